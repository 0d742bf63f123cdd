#!/usr/bin/env python3
"""Per-tensor hashes of llama-quantize's output on the default model, for the byte-exactness
test of `tandem quantize` (tests/unit/quantize_file_test.cpp).

For each file type it runs llama-quantize --allow-requantize on the default model (SmolLM2-135M
Q4_1), reads the output's tensor table and records, per tensor, its type and the XXH64 (seed 0)
of its data. Build llama-quantize from the llama-cpp-python sdist (vendor/llama.cpp) in /tmp:

  python3 tests/tools/make_quantize_vectors.py --llama-quantize /tmp/llama/build/bin/llama-quantize

Writes tests/data/quant/smollm2_135m_llama_quantize.json.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import xxhash

FILE_TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L",
              "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "F16", "BF16"]
# ggml type numbers -> (name, block elements, block bytes)
GGML_TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
              6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 10: ("Q2_K", 256, 84),
              11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
              20: ("IQ4_NL", 32, 18), 23: ("IQ4_XS", 256, 136), 30: ("BF16", 1, 2)}


def read_tensors(path):
    """{name: (type name, data bytes)} of a GGUF v2/v3 file."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals

    def string():
        nonlocal pos
        (n,) = take("Q")
        s = data[pos:pos + n].decode("utf-8")
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("IQ")
            return [value(et) for _ in range(n)]
        return take(scalar[t])[0]

    magic, version, n_tensors, n_kv = take("4sIQQ")
    assert magic == b"GGUF" and version in (2, 3)
    alignment = 32
    for _ in range(n_kv):
        key = string()
        (t,) = take("I")
        v = value(t)
        if key == "general.alignment":
            alignment = v
    infos = []
    for _ in range(n_tensors):
        name = string()
        (nd,) = take("I")
        ne = take("Q" * nd)
        t, off = take("IQ")
        infos.append((name, ne, t, off))
    start = (pos + alignment - 1) // alignment * alignment
    out = {}
    for name, ne, t, off in infos:
        tname, blk, bb = GGML_TYPES[t]
        n = 1
        for d in ne:
            n *= d
        size = n // blk * bb
        out[name] = (tname, data[start + off:start + off + size])
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-quantize", required=True)
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.cache/tandem/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default=os.path.join(here, "..", "data", "quant", "smollm2_135m_llama_quantize.json"))
    ap.add_argument("--types", default=",".join(FILE_TYPES))
    a = ap.parse_args()

    result = {"model": os.path.basename(a.model), "generator": "llama-quantize (llama-cpp-python 0.3.36 sdist)",
              "hash": "xxh64 seed 0 of each tensor's data", "file_types": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for ft in a.types.split(","):
            out = os.path.join(tmp, ft + ".gguf")
            subprocess.run([a.llama_quantize, "--allow-requantize", a.model, out, ft, "2"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            tensors = read_tensors(out)
            result["file_types"][ft] = {name: [t, xxhash.xxh64(b).hexdigest()] for name, (t, b) in tensors.items()}
            os.remove(out)
            print(f"{ft}: {len(tensors)} tensors", file=sys.stderr)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=0, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
