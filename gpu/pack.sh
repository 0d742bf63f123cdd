#!/usr/bin/env bash
# gpu/pack.sh: builds the GPU test and benchmark binaries and the CUDA-enabled `tandem` here
# and copies them, stripped, into gpu/.bin/, the folder the device tool carries for
# gpu/check.sh and gpu/serve_check.sh (ignored by git through .git/info/exclude).
# The CUDA tests (kernels, attention, sampling, model) and gpu_bench need only glibc >= 2.34,
# libstdc++ and libcublas there; gpu_worker_test and tandem also need CAF, yaml-cpp, xxHash,
# spdlog, fmt and Boost.JSON (whatever ldd lists beyond the system's C and C++ runtimes),
# copied into gpu/.bin/lib/ (libstdc++ and libcublas are the machine's own).
#
# Usage: gpu/pack.sh [targets...]   (default: every test, gpu_bench and tandem)
#   BUILD_DIR=build-serve gpu/pack.sh tandem   packs from another CUDA-enabled build folder
set -eu
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
TARGETS=${*:-gpu_plan_test gpu_kernels_test gpu_attention_test gpu_sampling_test gpu_model_test gpu_worker_test gpu_bench tandem}
GIT_DIR=$(git rev-parse --git-common-dir)
mkdir -p "$GIT_DIR/info"
grep -qx '/gpu/.bin/' "$GIT_DIR/info/exclude" 2>/dev/null || echo '/gpu/.bin/' >> "$GIT_DIR/info/exclude"
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" -DTANDEM_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
# shellcheck disable=SC2086
nice -n 10 cmake --build "$BUILD_DIR" -j1 --target $TARGETS
mkdir -p gpu/.bin/lib
for t in $TARGETS; do
  cp "$BUILD_DIR/bin/$t" gpu/.bin/
  strip "gpu/.bin/$t"
done
# Every shared library the binaries resolve here except the system's C runtime, libstdc++,
# libgcc and the CUDA libraries (the GPU machine brings its own).
SYSTEM_LIBS='^(libc|libm|libgcc_s|libstdc\+\+|ld-linux-x86-64|libdl|librt|libpthread|libcublas|libcublasLt|libcudart|libcuda|linux-vdso)\.'
for t in $TARGETS; do
  ldd "$BUILD_DIR/bin/$t" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! echo "$name" | grep -qE "$SYSTEM_LIBS"; then
    cp -L "$path" "gpu/.bin/lib/$name"
    strip --strip-unneeded "gpu/.bin/lib/$name" 2>/dev/null || true
  fi
done
# What each carried binary needs besides libc, libstdc++ and libcublas (check.sh and
# serve_check.sh put gpu/.bin/lib on the library path for all of them).
for t in $TARGETS; do
  echo "$t: $(readelf -d "gpu/.bin/$t" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | grep -vE "$SYSTEM_LIBS" | tr '\n' ' ')"
done
# The newest glibc symbol version anything carried asks for (the GPU machine needs at least it).
for f in gpu/.bin/* gpu/.bin/lib/*; do
  if [ -f "$f" ]; then objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' || true; fi
done | sort -t. -k2,2n -k3,3n -u | tail -1 | sed 's/^/newest glibc symbol needed: /'
# Everything resolves inside gpu/.bin/lib or from the system's C/C++ runtimes.
if [ -x gpu/.bin/tandem ] && LD_LIBRARY_PATH="$PWD/gpu/.bin/lib" ldd gpu/.bin/tandem 2>/dev/null |
    awk '/=>/ {print $1, $3}' | grep -vE "$PWD/gpu/.bin/lib" | grep -vE "$SYSTEM_LIBS"; then
  echo "pack.sh: tandem resolves the libraries above outside gpu/.bin/lib" >&2
fi
if [ -x gpu/.bin/tandem ] && ! readelf -d gpu/.bin/tandem | grep -q 'libcublas'; then
  echo "pack.sh: $BUILD_DIR/bin/tandem was built without CUDA (configure with -DTANDEM_CUDA=ON)" >&2
  exit 1
fi
# The device tool carries at most 64 MiB in all: the folder travels as one gzip archive
# (gpu/.bin.tgz, about a third of the folder), which check.sh and serve_check.sh unpack.
grep -qx '/gpu/.bin.tgz' "$GIT_DIR/info/exclude" 2>/dev/null || echo '/gpu/.bin.tgz' >> "$GIT_DIR/info/exclude"
tar -czf gpu/.bin.tgz -C gpu .bin
du -sh gpu/.bin | sed 's/^/unpacked: /'
du -sh gpu/.bin.tgz | sed 's/^/carried (carry=["gpu\/.bin.tgz"]): /'
