#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (AddressSanitizer and UndefinedBehavior-
# Sanitizer on) and runs each for SECONDS, from its seed corpus (the shipped files it reads).
#   scripts/fuzz.sh [SECONDS] [TARGET ...]     (default: 60 s each, every target)
# Prints a table of executions and findings per target; a finding (a crash, a trap of a broken
# property, a leak, a hang over 10 s) is saved under build-fuzz/findings/ and makes the exit status 1.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-60}"
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then TARGETS=(workload traces hardware model config safetensors vllm_result); fi

FUZZ=1 scripts/install-deps.sh
mkdir -p build-fuzz
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
      -DSERVESIM_FUZZ=ON -DSERVESIM_TESTS=OFF -DSERVESIM_UNITY=ON > build-fuzz/build.log 2>&1 \
  || { cat build-fuzz/build.log; exit 2; }
cmake --build build-fuzz -j2 >> build-fuzz/build.log 2>&1 || { tail -40 build-fuzz/build.log; exit 2; }

# Seeds: the shipped files each reader reads, and a tiny safetensors file made here.
mkdir -p build-fuzz/seeds/safetensors build-fuzz/findings
python3 - <<'PY'
import json, struct
header = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                     "__metadata__": {"format": "pt"}}).encode()
header += b" " * ((8 - len(header) % 8) % 8)
with open("build-fuzz/seeds/safetensors/tiny.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + struct.pack("<4f", 1, 2, 3, 4))
PY
seeds() {
  case "$1" in
    workload) echo data/workloads ;;
    traces) echo tests/data/traces ;;
    hardware) echo data/hardware ;;
    model) echo data/models ;;
    config) echo tests/fuzz/seeds/config ;;
    safetensors) echo build-fuzz/seeds/safetensors ;;
    vllm_result) echo tests/data/vllm ;;
  esac
}

status=0
printf '%-12s %14s %10s %8s\n' target executions corpus findings > build-fuzz/summary.txt
for t in "${TARGETS[@]}"; do
  corpus="build-fuzz/corpus/$t"
  mkdir -p "$corpus"
  log="build-fuzz/$t.log"
  # A finding stops the target; it is saved as build-fuzz/findings/<target>-crash-... (or leak-,
  # timeout-, oom-) for reproduction: build-fuzz/tests/fuzz/fuzz_<target> <that file>.
  set +e
  "build-fuzz/tests/fuzz/fuzz_$t" "$corpus" "$(seeds "$t")" -max_total_time="$SECONDS_EACH" \
      -timeout=10 -print_final_stats=1 -artifact_prefix="build-fuzz/findings/$t-" > "$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  found=$(ls build-fuzz/findings/ 2>/dev/null | grep -c "^$t-" || true)
  if [ "$rc" -ne 0 ] && [ "$found" -eq 0 ]; then found=1; fi
  printf '%-12s %14s %10s %8s\n' "$t" "${execs:-?}" "$(ls "$corpus" | wc -l)" "$found" >> build-fuzz/summary.txt
  if [ "$found" -ne 0 ]; then
    status=1
    echo "fuzz_$t: finding(s); the log's end:"
    tail -30 "$log"
  fi
done
cat build-fuzz/summary.txt
exit $status
