#!/usr/bin/env python3
"""llama.cpp's speed on a GGUF file through llama-cpp-python: prompt processing of N tokens
(one batch) and single-stream decode of M tokens, printed as one JSON line.

Usage: bench/llama_cpp_speed.py MODEL --threads T [--pp 512] [--tg 128] [--reps 3]
"""
import argparse
import json
import time

import llama_cpp
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()

    llm = llama_cpp.Llama(model_path=a.model, n_ctx=a.pp + a.tg + 16, n_batch=a.pp, n_ubatch=a.pp,
                          n_threads=a.threads, n_threads_batch=a.threads, verbose=False)
    n_vocab = llm.n_vocab()
    prompt = [1 + (i * 37) % (n_vocab - 2) for i in range(a.pp)]

    best_pp, best_tg = 0.0, 0.0
    for _ in range(a.reps):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        best_pp = max(best_pp, a.pp / (time.perf_counter() - t0))
        # Decode from an empty context, as llama-bench's tg does.
        llm.reset()
        tok = 1
        t0 = time.perf_counter()
        for _ in range(a.tg):
            llm.eval([tok])
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))
            tok = int(np.argmax(logits))
        best_tg = max(best_tg, a.tg / (time.perf_counter() - t0))
    print(json.dumps({"engine": "llama.cpp", "threads": a.threads, "pp": a.pp, "pp_tok_s": best_pp,
                      "tg": a.tg, "tg_tok_s": best_tg}))


if __name__ == "__main__":
    main()
