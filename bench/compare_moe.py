#!/usr/bin/env python3
"""Tandem's CPU engine against llama-bench (and, when given, ik_llama.cpp's llama-bench) on
mixtures of experts (issue 51): a Qwen3-30B-A3B shape cut to 16 layers (128 experts per
layer, 8 per token, Q4_K_M) and a gpt-oss-20b shape (24 layers, 32 experts, 4 per token,
MXFP4 experts, Q8_0 elsewhere), both with random weights from `tandem gen-model`.

For each file and thread count: pp512 and tg128 of each engine (same file, same threads, runs
alternating, medians), the ratios, and decode against the bandwidth limit of the bytes one
token actually reads (the shared weights, the head, and k of each layer's n experts:
engine_bench's weight_bytes_per_token over its measured read bandwidth). Writes its section
of docs/benchmarks.md, its rows to docs/bench/moe.json and a plot to docs/bench/moe.png
(--redraw: the plot again from that JSON, running nothing).

Usage: python3 bench/compare_moe.py --llama-bench PATH [--ik-bench PATH] [--build build]
           [--threads 2] [--reps 3] [--pp 512] [--tg 128] [--models-dir DIR] [--only qwen3moe|gpt-oss]
"""
import datetime
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_docs import ROOT, cpu_name, section_tail, write_section  # noqa: E402
from compare_quant_types import engine_bench, engines_args, llama_bench, make  # noqa: E402

BEGIN, END = "<!-- moe-bench:begin -->", "<!-- moe-bench:end -->"
SAVED = os.path.join(ROOT, "docs", "bench", "moe.json")

# Qwen3-30B-A3B's layer (config.json: hidden 2048, 32/4 heads of 128, 128 experts of 768, 8
# per token, vocabulary 151,936), 16 of its 48 layers.
QWEN3_30B_A3B_16L = ["--arch", "qwen3moe", "--layers", "16", "--embd", "2048", "--heads", "32", "--kv-heads", "4",
                     "--head-dim", "128", "--ff", "6144", "--experts", "128", "--experts-used", "8",
                     "--expert-ff", "768", "--vocab", "151936", "--ctx", "40960", "--rope-base", "1000000",
                     "--type", "q4_k_m", "--name", "Qwen3-30B-A3B shape, 16 layers (random weights)"]
# gpt-oss-20b (config.json: 24 layers, hidden 2880, 64/8 heads of 64, 32 experts of 2880, 4
# per token, a 128-token window on every other layer, vocabulary 201,088).
GPT_OSS_20B = ["--arch", "gpt-oss", "--layers", "24", "--embd", "2880", "--heads", "64", "--kv-heads", "8",
               "--head-dim", "64", "--ff", "2880", "--experts", "32", "--experts-used", "4", "--expert-ff", "2880",
               "--vocab", "201088", "--ctx", "131072", "--sliding-window", "128", "--rope-base", "150000",
               "--type", "mxfp4_moe", "--name", "gpt-oss-20b shape (random weights)"]


def files(models_dir, tandem):
    return [
        ("qwen3moe", "Qwen3-30B-A3B shape, 16 layers, Q4_K_M",
         os.path.join(models_dir, "synthetic-qwen3-30b-a3b-16l-Q4_K_M.gguf"), QWEN3_30B_A3B_16L),
        ("gpt-oss", "gpt-oss-20b shape, MXFP4 experts",
         os.path.join(models_dir, "synthetic-gpt-oss-20b-MXFP4.gguf"), GPT_OSS_20B),
    ]


def main():
    ap = engines_args("thread count, or a comma-separated list")
    ap.add_argument("--ik-bench", help="ik_llama.cpp's llama-bench (a second peer; optional)")
    ap.add_argument("--only", help="one file: qwen3moe or gpt-oss")
    ap.add_argument("--redraw", action="store_true", help="run nothing: the plot from the saved JSON")
    a = ap.parse_args()

    tandem = os.path.join(a.build, "bin", "tandem")
    engine = os.path.join(a.build, "bin", "engine_bench")
    os.makedirs(a.models_dir, exist_ok=True)
    load_before = os.getloadavg()[0]
    results = []
    for key, label, path, spec in files(a.models_dir, tandem):
        if a.redraw:
            return plot(json.load(open(SAVED)), os.path.splitext(SAVED)[0] + ".png", a.pp, a.tg)
        if a.only and key != a.only:
            continue
        make(path, [tandem, "gen-model", "-o", None] + spec)
        for threads in (int(t) for t in a.threads.split(",")):
            runs = {"t": [], "l": [], "ik": []}
            for _ in range(a.reps):  # alternating, one run each per round
                runs["t"].append(engine_bench(engine, path, threads, a.pp, a.tg))
                runs["l"].append(llama_bench(a.llama_bench, path, threads, a.pp, a.tg))
                if a.ik_bench:
                    runs["ik"].append(llama_bench(a.ik_bench, path, threads, a.pp, a.tg))
            med = lambda who, k: statistics.median(r[k] for r in runs[who]) if runs[who] else None  # noqa: E731
            t0 = runs["t"][0]
            row = {"label": label, "threads": threads, "mib": os.path.getsize(path) / 2**20,
                   "cpu": cpu_name(), "date": datetime.date.today().isoformat(), "reps": a.reps,
                   "t_pp": med("t", "pp_tok_s"), "t_tg": med("t", "tg_tok_s"),
                   "l_pp": med("l", "pp_tok_s"), "l_tg": med("l", "tg_tok_s"),
                   "ik_pp": med("ik", "pp_tok_s"), "ik_tg": med("ik", "tg_tok_s"),
                   "bytes": t0["weight_bytes_per_token"], "gbs": med("t", "read_gb_s"), "kernels": t0["kernels"]}
            row["roofline_tg"] = row["gbs"] * 1e9 / row["bytes"]
            results.append(row)
            print(json.dumps(row), flush=True)
    load_after = os.getloadavg()[0]
    # One section (table, JSON, plot) per kernel table, as compare_quant_types.py keeps them: a
    # CPU without AVX-512 answers a different question from the AVX-512 one, not a newer answer.
    isa = results[0]["kernels"] if results else "avx512"
    begin, end, saved = BEGIN, END, SAVED
    heading = "## Mixtures of experts vs llama-bench (issue 51)"
    if isa != "avx512":
        begin, end = (m.replace("moe-bench", f"moe-bench-{isa}") for m in (BEGIN, END))
        saved = SAVED.replace(".json", f"_{isa}.json")
        heading = f"## Mixtures of experts vs llama-bench, {isa.upper()} kernels (issue 51)"
    png = os.path.splitext(saved)[0] + ".png"

    def cell(v, fmt="{:.1f}"):
        return "-" if v is None else fmt.format(v)

    rows = []
    for r in results:
        rows.append(
            f"| {r['label']} | {r['threads']} | {r['mib']:.0f} | {cell(r['l_pp'])} | {cell(r['ik_pp'])} | "
            f"{r['t_pp']:.1f} | {r['t_pp'] / r['l_pp']:.2f}x | "
            f"{cell(r['ik_pp'] and r['t_pp'] / r['ik_pp'], '{:.2f}x')} | {cell(r['l_tg'])} | {cell(r['ik_tg'])} | "
            f"{r['t_tg']:.1f} | {r['t_tg'] / r['l_tg']:.2f}x | {r['bytes'] / 2**20:.0f} | "
            f"{100 * r['t_tg'] / r['roofline_tg']:.0f}% |")
    text = "\n".join([
        begin, "",
        heading, "",
        f"{results[0]['cpu'] if results else cpu_name()} ({os.cpu_count()} CPUs), "
        f"{results[0]['date'] if results else ''}; median of {results[0]['reps'] if results else a.reps} "
        f"alternating runs per engine (Tandem `engine_bench`, then `llama-bench -r 1`"
        f"{', then ik_llama.cpp' if a.ik_bench else ''}), pp{a.pp} = one {a.pp}-token prompt step, "
        f"tg{a.tg} = {a.tg} decode steps from an empty context. Tandem kernels: "
        f"{results[0]['kernels'] if results else '?'}. llama-bench from the llama-cpp-python 0.3.36 sdist, "
        "flash attention off. Random weights from `tandem gen-model` (bench/compare_moe.py lists the shapes). "
        "MiB/token: the weight bytes one decoded token reads (shared matrices, the head, k experts a layer); "
        "roofline: Tandem's tg against that many bytes at the read bandwidth engine_bench measures.", "",
        f"| file | threads | MiB | llama.cpp pp{a.pp} | ik pp{a.pp} | Tandem pp{a.pp} | vs llama.cpp | vs ik | "
        f"llama.cpp tg{a.tg} | ik tg{a.tg} | Tandem tg{a.tg} | vs llama.cpp | MiB/token | roofline |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ] + rows + ["", f"![Mixtures of experts: tok/s per engine](bench/{os.path.basename(png)})"] + section_tail(
        load_before, load_after,
        f"python3 bench/compare_moe.py --llama-bench PATH [--ik-bench PATH] --threads {a.threads} --reps {a.reps}", end))
    print(text)
    if a.out and results:
        write_section(text, begin, end, a.out)
        with open(saved, "w") as f:
            json.dump(results, f, indent=1)
        plot(results, png, a.pp, a.tg)


def plot(results, path, pp, tg):
    """Per file and thread count: each engine's pp and tg (tok/s), and tg's bandwidth limit."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = [("l", "llama.cpp"), ("ik", "ik_llama.cpp"), ("t", "Tandem")]
    engines = [(k, name) for k, name in engines if any(r.get(f"{k}_pp") for r in results)]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    labels = [f"{r['label'].split(',')[0]}, {r['threads']}t" for r in results]
    width = 0.8 / len(engines)
    for ax, key, title in ((axes[0], "pp", f"prompt (pp{pp})"), (axes[1], "tg", f"decode (tg{tg})")):
        for i, (k, name) in enumerate(engines):
            xs = [x + (i - (len(engines) - 1) / 2) * width for x in range(len(results))]
            ax.bar(xs, [r.get(f"{k}_{key}") or 0 for r in results], width, label=name)
        if key == "tg":
            for x, r in enumerate(results):
                ax.hlines(r["roofline_tg"], x - 0.45, x + 0.45, colors="black", linestyles="--",
                          label="bandwidth limit" if x == 0 else None)
        ax.set_xticks(range(len(results)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("tok/s")
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
