#!/usr/bin/env python3
"""Greedy output with a LoRA adapter: `tandem serve --lora a=FILE` (model "<model>:a") against
llama.cpp's `llama-server --lora FILE` on the very same files (issue 54's bar: the same text on
at least 19 of 20 prompts). The base is the default model (SmolLM2-135M-Instruct Q4_1); the
adapters are written by `tandem gen-model --lora default` in llama.cpp's layout: F16 rank 16
(convert_lora_to_gguf's default type) and Q8_0 rank 32, each on every layer's attention and
FFN matrices. 20 raw prompts, 32 tokens each, temperature 0, one request at a time.

llama-server is built from the llama-cpp-python 0.3.36 sdist (bench/compare_quant_types.py
says how); give its path with --llama-server or LLAMA_SERVER. --check: no docs, exit 77 when
no llama-server is found or the CPU has no AVX-512 (CTest's skip), 1 when a case has fewer
than --min-match matches. Tandem's bits are those of llama.cpp's AVX-512 build on every CPU;
a llama-server built natively without AVX-512 sums in other (8-lane) orders and disagrees
with it even without an adapter, so only an AVX-512 peer is a reference.

Usage: python3 bench/compare_lora.py [--llama-server PATH] [--build build] [--threads 2] [--check]
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_docs import ROOT, cpu_name, free_port, stop_server, wait_healthy, write_section  # noqa: E402

BEGIN, END = "<!-- lora-fidelity:begin -->", "<!-- lora-fidelity:end -->"
HOME = os.environ.get("TANDEM_HOME", os.path.expanduser("~/.cache/tandem"))

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):",
    "The three primary colours are",
    "To make a cup of tea, first",
    "The quick brown fox",
    "In 1969, the first humans",
    "A haiku about autumn:",
    "SELECT name, email FROM users WHERE",
    "The most important thing about learning a language is",
    "Photosynthesis is the process by which",
    "Dear hiring manager,",
    "The recipe calls for two cups of flour and",
    "Water boils at",
    "My favourite book is",
    "The stock market today",
    "Here is a list of fruits: apple, banana,",
    "The theory of relativity states that",
    "User: What is 2 + 2?\nAssistant:",
    "The weather in London is usually",
]

CASES = [  # (label, gen-model arguments)
    ("F16 rank 16", ["--lora-type", "f16", "--lora-rank", "16", "--lora-alpha", "16", "--seed", "11"]),
    ("Q8_0 rank 32", ["--lora-type", "q8_0", "--lora-rank", "32", "--lora-alpha", "32", "--seed", "12"]),
]


def has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def find_llama_server(given):
    for p in (given, os.environ.get("LLAMA_SERVER"), os.path.join(HOME, "peer", "bin", "llama-server")):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def complete(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())["choices"][0]["text"]


def run(cmd, port, what, requests):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port, proc, what)
        return [complete(port, b) for b in requests]
    finally:
        stop_server(proc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-server")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--min-match", type=int, default=19)
    ap.add_argument("--strength", default="0.05")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    llama = find_llama_server(a.llama_server)
    if llama is None:
        print("compare_lora: no llama-server (--llama-server, LLAMA_SERVER or $TANDEM_HOME/peer/bin): skipped")
        sys.exit(77 if a.check else 1)
    if a.check and not has_avx512():
        print("compare_lora: this CPU has no AVX-512, so the llama-server built here sums in AVX2's orders, "
              "not those Tandem reproduces (the AVX-512 build's): skipped")
        sys.exit(77)
    tandem = os.path.join(a.build, "bin", "tandem")
    tmp = tempfile.mkdtemp(prefix="tandem-lora-")
    info = subprocess.run([tandem, "info", "--model", "default"], capture_output=True, text=True).stdout
    path = next((ln.split(None, 1)[1].strip() for ln in info.splitlines() if ln.startswith("model ")), None)
    if path is None:
        sys.exit("compare_lora: `tandem info` did not name the default model's path")
    rows, ok = [], True
    for label, gen in CASES:
        adapter = os.path.join(tmp, label.replace(" ", "_") + ".gguf")
        subprocess.run([tandem, "gen-model", "--lora", "default", "--out", adapter, "--lora-strength", a.strength, *gen],
                       check=True, capture_output=True)
        body = {"prompt": None, "max_tokens": a.max_tokens, "temperature": 0}
        ours = [dict(body, prompt=p, model="m:a") for p in PROMPTS]
        theirs = [dict(body, prompt=p) for p in PROMPTS]
        port = free_port()
        t_out = run([tandem, "serve", "--port", str(port), "--threads", str(a.threads), "--lora", f"a={adapter}",
                     "--log-level", "warn"], port, "tandem serve", ours)
        port = free_port()
        l_out = run([llama, "-m", path, "--lora", adapter, "--port", str(port), "--host", "127.0.0.1", "-t",
                     str(a.threads), "-c", "2048", "-np", "1", "--no-warmup", "-nr", "-fa", "off"], port, "llama-server", theirs)
        # Without the adapter the two differ from it: the adapter changed the output.
        port = free_port()
        base_out = run([tandem, "serve", "--port", str(port), "--threads", str(a.threads), "--log-level", "warn"],
                       port, "tandem serve (no adapter)", theirs)
        same = sum(x == y for x, y in zip(t_out, l_out))
        changed = sum(x != y for x, y in zip(t_out, base_out))
        rows.append({"label": label, "same": same, "n": len(PROMPTS), "changed": changed,
                     "differ": [{"prompt": p, "tandem": x, "llama": y}
                                for p, x, y in zip(PROMPTS, t_out, l_out) if x != y]})
        print(json.dumps(rows[-1]), flush=True)
        ok = ok and same >= a.min_match and changed >= len(PROMPTS) // 2
    if not a.check:
        text = "\n".join([
            BEGIN, "",
            "## LoRA adapters: greedy output against llama-server --lora (issue 54)", "",
            f"{cpu_name()}, {datetime.date.today().isoformat()}. `python3 bench/compare_lora.py --llama-server "
            "PATH` (CTest `lora_fidelity` runs it with `--check`). The default "
            "model (SmolLM2-135M-Instruct Q4_1) with adapters `tandem gen-model --lora default --lora-strength "
            f"{a.strength}` writes in llama.cpp's layout (every layer's attn_q/k/v/output and ffn_gate/up/down; "
            "alpha / rank = 1, so each update is about 5% of its matrix's output); `tandem serve --lora a=FILE` "
            "with model `<model>:a` against `llama-server --lora FILE -fa off` (the llama-cpp-python 0.3.36 "
            f"sdist's), 20 raw prompts, {a.max_tokens} tokens, temperature 0. \"Changed\": prompts whose output "
            "with the adapter differs from the base model's.", "",
            "| adapter | same text as llama-server | changed vs the base |", "|---|---|---|",
            *[f"| {r['label']} | {r['same']} / {r['n']} | {r['changed']} / {r['n']} |" for r in rows],
            "",
            f"Target (issue 54): the same text on >= {a.min_match} of 20 prompts: "
            f"**{'met' if all(r['same'] >= a.min_match for r in rows) else 'not met'}**. Without an adapter the "
            "same comparison gives 20 of 20 (with llama-server's flash attention off; on, 9 of 20). This model's "
            "greedy output "
            "moves at last-bit differences (one 8-bit rounding flip of a later layer's quantized input moves "
            "logits by tenths; llama-server against itself with `-ub 2`, on an adapter of attn_v alone, differs by 0.2 "
            "in a first token's "
            "log-probability on one prompt of 20), so the update has to be llama.cpp's to the bit: "
            "engine/lora/step_updates.cpp sums A x and B (A x) in the orders of ggml's CPU backend, "
            "ggml_vec_dot_f16 (four 16-lane chains, then double) for a product of one row and llamafile's "
            "tinyBLAS (one 16-lane chain) for more, with the last layer's FFN multiplying a prompt's last row "
            "alone as llama.cpp does, then scales and adds in separate roundings. Before that (Tandem's own "
            "8-lane F16 order, and B's products in float), the F16 adapter's first generated token's top-5 "
            "log-probabilities differed from llama-server's by 0.05 to 0.28 on 18 of 20 prompts, and the text "
            "agreed on 10 of 20 for either adapter; now they differ by at most 2.3e-4 (F16; Q8_0 2.0e-4; over "
            "all 32 tokens of the F16 case 3.1e-4), as without an adapter (2.4e-4).",
            "", END])
        write_section(text, BEGIN, END)
        print(text)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
