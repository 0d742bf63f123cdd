#!/usr/bin/env python3
"""Tandem's CPU engine against llama-bench on the quantized files people use: the default model
requantized to Q4_K_M, Q6_K, Q8_0 and Q4_0 (by `tandem quantize`), and synthetic models of
real shapes with random weights (`tandem gen-model`): Llama-3.2-1B (16 layers, 2048 wide, 32/8
heads, FFN 8192, tied head) and, with --with-8b, Llama-3-8B (32 layers, 4096, 32/8, FFN 14336,
untied), both with the default model's 49152-token vocabulary (llama.cpp refuses gen-model's own
generated vocabulary's pre-tokenizer name). For each file: pp512 and tg128 of both engines (same file, same
threads, runs alternating, medians), the ratio (the median of the rounds' ratios), and both engines' decode against the memory-bandwidth
limit (weight bytes per token / measured streaming read bandwidth). Writes its section of
docs/benchmarks.md and a plot (docs/bench/quant_types.png).

llama-bench is built from the llama-cpp-python 0.3.36 sdist (vendor/llama.cpp), for example:
  cmake -S vendor/llama.cpp -B /tmp/llama/build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF
  cmake --build /tmp/llama/build -j1 --target llama-bench

Usage: python3 bench/compare_quant_types.py --llama-bench PATH [--build build] [--threads 2]
           [--reps 3] [--pp 512] [--tg 128] [--with-8b] [--only NAME,...] [--models-dir DIR]
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_docs import ROOT, cpu_name, write_section  # noqa: E402

BEGIN, END = "<!-- quant-bench:begin -->", "<!-- quant-bench:end -->"
DEFAULT_PLOT = os.path.join(ROOT, "docs", "bench", "quant_types.png")

SHAPES = {
    "1b": ["--layers", "16", "--embd", "2048", "--heads", "32", "--kv-heads", "8", "--ff", "8192",
           "--vocab-from", "default", "--ctx", "8192", "--rope-base", "500000"],
    "8b": ["--layers", "32", "--embd", "4096", "--heads", "32", "--kv-heads", "8", "--ff", "14336",
           "--vocab-from", "default", "--ctx", "8192", "--rope-base", "500000", "--untied"],
}


DEFAULT_MODEL = os.path.join(os.environ.get("TANDEM_HOME", os.path.expanduser("~/.cache/tandem")), "models",
                             "SmolLM2-135M-Instruct.Q4_1.gguf")


def files(models_dir, tandem, with_8b):
    """(label, path, how to make it, or None where `make model` fetched it) for every benchmarked file."""
    out = [("SmolLM2-135M Q4_1 (the default model)", DEFAULT_MODEL, None)]
    for ft in ("Q4_K_M", "Q6_K", "Q8_0", "Q4_0"):
        out.append((f"SmolLM2-135M {ft}", os.path.join(models_dir, f"smollm2-135m-{ft}.gguf"),
                    [tandem, "quantize", "--allow-requantize", "-q", "default", None, ft]))
    for shape in ("1b", "8b") if with_8b else ("1b",):
        for ft in ("Q4_K_M", "Q4_0", "Q8_0"):
            name = "Llama-3.2-1B shape" if shape == "1b" else "Llama-3-8B shape"
            out.append((f"{name} {ft}", os.path.join(models_dir, f"synthetic-{shape}-{ft}.gguf"),
                        [tandem, "gen-model", "-o", None, "--type", ft.lower(),
                         "--embd-type", "q8_0"] + SHAPES[shape]))
    return out


def make(path, cmd):
    """Makes the file at path by cmd (None in it: the file being written) unless it exists; a file
    with no cmd is fetched by `make model`."""
    if os.path.exists(path):
        return
    if cmd is None:
        sys.exit(f"{path} is missing: `make model` fetches it")
    tmp = path + ".partial"
    subprocess.run([tmp if c is None else c for c in cmd], check=True)
    os.replace(tmp, path)


def warm_page_cache(path):
    """Reads the file once so that every timed open finds it in the page cache: otherwise the
    first round's first open of a file larger than what the cache kept (the 8B files on a
    small machine) times the disk, and its ready column the disk against a warm mmap-only open."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out


def engine_bench(engine, path, threads, pp, tg, *extra):
    """One `engine_bench --reps 1` run on the file: the JSON object of its last line."""
    return json.loads(run_json([engine, "--model", path, "--threads", str(threads), "--pp", str(pp), "--tg", str(tg),
                                "--reps", "1", *extra]).strip().splitlines()[-1])


def engines_args(threads_help):
    """The arguments of the runners that set Tandem's engine against llama-bench file by file
    (this one and compare_architectures.py)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "build", "bench-models"))
    ap.add_argument("--threads", default=str(os.cpu_count()), help=threads_help)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    return ap


def llama_bench(binary, model, threads, pp, tg, flags=()):
    """One llama-bench run (-r 1, plus any extra flags): {"pp_tok_s", "tg_tok_s"}."""
    out = run_json([binary, "-m", model, "-t", str(threads), "-p", str(pp), "-n", str(tg), "-r", "1", "-o", "json",
                    *flags])
    res = {}
    for r in json.loads(out):
        if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0:
            res["pp_tok_s"] = r["avg_ts"]
        elif r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0:
            res["tg_tok_s"] = r["avg_ts"]
    return res


def ready_cell(r, key):
    return f"{r[key]:.2f} ({r[key] / r['mmap_ready_s']:.1f}x)" if key in r else "-"


def main():
    ap = engines_args("thread count, or a comma-separated list (one row per file and count)")
    ap.add_argument("--with-8b", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated substrings of the file labels to run")
    ap.add_argument("--plot", default=DEFAULT_PLOT)
    ap.add_argument("--redraw", default="", metavar="ISA",
                    help="run nothing: rewrite that kernel table's section and plot from its saved JSON")
    a = ap.parse_args()

    tandem = os.path.join(a.build, "bin", "tandem")
    engine = os.path.join(a.build, "bin", "engine_bench")
    os.makedirs(a.models_dir, exist_ok=True)
    load_before = os.getloadavg()[0]
    results = []
    thread_counts = [int(t) for t in a.threads.split(",")]
    for (label, path, cmd), threads in [(f, t) for f in files(a.models_dir, tandem, a.with_8b) for t in thread_counts]:
        if a.redraw:
            break
        if a.only and not any(s in label for s in a.only.split(",")):
            continue
        make(path, cmd and [path + ".partial" if c is None else c for c in cmd])
        warm_page_cache(path)
        runs_t, runs_l = [], []
        for rep in range(a.reps):  # alternating, one run each per round, who goes first swapping
            def tandem_run():
                # A fresh tiled-weight cache per run: the first open tiles (and writes the file in
                # the background), the second maps the file, as a restart does.
                with tempfile.TemporaryDirectory(dir=a.models_dir) as cache:
                    runs_t.append(engine_bench(engine, path, threads, a.pp, a.tg, "--tiled-cache", cache))

            def llama_run():
                runs_l.append(llama_bench(a.llama_bench, path, threads, a.pp, a.tg))

            for run in (tandem_run, llama_run) if rep % 2 == 0 else (llama_run, tandem_run):
                run()
        # Time to a first decoded token re-tiling at every open (no cache file), and with the
        # mmap only (whose first step faults the weights in), for the load columns.
        retiled = engine_bench(engine, path, threads, 8, 4)
        mmap = engine_bench(engine, path, threads, 8, 4, "--no-tiled")
        med = lambda runs, k: statistics.median(r[k] for r in runs)  # noqa: E731
        # Ratios per round (the two runs minutes apart at most), then their median: this VM's
        # memory bandwidth wanders by half over minutes, which a ratio of medians would mix in.
        pp_ratios = [t["pp_tok_s"] / l["pp_tok_s"] for t, l in zip(runs_t, runs_l)]
        tg_ratios = [t["tg_tok_s"] / l["tg_tok_s"] for t, l in zip(runs_t, runs_l)]
        row = {"label": label, "threads": threads, "file": os.path.basename(path), "mib": os.path.getsize(path) / 2**20,
               "cpu": cpu_name(), "date": datetime.date.today().isoformat(),
               "t_pp": med(runs_t, "pp_tok_s"), "t_tg": med(runs_t, "tg_tok_s"),
               "l_pp": med(runs_l, "pp_tok_s"), "l_tg": med(runs_l, "tg_tok_s"),
               "pp_ratio": statistics.median(pp_ratios), "tg_ratio": statistics.median(tg_ratios),
               "tg_ratios": tg_ratios, "t_tg_runs": [r["tg_tok_s"] for r in runs_t],
               "l_tg_runs": [r["tg_tok_s"] for r in runs_l], "gbs_runs": [r["read_gb_s"] for r in runs_t],
               "bytes": runs_t[0]["weight_bytes_per_token"], "gbs": med(runs_t, "read_gb_s"),
               "first_load_s": med(runs_t, "first_load_s"), "ready_s": med(runs_t, "ready_s"),
               "retiled_ready_s": retiled["ready_s"], "mmap_ready_s": mmap["ready_s"],
               "tiled_from": runs_t[0].get("tiled_from", ""), "kernels": runs_t[0]["kernels"], "runs": a.reps}
        row["limit"] = row["gbs"] * 1e9 / row["bytes"]
        results.append(row)
        print(json.dumps(row), flush=True)
    load_after = os.getloadavg()[0]
    # One section (table, JSON, plot) per kernel table: a machine without AVX-512 runs the AVX2
    # kernels, whose figures are a different question from the AVX-512 ones, not a newer answer.
    isa = a.redraw or (results[0]["kernels"] if results else "avx512")
    begin, end, heading = BEGIN, END, "## Quantized files vs llama-bench (issue 19)"
    if isa != "avx512":
        begin, end = BEGIN.replace("quant-bench", f"quant-bench-{isa}"), END.replace("quant-bench", f"quant-bench-{isa}")
        heading = f"## Quantized files vs llama-bench, {isa.upper()} kernels (issue 19)"
        if a.plot == DEFAULT_PLOT:
            a.plot = DEFAULT_PLOT.replace(".png", f"_{isa}.png")
    # Rows of earlier runs that this one did not redo (--only, other thread counts) stay, in
    # the files' order: docs/bench/quant_types.json keeps every row.
    saved = os.path.splitext(a.plot)[0] + ".json"
    if a.redraw:
        results = json.load(open(saved))
    if os.path.exists(saved) and results and not a.redraw:
        # Only rows taken on this CPU: a table mixing machines would compare nothing.
        fresh = {(r["label"], r["threads"]) for r in results}
        old = [r for r in json.load(open(saved))
               if (r["label"], r["threads"]) not in fresh and r.get("cpu") == cpu_name()]
        order = {f[0]: i for i, f in enumerate(files(a.models_dir, tandem, True))}
        results = sorted(old + results, key=lambda r: (order.get(r["label"], len(order)), r["threads"]))
    if results:
        os.makedirs(os.path.dirname(saved), exist_ok=True)
        with open(saved, "w") as f:
            json.dump(results, f, indent=1)

    def spread(r):
        v = r.get("tg_ratios", [])
        return f" ({min(v):.2f}-{max(v):.2f})" if len(v) > 1 else ""

    rows = [f"| {r['label']} | {r['threads']} | {r.get('runs', 1)} | {r['mib']:.0f} | {r['l_pp']:.1f} | {r['t_pp']:.1f} | "
            f"{ratio(r, 'pp'):.2f}x | {r['l_tg']:.1f} | {r['t_tg']:.1f} | {ratio(r, 'tg'):.2f}x{spread(r)} | "
            f"{r['limit']:.1f} | {100 * r['l_tg'] / r['limit']:.0f}% | {100 * r['t_tg'] / r['limit']:.0f}% | "
            f"{r['ready_s']:.2f} / {r['mmap_ready_s']:.2f} ({r['ready_s'] / r['mmap_ready_s']:.1f}x) | "
            f"{ready_cell(r, 'retiled_ready_s')} | {r['first_load_s']:.2f} |" for r in results]
    # One command per (threads, runs) pair the table's rows came from.
    runs_by_threads = sorted({(r["threads"], r.get("runs", 1)) for r in results})
    cmd = "\n".join(f"python3 bench/compare_quant_types.py --llama-bench PATH --threads {t} --reps {n} --with-8b"
                     for t, n in runs_by_threads)
    text = "\n".join([
        begin, "",
        heading, "",
        f"{results[0]['cpu'] if results else cpu_name()} ({os.cpu_count()} CPUs), "
        f"{max(r['date'] for r in results) if results else datetime.date.today().isoformat()}; "
        "each speed the median of the row's runs, engines alternating (Tandem `engine_bench` and `llama-bench -r 1`, "
        "who goes first swapping each round), each ratio the median of the rounds' ratios (for tg, the rounds' lowest "
        "and highest in brackets), "
        f"pp{a.pp} = one {a.pp}-token prompt step, tg{a.tg} = {a.tg} decode steps from an empty context. "
        f"Tandem kernels: {results[0]['kernels'] if results else '?'}. llama-bench: built from the "
        "llama-cpp-python 0.3.36 sdist (GGML_NATIVE for this CPU), flash attention off. The SmolLM2 files are the default model (Q4_1) and the default model requantized by "
        "`tandem quantize --allow-requantize` (the same bytes as llama-quantize's); the shapes are "
        "`tandem gen-model` models with random weights and the default model's vocabulary (Q4_K_M: the "
        "mixture's types, so a Q6_K tied head; Q4_0 and Q8_0: those matrices and a Q8_0 tied head). "
        "Limit = measured streaming read bandwidth (Tandem's runs' median) / weight bytes per decoded token "
        "(above 100% where part of the weights stays in the last-level cache, or where the bandwidth read low); "
        "decode / limit for both engines: where llama.cpp's is above 83%, 1.2x its speed is past the limit. Ready = Tandem's model open plus its first "
        "one-token step, each on a second open in the process: tiled from the cache file the first open wrote "
        "(docs/cpu_engine.md, the tiled-weight cache: the Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q4_K/Q6_K matrices re-laid "
        "once, then mapped) against mmap only (whose first step faults the GGUF's pages in); re-tiled = the "
        "same open re-laying into fresh memory (--no-tiled-cache); first open = the tiled open of a fresh "
        "process with no cache file yet, whose huge pages the kernel zero-fills on first touch (on this VM, "
        "whose host backs guest memory lazily, far slower the first time than after). On a loaded machine llama.cpp's "
        "decode suffers most (its threads spin at a barrier after every graph node, and one "
        "descheduled thread stalls them all); the 1-thread rows are free of that.", "",
        f"| file | threads | runs | MiB | llama.cpp pp{a.pp} | Tandem pp{a.pp} | ratio | llama.cpp tg{a.tg} | "
        f"Tandem tg{a.tg} | ratio | limit tok/s | llama.cpp decode / limit | Tandem decode / limit | "
        "ready s, cached tiles / mmap only | "
        "ready s, re-tiled | first open s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ] + rows + [
        "", f"![Tandem / llama.cpp per file](bench/{os.path.basename(a.plot)})", "",
        (f"Machine load (1-minute average) before / after: {load_before:.1f} / {load_after:.1f}." if not a.redraw
         else "Redrawn from the saved rows (--redraw); the machine load was not recorded with them."), "",
        "Reproduce:", "", "```", cmd, "```", "", end])
    print(text)
    if a.out and results:
        write_section(text, begin, end, a.out)
    if a.plot and results:
        plot(results, a.plot, a.pp, a.tg)


def ratio(r, key):
    """A row's Tandem / llama.cpp ratio for pp or tg (rows of earlier runs kept only the medians)."""
    return r.get(key + "_ratio", r["t_" + key] / r["l_" + key])


def plot(results, path, pp, tg):
    """Bars of the pp and tg ratios per row, the rounds' tg ratios as dots, the 1.2x target."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def short(r):
        name = r["label"].replace("SmolLM2-135M", "SmolLM2").replace("Llama-3.2-1B shape", "1B shape")
        return name.replace("Llama-3-8B shape", "8B shape") + f", {r['threads']}t"

    fig, ax = plt.subplots(figsize=(11, 5))
    xs = range(len(results))
    ax.bar([x - 0.2 for x in xs], [ratio(r, "pp") for r in results], 0.4, label=f"pp{pp}")
    ax.bar([x + 0.2 for x in xs], [ratio(r, "tg") for r in results], 0.4, label=f"tg{tg}")
    for x, r in zip(xs, results):  # the rounds' tg ratios
        ax.plot([x + 0.2] * len(r.get("tg_ratios", [])), r.get("tg_ratios", []), "k.", ms=3)
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.axhline(1.2, color="green", lw=0.8, ls="--", label="target 1.2x")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([short(r) for r in results], fontsize=8, rotation=45, ha="right")
    ax.set_ylabel("Tandem / llama.cpp (tok/s)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
