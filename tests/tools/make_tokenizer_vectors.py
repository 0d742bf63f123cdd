#!/usr/bin/env python3
"""Writes the tokenizer reference vectors under tests/data/tokenizer/, made with llama.cpp
(through llama-cpp-python, which builds it from source) on the same GGUF files the tests use:

  default.json    the default model (SmolLM2-135M-Instruct, byte-level BPE, pre "smollm")
  llama-bpe.json  Llama 3's vocabulary (byte-level BPE, pre "llama-bpe")
  llama-spm.json  Llama 2's vocabulary (SentencePiece BPE)
  qwen2.json      Qwen2's vocabulary (byte-level BPE, 152k tokens, pre "qwen2")
  gemma3.json     Gemma 3's vocabulary (SentencePiece, 262k tokens), from the gemma-3-270m file

For every text of corpus.json, plus seeded random strings, and every combination of
add_special / parse_special, a vector holds the token ids llama.cpp produces and the bytes
it decodes them to (token pieces concatenated, with special tokens rendered and hidden;
stored only where they differ from the text). Texts and bytes are stored as hex so that
invalid UTF-8 survives JSON. Pieces of the whole vocabulary are
checked through an FNV-1a digest.

    pip install llama-cpp-python==0.3.36   (see tests/requirements.txt)
    make model test-data
    python3 tests/tools/make_tokenizer_vectors.py [VOCAB ...]   (default: every vocabulary)
"""
import ctypes
import json
import os
import pathlib
import random
import sys

import llama_cpp

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "tests" / "data" / "tokenizer"
HOME = pathlib.Path(os.environ.get("TANDEM_HOME", pathlib.Path.home() / ".cache" / "tandem"))
VOCABS = {
    "default": HOME / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "llama-bpe": HOME / "test-vocab" / "ggml-vocab-llama-bpe.gguf",
    "llama-spm": HOME / "test-vocab" / "ggml-vocab-llama-spm.gguf",
    "qwen2": HOME / "test-vocab" / "ggml-vocab-qwen2.gguf",
    "gemma3": HOME / "models" / "gemma-3-270m-q4_k_m.gguf",
}
FLAG_COMBINATIONS = [(False, False), (True, False), (False, True), (True, True)]

# Fragments the random strings are drawn from: every class the pre-tokenizers distinguish.
RANDOM_FRAGMENTS = [
    " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "a", "Z", "hello", " world", "'s", "'LL",
    "'", "0", "7", "42", "12345", "٣", "½", "Ⅻ", ".", ",", "!?", "(", ")", "-", "_", "$", "€",
    "+", "=", "<", ">", "|", "中", "文字", "日本", "カタ", "ا", "لعربية", "é", "e\u0301", "ß",
    "🦙", "👍🏽", "👨‍👩‍👧", "\u200d", "\u0301", "<|im_end|>", "<|im_start|>", "<|endoftext|>",
    "<|eot_id|>", "<s>", "</s>", "<0x41>", "▁", "Ġ", "<", "|",
]
RANDOM_BYTES = [b"\xff", b"\x80", b"\xe4\xb8", b"\xc3", b"\xf0\x9f", b"\xed\xa0\x80", b"\xc0\xaf"]


def fnv1a64(chunks):
    h = 0xCBF29CE484222325
    for chunk in chunks:
        data = len(chunk).to_bytes(4, "little") + chunk
        for b in data:
            h ^= b
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def random_texts(seed, count):
    rng = random.Random(seed)
    out = []
    for i in range(count):
        parts = []
        for _ in range(rng.randint(1, 12) if i % 4 else rng.randint(20, 80)):
            if rng.random() < 0.08:
                parts.append(rng.choice(RANDOM_BYTES))
            else:
                parts.append(rng.choice(RANDOM_FRAGMENTS).encode())
        out.append((f"random_{i}", b"".join(parts)))
    return out


class reference:
    def __init__(self, path):
        self.llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        self.vocab = self.llm._model.vocab
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)

    def tokenize(self, data, add_special, parse_special):
        return self.llm.tokenize(data, add_bos=add_special, special=parse_special)

    def piece(self, token, special):
        buf = ctypes.create_string_buffer(1024)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        assert 0 <= n <= len(buf), n
        return buf.raw[:n]

    def info(self):
        v = self.vocab
        eot = llama_cpp.llama_vocab_eot(v)
        return {
            "vocab_size": self.n_vocab,
            "bos": llama_cpp.llama_vocab_bos(v),
            "eos": llama_cpp.llama_vocab_eos(v),
            "eot": eot if eot >= 0 else None,
            "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(v)),
            "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(v)),
            "end_of_generation": [t for t in range(self.n_vocab) if llama_cpp.llama_vocab_is_eog(v, t)],
            "control": [t for t in range(self.n_vocab) if llama_cpp.llama_vocab_is_control(v, t)],
            "pieces_fnv1a64_special": fnv1a64(self.piece(t, True) for t in range(self.n_vocab)),
            "pieces_fnv1a64_plain": fnv1a64(self.piece(t, False) for t in range(self.n_vocab)),
        }


def main():
    corpus = json.loads((OUT_DIR / "corpus.json").read_text())["texts"]
    texts = [(c["name"], bytes.fromhex(c["hex"]) if "hex" in c else c["text"].encode()) for c in corpus]
    texts += random_texts(seed=20261130, count=400)
    wanted = sys.argv[1:] or list(VOCABS)
    for name, path in VOCABS.items():
        if name not in wanted:
            continue
        if not path.exists():
            sys.exit(f"{path} is missing: run `make model` and `make test-data`")
        ref = reference(path)
        cases = []
        for text_name, data in texts:
            runs = []
            for add_special, parse_special in FLAG_COMBINATIONS:
                ids = ref.tokenize(data, add_special, parse_special)
                run = {"add_special": add_special, "parse_special": parse_special, "ids": ids}
                # The decoded bytes, stored only where they differ from the text.
                decoded = b"".join(ref.piece(t, True) for t in ids)
                decoded_plain = b"".join(ref.piece(t, False) for t in ids)
                if decoded != data:
                    run["decoded_hex"] = decoded.hex()
                if decoded_plain != data:
                    run["decoded_plain_hex"] = decoded_plain.hex()
                runs.append(run)
            cases.append({"name": text_name, "text_hex": data.hex(), "runs": runs})
        doc = {
            "comment": "Generated by tests/tools/make_tokenizer_vectors.py with llama.cpp; do not edit.",
            "vocab": name,
            "file": path.name,
            "llama_cpp_python": llama_cpp.__version__,
            **ref.info(),
            "cases": cases,
        }
        out = OUT_DIR / f"{name}.json"
        out.write_text(json.dumps(doc, ensure_ascii=True, separators=(",", ":")) + "\n")
        print(f"{out}: {len(cases)} texts, {4 * len(cases)} cases")


if __name__ == "__main__":
    main()
