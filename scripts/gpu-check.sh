#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (Hopper: sm_90): configure with CUDA, build, run the CUDA
# tests, then benchmark decode steps and prefills of Qwen2.5-0.5B and Llama-3-8B against the
# roofline (data/hardware/h200.toml) and against Hugging Face transformers; then validate and
# calibrate the roofline for this GPU: a --backend cuda run whose every iteration is measured,
# `sim validate` (the shipped h200.toml's error), `sim calibrate` (a fitted file, held-out error)
# and `sim validate --hardware` with the fitted file, with both MAPEs in one table; Hugging Face
# transformers' decode steps come last.
# Everything printed also goes to gpu-check.txt in the repository root.
# Usage: scripts/gpu-check.sh [--prebuilt] [BUILD_DIR]   (default build-gpu)
#   --prebuilt: BUILD_DIR already holds the programs (scripts/gpu-bundle.sh packs them for a GPU
#   machine without the build's libraries); skip configuring and building.
set -euo pipefail
cd "$(dirname "$0")/.."
prebuilt=0
if [[ "${1:-}" == "--prebuilt" ]]; then prebuilt=1; shift; fi
build="${1:-build-gpu}"
out="gpu-check.txt"
: > "$out"
log() { tee -a "$out"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | log
if (( ! prebuilt )); then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 2>&1 | tail -n 5 | log
  cmake --build "$build" -j "$(nproc)" 2>&1 | tail -n 5 | log
fi
# A failure is reported and the check goes on, so that one call gives every table.
(cd "$build" && ctest -R Cuda --output-on-failure) 2>&1 | log || echo "CUDA tests FAILED" | log

echo "== bench_decode (servesim CUDA runner; ms per step, roofline from h200.toml)" | log
"$build/bench_decode" data/hardware/h200.toml data/models/qwen2.5-0.5b.json \
  data/models/llama-3-8b.json 2>&1 | log || echo "bench_decode FAILED" | log

echo "== the roofline validated and calibrated on this GPU (Qwen2.5-0.5B, --backend cuda)" | log
db="$build/gpu-check.db"
rm -f "$db" "$db-wal" "$db-shm"
"$build/sim/sim" --backend cuda --hardware h200 --model qwen2.5-0.5b --policy chunked-prefill \
  --trace multiturn.toml --num-prompts 200 --set max_tokens=64 --db "$db" --quiet 2>&1 | tail -n 4 | log
"$build/sim/sim" validate --db "$db" 2>&1 | log
"$build/sim/sim" calibrate --db "$db" --out "$build/h200-fitted.toml" 2>&1 | log
"$build/sim/sim" validate --db "$db" --hardware "$build/h200-fitted.toml" 2>&1 | log
before=$("$build/sim/sim" validate --db "$db" | awk '$1 == "all" {print $3}')
after=$("$build/sim/sim" validate --db "$db" --hardware "$build/h200-fitted.toml" | awk '$1 == "all" {print $3}')
held=$(grep -h "^Held-out:" "$out" | tail -n 1 | sed 's/.*iterations: //')
{
  echo "roofline on this GPU      MAPE (all iterations)"
  echo "h200.toml as shipped      $before"
  echo "calibrated (fitted file)  $after"
  echo "held-out half             $held"
} | log
echo "== Hugging Face transformers, same shapes as bench_decode" | log
timeout 240 python3 scripts/hf_decode_bench.py data/models/qwen2.5-0.5b.json data/models/llama-3-8b.json \
  2>&1 | log || echo "hf_decode_bench failed" | log
echo "wrote $out"
