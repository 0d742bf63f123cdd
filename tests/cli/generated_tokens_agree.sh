#!/bin/sh
# `tandem generate` has two paths: the engine's own loop (no speculation) and the actor
# runtime (--speculative ...). For the same greedy output that ends on a stop token, their
# stats lines must report the same number of generated tokens (the stop token counted, as
# the API's usage counts it), and the stop must come before --max-tokens, or the test
# would not reach the difference.
set -e
bin=$1
prompt="What is the capital of France? Answer in one short sentence."
count() {
  "$bin" generate --chat --prompt "$prompt" --temperature 0 --max-tokens 64 "$@" 2>&1 >/dev/null |
    sed -n 's/.*generated tokens: \([0-9][0-9]*\).*/\1/p'
}
plain=$(count)
spec=$(count --speculative ngram)
echo "engine loop: $plain, runtime: $spec"
[ -n "$plain" ] && [ "$plain" -lt 64 ] && [ "$plain" = "$spec" ]
