"""Test images as formulas, written as PNGs by hand (zlib and struct: no imaging package), and
the cases of llama.cpp's greedy continuations (tests/data/vision/make_continuations.py writes
them into continuations.json; test_vision.py replays them)."""
import struct
import zlib


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(width, height, pixel=None):
    """An 8-bit RGB PNG of pixel(x, y) -> (r, g, b) (a gradient by default)."""
    pixel = pixel or (lambda x, y: (x * 255 // max(1, width - 1), y * 255 // max(1, height - 1), 128))
    rows = b"".join(b"\x00" + bytes(c for x in range(width) for c in pixel(x, y)) for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            _chunk(b"IDAT", zlib.compress(rows)) + _chunk(b"IEND", b""))


def declared_png(width, height, idat=b""):
    """A PNG whose header declares width x height, with the given compressed data."""
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            _chunk(b"IDAT", idat) + _chunk(b"IEND", b""))


FORMULAS = {
    "gradient": lambda w, h: lambda x, y: (x * 255 // max(1, w - 1), y * 255 // max(1, h - 1), 128),
    "stripes": lambda w, h: lambda x, y: (0, 0, 0) if (x // 5) % 2 else (255, 255, 255),
    "checker": lambda w, h: lambda x, y: (200, 40, 40) if ((x // 8) + (y // 8)) % 2 else (30, 30, 160),
    "noise": lambda w, h: lambda x, y: tuple(((3 * (y * w + x) + c) * 37 + (3 * (y * w + x) + c) // 7) % 251
                                             for c in range(3)),
    "disc": lambda w, h: lambda x, y: (250, 220, 40) if (x - w / 2) ** 2 + (y - h / 2) ** 2 < (min(w, h) / 3) ** 2
    else (20, 120, 40),
}


def png_of(spec):
    """spec: "KIND WIDTHxHEIGHT", e.g. "noise 50x29"."""
    kind, size = spec.split()
    w, h = (int(v) for v in size.split("x"))
    return png(w, h, FORMULAS[kind](w, h))


# Gemma's turn format as llama.cpp's built-in "gemma" template renders one user message
# (gemma-3-270m's file has no template); test_vision.py's Jinja template renders the same.
PROMPT_TEMPLATE = "<start_of_turn>user\n<__media__>{}<end_of_turn>\n<start_of_turn>model\n"

_PROJECTOR = ["--mmproj-text-embd", "640", "--mmproj-image-size", "224", "--mmproj-patch", "14", "--mmproj-layers",
              "2", "--mmproj-embd", "64", "--mmproj-ff", "128", "--mmproj-heads", "2"]
PROJECTORS = [_PROJECTOR + ["--seed", "3", "--mmproj-output-scale", "0.1"],
              _PROJECTOR + ["--seed", "3", "--mmproj-output-scale", "0.3"]]
IMAGES = ["gradient 64x64", "stripes 40x60", "checker 96x48", "noise 50x29", "disc 80x80"]
PROMPTS = ["What is in the image?", "Describe this picture in one sentence."]
CASES = [{"projector": p, "image": i, "prompt": q, "max_tokens": 16} for p in PROJECTORS for i in IMAGES
         for q in PROMPTS]

# Small synthetic pairs of each family (tests/data/vision/make_pair_continuations.py records
# llama.cpp's answers on them into pair_continuations.json; test_vision.py replays them): a
# language model whose generated vocabulary holds the family's image tokens (untied: a tied
# head of random weights answers one token whatever the prompt) and a projector into its
# width, both by `tandem gen-model`. Their ChatML template renders a user turn as
# PAIR_PROMPT_TEMPLATE does.
#   gemma3     a gemma3 model (five local layers, one global), SigLIP's layout at 224 px: 16
#              rows attending to each other bidirectionally
#   idefics3   a llama (SmolVLM's language model), tiles of 64 px with 2 x 2 pixel shuffle:
#              slices and an overview, 16 rows each
#   qwen2.5vl  a qwen2vl model with 64-wide heads (multimodal RoPE's sections 8, 12, 12 of 32
#              pairs), a two-block projector (one windowed, one full), the image's own size
#   qwen2vl    the same language model and Qwen2-VL's projector (LayerNorms, quick GELU, no
#              windows)
_TEXT = ["--embd", "256", "--heads", "4", "--kv-heads", "2", "--ff", "512", "--vocab", "1024", "--type", "q8_0",
         "--untied", "--seed", "4"]
_SMALL_VIT = ["--type", "f32", "--seed", "7", "--mmproj-text-embd", "256", "--mmproj-layers", "2", "--mmproj-embd",
              "64", "--mmproj-heads", "2", "--mmproj-output-scale", "0.1"]
PAIRS = {
    "gemma3": {
        "text": ["--arch", "gemma3", "--layers", "6", "--sliding-window", "24", "--image-tokens", "gemma3", *_TEXT],
        "projector": ["--arch", "gemma3", "--mmproj", *_SMALL_VIT, "--mmproj-ff", "128", "--mmproj-image-size", "224",
                      "--mmproj-patch", "14"],
        "images": ["gradient 64x64", "disc 80x80"]},
    "idefics3": {
        "text": ["--arch", "llama", "--layers", "2", "--image-tokens", "idefics3", *_TEXT],
        "projector": ["--arch", "llama", "--mmproj", *_SMALL_VIT, "--mmproj-ff", "128", "--mmproj-image-size", "64",
                      "--mmproj-patch", "8", "--mmproj-merge", "2", "--mmproj-longest-edge", "128"],
        # 2 x 1 slices, and one tile alone
        "images": ["noise 200x50", "gradient 64x64"]},
    "qwen2.5vl": {
        "text": ["--arch", "qwen2vl", "--layers", "2", "--image-tokens", "qwen2vl", *_TEXT],
        "projector": ["--arch", "qwen2vl", "--mmproj", *_SMALL_VIT, "--mmproj-ff", "96", "--mmproj-wa-pattern", "2"],
        # merged grids (28 px a token): 4 x 9 (windows of 4 x 4 cut at the bottom), 3 x 2, 6 x 4
        "images": ["noise 100x260", "gradient 64x30", "disc 170x110"]},
    "qwen2vl": {
        "text": ["--arch", "qwen2vl", "--layers", "2", "--image-tokens", "qwen2vl", *_TEXT],
        "projector": ["--arch", "qwen2vl", "--mmproj", "--mmproj-family", "qwen2vl", *_SMALL_VIT, "--mmproj-ff", "128"],
        # merged grids 4 x 9 and 6 x 4
        "images": ["noise 100x260", "disc 170x110"]},
}
PAIR_PROMPT_TEMPLATE = "<|im_start|>user\n<__media__>{}<|im_end|>\n<|im_start|>assistant\n"
PAIR_CASES = [{"family": f, "image": i, "prompt": q, "max_tokens": 12} for f, pair in PAIRS.items()
              for i in pair["images"] for q in PROMPTS]
