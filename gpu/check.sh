#!/usr/bin/env bash
# gpu/check.sh: the one prepared GPU check of issue 7, for the device tool's H200 machine
# (no package registry there; no CAF or Boost). Runs from the repository root:
#
#   1. binaries: gpu/.bin/ as made here by gpu/pack.sh and carried as gpu/.bin.tgz (CUDA runtime and
#      GoogleTest linked in; they need glibc >= 2.34, libstdc++ and the machine's libcublas);
#      when they are missing or do not start, builds gpu_bench there with nvcc and g++
#      (the parity tests need GoogleTest, which only travels inside the carried binaries).
#   2. parity tests: gpu_plan_test, gpu_kernels_test (every kernel vs the CPU reference),
#      gpu_model_test (whole prefill + decode steps vs the CPU engine), gpu_worker_test
#      (the actor protocol; its CAF libraries travel in gpu/.bin/lib).
#   3. torch's BF16 GEMV on the same shapes (gpu/bench/torch_gemv.py), the reference column.
#   4. gpu_bench: GEMV launch variants timed and the winners written to $OUT/gemv_table.inc
#      (paste into gpu/plan/gemv_table.inc), then the benchmark table (markdown) for
#      docs/benchmarks.md.
#
# Everything it prints also lands in $OUT (check.log, bench.md, *.xml, nvidia-smi.txt).
# Usage there:  bash gpu/check.sh [bench budget seconds, default 330] [serve_check budget, default 0: none]
#   STAGES="tests torch bench serve" picks stages (default: tests torch bench, plus serve when
#   its budget is given), so a 15-minute lease can split them over two calls.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tandem-gpu-check}
mkdir -p "$OUT"
BUDGET=${1:-330}
SERVE_BUDGET=${2:-0}
STAGES=${STAGES:-"tests torch bench $([ "$SERVE_BUDGET" -gt 0 ] && echo serve)"}
want() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
exec > >(tee "$OUT/check.log") 2>&1
T0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }

# libcublas: the CUDA toolkit's, else the pip wheel's (nvidia-cublas).
CUBLAS_PY=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib:${CUBLAS_PY}:${LD_LIBRARY_PATH:-}"
# The carried binaries' libraries beyond libc, libstdc++ and libcublas (gpu_worker_test's
# CAF, yaml-cpp, xxHash: gpu/pack.sh copies whatever any of them needs)
WORKER_LIBS="$PWD/gpu/.bin/lib"

stamp "machine"
date -u
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/nvidia-smi.txt"
command -v nvcc && nvcc --version | tail -2

BIN=gpu/.bin
# The binaries travel as one archive (gpu/pack.sh: the carry limit is 64 MiB).
if [ -f gpu/.bin.tgz ] && [ ! -x "$BIN/gpu_bench" ]; then tar -xzf gpu/.bin.tgz -C gpu; fi
if ! "$BIN/gpu_bench" --probe >/dev/null 2>&1; then
  stamp "no carried binaries: building gpu_bench here"
  BIN=/tmp/tandem-gpu-build
  mkdir -p "$BIN/obj"
  CUDA_INC=/usr/local/cuda/include
  for f in gpu/*.cu; do
    nvcc -O3 -std=c++17 -arch=sm_90 -I. -c "$f" -o "$BIN/obj/$(basename "$f").o" || exit 1
  done
  for f in gpu/*.cpp gpu/plan/*.cpp gpu/formats/*.cpp engine/gguf/tensor_type.cpp engine/gguf/quant_mixture.cpp \
    gpu/bench/gpu_bench.cpp gpu/bench/gemv_bench.cpp; do
    g++ -O2 -std=c++20 -I. -Iinclude -I"$CUDA_INC" -c "$f" -o "$BIN/obj/$(basename "$f").o" || exit 1
  done
  g++ -o "$BIN/gpu_bench" "$BIN"/obj/*.o -L/usr/local/cuda/lib64 -L/usr/local/cuda/lib ${CUBLAS_PY:+-L$CUBLAS_PY} \
    -lcublas -lcudart_static -ldl -lpthread -lrt || exit 1
fi

status=0
for t in gpu_plan_test gpu_kernels_test gpu_attention_test gpu_sampling_test gpu_model_test gpu_worker_test; do
  want tests || break
  if [ -x "$BIN/$t" ]; then
    stamp "$t"
    LD_LIBRARY_PATH="$WORKER_LIBS:$LD_LIBRARY_PATH" timeout 150 "$BIN/$t" --gtest_output="xml:$OUT/$t.xml" 2>&1 | grep -E '^\[( +OK|  FAILED|  SKIPPED|  PASSED|==========)|Failure|Expected|Which is|actual|error' | tail -60
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  else
    stamp "$t: not carried (parity tests need the binaries from gpu/pack.sh)"
  fi
done

if want torch; then
  stamp "torch reference (bf16 GEMV)"
  timeout 120 python3 gpu/bench/torch_gemv.py --out "$OUT/torch_gemv.txt" | tee "$OUT/torch_gemv.md"
fi

if want bench; then
  stamp "gpu_bench (budget ${BUDGET} s)"
  timeout $(( BUDGET + 120 )) "$BIN/gpu_bench" --budget-s "$BUDGET" --tune-out "$OUT/gemv_table.inc" \
    --torch "$OUT/torch_gemv.txt" | tee "$OUT/bench.md"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

# `tandem serve --device cuda` end to end (issue 49: gpu/serve_check.sh, its output under
# $OUT/serve), when a second argument gives its budget in seconds.
if want serve && [ "$SERVE_BUDGET" -gt 0 ]; then
  stamp "serve_check (budget ${SERVE_BUDGET} s)"
  OUT="$OUT/serve" bash gpu/serve_check.sh "$SERVE_BUDGET" || status=1
fi
stamp "done, status $status"
exit $status
