#!/usr/bin/env python3
"""Writes resize.json: Pillow's Image.resize of a fixed test image (the formula the C++ test
uses too) to several sizes with the three filters engine/vision/resample.cpp implements.
The vectors are what Pillow computed, committed so the test needs no Python: rerun this
script (pip install pillow) to remake them."""
import base64
import json
import os

import PIL
from PIL import Image


def test_image(w, h):
    data = bytes(((i * 37 + i // 7) % 251) for i in range(w * h * 3))
    return Image.frombytes("RGB", (w, h), data)


CASES = [((50, 29), (32, 18)), ((13, 7), (40, 22)), ((64, 64), (17, 33)), ((31, 40), (31, 12))]
FILTERS = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC, "lanczos": Image.LANCZOS}

out = []
for (sw, sh), (dw, dh) in CASES:
    for name, f in FILTERS.items():
        img = test_image(sw, sh).resize((dw, dh), f)
        out.append({"src": [sw, sh], "dst": [dw, dh], "filter": name,
                    "rgb": base64.b64encode(img.tobytes()).decode()})
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resize.json")
with open(path, "w") as fh:
    json.dump({"pillow": PIL.__version__, "cases": out}, fh, indent=0)
print(f"{len(out)} cases -> {path}")
