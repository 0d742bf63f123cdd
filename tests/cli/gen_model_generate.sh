#!/bin/sh
# `tandem gen-model --arch ARCH [options]` writes a synthetic file that `tandem generate`
# then runs: usage bin arch [gen-model options...]. Prints generate's output and stats line.
set -e
bin=$1
arch=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" gen-model --arch "$arch" -o "$dir/model.gguf" "$@"
"$bin" generate --model "$dir/model.gguf" --prompt "the quick brown fox" --max-tokens 8 --temperature 0 2>&1
