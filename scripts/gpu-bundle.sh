#!/usr/bin/env bash
# Packs a CUDA build for scripts/gpu-check.sh on a GPU machine that has nvcc and cuBLAS but none of
# the build's other libraries (Boost, SQLite, toml++, GoogleTest): the programs the check runs, the
# CTest files that list the CUDA tests, and every shared library they load that is neither the C
# runtime nor CUDA's. The build's paths are absolute (the CUDA plugin, the project's data), so on the
# GPU machine the checkout must sit at the same path as here, or be linked there, e.g.
#   ln -sfn "$PWD" /work/main; ln -sfn DEST/build-gpu build-gpu
#   LD_LIBRARY_PATH=$PWD/DEST/build-gpu/lib scripts/gpu-check.sh --prebuilt build-gpu
# Usage: scripts/gpu-bundle.sh [BUILD_DIR] [DEST]   (default build-gpu, gpu-stage)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
dest="${2:-gpu-stage}/$(basename "$build")"
programs=(sim/sim bench_decode libservesim_cuda.so tests/servesim_tests tests/servesim_cuda_tests)
for p in "${programs[@]}"; do
  [[ -f "$build/$p" ]] || { echo "gpu-bundle: $build/$p is missing; build it first" >&2; exit 2; }
done
rm -rf "$dest"
mkdir -p "$dest/lib"
for p in "${programs[@]}"; do
  mkdir -p "$dest/$(dirname "$p")"
  strip --strip-unneeded -o "$dest/$p" "$build/$p"
done
(cd "$build" && find . -name 'CTestTestfile.cmake' -o -name '*_include.cmake' -o -name '*_tests.cmake') |
  while read -r f; do mkdir -p "$dest/$(dirname "$f")"; cp "$build/$f" "$dest/$f"; done
# Shared libraries outside the C runtime, the compiler's runtime, CUDA and the driver.
for p in "${programs[@]}"; do ldd "$build/$p"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas[A-Za-z]*|libnvidia[^/]*)\.so' |
  grep -v -F "$(realpath "$build")" |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
du -sh "$dest"
ls "$dest/lib"
