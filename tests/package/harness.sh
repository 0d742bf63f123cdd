# What the package tests share, sourced by a test run as `sh TEST.sh BUILD_DIR SOURCE_DIR`
# once it has set name (its own, the prefix of what it prints):
#   name=NAME; . "$(dirname "$0")/harness.sh"
# It sets build and src (absolute, from the test's $1 and $2), work (a scratch folder that
# goes on exit, with the server in $server killed if one still runs), and the helpers below.
# shellcheck shell=sh disable=SC2034,SC2154
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "$name: $*" >&2
  exit 1
}

# await_port LOG READY PORT_SED WHAT: waits up to 60 s for the server started in the background
# ($server, writing LOG) to print a line matching the extended regex READY, then sets port to
# what `sed -n PORT_SED LOG` prints; fails naming WHAT if the server exits first or never says.
await_port() {
  i=0
  while [ $i -lt 600 ] && ! grep -Eq "$2" "$1"; do
    kill -0 "$server" 2>/dev/null || { cat "$1"; fail "$4 exited before serving"; }
    sleep 0.1
    i=$((i + 1))
  done
  port=$(sed -n "$3" "$1")
  [ -n "$port" ] || { cat "$1"; fail "$4 did not say where it listens"; }
}

# expect_completion MAX_TOKENS: a greedy /v1/completions on $port generates at least one token;
# the reply is left in $work/completion.json.
expect_completion() {
  curl -sS --max-time 60 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"prompt\":\"The capital of France is\",\"max_tokens\":$1,\"temperature\":0}" >"$work/completion.json"
  grep -q '"completion_tokens":[1-9]' "$work/completion.json" || fail "no completion: $(cat "$work/completion.json")"
}

# stop_server LOG WHAT: SIGTERM to $server, which must exit with status 0.
stop_server() {
  kill -TERM "$server"
  wait "$server" || { cat "$1"; fail "$2 did not exit 0 on SIGTERM"; }
  server=""
}
