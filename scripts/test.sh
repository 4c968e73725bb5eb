#!/usr/bin/env bash
# Builds servesim with its tests and runs them (ctest). Installs the build dependencies first.
# Under CI (CI set), compiler warnings are errors.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
WERROR=OFF
if [ -n "${CI:-}" ]; then WERROR=ON; fi
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSERVESIM_WERROR=$WERROR
cmake --build build-test -j2
cd build-test
ctest --output-on-failure -j2
