#!/usr/bin/env python3
"""Tandem's CPU engine side by side with llama.cpp (llama-cpp-python) on the same GGUF file
and thread count: prompt processing (pp) and single-stream decode (tg) in tok/s, the ratio
Tandem / llama.cpp, and decode against the machine's memory-bandwidth limit. Writes its
section of docs/benchmarks.md (between the engine-bench markers; or --out) and prints it.

Usage: python3 bench/compare_llama_cpp.py [--build build] [--model PATH] [--threads N]
                                          [--pp 512] [--tg 128] [--reps 3] [--out FILE]
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_docs import ROOT, cpu_name, write_section  # noqa: E402

BEGIN, END = "<!-- engine-bench:begin -->", "<!-- engine-bench:end -->"


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=os.path.join(
        os.environ.get("TANDEM_HOME", os.path.expanduser("~/.cache/tandem")), "models",
        "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", default=str(os.cpu_count()),
                    help="thread count, or a comma-separated list (one table row pair each)")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    a = ap.parse_args()

    load_before = os.getloadavg()[0]
    rows, limits = [], []
    thread_counts = [int(t) for t in str(a.threads).split(",")]
    for threads in thread_counts:
        # The two engines take turns, one run each per round, and each keeps its best round:
        # a burst of other work on the machine then cannot favour one of them.
        common = ["--threads", str(threads), "--pp", str(a.pp), "--tg", str(a.tg), "--reps", "1"]
        tandem, llama = None, None
        for _ in range(a.reps):
            t = run_json([os.path.join(a.build, "bin", "engine_bench"), "--model", a.model] + common)
            l = run_json([sys.executable, os.path.join(HERE, "llama_cpp_speed.py"), a.model] + common)
            if tandem is None:
                tandem, llama = t, l
            for key in ("pp_tok_s", "tg_tok_s", "read_gb_s"):
                if key in t:
                    tandem[key] = max(tandem[key], t[key])
                if key in l:
                    llama[key] = max(llama[key], l[key])
        for test, key, target in ((f"pp{a.pp} (prompt, one step)", "pp_tok_s", ">= 1.0x"),
                                  (f"tg{a.tg} (decode, empty context)", "tg_tok_s", ">= 1.1x")):
            rows.append(f"| {test} | {threads} | {llama[key]:.1f} | {tandem[key]:.1f} | "
                        f"{tandem[key] / llama[key]:.2f}x | {target} |")
        limit = tandem["read_gb_s"] * 1e9 / tandem["weight_bytes_per_token"]
        limits.append(f"- {threads} thread(s): {tandem['weight_bytes_per_token'] / 1e6:.1f} MB of weights per "
                      f"token / {tandem['read_gb_s']:.1f} GB/s measured read bandwidth = {limit:.0f} tok/s; "
                      f"Tandem decodes at {tandem['tg_tok_s']:.1f} tok/s, "
                      f"{100 * tandem['tg_tok_s'] / limit:.0f}% of it.")
    load_after = os.getloadavg()[0]
    kernels = tandem["kernels"]

    cmd = (f"python3 bench/compare_llama_cpp.py --threads {a.threads} --pp {a.pp} --tg {a.tg} "
           f"--reps {a.reps}   # make bench runs it with the default thread count")
    lines = [
        BEGIN,
        "",
        "## CPU engine vs llama.cpp (issue 3)",
        "",
        f"Model `{os.path.basename(a.model)}`, {cpu_name()} ({os.cpu_count()} CPUs), best of {a.reps} "
        f"alternating runs per engine, {datetime.date.today().isoformat()}. Tandem kernels: {kernels}. "
        "llama.cpp: llama-cpp-python 0.3.36 (PyPI, built with `CMAKE_ARGS=-DGGML_NATIVE=ON`), "
        "flash attention off (its default), same GGUF file and thread count.",
        "",
        "| test | threads | llama.cpp tok/s | Tandem tok/s | Tandem / llama.cpp | target |",
        "|---|---:|---:|---:|---:|---:|",
    ] + rows + [
        "",
        "Decode against the memory-bandwidth limit (weight bytes read per token / measured "
        "streaming read bandwidth):",
        "",
    ] + limits + [
        "",
        f"Machine load (1-minute average) before / after: {load_before:.1f} / {load_after:.1f} on "
        f"{os.cpu_count()} CPUs. Other work on the machine skews the figures, llama.cpp's most: its "
        "worker threads meet at a spinning barrier after every graph node, and when a core is "
        "taken away one late thread stalls them all, while Tandem's pool yields and then sleeps. "
        "For figures free of that, run it on an idle machine.",
        "",
        "Reproduce:",
        "",
        "```",
        cmd,
        "```",
        "",
        END,
    ]
    text = "\n".join(lines)
    print(text)
    if a.out:
        write_section(text, BEGIN, END, a.out)


if __name__ == "__main__":
    main()
