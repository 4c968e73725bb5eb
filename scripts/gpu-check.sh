#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (Hopper: sm_90): configure with CUDA, build, run the CUDA
# tests, then benchmark decode steps and prefills of Qwen2.5-0.5B and Llama-3-8B against the
# roofline (data/hardware/h200.toml) and against Hugging Face transformers.
# Everything printed also goes to gpu-check.txt in the repository root.
# Usage: scripts/gpu-check.sh [BUILD_DIR]   (default build-gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
out="gpu-check.txt"
: > "$out"
log() { tee -a "$out"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | log
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 2>&1 | tail -n 5 | log
cmake --build "$build" -j "$(nproc)" 2>&1 | tail -n 5 | log
(cd "$build" && ctest -R Cuda --output-on-failure) 2>&1 | log

echo "== bench_decode (servesim CUDA runner; ms per step, roofline from h200.toml)" | log
"$build/bench_decode" data/hardware/h200.toml data/models/qwen2.5-0.5b.json \
  data/models/llama-3-8b.json 2>&1 | log

echo "== Hugging Face transformers, same shapes" | log
python3 scripts/hf_decode_bench.py data/models/qwen2.5-0.5b.json data/models/llama-3-8b.json \
  2>&1 | log || echo "hf_decode_bench failed" | log
echo "wrote $out"
