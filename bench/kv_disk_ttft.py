#!/usr/bin/env python3
"""TTFT with the prefix cache's disk tier (issue 56): a long shared prefix served cold, from
the in-memory prefix cache, and from disk after a restart, on real `tandem serve` processes
on 127.0.0.1, one at a time.

Each round and prefix length uses a prefix the servers have never seen and a fresh
--kv-cache-dir; every server answers one untimed request first (a start's first request faults
in weights and buffers):
  cold      first server, prefix + question 1 (nothing cached)
  memory    the same server, prefix + question 2 (the prefix's blocks in memory)
  disk      a second server on the same directory, prefix + question 3 (the prefix's blocks
            read from disk into the pool, then the question prefilled); the files are in the
            page cache (just written)
  disk out of the page cache: the files written back and dropped from the page cache
            (posix_fadvise DONTNEED), a third server, prefix + question 4
TTFT is the time of a greedy /v1/completions request with max_tokens 1 (prefill + one token),
measured by the client. Each figure is the median over --rounds.

Break-even (break_even() says how): reading costs a fixed part plus a per-token part over the
memory hit, recomputing a per-token part; below their crossing, reading loses.

Writes the table between the kv-disk markers of docs/benchmarks.md and docs/bench/kv_disk.json.

Usage: bench/kv_disk_ttft.py [--lengths 250,1000,2000] [--rounds 3] [--threads 2]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- kv-disk:begin -->", "<!-- kv-disk:end -->"


class Server:
    def __init__(self, binary, *args):
        self.proc = subprocess.Popen([binary, "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.port, ready, self.log = None, threading.Event(), []

        def pump():
            for line in self.proc.stdout:
                self.log.append(line)
                m = re.search(r"listening on https?://[^:]+:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                if "ready:" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(180) or self.port is None:
            self.stop()
            sys.exit("tandem serve did not start:\n" + "".join(self.log))
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=600)

    def metrics(self):
        out = {}
        for line in self.client.get("/metrics").text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def ttft(self, prompt):
        t0 = time.perf_counter()
        r = self.client.post("/v1/completions", json={"model": "default", "prompt": prompt, "max_tokens": 1,
                                                       "temperature": 0})
        ms = (time.perf_counter() - t0) * 1e3
        r.raise_for_status()
        u = r.json()["usage"]
        return ms, u["prompt_tokens"], (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)

    def settle(self, timeout=120):
        """Until the spills have reached the disk (the written count stops moving)."""
        last, deadline = None, time.time() + timeout
        while time.time() < deadline:
            m = self.metrics()
            now = m.get("tandem:kv_disk_writes_total", 0)
            if now == last and m["tandem:num_requests_running"] == 0:
                return m
            last = now
            time.sleep(0.5)
        return self.metrics()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def prefix_text(seed, n_tokens, tokens_per_sentence):
    """A prefix of about n_tokens tokens that no earlier run has seen (the seed leads it, so
    its first block, and with it every chained block hash, is new)."""
    n = max(1, round(n_tokens / tokens_per_sentence))
    return f"Ledger {seed}. " + "".join(f"Record {i}: the caravan from Velmora carried {i * 7 % 97} crates of "
                                        f"indigo and {i * 13 % 89} bolts of linen. " for i in range(n))


def evict_page_cache(d):
    """Drops the directory's files from the page cache (written back first), so the next read
    comes from the device."""
    for name in os.listdir(d):
        fd = os.open(os.path.join(d, name), os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def fit(points):
    """Least squares ms = a + b * tokens over (tokens, ms) points."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def break_even(med, lengths, disk_key):
    """Prefix tokens below which reading from disk loses to recomputing: reading costs
    a + r * n (the disk hit's TTFT over the memory hit's, fitted over the lengths), recomputing
    p * n (the cold TTFT over the memory hit's per cached token at the shortest length, where
    attention adds least: the lowest per-token cost, so the estimate errs towards reading
    losing)."""
    short = med[lengths[0]]
    p = (short["cold"] - short["ram"]) / short["cached_ram"]
    a, r = fit([(med[n]["cached_disk"], med[n][disk_key] - med[n]["ram"]) for n in lengths])
    return {"prefill_ms_per_token": p, "read_fixed_ms": a, "read_ms_per_token": r,
            "break_even_tokens": max(a, 0.0) / (p - r) if p > r else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=str(ROOT / "build" / "bin" / "tandem"))
    ap.add_argument("--model", default="default")
    ap.add_argument("--lengths", default="250,1000,2000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--redraw", action="store_true", help="rewrite the doc section from docs/bench/kv_disk.json")
    args = ap.parse_args()
    if args.redraw:
        res = json.loads((ROOT / "docs" / "bench" / "kv_disk.json").read_text())
        res["median"] = {int(k): v for k, v in res["median"].items()}
        args.rounds, args.threads = res["rounds"], res["threads"]
        return write_doc(res, args)
    lengths = [int(x) for x in args.lengths.split(",")]
    common = ["--model", args.model, "--threads", args.threads, "--log-level", "warn"]

    # Tokens per sentence of the prefix text, read from the server's tokenizer.
    s = Server(args.binary, *common)
    per_sentence = (len(s.client.post("/tokenize", json={"prompt": prefix_text("x", 11, 1)}).json()["tokens"]) -
                    len(s.client.post("/tokenize", json={"prompt": prefix_text("x", 1, 1)}).json()["tokens"])) / 10
    s.stop()

    def started(d):
        srv = Server(args.binary, *common, "--kv-cache-dir", d)
        srv.ttft("Hello there.")  # the first request after a start faults in weights and buffers: not timed
        return srv

    keys = ["cold", "ram", "disk", "disk_evicted", "tokens", "cached_ram", "cached_disk", "cached_evicted"]
    rows = {n: {k: [] for k in keys} for n in lengths}
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for n in lengths:
            d = tempfile.mkdtemp(prefix="tandem-kvd-bench.")
            try:
                prefix = prefix_text(f"r{r}n{n}t{time.time_ns()}", n, per_sentence)
                a = started(d)
                cold, tokens, _ = a.ttft(prefix + " Question 1: which city sent the caravan?")
                ram, _, cached_ram = a.ttft(prefix + " Question 2: what did the caravan carry?")
                a.settle()
                a.stop()
                b = started(d)
                disk, _, cached_disk = b.ttft(prefix + " Question 3: how many crates were there?")
                b.stop()
                evict_page_cache(d)
                c = started(d)
                evicted, _, cached_evicted = c.ttft(prefix + " Question 4: how many bolts of linen?")
                c.stop()
                for k, v in zip(keys, [cold, ram, disk, evicted, tokens, cached_ram, cached_disk, cached_evicted]):
                    rows[n][k].append(v)
                print(f"round {r} prefix ~{n}: {tokens} tokens; cold {cold:.0f} ms, memory {ram:.0f} ms "
                      f"({cached_ram} cached), disk {disk:.0f} ms ({cached_disk} cached), disk out of the page "
                      f"cache {evicted:.0f} ms ({cached_evicted} cached)", flush=True)
            finally:
                shutil.rmtree(d, ignore_errors=True)
    load.append(os.getloadavg()[0])

    med = {n: {k: statistics.median(v) for k, v in row.items()} for n, row in rows.items()}
    result = {"lengths": lengths, "rounds": args.rounds, "threads": args.threads, "median": med, "raw": rows,
              "load_average": load}
    if len(lengths) >= 2:
        result["break_even"] = break_even(med, lengths, "disk")
        result["break_even_evicted"] = break_even(med, lengths, "disk_evicted")
    print(json.dumps({k: v for k, v in result.items() if k != "raw"}, indent=1))
    if args.no_write:
        return
    (ROOT / "docs" / "bench").mkdir(exist_ok=True)
    (ROOT / "docs" / "bench" / "kv_disk.json").write_text(json.dumps(result, indent=1) + "\n")
    write_doc(result, args)


def write_doc(res, args):
    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    lines = [BEGIN, "## Prefix cache on disk: TTFT cold, from memory, from disk (issue 56)", "",
             f"`tandem serve` on the default model (SmolLM2-135M Q4_1), --threads {args.threads}, on this "
             f"machine ({cpu}, {os.cpu_count()} cores); a greedy /v1/completions request with max_tokens 1, "
             f"median of {args.rounds} rounds, a fresh prefix and --kv-cache-dir each round. cold: the first "
             "request; memory: a second question behind the same prefix on the same server; disk: a third "
             "question after a restart on the same directory (the prefix's blocks read back, verified, "
             "written into the pool, then the question prefilled).", "",
             "| prompt tokens | cold TTFT | memory hit TTFT | disk hit TTFT (files in the page cache) | "
             "disk hit TTFT (files out of the page cache) | cached from disk | disk vs cold |",
             "|---|---|---|---|---|---|---|"]
    for n in res["lengths"]:
        m = res["median"][n]
        lines.append(f"| {m['tokens']:.0f} | {m['cold']:.0f} ms | {m['ram']:.0f} ms | {m['disk']:.0f} ms | "
                     f"{m['disk_evicted']:.0f} ms | {m['cached_disk']:.0f} | {m['cold'] / m['disk']:.0f}x / "
                     f"{m['cold'] / m['disk_evicted']:.0f}x less |")
    lines += ["", "Each server answers one untimed request first (a start's first request faults in weights "
              "and buffers). \"Out of the page cache\": the files were written back and dropped from it "
              "(posix_fadvise DONTNEED) before the server started. Load average while it ran: "
              f"{res['load_average'][0]:.1f} at the start, {res['load_average'][1]:.1f} at the end (other "
              "work shared the machine's cores)."]
    for key, what, disk in (("break_even", "in the page cache", "disk"),
                            ("break_even_evicted", "out of the page cache", "disk_evicted")):
        if key not in res:
            continue
        b = res[key]
        be = b["break_even_tokens"]
        short = res["median"][res["lengths"][0]]
        overhead = max(0.0, short[disk] - short["ram"])
        p, r = b["prefill_ms_per_token"], b["read_ms_per_token"]
        if be is None:
            verdict = "Reading is not cheaper per token here: no break-even."
        elif b["read_fixed_ms"] > 0:
            verdict = f"Reading loses to recomputing below about {be:.0f} prefix tokens."
        else:  # the fitted fixed part is noise: bound it by the shortest row's difference instead
            verdict = (f"The fitted fixed part is noise; bounded by the shortest row's difference ({overhead:.0f} ms), "
                       f"reading loses to recomputing only below about {overhead / (p - r):.0f} prefix tokens, "
                       "less than the one block (16 tokens) a read needs at least.")
        lines += ["", f"Break-even, files {what}: recomputing a prefix costs {p:.2f} ms a token (cold minus "
                  f"memory hit, per cached token, at the shortest prefix: attention makes longer ones dearer); "
                  f"reading it costs {b['read_fixed_ms']:.0f} ms + {r:.3f} ms a token (disk hit minus memory hit, "
                  f"least squares over the rows), {p / r:.0f}x less a token. " + verdict]
    lines += ["", "Reproduce: `python3 bench/kv_disk_ttft.py --lengths " + ",".join(map(str, res["lengths"])) +
              f" --rounds {args.rounds}` (raw figures: docs/bench/kv_disk.json).", END]
    doc = ROOT / "docs" / "benchmarks.md"
    text = doc.read_text()
    block = "\n".join(lines)
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    doc.write_text(text)


if __name__ == "__main__":
    main()
