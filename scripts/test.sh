#!/usr/bin/env bash
# The README's test command: installs what the tests need (GoogleTest, Chromium for the HTML
# pages' browser test, Ray from PyPI for the distributed sweeps' tests), builds servesim with its
# tests and runs the whole main suite (ctest). About 10 minutes from a fresh clone on 2 cores.
# Under CI (CI set), compiler warnings are errors. CI then runs scripts/ci-checks.sh (the suite
# under the sanitizers, a short fuzz of every target, the profile-guided build).
#
# The build compiles sources in batches (SERVESIM_UNITY) with line tables only (-g1): a build
# from scratch in about half the time. Building again after an edit, use a plain build folder
# (cmake -S . -B build && cmake --build build -j), where a change recompiles one file.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - start )) s] $*"; }
WERROR=OFF
if [ -n "${CI:-}" ]; then WERROR=ON; fi
stamp "dependencies"
TEST=1 RAY=1 scripts/install-deps.sh
stamp "configure and build (build-test)"
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSERVESIM_UNITY=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DSERVESIM_WERROR=$WERROR
cmake --build build-test -j2
stamp "the main suite"
(cd build-test && ctest --output-on-failure -j2) | tee build-test/ctest.log
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
stamp "done"
