#!/usr/bin/env bash
# Builds servesim with its tests and runs them (ctest); then, unless --quick is given, the same
# suite built with AddressSanitizer and UndefinedBehaviorSanitizer (halting on the first error),
# a short run of every fuzz target (scripts/fuzz.sh, 30 s each), and the profile-guided build
# (scripts/build-pgo.sh), whose metrics must equal the plain build's. Installs the build
# dependencies first. Under CI (CI set), compiler warnings are errors. Ends with the main suite's
# ctest summary.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - start )) s] $*"; }
QUICK=""
if [ "${1:-}" = "--quick" ]; then QUICK=1; fi
WERROR=OFF
if [ -n "${CI:-}" ]; then WERROR=ON; fi
if [ -n "$QUICK" ]; then scripts/install-deps.sh; else FUZZ=1 RAY=1 scripts/install-deps.sh; fi

stamp "configure and build (build-test)"
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSERVESIM_WERROR=$WERROR
cmake --build build-test -j2
stamp "the main suite"
(cd build-test && ctest --output-on-failure -j2) | tee build-test/ctest.log
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
[ -n "$QUICK" ] && exit 0

stamp "build the suite under AddressSanitizer and UndefinedBehaviorSanitizer"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSERVESIM_SANITIZE=ON -DSERVESIM_WERROR=$WERROR
cmake --build build-asan -j2
stamp "the suite under the sanitizers"
(cd build-asan && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
   ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 ctest --output-on-failure -j2 > ctest.log 2>&1) \
  || { tail -150 build-asan/ctest.log; exit 1; }
sed -n '/tests passed/,$p' build-asan/ctest.log

stamp "every fuzz target, 30 s each"
scripts/fuzz.sh 30

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

stamp "the main suite's summary"
sed -n '/tests passed/,$p' build-test/ctest.log
