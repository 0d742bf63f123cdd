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

# A small Qwen2.5-VL pair (tests/data/vision/make_qwen_continuations.py records llama.cpp's
# answers on it into qwen_continuations.json): a qwen2vl language model whose generated
# vocabulary holds Qwen2-VL's image tokens, 64-wide heads (multimodal RoPE's sections 8, 12,
# 12 of 32 pairs), and a qwen2.5vl projector of two blocks (one windowed, one full) mapping
# into its width. Its ChatML template renders a user turn as QWEN_PROMPT_TEMPLATE does.
QWEN_TEXT_MODEL = ["--arch", "qwen2vl", "--embd", "256", "--heads", "4", "--kv-heads", "2", "--ff", "512",
                   "--layers", "2", "--vocab", "1024", "--image-tokens", "qwen2vl", "--type", "q8_0", "--untied", "--seed", "4"]
QWEN_PROJECTOR = ["--arch", "qwen2vl", "--mmproj", "--type", "f32", "--seed", "7", "--mmproj-text-embd", "256",
                  "--mmproj-layers", "2", "--mmproj-embd", "64", "--mmproj-ff", "96", "--mmproj-heads", "2",
                  "--mmproj-wa-pattern", "2", "--mmproj-output-scale", "0.1"]
QWEN_PROMPT_TEMPLATE = "<|im_start|>user\n<__media__>{}<|im_end|>\n<|im_start|>assistant\n"
# Merged grids (28 px a token): 4 x 9 (windows of 4 x 4 cut at the bottom), 2 x 1, 6 x 4.
QWEN_IMAGES = ["noise 100x260", "gradient 64x30", "disc 170x110"]
QWEN_CASES = [{"image": i, "prompt": q, "max_tokens": 12} for i in QWEN_IMAGES for q in PROMPTS]
