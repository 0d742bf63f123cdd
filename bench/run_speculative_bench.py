#!/usr/bin/env python3
"""Runs build/bin/speculative_bench (issue 6) and writes the results into docs/benchmarks.md
(between the speculative markers), docs/bench/speculative.json and docs/bench/speculative.png.

Usage: bench/run_speculative_bench.py [--draft-layers 24]
"""
import argparse
import json
import datetime
import os
import sys

from bench_docs import ROOT, met, probe_table, publish, run_json

BEGIN, END = "<!-- speculative-bench:begin -->", "<!-- speculative-bench:end -->"
METHODS = ["none", "ngram", "layer-skip", "draft"]
FORCED = ["layer-skip-always", "draft-always"]  # the model drafters with the cost model off


def methods_in(res):
    return METHODS + [m for m in FORCED if m in res["single"]]


def label(m):
    return m.replace("-always", ", always on")


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    base = res["single"]["none"]
    methods = methods_in(res)
    x = range(len(methods))
    for off, task, color in [(-0.2, "grounded", "#48c"), (0.2, "chat", "#c84")]:
        ax.bar([i + off for i in x], [res["single"][m][task]["speedup"] for m in methods],
               width=0.4, label=task, color=color)
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xticks(list(x), [label(m).replace(", ", "\n") for m in methods], fontsize=8)
    ax.set_ylabel("single-stream decode speed-up vs none")
    ax.legend()
    ax = axes[1]
    for mode in ["off", "always", "adaptive"]:
        pts = res["batch"][mode]
        streams = sorted(int(s) for s in pts)
        ax.plot(streams, [pts[str(s)]["tok_per_s"] for s in streams], "o-", label=f"n-gram {mode}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent streams")
    ax.set_ylabel("aggregate tok/s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(res, cmd):
    s = res["single"]
    lines = [BEGIN, "", "## Speculative decoding (issue 6)", "",
             f"Measured {datetime.date.today()}, default model, greedy, 128 new tokens per task; draft model and "
             f"layer skip use the first {res['draft_layers']} of 30 blocks. Single stream: the methods' runtimes "
             f"run each task back to back (order reversed every other task); tok/s is the median of five reps, the "
             f"speed-up the median of the five reps' paired ratios (none's decode time over the method's, same "
             f"tokens), acceptance over all five reps. This machine's speed drifts by up to 30% within seconds, "
             f"so only paired figures compare. The model drafters cost about what the target does per token here "
             f"(24 of its 30 blocks), so adaptive they switch themselves off; \"always on\" runs them with the cost "
             f"model off, for their acceptance and what drafting would cost. Reproduce: `{cmd}`.", "",
             "![speculative decoding](bench/speculative.png)", "",
             "| method | task | decode tok/s | speed-up | acceptance | mean accepted / pass |",
             "|---|---|---:|---:|---:|---:|"]
    for m in methods_in(res):
        for task in ["grounded", "chat"]:
            f = s[m][task]
            up = f["speedup"]
            n = f.get("drafted", 0)
            if m == "none":
                acc = mal = "-"
            elif n < 20:  # the cost model switched drafting off after a try or two
                acc = (f"switched off ({f.get('accepted', 0)} of {n} tried tokens accepted)" if n else
                       "switched off (nothing drafted)")
                mal = "-"
            else:
                acc, mal = f"{100 * f['acceptance']:.1f}%", f"{f['mean_accepted']:.2f}"
            lines.append(f"| {label(m)} | {task} | {f['tok_per_s']:.1f} | {up:.2f}x | {acc} | {mal} |")
    base = s["none"]["grounded"].get("tasks", [])
    if base:
        lines += ["", "Per grounded task (correct the mistakes in a passage and write it out again; the passages are in "
                  "bench/speculative_bench.cpp), speed-up over none (median of the five reps' paired ratios):", "",
                  "| method | " + " | ".join(f"passage {i + 1}" for i in range(len(base))) + " |",
                  "|---|" + "---:|" * len(base)]
        for m in methods_in(res)[1:]:
            t = s[m]["grounded"].get("tasks", [])
            lines.append(f"| {label(m)} | " + " | ".join(f"{x:.2f}x" for x in t) + " |")
    reps = s.get("reps", [])
    if reps:
        lines += ["", "What the machine charged for a drafted token during each rep, next to that rep's n-gram speed-up "
                  "on the grounded tasks. The figure is a 9-token step's extra time per extra token over a one-token "
                  "step, measured on a separate copy of the model just before and just after the rep's grounded tasks "
                  "(`compute_probe` in bench/compute_probe.h). A one-token step is bound by reading the weights, "
                  "a drafted token by compute, and on this shared VM the compute slows by up to half for minutes at a "
                  "time while the one-token step hardly moves: the lower the figure, the more a draft saves.", "",
                  *probe_table("rep", reps, "extra cost of a drafted token", "n-gram speed-up, grounded",
                               "ngram_grounded")]
    lines += ["", "Aggregate throughput (6 tasks, 3 grounded and 3 chat, dealt round-robin to the streams; wall time "
              "including prompts): the three modes run each stream count back to back, each mode first in turn; tok/s is "
              "the median of five reps, adaptive vs off the median of the reps' paired ratios.",
              "", "| streams | off tok/s | always-on tok/s | adaptive tok/s | adaptive vs off | steps switched off |",
              "|---:|---:|---:|---:|---:|---:|"]
    b = res["batch"]
    for st in sorted(int(k) for k in b["off"]):
        k = str(st)
        off, alw, ada = b["off"][k]["tok_per_s"], b["always"][k]["tok_per_s"], b["adaptive"][k]["tok_per_s"]
        lines.append(f"| {st} | {off:.1f} | {alw:.1f} | {ada:.1f} | {b['adaptive'][k]['speedup']:.2f}x | "
                     f"{b['adaptive'][k]['steps_off']} |")
    ng = s["ngram"]["grounded"]["speedup"]
    worst = min(b["adaptive"][k]["speedup"] for k in b["adaptive"])
    lines += ["", f"Targets (issue 6): n-gram >= 1.8x on the grounded tasks at one stream: {ng:.2f}x ({met(ng >= 1.8)}); "
              f"adaptive never more than 5% slower than off: at worst {worst:.2f}x of off ({met(worst >= 0.95)}).",
              "", END]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--draft-layers", type=int, default=24)
    ap.add_argument("--from-json", help="re-render docs from a saved docs/bench/speculative.json, running nothing")
    a = ap.parse_args()
    if a.from_json:
        publish("speculative", json.load(open(a.from_json)), plot, markdown, BEGIN, END)
        return 0
    exe = os.path.join(ROOT, "build", "bin", "speculative_bench")
    res = run_json("speculative bench", [exe, str(a.draft_layers)])
    publish("speculative", res, plot, markdown, BEGIN, END)

if __name__ == "__main__":
    sys.exit(main())
