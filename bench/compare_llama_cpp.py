#!/usr/bin/env python3
"""Tandem's CPU engine side by side with llama.cpp (llama-cpp-python) on the same GGUF file
and thread count: prompt processing (pp) and single-stream decode (tg) in tok/s, the ratio
Tandem / llama.cpp, and decode against the machine's memory-bandwidth limit. Writes the
table to docs/benchmarks.md (or --out) and prints it.

Usage: python3 bench/compare_llama_cpp.py [--build build] [--model PATH] [--threads N]
                                          [--pp 512] [--tg 128] [--reps 3] [--out FILE]
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=os.path.join(
        os.environ.get("TANDEM_HOME", os.path.expanduser("~/.cache/tandem")), "models",
        "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    a = ap.parse_args()

    common = ["--threads", str(a.threads), "--pp", str(a.pp), "--tg", str(a.tg), "--reps", str(a.reps)]
    tandem = run_json([os.path.join(a.build, "bin", "engine_bench"), "--model", a.model] + common)
    llama = run_json([sys.executable, os.path.join(HERE, "llama_cpp_speed.py"), a.model] + common)

    pp_ratio = tandem["pp_tok_s"] / llama["pp_tok_s"]
    tg_ratio = tandem["tg_tok_s"] / llama["tg_tok_s"]
    limit = tandem["read_gb_s"] * 1e9 / tandem["weight_bytes_per_token"]
    cmd = (f"python3 bench/compare_llama_cpp.py --threads {a.threads} --pp {a.pp} --tg {a.tg} "
           f"--reps {a.reps}   # or: make bench")
    lines = [
        "# Benchmarks: CPU engine vs llama.cpp",
        "",
        f"Model `{os.path.basename(a.model)}`, {a.threads} threads, {cpu_name()}, "
        f"best of {a.reps} runs, {datetime.date.today().isoformat()}. "
        f"Tandem kernels: {tandem['kernels']}. llama.cpp: llama-cpp-python "
        "(PyPI, built with `CMAKE_ARGS=-DGGML_NATIVE=ON`), flash attention off (its default).",
        "",
        "| test | llama.cpp tok/s | Tandem tok/s | Tandem / llama.cpp | target |",
        "|---|---:|---:|---:|---:|",
        f"| pp{a.pp} (prompt, one step) | {llama['pp_tok_s']:.1f} | {tandem['pp_tok_s']:.1f} | "
        f"{pp_ratio:.2f}x | >= 1.0x |",
        f"| tg{a.tg} (decode, empty context) | {llama['tg_tok_s']:.1f} | {tandem['tg_tok_s']:.1f} | "
        f"{tg_ratio:.2f}x | >= 1.1x |",
        "",
        f"Memory-bandwidth limit for decode: {tandem['weight_bytes_per_token'] / 1e6:.1f} MB of weights "
        f"per token / {tandem['read_gb_s']:.1f} GB/s measured read bandwidth ({a.threads} threads) = "
        f"{limit:.0f} tok/s; Tandem decodes at {100 * tandem['tg_tok_s'] / limit:.0f}% of it "
        "(the model is small enough to sit partly in the last-level cache, so the bound is loose).",
        "",
        "Reproduce:",
        "",
        "```",
        cmd,
        "```",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
