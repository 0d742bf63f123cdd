#!/usr/bin/env bash
# Installs what Tandem needs on Debian 12, and nothing when it is all there already.
# Called by `make`; safe to run again. Needs root (or sudo) only when something is missing.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake pkg-config git ca-certificates unzip
  libcaf-dev                                   # C++ Actor Framework 0.17 (core + io)
  libboost1.81-dev libboost-json1.81-dev libboost-system1.81-dev   # Asio, Beast, JSON
  libspdlog-dev libfmt-dev libcli11-dev libyaml-cpp-dev
  libxxhash-dev libpcre2-dev
  libssl-dev openssl                           # SHA-256 of model files, TLS; the TLS test's throwaway CA
  libpng-dev libturbojpeg0-dev libwebp-dev     # images in chat requests (engine/vision/image_decode)
  libgtest-dev libgmock-dev
  python3 python3-pip python3-venv
  curl chromium chromium-driver                # serving tests: SSE disconnects, the chat page
  dpkg-dev file                                # make deb: cpack runs dpkg-shlibdeps
)
# Only with `install-deps.sh --fuzz`: clang and libFuzzer for the fuzz targets.
FUZZ_PACKAGES=(clang libfuzzer-14-dev)

want=("${APT_PACKAGES[@]}")
if [[ "${1:-}" == "--fuzz" ]]; then want+=("${FUZZ_PACKAGES[@]}"); fi

missing=()
for p in "${want[@]}"; do
  # python3/pip may come from elsewhere (pyenv); accept a working command as well.
  case "$p" in
    python3) command -v python3 >/dev/null && continue ;;
    python3-pip) python3 -m pip --version >/dev/null 2>&1 && continue ;;
    python3-venv) python3 -c 'import venv' >/dev/null 2>&1 && continue ;;
    cmake) command -v cmake >/dev/null && continue ;;
    build-essential) command -v g++ >/dev/null && command -v make >/dev/null && continue ;;
  esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

# Python packages for tests and tools only (never for the server itself).
install_requirements() {
  local req="$1"
  if ! python3 - "$req" <<'PY' 2>/dev/null
import sys, importlib.metadata as md, re
for line in open(sys.argv[1]):
    line = line.split('#')[0].strip()
    if not line: continue
    name, _, ver = re.split(r'(==)', line) if '==' in line else (line, '', '')
    if md.version(name) != ver and ver: raise SystemExit(1)
PY
  then
    echo "install-deps: installing Python packages from ${req#*/../}"
    python3 -m pip install -q --disable-pip-version-check -r "$req"
  fi
}

here="$(dirname "$0")"
if [[ "${1:-}" == "--python" || "${1:-}" == "--soak" ]]; then
  install_requirements "$here/../tests/requirements.txt"
fi
if [[ "${1:-}" == "--soak" ]]; then
  install_requirements "$here/../bench/requirements.txt"  # the plot
fi
if [[ "${1:-}" == "--bench" ]]; then
  install_requirements "$here/../bench/requirements.txt"
  # The peer: llama.cpp as llama-cpp-python builds it from its PyPI sdist, for this CPU.
  if ! python3 -c 'import llama_cpp' 2>/dev/null; then
    echo "install-deps: building llama-cpp-python 0.3.36 from source (llama.cpp, native CPU; several minutes)"
    CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF" python3 -m pip install -q --disable-pip-version-check \
      --no-binary llama-cpp-python "llama-cpp-python==0.3.36"
  fi
fi
