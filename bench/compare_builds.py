#!/usr/bin/env python3
"""Two builds of Tandem on the quantized-file table's files (bench/compare_quant_types.py's
list), alternating run by run: did a change keep the speed? For each file, pp512 and tg128 of
the build before and the build after (same file, same threads, who goes first swapping each
round, a fresh tiled-weight cache per run as in the quant table), the medians, and the after /
before ratio as the median of the rounds' ratios with the rounds' lowest and highest. Writes
its section of docs/benchmarks.md (--section NAME, so one change's check does not overwrite
another's).

A change "keeps the speed" where every ratio's range holds 1.0 or lies above it: on this VM the
memory bandwidth wanders by tens of percent over minutes, so one round's ratio alone says little.

Usage: python3 bench/compare_builds.py --before DIR --after DIR --section NAME --title TEXT
           [--threads 2] [--reps 3] [--only NAME,...] [--with-8b] [--models-dir DIR]
(DIR: a build directory with bin/engine_bench and bin/tandem; the files are made by the
--after build's tandem where missing.)
"""
import argparse
import datetime
import json
import os
import shlex
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_docs import ROOT, cpu_name, section_tail, write_section  # noqa: E402
from compare_quant_types import engine_bench, files, make, warm_page_cache  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--section", required=True, help="the section's marker name in docs/benchmarks.md")
    ap.add_argument("--title", required=True, help="the section's heading")
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "build", "bench-models"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--with-8b", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated substrings of the file labels to run")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    a = ap.parse_args()

    engines = {k: os.path.join(d, "bin", "engine_bench") for k, d in (("before", a.before), ("after", a.after))}
    tandem = os.path.join(a.after, "bin", "tandem")
    os.makedirs(a.models_dir, exist_ok=True)
    load_before = os.getloadavg()[0]
    rows = []
    for label, path, cmd in files(a.models_dir, tandem, a.with_8b):
        if a.only and not any(s in label for s in a.only.split(",")):
            continue
        make(path, cmd and [path + ".partial" if c is None else c for c in cmd])
        warm_page_cache(path)
        runs = {"before": [], "after": []}
        for rep in range(a.reps):
            order = ("before", "after") if rep % 2 == 0 else ("after", "before")
            for which in order:
                with tempfile.TemporaryDirectory(dir=a.models_dir) as cache:
                    runs[which].append(engine_bench(engines[which], path, a.threads, a.pp, a.tg,
                                                    "--tiled-cache", cache))
        row = {"label": label, "threads": a.threads, "cpu": cpu_name(), "date": datetime.date.today().isoformat(),
               "kernels": runs["after"][0]["kernels"]}
        for k in ("pp_tok_s", "tg_tok_s"):
            ratios = [x[k] / b[k] for b, x in zip(runs["before"], runs["after"])]
            row[k] = {"before": statistics.median(r[k] for r in runs["before"]),
                      "after": statistics.median(r[k] for r in runs["after"]),
                      "ratio": statistics.median(ratios), "lo": min(ratios), "hi": max(ratios)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    load_after = os.getloadavg()[0]

    begin, end = f"<!-- {a.section}:begin -->", f"<!-- {a.section}:end -->"
    cell = lambda s: f"{s['before']:.1f} / {s['after']:.1f}"  # noqa: E731
    ratio = lambda s: f"{s['ratio']:.3f} ({s['lo']:.3f}-{s['hi']:.3f})"  # noqa: E731
    lines = [begin, f"## {a.title}", "",
             f"{cpu_name()}, {datetime.date.today().isoformat()}, {a.threads} threads, kernels "
             f"{rows[0]['kernels'] if rows else '-'}; each speed the median of {a.reps} runs per build, builds "
             "alternating (who goes first swapping each round), each ratio after / before the median of the "
             "rounds' ratios (lowest and highest round in brackets).", "",
             f"| file | pp{a.pp} before / after (tok/s) | pp ratio | tg{a.tg} before / after (tok/s) | tg ratio |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['label']} | {cell(r['pp_tok_s'])} | {ratio(r['pp_tok_s'])} | "
                     f"{cell(r['tg_tok_s'])} | {ratio(r['tg_tok_s'])} |")
    command = " ".join(["python3 bench/compare_builds.py --before BUILD_BEFORE --after BUILD_AFTER",
                        f"--section {a.section} --title {shlex.quote(a.title)} --threads {a.threads} --reps {a.reps}"]
                       + (["--with-8b"] if a.with_8b else []))
    lines += section_tail(load_before, load_after, command, end)
    write_section("\n".join(lines), begin, end, a.out)


if __name__ == "__main__":
    main()
