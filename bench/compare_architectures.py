#!/usr/bin/env python3
"""Tandem's CPU engine against llama-bench on the architectures besides llama (issue 21): the
real Gemma 3 270M Q4_K_M file (scripts/fetch-gemma3.sh; gemma3, sliding-window attention,
262k vocabulary) and a Qwen2.5-1.5B-shaped synthetic Q4_K_M file (`tandem gen-model --arch
qwen2`: 28 layers, 1536 wide, 12/2 heads, FFN 8960, Q/K/V biases, tied head, Qwen2's own
151,665-token vocabulary borrowed from llama.cpp's ggml-vocab-qwen2.gguf, random weights).
For each file: pp512 and tg128 of both engines (same file, same threads, runs alternating,
medians) and the ratio. Writes its section of docs/benchmarks.md.

llama-bench is built from the llama-cpp-python 0.3.36 sdist as bench/compare_quant_types.py says.

Usage: python3 bench/compare_architectures.py --llama-bench PATH [--build build] [--threads 1,2]
           [--reps 3] [--pp 512] [--tg 128] [--models-dir DIR]
"""
import datetime
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_docs import cpu_name, section_tail, write_section  # noqa: E402
from compare_quant_types import engine_bench, engines_args, llama_bench, make  # noqa: E402

BEGIN, END = "<!-- arch-bench:begin -->", "<!-- arch-bench:end -->"
HOME = os.environ.get("TANDEM_HOME", os.path.expanduser("~/.cache/tandem"))

QWEN25_15B = ["--arch", "qwen2", "--layers", "28", "--embd", "1536", "--heads", "12", "--kv-heads", "2",
              "--ff", "8960", "--ctx", "32768", "--rope-base", "1000000", "--type", "q4_k_m",
              "--embd-type", "q8_0", "--name", "Qwen2.5-1.5B shape (random weights)"]


def files(models_dir, tandem):
    gemma = os.path.join(HOME, "models", "gemma-3-270m-q4_k_m.gguf")
    vocab = os.path.join(HOME, "test-vocab", "ggml-vocab-qwen2.gguf")
    return [
        ("gemma-3-270m Q4_K_M", gemma, None),
        ("Qwen2.5-1.5B shape Q4_K_M", os.path.join(models_dir, "synthetic-qwen2.5-1.5b-Q4_K_M.gguf"),
         [tandem, "gen-model", "-o", None, "--vocab-from", vocab] + QWEN25_15B),
    ]


def main():
    a = engines_args("thread count, or a comma-separated list").parse_args()

    tandem = os.path.join(a.build, "bin", "tandem")
    engine = os.path.join(a.build, "bin", "engine_bench")
    os.makedirs(a.models_dir, exist_ok=True)
    load_before = os.getloadavg()[0]
    results = []
    for (label, path, cmd), threads in [(f, int(t)) for f in files(a.models_dir, tandem) for t in a.threads.split(",")]:
        if cmd is None and not os.path.exists(path):
            sys.exit(f"{path} is missing: run `make test-data`")
        if cmd is not None:
            make(path, [path + ".partial" if c is None else c for c in cmd])
        runs_t, runs_l = [], []
        for _ in range(a.reps):  # alternating, one run each per round
            runs_t.append(engine_bench(engine, path, threads, a.pp, a.tg))
            runs_l.append(llama_bench(a.llama_bench, path, threads, a.pp, a.tg))
        med = lambda runs, k: statistics.median(r[k] for r in runs)  # noqa: E731
        row = {"label": label, "threads": threads, "mib": os.path.getsize(path) / 2**20,
               "t_pp": med(runs_t, "pp_tok_s"), "t_tg": med(runs_t, "tg_tok_s"),
               "l_pp": med(runs_l, "pp_tok_s"), "l_tg": med(runs_l, "tg_tok_s"), "kernels": runs_t[0]["kernels"]}
        results.append(row)
        print(json.dumps(row), flush=True)
    load_after = os.getloadavg()[0]

    rows = [f"| {r['label']} | {r['threads']} | {r['mib']:.0f} | {r['l_pp']:.1f} | {r['t_pp']:.1f} | "
            f"{r['t_pp'] / r['l_pp']:.2f}x | {r['l_tg']:.1f} | {r['t_tg']:.1f} | {r['t_tg'] / r['l_tg']:.2f}x |"
            for r in results]
    text = "\n".join([
        BEGIN, "",
        "## Architectures beyond llama vs llama-bench (issue 21)", "",
        f"{cpu_name()} ({os.cpu_count()} CPUs), {datetime.date.today().isoformat()}; median of {a.reps} "
        f"alternating runs per engine (Tandem `engine_bench`, then `llama-bench -r 1`), pp{a.pp} = one "
        f"{a.pp}-token prompt step, tg{a.tg} = {a.tg} decode steps from an empty context. Tandem kernels: "
        f"{results[0]['kernels'] if results else '?'}. llama-bench from the llama-cpp-python 0.3.36 sdist, "
        "flash attention off. gemma-3-270m is the real file (Q8_0 embedding and head of 262,144 rows, "
        "Q5_0 / Q4_K / Q6_K / Q8_0 matrices); the Qwen2.5-1.5B shape has random weights in the Q4_K_M "
        "mixture (`tandem gen-model --arch qwen2`) and Qwen2's vocabulary.", "",
        f"| file | threads | MiB | llama.cpp pp{a.pp} | Tandem pp{a.pp} | ratio | llama.cpp tg{a.tg} | "
        f"Tandem tg{a.tg} | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ] + rows + section_tail(load_before, load_after,
                            f"python3 bench/compare_architectures.py --llama-bench PATH --threads {a.threads} --reps {a.reps}", END))
    print(text)
    if a.out and results:
        write_section(text, BEGIN, END, a.out)


if __name__ == "__main__":
    main()
