#!/usr/bin/env bash
# Installs the Debian packages servesim builds with. Safe to run again; needs root (or sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
# What building and running `sim` needs (scripts/setup.sh):
PACKAGES=(cmake make g++ libboost-program-options-dev libboost-graph-dev libsqlite3-dev
          libtomlplusplus-dev nlohmann-json3-dev sqlite3 python3 libjs-chart.js libnlopt-dev)
# libnlopt-dev: NLopt's BOBYQA, the optimiser of `sim calibrate`.
# libjs-chart.js: Chart.js, built into `sim report --html` pages.
# The tests (scripts/test.sh, TEST=1) add GoogleTest, and Chromium for the HTML pages' browser test.
if [ -n "${TEST:-}" ]; then PACKAGES+=(libgtest-dev chromium); fi
# The fuzz targets (scripts/fuzz.sh, and CI's fuzz step) need clang and its libFuzzer runtime.
if [ -n "${FUZZ:-}" ]; then PACKAGES+=(clang libclang-rt-14-dev); fi
# Sweeps on Ray (scripts/ray_sweep.py and its test) need Ray from PyPI, in a virtual environment.
if [ -n "${RAY:-}" ]; then PACKAGES+=(python3-venv python3-pip); fi
RAY_VERSION=2.60.0
install_ray() {
  [ -n "${RAY:-}" ] || return 0
  if [ -x .venv-ray/bin/python ] && .venv-ray/bin/python -c "import ray" 2>/dev/null; then
    echo "servesim: Ray is installed in .venv-ray"
    return 0
  fi
  echo "servesim: installing Ray $RAY_VERSION from PyPI into .venv-ray"
  python3 -m venv .venv-ray
  .venv-ray/bin/pip install -q "ray==$RAY_VERSION"
}
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "servesim: all build dependencies are installed"
  install_ray
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "servesim: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
install_ray
