#!/usr/bin/env python3
"""Greedy reference continuations from llama.cpp (through llama-cpp-python) for the fidelity
test (tests/unit/fidelity_test.cpp).

For each of 20 prompts (chat and raw, short and 1,000+ tokens) it records the prompt's token
ids as llama.cpp tokenizes them, the 64 tokens llama.cpp generates greedily (end-of-turn
tokens do not stop it, so every prompt yields 64), and at every generated position the two
largest logits (ids and values), so the test can tell a real divergence from a near-tie.

Usage: python3 tests/tools/make_fidelity_vectors.py [--model PATH] [--out FILE] [--threads N]
Writes tests/data/fidelity/smollm2_135m_q4_1.json by default.

With --gemma3 it runs the real Gemma 3 270M file (scripts/fetch-gemma3.sh) on the 10 raw
prompts (the file has no chat template; two of them run past its 512-token sliding window)
and writes tests/data/fidelity/gemma3_270m_q4_k_m.json.

With --quantize TYPE (Q4_K_M, Q6_K, ...) it first makes the file the test runs on, the default
model requantized by `tandem quantize --allow-requantize` (--tandem BINARY), and writes
tests/data/fidelity/smollm2_135m_<type>.json from llama.cpp's continuations on that file.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import jinja2
import llama_cpp
import numpy as np

N_GENERATE = 64

SHORT_CHAT = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain what a hash table is in two sentences.",
    "Give me three tips for sleeping better.",
    "Translate 'good morning' into Spanish and German.",
    "What is 17 times 23?",
    "Who wrote Romeo and Juliet?",
    "Suggest a name for a friendly robot.",
]
SHORT_RAW = [
    "The quick brown fox",
    "Once upon a time, in a small village by the mountains,",
    "def fibonacci(n):\n    ",
    "The three primary colors are",
    "In 1969, the first humans",
    "Water boils at",
    "Here is a list of fruits: apple, banana,",
    "The meaning of life is",
]

# Long prompts are built from a fixed passage repeated with numbered sections, so they are
# ordinary English, well over 1,000 tokens, and identical wherever the script runs.
PASSAGE = (
    "The river rose slowly through the night, and by morning the lower fields were under a "
    "sheet of brown water. The farmers gathered at the bridge to watch it, talking quietly "
    "about the harvest that had been brought in only a week before, and about the seed corn "
    "still stored in the mill by the water's edge. Some of the younger men wanted to carry "
    "the sacks up to the church on the hill, while the older ones argued that the mill had "
    "stood for a hundred years and had never yet flooded. The miller himself said nothing; "
    "he walked along the bank, measuring the height of the water against the old stone "
    "marks, and when he came back he told them to fetch the carts. "
)


def long_text(topic, sections):
    parts = [f"Section {i + 1}. {PASSAGE}" for i in range(sections)]
    return f"{topic}\n\n" + "\n".join(parts)


LONG_CHAT = [
    long_text("Read the following story and then summarise it in one sentence.", 11),
    long_text("Here is a report from a village. What did the miller decide?", 12),
]
LONG_RAW = [
    long_text("A chronicle of the flood year", 11) + "\nSection 12. The",
    long_text("Notes on the village of Ashford", 12) + "\nIn the end, the villagers",
]


def render_chat(template, user_text):
    env = jinja2.Environment(loader=jinja2.BaseLoader())
    return env.from_string(template).render(
        messages=[{"role": "user", "content": user_text}], add_generation_prompt=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.cache/tandem/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default=os.path.join(here, "..", "data", "fidelity", "smollm2_135m_q4_1.json"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quantize", help="file type to requantize the model to with tandem first")
    ap.add_argument("--gemma3", action="store_true", help="the gemma-3-270m file on the raw prompts")
    ap.add_argument("--tandem", default=os.path.join(here, "..", "..", "build", "bin", "tandem"))
    a = ap.parse_args()
    if a.quantize:
        tmp = tempfile.mkdtemp()
        quantized = os.path.join(tmp, f"smollm2-135m-{a.quantize}.gguf")
        subprocess.run([a.tandem, "quantize", "--allow-requantize", "-q", a.model, quantized, a.quantize], check=True)
        if a.out.endswith("smollm2_135m_q4_1.json"):
            a.out = os.path.join(here, "..", "data", "fidelity", f"smollm2_135m_{a.quantize.lower()}.json")
        a.model = quantized

    groups = (("chat", SHORT_CHAT + LONG_CHAT), ("raw", SHORT_RAW + LONG_RAW))
    if a.gemma3:
        home = os.environ.get("TANDEM_HOME", os.path.expanduser("~/.cache/tandem"))
        a.model = os.path.join(home, "models", "gemma-3-270m-q4_k_m.gguf")
        if a.out.endswith("smollm2_135m_q4_1.json"):
            a.out = os.path.join(here, "..", "data", "fidelity", "gemma3_270m_q4_k_m.json")
        groups = (("raw", SHORT_RAW + LONG_RAW),)

    llm = llama_cpp.Llama(model_path=a.model, n_ctx=4096, n_batch=512, n_threads=a.threads,
                          n_threads_batch=a.threads, verbose=False)
    template = llm.metadata.get("tokenizer.chat_template")
    n_vocab = llm.n_vocab()
    add_bos = llm.metadata.get("tokenizer.ggml.add_bos_token", "false") == "true"

    cases = []
    for kind, prompts in groups:
        for text in prompts:
            full = render_chat(template, text) if kind == "chat" else text
            ids = llm.tokenize(full.encode("utf-8"), add_bos=add_bos, special=(kind == "chat"))
            llm.reset()
            llm.eval(ids)
            generated, top2 = [], []
            for _ in range(N_GENERATE):
                # Only the batch's last token has outputs, so row 0 is its logits.
                logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,)).copy()
                best = np.argsort(-logits, kind="stable")[:2]
                tok = int(best[0])
                generated.append(tok)
                top2.append([[int(best[0]), float(logits[best[0]])], [int(best[1]), float(logits[best[1]])]])
                llm.eval([tok])
            cases.append({"kind": kind, "prompt": full, "prompt_ids": [int(t) for t in ids],
                          "generated": generated, "top2": top2})
            print(f"{kind:4} {len(ids):5} prompt tokens -> {llm.detokenize(generated)[:60]!r}",
                  file=sys.stderr)

    with open(a.out, "w") as f:
        json.dump({"model": os.path.basename(a.model), "generator": "llama-cpp-python " +
                   llama_cpp.__version__, "n_generate": N_GENERATE, "cases": cases}, f)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
