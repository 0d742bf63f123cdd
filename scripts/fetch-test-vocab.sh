#!/usr/bin/env bash
# Fetches the vocabulary-only GGUF files of Llama 3 (byte-level BPE, llama-bpe), Llama 2
# (SentencePiece, llama-spm) and Qwen2 (byte-level BPE, pre qwen2, 152k tokens) that llama.cpp
# publishes inside the llama-cpp-python source distribution on PyPI (downloaded once by
# fetch-sdist.sh). Only those data files are kept, in
# $TANDEM_HOME/test-vocab; the tokenizer tests use them when present.
set -euo pipefail

VERSION=0.3.36
FILES=(ggml-vocab-llama-bpe.gguf ggml-vocab-llama-spm.gguf ggml-vocab-qwen2.gguf)
home="${TANDEM_HOME:-$HOME/.cache/tandem}"
dir="$home/test-vocab"

have=1
for f in "${FILES[@]}"; do [[ -s "$dir/$f" ]] || have=0; done
if ((have)); then echo "test-vocab: $dir (present)"; exit 0; fi

mkdir -p "$dir"
sdist="$("$(dirname "$0")/fetch-sdist.sh")"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
for f in "${FILES[@]}"; do
  tar -xzf "$sdist" -C "$tmp" "llama_cpp_python-$VERSION/vendor/llama.cpp/models/$f"
  mv "$tmp/llama_cpp_python-$VERSION/vendor/llama.cpp/models/$f" "$dir/$f"
done
echo "test-vocab: $dir"
