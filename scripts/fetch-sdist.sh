#!/usr/bin/env bash
# Downloads the llama-cpp-python source distribution from PyPI once and keeps the tarball in
# $TANDEM_HOME/sdist, so every script that takes test data from it reuses one download.
# Prints the tarball's path on stdout (progress goes to stderr).
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
home="${TANDEM_HOME:-$HOME/.cache/tandem}"
dir="$home/sdist"
tarball="$dir/llama_cpp_python-$VERSION.tar.gz"

if [[ -s "$tarball" ]] && tar -tzf "$tarball" >/dev/null 2>&1; then
  echo "$tarball"
  exit 0
fi

mkdir -p "$dir"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
echo "sdist: downloading the llama-cpp-python $VERSION sdist from PyPI (about 77 MB)" >&2
python3 -m pip download --disable-pip-version-check --no-deps --no-binary :all: \
  -d "$tmp" "llama-cpp-python==$VERSION" >&2
got=("$tmp"/llama_cpp_python-*.tar.gz)
mv "${got[0]}" "$tarball.part"
mv "$tarball.part" "$tarball"
echo "$tarball"
