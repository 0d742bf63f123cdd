#!/usr/bin/env bash
# gpu/serve_check.sh: `tandem serve --device cuda` end to end (issue 49), for the device tool's
# GPU machine (no package registry, no CAF there), run from the repository root with the
# binaries gpu/pack.sh made here and the device tool carried in gpu/.bin/:
#
#   1. models, made there with `tandem gen-model`: a Llama-3-8B-shaped one (32 layers, 4096
#      wide, FFN 14336, 32/8 heads, 128,256 tokens, Q8_0, untied head, 8K context), written in
#      the background while step 2 runs, and a small F32 one for the CPU/GPU comparison. The
#      8B file is gen-model's one-block file with that block copied 32 times
#      (gpu/serve_model.py): gen-model draws every weight on one thread, ~155 s for the whole
#      8B file where this was written, against ~25 s for one block plus the copies;
#   2. the small model on a GPU server: gpu/serve_client.py's functional cases and its greedy
#      answers; the same model on a CPU server: its greedy answers; the two compared
#      (identical, near ties, or real differences);
#   3. the 8B model on a GPU server: its sizing line, the functional cases, then the serving
#      benchmark (bench/serve_bench.py's realistic mix, closed loop) at 64 and 256 clients in
#      what is left of the budget;
#   4. a summary table, printed last.
#
# Usage: bash gpu/serve_check.sh [--device cuda|cpu] [--layers N] [--big "gen-model shape args"]
#                                [--clients 64,256] [budget seconds, default 480]
#   --device cpu   every server without --device cuda: a dry run of this script where there is
#                  no GPU (use a small --big shape then)
#   --layers N     blocks of the big model (default 32)
#   --big ARGS     gen-model's shape arguments for the big model's block (default: Llama-3-8B's)
#   OUT            logs and results (default /tmp/tandem-serve-check); TANDEM_BIN: the binary
#                  (default gpu/.bin/tandem, else build/bin/tandem)
# Every step is bounded by a timeout; the servers are stopped on exit.
set -u
cd "$(dirname "$0")/.." || exit 1
DEVICE=cuda
LAYERS=32
BIG=""
CLIENTS=64,256
BUDGET=480
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE=$2; shift 2 ;;
    --layers) LAYERS=$2; shift 2 ;;
    --big) BIG=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    *) BUDGET=$1; shift ;;
  esac
done
[ -n "$BIG" ] || BIG="--embd 4096 --heads 32 --kv-heads 8 --ff 14336 --vocab 128256 --type q8_0 --embd-type q8_0 --untied --ctx 8192"
SMALL="--layers 4 --embd 256 --heads 4 --kv-heads 2 --ff 512 --vocab 2048 --type f32 --embd-type f32 --untied --ctx 8192"

OUT=${OUT:-/tmp/tandem-serve-check}
mkdir -p "$OUT"
WORK=${WORK:-/tmp/tandem-serve-models}
mkdir -p "$WORK"
exec > >(tee "$OUT/serve_check.log") 2>&1
T0=$(date +%s)
DEADLINE=$((T0 + BUDGET))
now() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( DEADLINE - $(date +%s) )); }
stamp() { echo "== [$(now) s] $*"; }

CUBLAS_PY=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$PWD/gpu/.bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${CUBLAS_PY}:${LD_LIBRARY_PATH:-}"
# The binaries travel as one archive (gpu/pack.sh: the carry limit is 64 MiB).
if [ -f gpu/.bin.tgz ] && [ ! -x gpu/.bin/tandem ]; then tar -xzf gpu/.bin.tgz -C gpu; fi
BIN=${TANDEM_BIN:-gpu/.bin/tandem}
[ -x "$BIN" ] || BIN=build/bin/tandem
DEVICE_ARGS=()
[ "$DEVICE" = cuda ] && DEVICE_ARGS=(--device cuda)

declare -A RESULT
PIDS=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  sleep 1
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
}
trap cleanup EXIT

stamp "machine ($DEVICE, budget $BUDGET s)"
date -u
if [ "$DEVICE" = cuda ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/nvidia-smi.txt"
fi
nproc
if ! "$BIN" --help >/dev/null 2>"$OUT/bin-start.err"; then
  echo "$BIN does not start:"; cat "$OUT/bin-start.err"; ldd "$BIN" | grep -i 'not found'
  exit 1
fi

# gen_model NAME "ARGS" TIMEOUT [LAYERS]: writes $WORK/NAME.gguf (with LAYERS: one block
# made, then copied LAYERS times); its time into RESULT[gen_NAME].
gen_model() {
  local name=$1 args=$2 limit=$3 layers=${4:-} t t1="" ok=1
  t=$(date +%s)
  rm -f "$WORK/$name.gguf" "$WORK/$name-1.gguf"
  if [ -n "$layers" ]; then
    # shellcheck disable=SC2086
    timeout "$limit" "$BIN" gen-model --out "$WORK/$name-1.gguf" --layers 1 $args > "$OUT/gen-$name.log" 2>&1 &&
      t1=$(date +%s) &&
      timeout "$limit" python3 gpu/serve_model.py "$WORK/$name-1.gguf" "$WORK/$name.gguf" "$layers" \
        >> "$OUT/gen-$name.log" 2>&1 || ok=0
    rm -f "$WORK/$name-1.gguf"
  else
    # shellcheck disable=SC2086
    timeout "$limit" "$BIN" gen-model --out "$WORK/$name.gguf" $args > "$OUT/gen-$name.log" 2>&1 || ok=0
  fi
  if [ "$ok" = 1 ]; then
    RESULT[gen_$name]="$(( $(date +%s) - t )) s${t1:+ ($(( t1 - t )) s for one block)}, $(du -h "$WORK/$name.gguf" | cut -f1)"
  else
    RESULT[gen_$name]="FAILED after $(( $(date +%s) - t )) s: $(tail -1 "$OUT/gen-$name.log")"
    return 1
  fi
}

# start_server NAME MODEL ARGS...: starts it on 127.0.0.1 (a free port), waits for "ready:"
# (at most SERVER_WAIT s) and sets URL; returns 1 when it does not come up.
start_server() {
  local name=$1 model=$2; shift 2
  "$BIN" serve --model "$model" --host 127.0.0.1 --port 0 --no-tiled-cache "$@" > "$OUT/server-$name.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  local t
  t=$(date +%s)
  URL=""
  while [ $(( $(date +%s) - t )) -lt "${SERVER_WAIT:-300}" ]; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then break; fi
    if grep -q "ready:" "$OUT/server-$name.log"; then
      local port
      port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$OUT/server-$name.log" | head -1)
      URL="http://127.0.0.1:$port"
      RESULT[start_$name]="$(( $(date +%s) - t )) s"
      stamp "server $name up at $URL in ${RESULT[start_$name]}"
      grep -E "cuda device|KV cache|ready:" "$OUT/server-$name.log" | head -5
      return 0
    fi
    sleep 0.5
  done
  RESULT[start_$name]="FAILED"
  stamp "server $name did not start; its log:"
  tail -30 "$OUT/server-$name.log"
  return 1
}

stop_server() {
  kill "$SERVER_PID" 2>/dev/null
  for _ in $(seq 1 40); do kill -0 "$SERVER_PID" 2>/dev/null || return 0; sleep 0.25; done
  kill -9 "$SERVER_PID" 2>/dev/null
}

# client NAME ARGS...: serve_client.py with a timeout; its PASS/FAIL lines into RESULT[NAME].
client() {
  local name=$1; shift
  timeout "${CLIENT_TIMEOUT:-300}" python3 gpu/serve_client.py "$@" 2>&1 | tee "$OUT/client-$name.log"
  local rc=${PIPESTATUS[0]}
  RESULT[$name]="$(grep -c '^PASS' "$OUT/client-$name.log") pass, $(grep -c '^FAIL' "$OUT/client-$name.log") fail$([ "$rc" = 124 ] && echo ', TIMED OUT')"
  return "$rc"
}

status=0
stamp "models"
gen_model small "$SMALL" 120 || status=1
( gen_model big "$BIG" "${GEN_TIMEOUT:-$(( BUDGET / 3 ))}" "$LAYERS"; echo "${RESULT[gen_big]}" > "$OUT/gen-big.result" ) &
GEN_PID=$!
PIDS+=("$GEN_PID")

# 2. The small model: GPU server (functional cases, greedy answers), CPU server (greedy).
if [ -f "$WORK/small.gguf" ]; then
  stamp "small model on the $DEVICE server"
  # A bounded KV pool: --gpu-memory-utilization's share of the device would be tens of millions
  # of tokens for this model, all of them host-side block bookkeeping.
  if SERVER_WAIT=120 start_server "small-$DEVICE" "$WORK/small.gguf" "${DEVICE_ARGS[@]}" --kv-cache-tokens 131072 \
      --max-num-batched-tokens 256 --max-num-seqs 16; then
    CLIENT_TIMEOUT=120 client "small-$DEVICE" check --url "$URL" --greedy-out "$OUT/greedy-$DEVICE.json" || status=1
    stop_server
  else
    status=1
  fi
  stamp "small model on a CPU server (the greedy reference)"
  if SERVER_WAIT=60 start_server small-cpu-ref "$WORK/small.gguf" --threads "$(( $(nproc) > 8 ? 8 : $(nproc) ))" \
      --kv-cache-tokens 131072 --max-num-seqs 16; then
    CLIENT_TIMEOUT=60 client small-cpu-ref check --url "$URL" --only health --greedy-out "$OUT/greedy-cpu-ref.json" || status=1
    stop_server
  fi
  if [ -f "$OUT/greedy-cpu-ref.json" ] && [ -f "$OUT/greedy-$DEVICE.json" ]; then
    stamp "greedy answers: CPU reference vs the $DEVICE server"
    python3 gpu/serve_client.py compare "$OUT/greedy-cpu-ref.json" "$OUT/greedy-$DEVICE.json" | tee "$OUT/compare.txt"
    RESULT[compare]="$(grep -c '^SAME' "$OUT/compare.txt") same, $(grep -c '^TIE' "$OUT/compare.txt") near ties, $(grep -c '^DIFF' "$OUT/compare.txt") differ"
  fi
fi

# 3. The 8B-shaped model on the GPU server.
stamp "waiting for the big model (gen-model)"
wait "$GEN_PID"
RESULT[gen_big]=$(cat "$OUT/gen-big.result" 2>/dev/null || echo "FAILED")
echo "gen-model big: ${RESULT[gen_big]}"
if [ -f "$WORK/big.gguf" ] && [ "$(left)" -gt 60 ]; then
  stamp "big model on the $DEVICE server"
  if SERVER_WAIT=$(( $(left) > 300 ? 240 : $(left) - 60 )) start_server "big-$DEVICE" "$WORK/big.gguf" "${DEVICE_ARGS[@]}" \
      --max-num-seqs 256 --max-model-len 8192; then
    CLIENT_TIMEOUT=$(( $(left) > 240 ? 180 : $(left) / 2 )) client "big-$DEVICE" check --url "$URL" || status=1
    # The benchmark: what is left, split over the client counts (70% running, 30% draining).
    n_levels=$(echo "$CLIENTS" | tr ',' '\n' | grep -c .)
    per=$(( ($(left) - 20) / n_levels ))
    if [ "$per" -ge 20 ]; then
      secs=$(( per * 7 / 10 )); drain=$(( per - secs - 5 ))
      stamp "benchmark at $CLIENTS clients: $secs s each + at most $drain s draining"
      CLIENT_TIMEOUT=$(( per * n_levels + 30 )) client "bench-$DEVICE" bench --url "$URL" --clients "$CLIENTS" \
        --seconds "$secs" --drain-seconds "$drain" --out "$OUT/bench-$DEVICE.json" || status=1
    else
      RESULT[bench-$DEVICE]="skipped: $(left) s left"
    fi
    grep -E "steps|tok/s" "$OUT/server-big-$DEVICE.log" | tail -3
    stop_server
  else
    status=1
  fi
else
  RESULT[big]="skipped ($(left) s left, model: ${RESULT[gen_big]})"
  status=1
fi

stamp "summary (device $DEVICE, status $status)"
{
  printf '| step | result |\n|---|---|\n'
  printf '| gen-model small (%s) | %s |\n' "$SMALL" "${RESULT[gen_small]:-}"
  printf '| gen-model big (%s layers of %s) | %s |\n' "$LAYERS" "$BIG" "${RESULT[gen_big]:-}"
  for k in "small-$DEVICE" small-cpu-ref big-$DEVICE; do
    [ -n "${RESULT[start_$k]:-}" ] && printf '| server %s start | %s |\n' "$k" "${RESULT[start_$k]}"
  done
  for k in "small-$DEVICE" small-cpu-ref "big-$DEVICE" compare big; do
    [ -n "${RESULT[$k]:-}" ] && printf '| %s | %s |\n' "$k" "${RESULT[$k]}"
  done
  grep -h '^FAIL' "$OUT"/client-*.log 2>/dev/null | sed 's/|/\\|/g; s/^/| failure | /; s/$/ |/'
  if [ -f "$OUT/bench-$DEVICE.json" ]; then
    python3 - "$OUT/bench-$DEVICE.json" <<'EOF'
import json, sys
for r in json.load(open(sys.argv[1])):
    print(f"| bench {r['clients']} clients | {r['tok_s']:.0f} output tok/s, {r['requests']} requests "
          f"({r['unfinished']} unfinished, {r['errors']} errors), TTFT p50/p99 {r['ttft_p50_ms']:.0f}/"
          f"{r['ttft_p99_ms']:.0f} ms, ITL p50/p99 {r['itl_p50_ms']:.1f}/{r['itl_p99_ms']:.1f} ms |")
EOF
  else
    [ -n "${RESULT[bench-$DEVICE]:-}" ] && printf '| bench | %s |\n' "${RESULT[bench-$DEVICE]}"
  fi
  printf '| total | %s s, status %s |\n' "$(now)" "$status"
} | tee "$OUT/summary.md"
exit $status
