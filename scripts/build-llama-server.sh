#!/usr/bin/env bash
# Builds llama.cpp's llama-server, the serving benchmark's peer, and llama-mtmd-cli, the vision
# peer (tests/data/vision/make_mtmd_vectors.sh, the encode benchmark), from the llama.cpp sources
# inside the llama-cpp-python 0.3.36 sdist on PyPI (the same llama.cpp the engine benchmark
# uses through llama_cpp). Nothing of it enters this repository: the sources and the build go
# to $TANDEM_HOME/peer. Prints the binary's path on the last line; does nothing when it is built.
set -euo pipefail

version=0.3.36
home="${TANDEM_HOME:-$HOME/.cache/tandem}"
dest="$home/peer/llama-server-$version"
bin="$dest/llama-server"
if [[ -x "$bin" && -x "$dest/llama-mtmd-cli" ]]; then echo "$bin"; exit 0; fi

work="$home/peer/src-$version"
mkdir -p "$work"
if [[ ! -f "$work/llama.cpp/CMakeLists.txt" ]]; then
  echo "build-llama-server: downloading the llama-cpp-python $version sdist" >&2
  python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$work" "llama-cpp-python==$version" >&2
  tar xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
  mv "$work/llama_cpp_python-$version/vendor/llama.cpp" "$work/llama.cpp"
  rm -rf "$work/llama_cpp_python-$version"
fi

echo "build-llama-server: building llama-server (native CPU, static; several minutes)" >&2
cmake -S "$work/llama.cpp" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_MTMD=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >&2
cmake --build "$work/build" -j"$(nproc)" --target llama-server llama-mtmd-cli >&2
mkdir -p "$dest"
cp "$work/build/bin/llama-server" "$bin"
cp "$work/build/bin/llama-mtmd-cli" "$dest/llama-mtmd-cli"
rm -rf "$work/build"
echo "$bin"
