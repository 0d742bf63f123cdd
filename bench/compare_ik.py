#!/usr/bin/env python3
"""Prompt processing against the fastest CPU engine (issue 51): Tandem, llama.cpp's llama-bench
and ik_llama.cpp's llama-bench on the quant table's files (compare_quant_types.py: SmolLM2-135M
in four types, the Llama-3.2-1B shape in three, with --with-8b the Llama-3-8B shape's Q4_K_M)
and a Qwen2.5-0.5B-shaped Q4_K_M file (896 wide, so its attention and FFN-up matrices take
llama.cpp's fallback types; Qwen2's vocabulary). The mixtures of experts have their own
runner (compare_moe.py --ik-bench).

Same file, same threads, the three engines alternating, who goes first rotating each round;
each speed the median of its rounds, each ratio the median of the rounds' ratios. ik_llama.cpp
runs with its own defaults (its flash attention on), llama.cpp with its own (off); --ik-flags
passes more (e.g. "-fa 0" or "-rtr 1"). Writes its section of docs/benchmarks.md, its rows to
docs/bench/ik.json and a plot to docs/bench/ik.png (--redraw: the plot again from that JSON).

ik_llama.cpp's llama-bench is built outside the tree (about 30 minutes on 2 cores):
  git clone https://github.com/ikawrakow/ik_llama.cpp && cd ik_llama.cpp
  cmake -B build -DGGML_NATIVE=ON -DLLAMA_CURL=OFF && cmake --build build -j2 --target llama-bench

Usage: python3 bench/compare_ik.py --llama-bench PATH --ik-bench PATH [--threads 2] [--reps 3]
           [--pp 512] [--tg 128] [--with-8b] [--only NAME,...] [--ik-flags "..."] [--redraw]
"""
import datetime
import json
import os
import shlex
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_docs import ROOT, cpu_name, kernel_table, section_tail, write_section  # noqa: E402
import compare_quant_types as cqt  # noqa: E402

BEGIN, END = "<!-- ik-bench:begin -->", "<!-- ik-bench:end -->"
SAVED = os.path.join(ROOT, "docs", "bench", "ik.json")
HEADING = "## Prompt processing vs ik_llama.cpp (issue 51)"
HOME = os.environ.get("TANDEM_HOME", os.path.expanduser("~/.cache/tandem"))

# Qwen2.5-0.5B (config.json: 24 layers, hidden 896, 14/2 heads of 64, FFN 4864, tied head,
# Q/K/V biases).
QWEN25_05B = ["--arch", "qwen2", "--layers", "24", "--embd", "896", "--heads", "14", "--kv-heads", "2",
              "--ff", "4864", "--ctx", "32768", "--rope-base", "1000000", "--type", "q4_k_m",
              "--embd-type", "q8_0", "--name", "Qwen2.5-0.5B shape (random weights)"]


def files(models_dir, tandem, with_8b):
    out = [(label, path, cmd) for label, path, cmd in cqt.files(models_dir, tandem, with_8b)
           if "8B" not in label or label.endswith("Q4_K_M")]
    vocab = os.path.join(HOME, "test-vocab", "ggml-vocab-qwen2.gguf")
    out.insert(5, ("Qwen2.5-0.5B shape Q4_K_M", os.path.join(models_dir, "synthetic-qwen2.5-0.5b-Q4_K_M.gguf"),
                   [tandem, "gen-model", "-o", None, "--vocab-from", vocab] + QWEN25_05B))
    return out


def measure(a, engine, path, threads):
    """Rounds of the three engines, rotating who goes first: per engine its runs' results."""
    runners = [
        ("t", lambda: cqt.engine_bench(engine, path, threads, a.pp, a.tg)),
        ("l", lambda: cqt.llama_bench(a.llama_bench, path, threads, a.pp, a.tg)),
        ("ik", lambda: cqt.llama_bench(a.ik_bench, path, threads, a.pp, a.tg, shlex.split(a.ik_flags))),
    ]
    runs = {k: [] for k, _ in runners}
    for rnd in range(a.reps):
        for k, run in runners[rnd % 3:] + runners[:rnd % 3]:
            runs[k].append(run())
            print(f"  round {rnd + 1} {k}: pp {runs[k][-1]['pp_tok_s']:.1f} tg {runs[k][-1]['tg_tok_s']:.1f}",
                  file=sys.stderr, flush=True)
    return runs


def main():
    ap = cqt.engines_args("thread count, or a comma-separated list")
    ap.add_argument("--ik-bench", required="--redraw" not in sys.argv)
    ap.add_argument("--ik-flags", default="", help="extra llama-bench flags for ik_llama.cpp")
    ap.add_argument("--with-8b", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated substrings of the file labels to run")
    ap.add_argument("--redraw", action="store_true", help="run nothing: the plot from the saved JSON")
    a = ap.parse_args()
    # One section (table, JSON, plot) per kernel table, as compare_quant_types.py keeps them: a
    # CPU without AVX-512 answers a different question from the AVX-512 one, not a newer answer.
    global BEGIN, END, SAVED, HEADING
    isa = kernel_table()
    if isa != "avx512":
        BEGIN, END = (m.replace("ik-bench", f"ik-bench-{isa}") for m in (BEGIN, END))
        SAVED = SAVED.replace(".json", f"_{isa}.json")
        HEADING = f"## Prompt processing vs ik_llama.cpp, {isa.upper()} kernels (issue 51)"
    if a.redraw:
        return plot(json.load(open(SAVED)), os.path.splitext(SAVED)[0] + ".png", a.pp)

    tandem = os.path.join(a.build, "bin", "tandem")
    engine = os.path.join(a.build, "bin", "engine_bench")
    os.makedirs(a.models_dir, exist_ok=True)
    load_before = os.getloadavg()[0]
    saved = {(r["label"], r["threads"]): r for r in json.load(open(SAVED))} if os.path.exists(SAVED) else {}
    results = []
    thread_counts = [int(t) for t in a.threads.split(",")]
    for label, path, cmd in files(a.models_dir, tandem, a.with_8b):
        # Saved rows of the files and thread counts this run leaves alone stay in the table.
        kept = [r for k, r in saved.items()
                if k[0] == label and (k[1] not in thread_counts or (a.only and not any(
                    s in label for s in a.only.split(","))))]
        if a.only and not any(s in label for s in a.only.split(",")):
            results += kept
            continue
        results += [r for r in kept if r["threads"] < min(thread_counts)]
        cqt.make(path, cmd)
        cqt.warm_page_cache(path)
        for threads in thread_counts:
            print(f"{label}, {threads} threads", file=sys.stderr, flush=True)
            runs = measure(a, engine, path, threads)
            med = lambda k, key: statistics.median(r[key] for r in runs[k])  # noqa: E731
            ratio = lambda key, peer: statistics.median(  # noqa: E731
                t[key] / p[key] for t, p in zip(runs["t"], runs[peer]))
            ratios_pp_ik = [t["pp_tok_s"] / p["pp_tok_s"] for t, p in zip(runs["t"], runs["ik"])]
            results.append({
                "label": label, "threads": threads, "reps": a.reps, "mib": os.path.getsize(path) / 2**20,
                "cpu": cpu_name(), "date": datetime.date.today().isoformat(), "kernels": runs["t"][0].get("kernels"),
                "ik_flags": a.ik_flags,
                **{f"{k}_{key}": med(k, f"{key}_tok_s") for k in ("t", "l", "ik") for key in ("pp", "tg")},
                "pp_vs_l": ratio("pp_tok_s", "l"), "pp_vs_ik": ratio("pp_tok_s", "ik"),
                "pp_vs_ik_range": [min(ratios_pp_ik), max(ratios_pp_ik)],
                "tg_vs_l": ratio("tg_tok_s", "l"), "tg_vs_ik": ratio("tg_tok_s", "ik"),
            })
        results += [r for r in kept if r["threads"] > max(thread_counts)]
    load_after = os.getloadavg()[0]
    if not results:
        sys.exit("compare_ik: no file matched --only")
    text = section(results, a, load_before, load_after)
    print(text)
    write_section(text, BEGIN, END, a.out)
    with open(SAVED, "w") as f:
        json.dump(results, f, indent=1)
    plot(results, os.path.splitext(SAVED)[0] + ".png", a.pp)


def section(results, a, load_before, load_after):
    r0 = results[0]
    rows = [f"| {r['label']} | {r['threads']} | {r['mib']:.0f} | {r['l_pp']:.1f} | {r['ik_pp']:.1f} | "
            f"{r['t_pp']:.1f} | {r['pp_vs_l']:.2f}x | {r['pp_vs_ik']:.2f}x ({r['pp_vs_ik_range'][0]:.2f}-"
            f"{r['pp_vs_ik_range'][1]:.2f}) | {r['l_tg']:.1f} | {r['ik_tg']:.1f} | {r['t_tg']:.1f} | "
            f"{r['tg_vs_l']:.2f}x | {r['tg_vs_ik']:.2f}x |" for r in results]
    flags = f" plus `{r0['ik_flags']}`" if r0.get("ik_flags") else ""
    return "\n".join([
        BEGIN, "",
        HEADING, "",
        f"{r0['cpu']} ({os.cpu_count()} CPUs), {r0['date']}; Tandem `engine_bench`, llama.cpp's and ik_llama.cpp's "
        f"`llama-bench -r 1`, alternating, who goes first rotating each round; each speed the median of "
        f"{r0['reps']} rounds, each ratio the median of the rounds' ratios (Tandem / ik pp: the rounds' lowest and "
        f"highest in brackets). pp{a.pp} = one {a.pp}-token prompt step, tg{a.tg} = {a.tg} decode steps from an "
        f"empty context. Tandem kernels: {r0.get('kernels') or '?'}. llama.cpp: the llama-cpp-python 0.3.36 sdist, "
        f"its defaults (flash attention off). ik_llama.cpp: its public repository, built GGML_NATIVE, its "
        f"defaults{flags} (flash attention on). Files: the quant table's (compare_quant_types.py) and a "
        "Qwen2.5-0.5B shape (`tandem gen-model --arch qwen2`, Qwen2's vocabulary, random weights).", "",
        f"| file | threads | MiB | llama.cpp pp{a.pp} | ik pp{a.pp} | Tandem pp{a.pp} | vs llama.cpp | vs ik | "
        f"llama.cpp tg{a.tg} | ik tg{a.tg} | Tandem tg{a.tg} | tg vs llama.cpp | tg vs ik |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ] + rows + ["", f"![Prompt processing: Tandem / ik_llama.cpp per file](bench/{os.path.basename(SAVED)[:-5]}.png)"
                ] + section_tail(
        load_before, load_after,
        f"python3 bench/compare_ik.py --llama-bench PATH --ik-bench PATH --threads {a.threads} --reps {a.reps}"
        f"{' --with-8b' if a.with_8b else ''}", END))


def plot(results, path, pp):
    """Per file: Tandem's pp over each peer's (1.0 = parity)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    labels = [f"{r['label']}, {r['threads']}t" for r in results]
    xs = range(len(results))
    for off, key, name in ((-0.2, "pp_vs_l", "Tandem / llama.cpp"), (0.2, "pp_vs_ik", "Tandem / ik_llama.cpp")):
        ax.bar([x + off for x in xs], [r[key] for r in results], 0.4, label=name)
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(f"pp{pp} speed ratio")
    ax.set_title(f"Prompt processing (pp{pp}): Tandem against each peer")
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
