#!/usr/bin/env python3
"""Runs build/bin/sampler_bench (the sampler's cost per sequence, issue 20) and writes its
section of docs/benchmarks.md (between the sampler-bench markers), docs/bench/sampler.json
and a plot, docs/bench/sampler.png. docs/bench/sampler_before.json, when present, is the
same benchmark run against the sampler before issue 20, shown beside it.

Usage: bench/run_sampler_bench.py [--build build] [--reps 9]
"""
import argparse
import datetime
import json
import os
import sys

from bench_docs import ROOT, cpu_name, met, publish, run_json

BEGIN, END = "<!-- sampler-bench:begin -->", "<!-- sampler-bench:end -->"
BEFORE = os.path.join(ROOT, "docs", "bench", "sampler_before.json")


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cfgs = res["configs"]
    before = {c["name"]: c for c in res.get("before", {}).get("configs", [])}
    fig, ax = plt.subplots(figsize=(12, 5))
    y = range(len(cfgs))
    h = 0.2
    series = [("us_49k", "49,152 vocabulary", "#48c", 0), ("us_152k", "152,064 vocabulary", "#c84", 1)]
    for key, label, color, i in series:
        ax.barh([v + (i - 1.5) * h for v in y], [c[key] for c in cfgs], h, color=color, label=label)
        if before:
            ax.barh([v + (i + 0.5) * h for v in y], [before.get(c["name"], {}).get(key, 0) for c in cfgs], h,
                    color=color, alpha=0.35, label=label + ", before")
    ax.set_yticks(list(y))
    ax.set_yticklabels([c["name"] for c in cfgs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("µs of CPU per sequence (one thread, rows from memory)")
    ax.axvline(50, color="k", lw=0.8, ls=":")
    ax.axvline(150, color="k", lw=0.8, ls="--")
    ax.set_title(f"Sampler cost per sequence on the default model's logits ({res['cpu']})", fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(res, cmd):
    before = {c["name"]: c for c in res.get("before", {}).get("configs", [])}
    lines = [BEGIN, "", "## Sampler cost per sequence (issue 20)", "",
             f"Measured {res['date']} on {res['cpu']}, one thread, row kernels `{res['row_kernels']}`: "
             f"`sampler::sample()` over the {res['rows']} rows of the default model's logits for a chat "
             "conversation's assistant turn (each position's next-token distribution): the thread's CPU time "
             f"per call, the fastest of {res['reps']} passes over the rows (this two-core machine is shared, and "
             "CPU time leaves out the waits for a core). \"From memory\" samples each row once per pass (38 MB "
             "of rows at 49k, out of the caches, as a batch's logits are); \"in cache\" re-samples each row "
             "at once. The 152,064 column is the same rows extended to Qwen's "
             "vocabulary size, the extra ids drawn from each row's own values below its 99th percentile (the "
             "model's top, a longer tail). \"kept\" is the mean number of tokens the draw chooses among. "
             f"Reproduce: `{cmd}`." + (f" \"Before\" is the same benchmark on the sampler before this issue "
                                        f"({res['before']['commit']}, sort-based)." if before else ""), "",
             "| settings | µs, 49,152 from memory / in cache | µs, 152,064 from memory / in cache | kept (49k / 152k) |"
             + (" before, µs 49k / 152k (from memory) |" if before else ""),
             "|---|---:|---:|---:|" + ("---:|" if before else "")]
    for c in res["configs"]:
        b = before.get(c["name"])
        lines.append(f"| {c['name']} | {c['us_49k']:.1f} / {c.get('hot_us_49k', 0):.1f} | {c['us_152k']:.1f} / "
                     f"{c.get('hot_us_152k', 0):.1f} | {c['kept_49k']} / {c['kept_152k']} |"
                     + (f" {b['us_49k']:.0f} / {b['us_152k']:.0f} |" if b else (" - |" if before else "")))
    by = {c["name"]: c for c in res["configs"]}
    p, d = by.get("T 0.7, top_p 0.95"), by.get("T 0.7, no truncation")
    if p and d:
        worst49 = max(p["us_49k"], d["us_49k"])
        worst152 = max(p["us_152k"], d["us_152k"])
        lines += ["", f"Targets (issue 20): temperature 0.7 with top_p 0.95 and with no truncation, <= 50 µs per "
                  f"sequence on 49,152 tokens: {p['us_49k']:.1f} and {d['us_49k']:.1f} µs from memory "
                  f"({met(worst49 <= 50)}); <= 150 µs on 152,064: {p['us_152k']:.1f} and {d['us_152k']:.1f} µs "
                  f"({met(worst152 <= 150)})."]
    lines += ["", f"One step of 64 sequences (T 0.7, top_p 0.95, 49,152 tokens), each with its own sampler and "
              f"random stream: {res['batch64_one_thread_us']:.0f} µs on one thread, {res['batch64_pool_us']:.0f} µs "
              f"on the compute pool ({res['pool_threads']} threads), which is how the CPU device worker samples a "
              "batch (the same tokens either way: tests/unit/sampler_test.cpp).", "",
              "![sampler cost](bench/sampler.png)", "", END]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--save-before", metavar="COMMIT",
                    help="store this run as docs/bench/sampler_before.json (the sampler of COMMIT) and stop")
    ap.add_argument("--from-json", help="re-render docs from a saved docs/bench/sampler.json, running nothing")
    a = ap.parse_args()
    if a.from_json:
        publish("sampler", json.load(open(a.from_json)), plot, markdown, BEGIN, END)
        return 0
    exe = os.path.join(a.build, "bin", "sampler_bench")
    res = run_json("sampler bench", [exe, "--reps", str(a.reps)])
    res.update({"date": datetime.date.today().isoformat(), "cpu": cpu_name(), "reps": a.reps})
    if a.save_before:
        res["commit"] = a.save_before
        with open(BEFORE, "w") as f:
            json.dump(res, f, indent=2)
        print(json.dumps(res, indent=2))
        return 0
    if os.path.exists(BEFORE):
        res["before"] = json.load(open(BEFORE))
    publish("sampler", res, plot, markdown, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
