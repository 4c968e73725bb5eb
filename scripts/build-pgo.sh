#!/usr/bin/env bash
# Builds `sim` with profile-guided optimisation (GCC). An instrumented build first replays a
# synthetic trace shaped like the Azure conversation trace (Poisson arrivals at 5.5 requests/s,
# prompts of about 1,100 tokens and outputs of about 200 on average, in Vidur's CSV format) through
# continuous batching and chunked prefill, on 1 and 8 replicas, with and without the per-request
# rows; the final build then lays out and inlines the code by the branch and call counts recorded.
# It takes twice the time of a plain build, for about 5-8 % less wall time on
# bench/replay_100k.py (docs/benchmarks.md). The results are the same as any build's.
#
#   scripts/build-pgo.sh [BUILD_DIR]     (default: build-pgo; the program is BUILD_DIR/sim/sim)
#
# Needs what scripts/setup.sh installs, and GCC.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-pgo}
mkdir -p "$out"
profile="$(cd "$out" && pwd)/pgo-profile"
rm -rf "$profile"
mkdir -p "$profile"

echo "servesim: instrumented build in $out"
cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=Release -DSERVESIM_TESTS=OFF -DSERVESIM_UNITY=ON -DSERVESIM_PGO=generate \
  -DSERVESIM_PGO_DIR="$profile" > /dev/null
cmake --build "$out" -j2 --target sim

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# 20,000 requests from awk's rand() with a fixed seed (the same trace on every run of one awk):
# exponential gaps; lognormal prompts and outputs (Box-Muller), capped at 8,000 and 2,000 tokens.
awk 'BEGIN {
  srand(1); t = 0; print "arrived_at,num_prefill_tokens,num_decode_tokens";
  for (i = 0; i < 20000; ++i) {
    t += -log(1 - rand()) / 5.5;
    p = int(exp(log(700) + 1.0 * sqrt(-2 * log(1 - rand())) * cos(6.2831853 * rand()))) + 1;
    d = int(exp(log(120) + 1.0 * sqrt(-2 * log(1 - rand())) * cos(6.2831853 * rand()))) + 1;
    if (p > 8000) p = 8000; if (d > 2000) d = 2000;
    printf "%.6f,%d,%d\n", t, p, d;
  }
}' > "$work/train.csv"
echo "servesim: training runs"
for case in "continuous 4096" "chunked-prefill 512"; do
  set -- $case
  for replicas in 1 8; do
    for log in requests summary; do
      "$out/sim/sim" --trace "$work/train.csv" --model llama-2-7b --hardware a100-80gb --policy "$1" \
        --max-num-seqs 128 --max-num-batched-tokens "$2" --replicas "$replicas" --log "$log" \
        --db "$work/train.db" > /dev/null
      rm -f "$work"/train.db*
    done
  done
done

echo "servesim: optimised build in $out"
cmake -S . -B "$out" -DSERVESIM_PGO=use > /dev/null
cmake --build "$out" -j2 --target sim
echo "servesim: $out/sim/sim"
