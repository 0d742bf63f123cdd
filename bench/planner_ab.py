#!/usr/bin/env python3
"""One `tandem serve` setting against another at one closed-loop level of the realistic mix
(serve_bench.py's run_mix): for comparing scheduler flags on the same binary, alternating
settings round by round. Prints one JSON row per run; writes nothing.

Usage: bench/planner_ab.py --model FILE --flag=--target-ttft-ms --values 0,2000 [--clients 64]
       [--seconds 40] [--drain-seconds 60] [--rounds 1]
"""
import argparse
import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_docs import ROOT, free_port, wait_healthy  # noqa: E402
from serve_bench import run_mix, start_tandem, stop  # noqa: E402


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
    a = ap.parse_args()
    values = a.values.split(",")
    for r in range(a.rounds):
        for v in values if r % 2 == 0 else values[::-1]:
            port = free_port()
            _, proc = start_tandem(a.tandem, a.model, port, a.threads, a.clients, a.kv_tokens, extra=[a.flag, v])
            try:
                wait_healthy(port, proc, "tandem")
                asyncio.run(run_mix(port, 10 ** 8, 4, n_clients=4, drain_s=30))  # warm-up: the cost model's first steps
                row = asyncio.run(run_mix(port, 1_000_000 * (r + 1), a.seconds, n_clients=a.clients,
                                          drain_s=a.drain_seconds, good_ttft_s=2.0))
            finally:
                stop(proc)
            print(json.dumps({"round": r + 1, a.flag: v, "clients": a.clients,
                              **{k: round(x, 1) if isinstance(x, float) else x for k, x in row.items()}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
