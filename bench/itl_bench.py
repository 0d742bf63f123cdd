#!/usr/bin/env python3
"""Steps sized in time (issue 53): inter-token latency and time to first token under load,
Tandem with its latency target (--target-itl-ms, default 150) against Tandem with a token
budget only (--target-itl-ms 0, the step planner before issue 53) and llama.cpp's
llama-server, on the same GGUF, machine and threads, in one run.

The load is serve_bench.py's realistic mix (sampled T 0.7 / top_p 0.95, unique prompts of
20-1,000 tokens, half behind shared system prompts, max_tokens 64/128/256, outputs end at EOS
or there) from N closed-loop clients for --seconds, then at most --drain-seconds for what is in
flight. Each level runs every server in turn (the order rotated per level). Reported: tokens/s,
TTFT p50/p99, ITL p50/p99, goodput (requests/s with TTFT <= 2 s and mean inter-token time
<= 100 ms, the issue's), and a plot of ITL p99 over time (1-s windows) at the largest level.

Writes docs/bench/itl-NAME.json and .png and its section in docs/benchmarks.md.

Usage: bench/itl_bench.py --model FILE --name NAME [--clients 16,32] [--seconds 60]
                          [--drain-seconds 120] [--threads N] [--llama-server PATH]
"""
import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_docs import ROOT, cpu_name, free_port, publish, wait_healthy  # noqa: E402
from serve_bench import (pct, run_mix, start_llama_server, start_tandem, stop,  # noqa: E402
                         wait_idle)

GOOD_TTFT_S = 2.0


def itl_timeline(records, window_s=1.0):
    """[(window start s, ITL p99 ms, gaps)] over the level, by when each gap ended."""
    bins = {}
    for _, times, _, _ in records:
        for a, b in zip(times, times[1:]):
            bins.setdefault(int(b // window_s), []).append(b - a)
    return [(k * window_s, 1e3 * pct(sorted(v), 99), len(v)) for k, v in sorted(bins.items())]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--name", help="names the section and docs/bench/itl-NAME.*")
    ap.add_argument("--from-json", help="re-render the docs from a saved docs/bench/itl-NAME.json, running nothing")
    ap.add_argument("--clients", default="16,32")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--drain-seconds", type=float, default=120)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--kv-tokens", type=int, default=65536)
    ap.add_argument("--target-itl-ms", type=float, default=150)
    ap.add_argument("--tandem", default=os.path.join(ROOT, "build", "bin", "tandem"))
    ap.add_argument("--llama-server", default=None, help="default: scripts/build-llama-server.sh")
    a = ap.parse_args()
    if a.from_json:
        res = json.load(open(a.from_json))
        begin, end = markers(res["name"])
        publish(f"itl-{res['name']}", res, plot, markdown, begin, end)
        return 0
    if not a.model or not a.name:
        ap.error("--model and --name are required")
    clients = [int(c) for c in a.clients.split(",")]
    slots = max(clients)
    llama = a.llama_server or subprocess.run([os.path.join(ROOT, "scripts", "build-llama-server.sh")], check=True,
                                             stdout=subprocess.PIPE, text=True).stdout.split()[-1]
    starts = {
        "tandem": lambda port: start_tandem(a.tandem, a.model, port, a.threads, slots, a.kv_tokens,
                                            extra=["--target-itl-ms", str(a.target_itl_ms)]),
        "tandem, token budget only": lambda port: start_tandem(a.tandem, a.model, port, a.threads, slots,
                                                               a.kv_tokens, extra=["--target-itl-ms", "0"]),
        "llama-server": lambda port: start_llama_server(llama, a.model, port, a.threads, slots, a.kv_tokens),
    }
    res = {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(), "threads": a.threads, "name": a.name,
           "model": os.path.basename(a.model), "seconds": a.seconds, "drain_s": a.drain_seconds,
           "target_itl_ms": a.target_itl_ms, "good_ttft_s": GOOD_TTFT_S, "levels": clients, "servers": {},
           "command": " ".join(["python3", os.path.relpath(os.path.abspath(sys.argv[0]), ROOT), *sys.argv[1:]])}
    servers = {}
    try:
        for name, start in starts.items():
            port = free_port()
            cmd, proc = start(port)
            servers[name] = {"port": port, "proc": proc}
            res["servers"][name] = {"command": " ".join(cmd), "levels": []}
            print(f"itl bench: {name}: {' '.join(cmd)}", flush=True)
        for name, sv in servers.items():
            wait_healthy(sv["port"], sv["proc"], name)
            asyncio.run(run_mix(sv["port"], 10 ** 8, 4, n_clients=4, drain_s=30))  # warm-up, the cost model's first steps
        names = list(servers)
        for li, n in enumerate(clients):
            order = names[li % len(names):] + names[:li % len(names)]
            for name in order:
                sv = servers[name]
                records = []
                row = asyncio.run(run_mix(sv["port"], (li + 1) * 1_000_000, a.seconds, n_clients=n,
                                          drain_s=a.drain_seconds, keep=records, good_ttft_s=GOOD_TTFT_S))
                row["clients"] = n
                row["timeline"] = itl_timeline(records)
                res["servers"][name]["levels"].append(row)
                wait_idle(sv["proc"])
                print(f"  {n:3d} clients {name:26s}: {row['tok_s']:6.1f} tok/s  TTFT p50 {row['ttft_p50_ms']:7.0f} "
                      f"p99 {row['ttft_p99_ms']:7.0f} ms  ITL p50 {row['itl_p50_ms']:6.1f} p99 {row['itl_p99_ms']:7.1f} ms"
                      f"  goodput {row['goodput_rps']:.2f}/s  ({row['requests']} requests, {row['unfinished']} cut, "
                      f"{row['errors']} errors)", flush=True)
    finally:
        for sv in servers.values():
            stop(sv["proc"])
    begin, end = markers(a.name)
    publish(f"itl-{a.name}", res, plot, markdown, begin, end)
    return 0


def markers(name):
    return f"<!-- itl-bench-{name}:begin -->", f"<!-- itl-bench-{name}:end -->"


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 4))
    for (name, sv), style in zip(res["servers"].items(), ("-", "--", ":")):
        lv = sv["levels"][-1]
        t = [w[0] for w in lv["timeline"]]
        ax.plot(t, [w[1] for w in lv["timeline"]], style, label=name)
    ax.axhline(res["target_itl_ms"], color="grey", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("seconds into the level")
    ax.set_ylabel("ITL p99 per 1-s window (ms)")
    ax.set_title(f"{res['model']}, {res['levels'][-1]} clients, realistic mix ({res['cpu']}, {res['threads']} threads)", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(res, cmd):
    begin, end = markers(res["name"])
    lines = [begin, f"### Inter-token latency under load: {res['model']} ({res['name']})", "",
             f"{res['date']}, {res['cpu']}, {res['threads']} threads. `{res['command']}`", "",
             "Realistic mix (sampled, unique prompts of 20-1,000 tokens, outputs to EOS or max_tokens), "
             f"closed-loop clients for {res['seconds']:.0f} s plus at most {res['drain_s']:.0f} s of drain, one "
             f"run per server per level. Goodput: requests/s with TTFT <= {res['good_ttft_s']:.0f} s and mean "
             "inter-token time <= 100 ms. The token-budget-only Tandem is the same binary with "
             "`--target-itl-ms 0`.", "",
             "| clients | server | tokens/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | p99 / p50 | goodput req/s |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for i, n in enumerate(res["levels"]):
        for name, sv in res["servers"].items():
            r = sv["levels"][i]
            lines.append(f"| {n} | {name} | {r['tok_s']:.1f} | {r['ttft_p50_ms']:.0f} / {r['ttft_p99_ms']:.0f} | "
                         f"{r['itl_p50_ms']:.0f} / {r['itl_p99_ms']:.0f} | "
                         f"{r['itl_p99_ms'] / max(r['itl_p50_ms'], 1e-9):.1f} | {r['goodput_rps']:.2f} |")
    lines += ["", f"![ITL p99 over time](bench/itl-{res['name']}.png)", ""]
    t, b, l = (res["servers"][k]["levels"] for k in ("tandem", "tandem, token budget only", "llama-server"))
    for i, n in enumerate(res["levels"]):
        lines.append(f"- {n} clients: tokens/s {t[i]['tok_s'] / max(b[i]['tok_s'], 1e-9):.2f}x the token-budget "
                     f"planner's and {t[i]['tok_s'] / max(l[i]['tok_s'], 1e-9):.2f}x llama-server's; TTFT p50 "
                     f"{t[i]['ttft_p50_ms'] / max(l[i]['ttft_p50_ms'], 1e-9):.2f}x llama-server's; goodput "
                     + (f"{t[i]['goodput_rps'] / l[i]['goodput_rps']:.2f}x llama-server's." if l[i]['goodput_rps'] > 0
                        else f"{t[i]['goodput_rps']:.2f} req/s against none for llama-server."))
    return "\n".join(lines + [end])


if __name__ == "__main__":
    sys.exit(main())
