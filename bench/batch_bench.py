#!/usr/bin/env python3
"""The Batch API in the background (issue 53): interactive latency with and without a large
batch queued, and how much of the batch runs meanwhile and after.

One `tandem serve` on the given model. Each of --rounds rounds runs the interactive load
alone (serve_bench.py's realistic mix from --clients closed-loop clients for --seconds), then
uploads and starts a batch of --batch-size short chat requests through the openai SDK and runs
the same requests again as twins (same lengths, another text, so no prefix-cache hit), then
cancels the batch; the last round's is left to finish (bounded by --finish-seconds). A p99
over one run of ~90 requests is its slowest request or two, so the rounds are pooled, alone
against with the batch. Batch requests run at kBatchPriority, after every interactive request,
and are preempted first; the target is interactive TTFT p99 within 10% of the load alone.

Writes docs/bench/batch.json and its section in docs/benchmarks.md.

Usage: bench/batch_bench.py [--model FILE] [--clients 8] [--seconds 40] [--rounds 3] [--batch-size 2000]
"""
import argparse
import asyncio
import json
import os
import sys
import tempfile
import time

import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_docs import ROOT, cpu_name, free_port, wait_healthy, write_section  # noqa: E402
from serve_bench import model_path, pct, run_mix, start_tandem, stop  # noqa: E402

BEGIN, END = "<!-- batch-bench:begin -->", "<!-- batch-bench:end -->"
TOPICS = ["rivers", "bridges", "owls", "glass", "tea", "clocks", "maps", "bees", "salt", "kites"]


def batch_lines(n):
    for i in range(n):
        q = f"In two sentences, what is interesting about {TOPICS[i % len(TOPICS)]}? (note {i})"
        yield json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions",
                          "body": {"model": "default", "max_tokens": 32, "temperature": 0.7, "top_p": 0.95,
                                   "messages": [{"role": "user", "content": q}]}})


def summary(recs, wall_s):
    """p50/p99 TTFT and ITL over pooled records (serve_bench.run_mix's `keep` rows)."""
    ttft = sorted(r[1][0] - r[0] for r in recs if r[1])
    itl = sorted(b - a for r in recs for a, b in zip(r[1], r[1][1:]))
    return {"requests": len(recs), "tok_s": sum(r[2] for r in recs) / max(wall_s, 1e-9),
            "ttft_p50_ms": 1e3 * pct(ttft, 50), "ttft_p99_ms": 1e3 * pct(ttft, 99),
            "itl_p50_ms": 1e3 * pct(itl, 50), "itl_p99_ms": 1e3 * pct(itl, 99)}


def row_text(label, r):
    return (f"| {label} | {r['tok_s']:.1f} | {r['ttft_p50_ms']:.0f} / {r['ttft_p99_ms']:.0f} | "
            f"{r['itl_p50_ms']:.0f} / {r['itl_p99_ms']:.0f} | {r['requests']} |")


def start_batch(client, n):
    data = ("\n".join(batch_lines(n)) + "\n").encode()
    f = client.files.create(file=("batch.jsonl", data, "application/jsonl"), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    while client.batches.retrieve(b.id).status not in ("in_progress", "completed", "failed"):
        time.sleep(0.2)
    return b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--drain-seconds", type=float, default=60)
    ap.add_argument("--batch-size", type=int, default=2000)
    ap.add_argument("--finish-seconds", type=float, default=900)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--tandem", default=os.path.join(ROOT, "build", "bin", "tandem"))
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    model = a.model or model_path()
    res = {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(), "threads": a.threads, "model": os.path.basename(model),
           "clients": a.clients, "seconds": a.seconds, "rounds": a.rounds, "batch_size": a.batch_size, "round": [],
           "command": " ".join(["python3", os.path.relpath(os.path.abspath(sys.argv[0]), ROOT), *sys.argv[1:]])}
    recs = {"alone": [], "with_batch": []}
    wall = {"alone": 0.0, "with_batch": 0.0}
    with tempfile.TemporaryDirectory() as batch_dir:
        port = free_port()
        cmd, proc = start_tandem(a.tandem, model, port, a.threads, 32, 65536, extra=["--batch-dir", batch_dir])
        res["server"] = " ".join(cmd)
        try:
            wait_healthy(port, proc, "tandem")
            asyncio.run(run_mix(port, 10 ** 8, 4, n_clients=4, drain_s=30))  # warm-up
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
            done_during_load = 0
            for i in range(a.rounds):
                # The same requests in both halves of a round (twins: no prefix-cache hit on the first).
                first = 1_000_000 * (i + 1)
                per = {}
                for half in ("alone", "with_batch"):
                    if half == "with_batch":
                        b = start_batch(client, a.batch_size)
                    keep = []
                    r = asyncio.run(run_mix(port, first, a.seconds, n_clients=a.clients, drain_s=a.drain_seconds,
                                            good_ttft_s=2.0, keep=keep, tag="" if half == "alone" else "b"))
                    recs[half] += keep
                    wall[half] += r["wall_s"]
                    per[half] = r
                    print(f"batch bench: round {i + 1}, {half}: {json.dumps(r)}", flush=True)
                done_during_load += client.batches.retrieve(b.id).request_counts.completed
                res["round"].append({"alone": per["alone"], "with_batch": per["with_batch"],
                                     "ttft_p99_ratio": per["with_batch"]["ttft_p99_ms"] / per["alone"]["ttft_p99_ms"],
                                     "ttft_p50_ratio": per["with_batch"]["ttft_p50_ms"] / per["alone"]["ttft_p50_ms"]})
                if i + 1 < a.rounds:
                    client.batches.cancel(b.id)
            res["done_during_load"] = done_during_load
            t_idle = time.monotonic()
            while time.monotonic() - t_idle < a.finish_seconds:
                st = client.batches.retrieve(b.id)
                if st.status in ("completed", "failed", "cancelled"):
                    break
                time.sleep(1)
            st = client.batches.retrieve(b.id)
            res["batch_status"] = st.status
            res["batch_completed"] = st.request_counts.completed
            res["batch_failed"] = st.request_counts.failed
            res["batch_idle_s"] = time.monotonic() - t_idle
            print(f"batch bench: last batch {st.status}: {st.request_counts.completed} completed, "
                  f"{st.request_counts.failed} failed, {res['batch_idle_s']:.0f} s after the load", flush=True)
        finally:
            stop(proc)
    al, wb = summary(recs["alone"], wall["alone"]), summary(recs["with_batch"], wall["with_batch"])
    res["alone"], res["with_batch"] = al, wb
    ratio = wb["ttft_p99_ms"] / max(al["ttft_p99_ms"], 1e-9)
    per_round = ", ".join(f"{r['ttft_p99_ratio']:.2f}x" for r in res["round"])
    lines = [BEGIN, "## The Batch API in the background (issue 53)", "",
             f"{res['date']}, {res['cpu']}, {res['threads']} threads, {res['model']}. `{res['command']}`", "",
             f"Interactive load: the realistic mix from {res['clients']} closed-loop clients for {res['seconds']:.0f} s, "
             f"alone, then the same requests again (twins: the same lengths, another text) with a batch of "
             f"{res['batch_size']} short chat requests (max_tokens 32) in progress; {res['rounds']} rounds, each "
             f"with its own requests and batch (cancelled at the round's end but the last's). Figures pooled over "
             f"the rounds.", "",
             "| interactive load | tokens/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | requests |", "|---|---:|---:|---:|---:|",
             row_text("alone", al), row_text("with the batch in progress", wb), "",
             f"- Interactive TTFT p99 with the batch: {ratio:.2f}x the run without it (target <= 1.10x: "
             f"{'met' if ratio <= 1.10 else 'not met'}); round by round {per_round}.",
             f"- Interactive TTFT p50 with the batch: {wb['ttft_p50_ms'] / max(al['ttft_p50_ms'], 1e-9):.2f}x.",
             f"- Batch requests done while the interactive load ran: {res['done_during_load']}; the last batch ended "
             f"{res['batch_status']} ({res['batch_completed']} completed, {res['batch_failed']} failed) "
             f"{res['batch_idle_s']:.0f} s after the load stopped.", "", END]
    section = "\n".join(lines)
    print(section)
    if not a.no_write:
        os.makedirs(os.path.join(ROOT, "docs", "bench"), exist_ok=True)
        with open(os.path.join(ROOT, "docs", "bench", "batch.json"), "w") as f:
            json.dump(res, f, indent=2)
        write_section(section, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
