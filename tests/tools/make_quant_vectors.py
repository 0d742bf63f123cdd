#!/usr/bin/env python3
"""Reference hashes of llama.cpp's quantizers (ggml-base, through ctypes) for the byte-exactness
test in tests/unit/quant_types_test.cpp.

The input is a deterministic 4 x 512 float block (the generator below, mirrored by the test):
every value is an integer over 2^23 times a power of two, so Python and C++ build the same
floats exactly. Per type the file records the FNV-1a-64 hash of ggml_quantize_chunk's output
(no importance matrix, as llama-quantize without --imatrix) and of ggml's dequantization of
those bytes; Q8_K (activations only) comes from quantize_row_q8_K_ref, which the CPU backend uses too.

Build ggml from the llama-cpp-python sdist (vendor/llama.cpp) with BUILD_SHARED_LIBS=ON, then:
  python3 tests/tools/make_quant_vectors.py --ggml-lib /tmp/llama/build/bin/libggml-base.so
Writes tests/data/quant/ggml_reference.json.
"""
import argparse
import ctypes
import json
import os
import struct

ROWS, COLS = 4, 512
# ggml_type numbers of the types compared.
TYPES = {"Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q2_K": 10, "Q3_K": 11, "Q4_K": 12,
         "Q5_K": 13, "Q6_K": 14, "IQ4_NL": 20, "IQ4_XS": 23, "MXFP4": 39}
Q8_K = 15


def reference_input():
    """Row r, element i: (u - 2^23) / 2^23 * 2^e, u the top 24 bits of a 64-bit LCG, e per
    32-element block in -4..3; row 2's second half is zero; element (3, 200) is 16x larger."""
    state = 0x9E3779B97F4A7C15
    mask = (1 << 64) - 1

    def step():
        nonlocal state
        state = (state * 6364136223846793005 + 1442695040888963407) & mask
        return state

    out = []
    for r in range(ROWS):
        exp = 0
        for i in range(COLS):
            if i % 32 == 0:
                exp = (step() >> 61) - 4
            u = step() >> 40
            v = (u - (1 << 23)) / float(1 << 23) * (2.0 ** exp)
            if r == 2 and i >= 256:
                v = 0.0
            if r == 3 and i == 200:
                v *= 16.0
            out.append(v)
    return out


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & ((1 << 64) - 1)
    return f"{h:016x}"


class TypeTraits(ctypes.Structure):
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--ggml-lib", required=True, help="libggml-base.so built from the sdist")
    ap.add_argument("--out", default=os.path.join(here, "..", "data", "quant", "ggml_reference.json"))
    a = ap.parse_args()

    lib = ctypes.CDLL(a.ggml_lib)
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    row_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)

    x = reference_input()
    n = len(x)
    src = (ctypes.c_float * n)(*x)
    result = {"rows": ROWS, "cols": COLS, "input_fnv1a64": fnv1a64(struct.pack(f"<{n}f", *x)), "types": {}}

    def record(name, type_id, quantize, dequantize=None):
        traits = lib.ggml_get_type_traits(type_id).contents
        size = n // traits.blck_size * traits.type_size
        dst = (ctypes.c_uint8 * size)()
        quantize(dst)
        back = (ctypes.c_float * n)()
        (dequantize or row_fn(traits.to_float))(dst, back, n)
        result["types"][name] = {"bytes": size, "quantized_fnv1a64": fnv1a64(bytes(dst)),
                                 "dequantized_fnv1a64": fnv1a64(bytes(back))}

    for name, type_id in TYPES.items():
        record(name, type_id, lambda dst, t=type_id: lib.ggml_quantize_chunk(t, src, dst, 0, ROWS, COLS, None))
    q8_k = lib.quantize_row_q8_K_ref
    q8_k.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    q8_k_back = lib.dequantize_row_q8_K
    q8_k_back.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    record("Q8_K", Q8_K, lambda dst: q8_k(src, dst, n), q8_k_back)

    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(result['types'])} types to {a.out}")


if __name__ == "__main__":
    main()
