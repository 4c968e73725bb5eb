#!/usr/bin/env bash
# Installs the Debian packages servesim builds with. Safe to run again; needs root (or sudo).
set -euo pipefail
PACKAGES=(cmake make g++ libboost-program-options-dev libboost-graph-dev libsqlite3-dev
          libtomlplusplus-dev nlohmann-json3-dev libgtest-dev sqlite3 python3)
# The fuzz targets (scripts/fuzz.sh, and CI's fuzz step) need clang and its libFuzzer runtime.
if [ -n "${FUZZ:-}" ]; then PACKAGES+=(clang libclang-rt-14-dev); fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "servesim: all build dependencies are installed"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "servesim: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
