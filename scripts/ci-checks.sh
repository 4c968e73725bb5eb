#!/usr/bin/env bash
# The checks CI runs after the README's test command (scripts/test.sh): the whole suite built with
# AddressSanitizer and UndefinedBehaviorSanitizer (halting on the first error), a short fuzz of
# every target (scripts/fuzz.sh, 10 s each; run it longer by hand), and the profile-guided build
# (scripts/build-pgo.sh), whose metrics must equal the plain build's. Needs build-test from
# scripts/test.sh. Under CI (CI set), compiler warnings are errors.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - start )) s] $*"; }
WERROR=OFF
if [ -n "${CI:-}" ]; then WERROR=ON; fi
FUZZ=1 TEST=1 scripts/install-deps.sh

stamp "build the suite under AddressSanitizer and UndefinedBehaviorSanitizer"
# -O1 with line tables: the sanitizers' reports name file and line, at half -O2 -g's build time.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSERVESIM_SANITIZE=ON -DSERVESIM_UNITY=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DSERVESIM_WERROR=$WERROR > /dev/null
cmake --build build-asan -j2
stamp "the suite under the sanitizers"
(cd build-asan && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
   ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 ctest --output-on-failure -j2 > ctest.log 2>&1) \
  || { tail -150 build-asan/ctest.log; exit 1; }
sed -n '/tests passed/,$p' build-asan/ctest.log

stamp "every fuzz target, 10 s each"
scripts/fuzz.sh 10

stamp "the profile-guided build (scripts/build-pgo.sh) gives the plain build's metrics"
mkdir -p build-pgo
scripts/build-pgo.sh build-pgo > build-pgo/build.log 2>&1 || { tail -60 build-pgo/build.log; exit 1; }
pgo_check=$(mktemp -d)
for case in "continuous 2048" "chunked-prefill 512"; do
  set -- $case
  for build in build-test build-pgo; do
    "$build/sim/sim" --policy "$1" --max-num-batched-tokens "$2" --replicas 8 --trace pareto.toml \
      --db "$pgo_check/$build.db" --log summary > /dev/null
    "$build/sim/sim" report --db "$pgo_check/$build.db" --format csv > "$pgo_check/$build-$1.csv"
    rm -f "$pgo_check/$build".db*
  done
  diff "$pgo_check/build-test-$1.csv" "$pgo_check/build-pgo-$1.csv" ||
    { echo "build-pgo's metrics differ from build-test's ($1)"; exit 1; }
  echo "$1 on 8 replicas: the same $(wc -l < "$pgo_check/build-pgo-$1.csv") metric lines"
done
rm -rf "$pgo_check"
stamp "done"
