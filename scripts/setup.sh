#!/usr/bin/env bash
# One command from a fresh clone to a simulated run: installs the Debian dependencies, builds
# servesim, installs `sim` (and its presets) on the PATH, and runs the example workload.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSERVESIM_TESTS=OFF -DSERVESIM_UNITY=ON
cmake --build build -j2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO cmake --install build
echo
echo "servesim: installed $(command -v sim). Running the example:"
echo "  sim --policy continuous --trace pareto.toml"
sim --policy continuous --trace pareto.toml
echo
echo "servesim: and its charts, in one page that opens offline:"
echo "  sim report --html report.html"
sim report --html report.html
