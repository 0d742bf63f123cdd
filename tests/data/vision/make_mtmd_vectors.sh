#!/usr/bin/env bash
# Writes mtmd-*.bin: what llama.cpp's libmtmd (llama-mtmd-cli, MTMD_DEBUG_EMBEDDINGS) computes
# for synthetic projector files that `tandem gen-model --mmproj` makes, on test images whose
# pixels tests/unit/vision_test.cpp computes by the same formula. The test regenerates the same
# projectors (same shapes and seed) and compares its embeddings with these, so it needs neither
# llama.cpp nor Python. Each file: int32 n_tokens, int32 n_embd, then n_tokens x n_embd floats.
#
#   tests/data/vision/make_mtmd_vectors.sh TANDEM MTMD_CLI GEMMA3_TEXT_GGUF LLAMA_TEXT_GGUF
#   MTMD_VECTORS=qwen2.5vl tests/data/vision/make_mtmd_vectors.sh TANDEM MTMD_CLI  (that family alone;
#   likewise qwen2vl)
# TANDEM: build/bin/tandem; MTMD_CLI: llama-mtmd-cli built from the llama-cpp-python 0.3.36
# sdist (scripts/build-llama-server.sh builds it beside llama-server);
# GEMMA3_TEXT_GGUF: any gemma3 language model of width 640 (make test-data's gemma-3-270m);
# LLAMA_TEXT_GGUF: any llama model of width 576 (the default model, SmolLM2-135M). SmolLM2's
# vocabulary lacks SmolVLM's image tokens, so llama-mtmd-cli aborts once the image's tiles
# (overview, then slices row by row) are encoded: the dump holds the last, slice (1, 1).
# qwen2.5vl and qwen2vl need no model of their own: gen-model writes a small llama of the projector's width
# (llama-mtmd-cli decodes the image with Qwen's M-RoPE positions, which that model refuses, but
# only after the dump).
set -euo pipefail
tandem=$1 mtmd=$2 text=${3:-} llama_text=${4:-}
only=${MTMD_VECTORS:-all}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

image() {  # width height -> $work/WxH.png
  python3 - "$1" "$2" "$work/$1x$2.png" <<'PY'
import sys
from PIL import Image
w, h, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
Image.frombytes("RGB", (w, h), bytes(((i * 37 + i // 7) % 251) for i in range(w * h * 3))).save(path)
PY
}

# qwen_vectors FAMILY NAME SEED OPTIONS...: the two images through a small projector of the
# family, into mtmd-NAME-TYPE-WxH.bin.
#   qwen2.5vl: 3 layers (window, full, window: --mmproj-wa-pattern 2), SwiGLU FFN 96. 150x90
#   resizes to 140x84: 5x3 merged tokens, windows of 4x3 and 1x3; 100x260 to 112x252: 4x9,
#   windows of 4x4, 4x4 and 4x1.
#   qwen2vl: Qwen2-VL's tower (LayerNorms, a quick-GELU FFN of 128, every layer whole), 2 layers.
# Both 14-pixel patches, width 64, 4 heads of 16, tokens of width 64.
# Flash attention off: its default (on) rounds K and V to half, which moves these outputs
# by about 1.2e-3 of the largest (the merger's GELU, a half-precision table, turns small
# differences into half-precision steps); off is ggml's float path, the one Tandem computes.
qwen_vectors() {
  local family=$1 prefix=$2 seed=$3
  shift 3
  "$tandem" gen-model --arch llama --layers 1 --embd 64 --heads 4 --kv-heads 4 --ff 128 --seed 3 \
    -o "$work/text64.gguf" 2>/dev/null
  for spec in "f32 150 90" "f16 100 260"; do
    read -r type w h <<<"$spec"
    name=$prefix-$type-${w}x$h
    image "$w" "$h"
    "$tandem" gen-model --arch qwen2vl --mmproj --mmproj-family "$family" --type "$type" --seed "$seed" \
      -o "$work/$name.gguf" --mmproj-embd 64 --mmproj-heads 4 --mmproj-text-embd 64 "$@"
    rm -f "$here/mtmd-$name.bin"
    MTMD_DEBUG_EMBEDDINGS="$here/mtmd-$name.bin" "$mtmd" -m "$work/text64.gguf" --mmproj "$work/$name.gguf" \
      --image "$work/${w}x$h.png" -p hi -n 1 -t 2 --temp 0 --no-warmup -fa off >"$work/log" 2>&1 || true
    [ -s "$here/mtmd-$name.bin" ] || { tail -20 "$work/log"; exit 1; }
    echo "mtmd-$name.bin"
  done
}
qwen() { qwen_vectors qwen2.5vl qwen25vl 9 --mmproj-layers 3 --mmproj-ff 96 --mmproj-wa-pattern 2; }
qwen2() { qwen_vectors qwen2vl qwen2vl 13 --mmproj-layers 2 --mmproj-ff 128; }
if [ "$only" = qwen2.5vl ]; then qwen; exit 0; fi
if [ "$only" = qwen2vl ]; then qwen2; exit 0; fi

# name type width height: a 112-pixel gemma3 projector (8x8 patches of 14, 4x4 pooled: 4 tokens)
for spec in "gemma3-f16-50x29 f16 50 29" "gemma3-f32-300x170 f32 300 170"; do
  read -r name type w h <<<"$spec"
  image "$w" "$h"
  "$tandem" gen-model --arch gemma3 --mmproj --type "$type" --seed 5 -o "$work/$name.gguf" \
    --mmproj-image-size 112 --mmproj-patch 14 --mmproj-layers 2 --mmproj-embd 64 --mmproj-ff 128 \
    --mmproj-heads 4 --mmproj-merge 4 --mmproj-text-embd 640
  MTMD_DEBUG_EMBEDDINGS="$here/mtmd-$name.bin" "$mtmd" -m "$text" --mmproj "$work/$name.gguf" \
    --image "$work/${w}x$h.png" -p hi -n 1 -t 2 --temp 0 --chat-template gemma >"$work/log" 2>&1 ||
    { tail -20 "$work/log"; exit 1; }
  echo "mtmd-$name.bin"
done

# idefics3 (SmolVLM's family): 64-pixel tiles of 8x8 patches, 2x2 shuffled (16 tokens), the
# image resized to a 128 longest edge: a 100x60 image gives 2x2 slices and the overview.
image 100 60
"$tandem" gen-model --arch llama --mmproj --type f32 --seed 7 -o "$work/idefics3.gguf" \
  --mmproj-image-size 64 --mmproj-patch 8 --mmproj-layers 2 --mmproj-embd 64 --mmproj-ff 128 \
  --mmproj-heads 4 --mmproj-merge 2 --mmproj-text-embd 576 --mmproj-longest-edge 128
rm -f "$here/mtmd-idefics3-f32-100x60.bin"
MTMD_DEBUG_EMBEDDINGS="$here/mtmd-idefics3-f32-100x60.bin" "$mtmd" -m "$llama_text" --mmproj "$work/idefics3.gguf" \
  --image "$work/100x60.png" -p hi -n 1 -t 2 --temp 0 >"$work/log" 2>&1 || true
grep -q "done = 7, total = 11" "$work/log" || { tail -20 "$work/log"; exit 1; }
echo mtmd-idefics3-f32-100x60.bin

qwen
qwen2
