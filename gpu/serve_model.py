#!/usr/bin/env python3
"""Stacks a synthetic model's one transformer block into many: reads a GGUF file written by
`tandem gen-model --layers 1 ...` and writes the same model with --layers N, every block a copy
of block 0 (standard library only).

Why: gen-model draws and quantizes every weight on one thread, about 4-5 s per Llama-3-8B
block on the machine this was written on (155 s for the whole 8B file), while copying a block
is only disk writes; serve_check.sh needs an 8B-shaped file on the GPU machine within its
short run. The copies give the same shapes, bytes and memory traffic as distinct random
blocks, which is what serving and its benchmark measure.

  serve_model.py IN.gguf OUT.gguf N

GGUF v3: header, key/value pairs (the architecture's block_count is rewritten), tensor infos
(name, dims, type, offset into the data section), padding to general.alignment (default 32),
then the data. The blocks' tensors ("blk.0.*") are repeated as "blk.<l>.*", each tensor's data
region (its bytes up to the next tensor, padding included) copied as is, padded to the alignment.
"""
import struct
import sys

SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.d, self.at = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.at)
        self.at += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("<Q")
        s = self.d[self.at:self.at + n].decode("utf-8")
        self.at += n
        return s

    def value(self, t):
        if t in SCALAR:
            return self.take(SCALAR[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            if et in SCALAR:  # skip fixed-size arrays in one step
                self.at += n * struct.calcsize(SCALAR[et])
                return None
            for _ in range(n):
                self.value(et)
            return None
        raise ValueError(f"unknown GGUF value type {t}")


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def stack(src, dst, n_layers):
    with open(src, "rb") as f:
        data = f.read()
    r = Reader(data)
    magic, version, n_tensors, n_kv = r.take("<IIQQ")
    if magic != 0x46554747 or version != 3:
        raise SystemExit(f"{src}: not a GGUF v3 file")
    kv_start = r.at
    alignment, count_at, arch = 32, None, None
    for _ in range(n_kv):
        key = r.string()
        t = r.take("<I")
        at = r.at
        v = r.value(t)
        if key == "general.alignment":
            alignment = v
        elif key == "general.architecture":
            arch = v
        elif key.endswith(".block_count") and t == 4:
            count_at = at
    if count_at is None:
        raise SystemExit(f"{src}: no {arch}.block_count")
    kv = bytearray(data[kv_start:r.at])
    struct.pack_into("<I", kv, count_at - kv_start, n_layers)
    if struct.unpack_from("<I", data, count_at)[0] != 1:
        raise SystemExit(f"{src}: has {struct.unpack_from('<I', data, count_at)[0]} blocks; make it with --layers 1")

    infos = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take("<I")
        dims = [r.take("<Q") for _ in range(nd)]
        ttype, offset = r.take("<I"), r.take("<Q")
        infos.append([name, dims, ttype, offset])
    data_start = (r.at + alignment - 1) // alignment * alignment
    ends = sorted(i[3] for i in infos)[1:] + [len(data) - data_start]
    by_offset = sorted(range(len(infos)), key=lambda k: infos[k][3])
    size = {}
    for k, end in zip(by_offset, ends):
        size[k] = end - infos[k][3]

    out_infos = []  # (name, dims, type, source index)
    for k, (name, dims, ttype, _) in enumerate(infos):
        if name.startswith("blk.0."):
            for layer in range(n_layers):
                out_infos.append(("blk.%d.%s" % (layer, name[len("blk.0."):]), dims, ttype, k))
        elif name.startswith("blk."):
            raise SystemExit(f"{src}: tensor {name} of a block other than 0")
        else:
            out_infos.append((name, dims, ttype, k))
    header = bytearray(struct.pack("<IIQQ", magic, version, len(out_infos), n_kv)) + kv
    offset = 0
    for name, dims, ttype, k in out_infos:
        header += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        header += struct.pack("<IQ", ttype, offset)
        offset += -(-size[k] // alignment) * alignment
    header += b"\0" * ((-len(header)) % alignment)
    view = memoryview(data)
    with open(dst, "wb") as f:
        f.write(header)
        for _, _, _, k in out_infos:
            start = data_start + infos[k][3]
            f.write(view[start:start + size[k]])
            f.write(b"\0" * ((-size[k]) % alignment))
    return len(out_infos)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    n = stack(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    print(f"wrote {sys.argv[2]}: {sys.argv[3]} blocks, {n} tensors")
