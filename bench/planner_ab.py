#!/usr/bin/env python3
"""One `tandem serve` setting against another at one closed-loop level of the realistic mix
(serve_bench.py's run_mix): for comparing scheduler flags on the same binary, alternating
settings round by round. Prints one JSON row per run; writes nothing.

With --sample-steps it also reads /metrics 20 times a second during the load and prints, per
run, each step's measured time over the cost model's prediction (p50, p90, p99, p100) and the
slowest steps: whether a long gap between tokens was a step the planner sized that way or a
step that overran its prediction.

Usage: bench/planner_ab.py --model FILE --flag=--target-ttft-ms --values 0,2000 [--clients 64]
       [--seconds 40] [--drain-seconds 60] [--rounds 1] [--sample-steps]
"""
import argparse
import asyncio
import json
import os
import re
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_docs import ROOT, free_port, wait_healthy  # noqa: E402
from serve_bench import pct, run_mix, start_tandem, stop  # noqa: E402


STEP_GAUGES = ("scheduler_steps_total", "step_predicted_seconds", "step_measured_seconds", "step_budget_tokens",
               "prompt_share_ratio")


def sample_steps(port, out, stop):
    """Appends one dict of STEP_GAUGES per step seen (the gauges hold the last step only)."""
    last = None
    while not stop.is_set():
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
            m = {}
            for k in STEP_GAUGES:
                found = re.search(rf"^tandem:{k} ([0-9.e+-]+)$", text, re.M)
                if found:
                    m[k] = float(found.group(1))
            for phase, v in re.findall(r'^tandem:step_phase_seconds\{phase="(\w+)"\} ([0-9.e+-]+)$', text, re.M):
                m[phase] = float(v)
            if m.get("scheduler_steps_total") != last and "step_predicted_seconds" in m:
                out.append(m)
                last = m.get("scheduler_steps_total")
        except OSError:
            pass
        time.sleep(0.05)


def step_summary(steps):
    ratios = sorted(m["step_measured_seconds"] / max(m["step_predicted_seconds"], 1e-6) for m in steps)
    if not ratios:
        return {}
    slowest = sorted(steps, key=lambda m: -m["step_measured_seconds"])[:3]
    phases = {}
    for phase in ("plan", "forward", "sample", "transit", "apply"):
        xs = sorted(m[phase] for m in steps if phase in m)
        if xs:
            phases[phase] = {f"p{p}_ms": round(1e3 * pct(xs, p), 1) for p in (50, 99, 100)}
    return {"steps_sampled": len(ratios),
            "measured_over_predicted": {f"p{p}": round(pct(ratios, p), 2) for p in (50, 90, 99, 100)},
            "phases": phases,
            "slowest": [{k: round(v, 3) for k, v in m.items()} for m in slowest]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--flag", required=True, help="a tandem serve flag, e.g. --flag=--target-ttft-ms")
    ap.add_argument("--values", required=True, help="comma-separated values of the flag")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--drain-seconds", type=float, default=60)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--kv-tokens", type=int, default=65536)
    ap.add_argument("--tandem", default=os.path.join(ROOT, "build", "bin", "tandem"))
    ap.add_argument("--sample-steps", action="store_true", help="sample the step gauges of /metrics during the load")
    a = ap.parse_args()
    values = a.values.split(",")
    for r in range(a.rounds):
        for v in values if r % 2 == 0 else values[::-1]:
            port = free_port()
            _, proc = start_tandem(a.tandem, a.model, port, a.threads, a.clients, a.kv_tokens, extra=[a.flag, v])
            try:
                wait_healthy(port, proc, "tandem")
                asyncio.run(run_mix(port, 10 ** 8, 4, n_clients=4, drain_s=30))  # warm-up: the cost model's first steps
                steps, done = [], threading.Event()
                sampler = threading.Thread(target=sample_steps, args=(port, steps, done), daemon=True)
                if a.sample_steps:
                    sampler.start()
                row = asyncio.run(run_mix(port, 1_000_000 * (r + 1), a.seconds, n_clients=a.clients,
                                          drain_s=a.drain_seconds, good_ttft_s=2.0))
                done.set()
                if a.sample_steps:
                    sampler.join()
                    row.update(step_summary(steps))
            finally:
                stop(proc)
            print(json.dumps({"round": r + 1, a.flag: v, "clients": a.clients,
                              **{k: round(x, 1) if isinstance(x, float) else x for k, x in row.items()}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
