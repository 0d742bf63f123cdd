#!/usr/bin/env bash
# Extracts llama.cpp's corpus of real chat templates (vendor/llama.cpp/models/templates/*.jinja,
# the templates of published models) from the llama-cpp-python source distribution into
# $TANDEM_HOME/chat-templates. The corpus test (tests/python/test_chat_template_corpus.py)
# renders them with jinja2 and with Tandem; it skips when this folder is absent.
set -euo pipefail

VERSION=0.3.36
home="${TANDEM_HOME:-$HOME/.cache/tandem}"
dir="$home/chat-templates"
if compgen -G "$dir/*.jinja" >/dev/null; then echo "chat-templates: $dir (present)"; exit 0; fi

sdist="$("$(dirname "$0")/fetch-sdist.sh")"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
tar -xzf "$sdist" -C "$tmp" "llama_cpp_python-$VERSION/vendor/llama.cpp/models/templates"
mkdir -p "$dir"
mv "$tmp/llama_cpp_python-$VERSION/vendor/llama.cpp/models/templates/"* "$dir/"
echo "chat-templates: $dir ($(ls "$dir" | wc -l) files)"
