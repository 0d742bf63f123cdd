#!/usr/bin/env bash
# gpu/pack.sh: builds the GPU test and benchmark binaries here (build-gpu/) and copies them
# into gpu/.bin/, the folder the device tool carries for gpu/check.sh (ignored by git
# through .git/info/exclude). gpu_plan_test, gpu_kernels_test, gpu_model_test and gpu_bench
# need only glibc >= 2.34, libstdc++ and libcublas there (it prints what each needs
# beyond those); gpu_worker_test also needs CAF, yaml-cpp and xxHash, copied into
# gpu/.bin/lib/ (libstdc++ is the machine's own).
set -eu
cd "$(dirname "$0")/.."
grep -qx '/gpu/.bin/' .git/info/exclude 2>/dev/null || echo '/gpu/.bin/' >> .git/info/exclude
cmake -S . -B build-gpu -DTANDEM_CUDA=ON >/dev/null
nice -n 10 cmake --build build-gpu -j1 --target gpu_plan_test gpu_kernels_test gpu_model_test gpu_worker_test gpu_bench
mkdir -p gpu/.bin/lib
for t in gpu_plan_test gpu_kernels_test gpu_model_test gpu_worker_test gpu_bench; do
  cp build-gpu/bin/$t gpu/.bin/
  strip gpu/.bin/$t
done
for t in gpu_plan_test gpu_kernels_test gpu_model_test gpu_worker_test gpu_bench; do
  ldd build-gpu/bin/$t | awk '/=> \// {print $3}' | grep -E 'caf|spdlog|fmt|yaml|xxhash|pcre' || true
done | sort -u | while read -r lib; do cp -L "$lib" gpu/.bin/lib/; done
# What each carried binary needs besides libc, libstdc++ and libcublas (check.sh puts
# gpu/.bin/lib on the library path for all of them).
for t in gpu_plan_test gpu_kernels_test gpu_model_test gpu_worker_test gpu_bench; do
  echo "$t: $(readelf -d gpu/.bin/$t | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' |
    grep -vE '^(libc|libm|libgcc_s|libstdc\+\+|ld-linux|libcublas|libcublasLt|libdl|librt|libpthread)[.-]' | tr '\n' ' ')"
done
du -ch gpu/.bin/* gpu/.bin/lib/* | tail -1
