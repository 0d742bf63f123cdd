#!/bin/sh
# --model-sha256 on the real binary: usage model_sha256.sh BIN. A small generated model;
# `generate` with its right digest runs (read once, then remembered in $TANDEM_HOME), with a
# wrong one it exits non-zero before loading and names both digests on stderr; `serve` the
# same; `info --sha256` prints the digest. Prints PASS at the end, or what failed.
set -u
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export TANDEM_HOME="$dir/home"
fail() { echo "FAIL: $*"; exit 1; }

"$bin" gen-model --out "$dir/m.gguf" --layers 1 --embd 64 >/dev/null 2>&1 || fail "gen-model"
right=$(sha256sum "$dir/m.gguf" | cut -d' ' -f1)
wrong=0000000000000000000000000000000000000000000000000000000000000000

"$bin" generate --model "$dir/m.gguf" --model-sha256 "$right" --prompt hi --max-tokens 2 --no-tiled-cache \
  >"$dir/out" 2>"$dir/err" || fail "generate with the right digest: $(cat "$dir/err")"
grep -q "model SHA-256 verified: $right (read in" "$dir/err" || fail "first run not read: $(cat "$dir/err")"
[ -s "$TANDEM_HOME/sha256-cache" ] || fail "no cache file"
"$bin" generate --model "$dir/m.gguf" --model-sha256 "$(echo "$right" | tr a-f A-F)" --prompt hi --max-tokens 2 \
  --no-tiled-cache >"$dir/out" 2>"$dir/err" || fail "generate, second run: $(cat "$dir/err")"
grep -q "model SHA-256 verified: $right (remembered" "$dir/err" || fail "second run not cached: $(cat "$dir/err")"

for cmd in "generate --prompt hi --max-tokens 2" "serve --port 0"; do
  # shellcheck disable=SC2086
  "$bin" $cmd --model "$dir/m.gguf" --model-sha256 "$wrong" --no-tiled-cache >"$dir/out" 2>"$dir/err"
  status=$?
  [ "$status" -ne 0 ] || fail "$cmd with a wrong digest exited 0"
  grep -q "expected $wrong" "$dir/err" || fail "$cmd: stderr lacks the expected digest: $(cat "$dir/err")"
  grep -q "actual $right" "$dir/err" || fail "$cmd: stderr lacks the actual digest: $(cat "$dir/err")"
  grep -q "ready:" "$dir/out" && fail "$cmd: served a model that does not match"
  echo "$cmd: exit $status, $(cat "$dir/err")"
done

"$bin" serve --port 0 --model "$dir/m.gguf" --model-sha256 abc >"$dir/out" 2>&1 && fail "a malformed digest was taken"
grep -q "64 hex digits" "$dir/out" || fail "malformed digest: $(cat "$dir/out")"

# A server of several models: each entry of the config's models: list may carry its sha256.
"$bin" gen-model --out "$dir/n.gguf" --layers 1 --embd 32 --seed 2 >/dev/null 2>&1 || fail "gen-model n"
other=$(sha256sum "$dir/n.gguf" | cut -d' ' -f1)
models() {
  printf 'models:\n  - name: a\n    path: %s\n    sha256: %s\n    default: true\n  - name: b\n    path: %s\n    sha256: %s\n' \
    "$dir/m.gguf" "$1" "$dir/n.gguf" "$2" >"$dir/models.yaml"
}
models "$right" "$wrong"
"$bin" serve --port 0 --config "$dir/models.yaml" --no-tiled-cache >"$dir/out" 2>"$dir/err" &&
  fail "a models: entry with a wrong sha256 was served"
grep -q "models: 'b': sha256: the model file .*n.gguf does not match: expected $wrong, actual $other" "$dir/err" ||
  fail "models: wrong sha256: $(cat "$dir/err")"
grep -q "ready:" "$dir/out" && fail "serve printed ready with a wrong models: sha256"
models "$right" "$(echo "$other" | tr a-f A-F)"
timeout 60 "$bin" serve --port 0 --config "$dir/models.yaml" --no-tiled-cache >"$dir/out" 2>&1 &
pid=$!
for _ in $(seq 1 100); do grep -q "ready:" "$dir/out" && break; sleep 0.3; done
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
grep -q "ready:" "$dir/out" || fail "models: with right digests did not start: $(cat "$dir/out")"
grep -q "model SHA-256 verified: $other" "$dir/out" || fail "models: b's digest not verified: $(cat "$dir/out")"
"$bin" serve --port 0 --config "$dir/models.yaml" --print-config 2>&1 | grep -q "sha256: $other" ||
  fail "--print-config drops a model's sha256"
printf 'models:\n  - name: a\n    path: %s\n    sha256: abc\n' "$dir/m.gguf" >"$dir/bad.yaml"
"$bin" serve --port 0 --config "$dir/bad.yaml" >"$dir/out" 2>&1 && fail "a malformed models: sha256 was taken"
grep -q "'sha256' must be" "$dir/out" || fail "malformed models: sha256: $(cat "$dir/out")"

"$bin" info --sha256 "$dir/m.gguf" >"$dir/out" 2>&1 || fail "info --sha256: $(cat "$dir/out")"
grep -q "^sha256  *$right" "$dir/out" || fail "info --sha256 does not print the digest: $(cat "$dir/out")"
echo PASS
