#!/usr/bin/env python3
"""Soak: many streaming clients against one `tandem serve` for a long time, some of them
leaving mid-stream or cancelling, and at the end the server must be back where it started.

Clients (--clients, default 256) each loop until the time is up: a chat request with a unique
prompt of 1-12 sentences, sampled (temperature 0.7, top_p 0.95), max_tokens 16-160, ending at
EOS or the limit. A quarter of them speak WebSocket (/v1/ws, one socket kept across requests),
the rest SSE over HTTP. Per request, with probability --disconnect (0.3) the client goes away
after a few tokens (SSE: the connection is closed; WebSocket: the TCP connection is aborted, and
the client reconnects for the next request), and with probability --cancel (0.1) a WebSocket
client sends a cancel frame instead.

Every 5 s the server's RSS and its /metrics are sampled. At the end, once the clients have
stopped, the checks (exit status 1 if any fails):
  - no running or waiting sequences and no request in flight;
  - no KV block held outside the prefix cache (tandem:kv_blocks_used == 0);
  - RSS within 10% of its value after the first minute;
  - no unexpected error (a status or frame the client did not cause), and /health answers.
Writes the figures between the soak markers of docs/benchmarks.md, docs/bench/soak.json and
docs/bench/soak.png (RSS, running sequences and token rate over time).

Usage: bench/soak.py [--build build] [--seconds 600] [--clients 256]
"""
import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import time
import urllib.request

import httpx
import websockets

from bench_docs import free_port, wait_healthy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPICS = ["the sea", "a lighthouse keeper", "bread", "the moon", "a lost key", "trains", "winter", "a garden",
          "an old map", "rain on a roof", "a violin", "mountains", "the first computer", "a fox", "tea", "a bridge"]
SAMPLING = {"temperature": 0.7, "top_p": 0.95}


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(tandem:[a-z_]+)(\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    return out


def prompt_for(client, n):
    rnd = random.Random(client * 100003 + n)
    sentences = [f"Tell me something about {rnd.choice(TOPICS)}." for _ in range(rnd.randint(1, 12))]
    return f"(client {client}, request {n}) " + " ".join(sentences)


class Tally:
    def __init__(self):
        self.requests = self.completed = self.disconnected = self.cancelled = self.tokens = 0
        self.errors = []
        self.n_errors = 0

    def error(self, what):
        self.n_errors += 1
        if len(self.errors) < 20:
            print(f"soak: error: {what}", flush=True)
            self.errors.append(what)


async def sse_request(http, port, client, n, tally, rnd):
    body = {"messages": [{"role": "user", "content": prompt_for(client, n)}], "stream": True,
            "max_tokens": rnd.randint(16, 160), **SAMPLING}
    leave_after = rnd.randint(1, 24) if rnd.random() < tally.p_disconnect else None
    tally.requests += 1
    seen = 0
    async with http.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            tally.error(f"SSE status {r.status_code}: {(await r.aread())[:200]!r}")
            return
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                tally.completed += 1
                return
            chunk = json.loads(line[6:])
            if "error" in chunk:
                tally.error(f"SSE error event: {chunk['error']}")
                return
            if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
                seen += 1
                tally.tokens += 1
            if leave_after is not None and seen >= leave_after:
                tally.disconnected += 1
                return  # leaving the block closes the connection mid-stream
    tally.error("SSE stream ended without [DONE]")


async def ws_requests(port, client, tally, rnd, stop_at):
    n = 0
    ws = None
    try:
        while time.monotonic() < stop_at:
            if ws is None:
                ws = await websockets.connect(f"ws://127.0.0.1:{port}/v1/ws", max_size=1 << 22, open_timeout=120,
                                            ping_interval=None)  # the server pings
            n += 1
            gid = f"c{client}-{n}"
            roll = rnd.random()
            leave_after = rnd.randint(1, 24) if roll < tally.p_disconnect else None
            cancel_after = rnd.randint(1, 24) if tally.p_disconnect <= roll < tally.p_disconnect + tally.p_cancel else None
            await ws.send(json.dumps({"type": "start", "id": gid, "max_tokens": rnd.randint(16, 160),
                                      "messages": [{"role": "user", "content": prompt_for(client, n)}], **SAMPLING}))
            tally.requests += 1
            seen = 0
            while True:
                f = json.loads(await ws.recv())
                if f.get("id") != gid:
                    continue
                if f["type"] == "delta":
                    seen += len(f.get("tokens", [])) or 1
                    tally.tokens += len(f.get("tokens", [])) or 1
                    if leave_after is not None and seen >= leave_after:
                        ws.transport.abort()  # the TCP connection goes, no close frame
                        ws = None
                        tally.disconnected += 1
                        break
                    if cancel_after is not None and seen >= cancel_after:
                        await ws.send(json.dumps({"type": "cancel", "id": gid}))
                        cancel_after = None
                elif f["type"] == "done":
                    if f.get("finish_reason") == "cancelled":
                        tally.cancelled += 1
                    else:
                        tally.completed += 1
                    break
                elif f["type"] == "error":
                    tally.error(f"WebSocket error frame: {f}")
                    break
    finally:
        if ws is not None:
            await ws.close()


async def client_loop(port, client, tally, stop_at, use_ws):
    rnd = random.Random(client)
    if use_ws:
        while time.monotonic() < stop_at:
            try:
                await ws_requests(port, client, tally, rnd, stop_at)
            except (OSError, websockets.exceptions.WebSocketException) as e:
                tally.error(f"WebSocket client {client}: {type(e).__name__}: {e}")
                await asyncio.sleep(1)
        return
    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0, read=None), limits=httpx.Limits(max_connections=1)) as http:
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            try:
                await sse_request(http, port, client, n, tally, rnd)
            except httpx.HTTPError as e:
                tally.error(f"SSE client {client}: {type(e).__name__}: {e}")
                await asyncio.sleep(1)


async def sampler(port, pid, t0, stop_at, timeline, tally):
    last_print = 0.0
    while time.monotonic() < stop_at:
        await asyncio.sleep(5)
        try:
            m = await asyncio.to_thread(scrape, port)
        except OSError as e:
            tally.error(f"/metrics: {e}")
            continue
        t = time.monotonic() - t0
        timeline.append({"t": round(t, 1), "rss_mb": round(rss_mb(pid), 1),
                         "running": m.get("tandem:num_requests_running", 0),
                         "waiting": m.get("tandem:num_requests_waiting", 0),
                         "kv_used": m.get("tandem:kv_blocks_used", 0),
                         "tokens": m.get("tandem:generation_tokens_total", 0)})
        if t - last_print >= 30:
            last_print = t
            p = timeline[-1]
            print(f"soak: {t:5.0f} s  rss {p['rss_mb']:.0f} MB  running {p['running']:.0f}  waiting "
                  f"{p['waiting']:.0f}  requests {tally.requests}  completed {tally.completed}  left "
                  f"{tally.disconnected}  cancelled {tally.cancelled}  errors {tally.n_errors}", flush=True)


async def soak(a, port, pid):
    tally = Tally()
    tally.p_disconnect, tally.p_cancel = a.disconnect, a.cancel
    timeline = []
    t0 = time.monotonic()
    stop_at = t0 + a.seconds
    n_ws = a.clients // 4
    tasks = [asyncio.create_task(client_loop(port, c, tally, stop_at, c < n_ws)) for c in range(a.clients)]
    await sampler(port, pid, t0, stop_at, timeline, tally)
    # Requests under way when the time is up may finish (at most 160 tokens); then stop.
    done, pending = await asyncio.wait(tasks, timeout=180)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for t in done:
        if t.exception():
            tally.error(f"client task: {t.exception()!r}")
    return tally, timeline, time.monotonic() - t0


def settle(port, limit_s=120):
    """The metrics once nothing runs (or after limit_s)."""
    deadline = time.monotonic() + limit_s
    while True:
        m = scrape(port)
        idle = all(m.get(k, 0) == 0 for k in ("tandem:num_requests_running", "tandem:num_requests_waiting",
                                              "tandem:requests_in_flight", "tandem:kv_blocks_used"))
        if idle or time.monotonic() > deadline:
            return m
        time.sleep(1)


def write_docs(result):
    path = os.path.join(ROOT, "docs", "benchmarks.md")
    r = result
    rows = "\n".join(f"| {name} | {value} | {'yes' if ok else '**no**'} |" for name, value, ok in r["checks"])
    md = f"""<!-- soak:begin -->

## Soak: {r['clients']} streaming clients for {r['planned_seconds']:.0f} s (issue 18)

Measured {r['date']} on this two-core machine (shared with other work), default model, `tandem serve
--threads {r['threads']} --kv-cache-tokens {r['kv_cache_tokens']}` (a pool the clients outgrow, so sequences are
preempted too) with its defaults otherwise. {r['clients']} clients ({r['clients'] // 4} over WebSocket, the rest
SSE), each looping over unique chat prompts of 1-12 sentences, sampled (temperature 0.7, top_p 0.95),
max_tokens 16-160 ending at EOS or the limit; {r['disconnect']:.0%} of requests leave mid-stream (connection closed
or aborted) and {r['cancel']:.0%} of the WebSocket ones are cancelled by a frame; after the time is up the
requests under way may finish ({r['seconds'] - r['planned_seconds']:.0f} s here). Reproduce: `{r['command']}`.{(' ' + r['note']) if r['note'] else ''}

| | |
|---|---:|
| requests started | {r['requests']} |
| completed | {r['completed']} |
| left mid-stream | {r['disconnected']} |
| cancelled | {r['cancelled']} |
| tokens streamed | {r['tokens']} ({r['tokens'] / r['seconds']:.0f} tok/s) |
| preemptions | {r['preemptions']:.0f} |
| RSS after 1 min / at the end / peak | {r['rss_1min']:.0f} / {r['rss_end']:.0f} / {r['rss_peak']:.0f} MB |

| check at the end | value | passed |
|---|---|---|
{rows}

![RSS, running sequences and token rate over the soak](bench/soak.png)

<!-- soak:end -->"""
    text = open(path).read()
    if "<!-- soak:begin -->" in text:
        text = re.sub(r"<!-- soak:begin -->.*<!-- soak:end -->", lambda _: md, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + md + "\n"
    open(path, "w").write(text)


def plot(timeline, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("soak: matplotlib missing, no plot")
        return
    t = [p["t"] for p in timeline]
    rate = [0.0] + [(b["tokens"] - a["tokens"]) / max(b["t"] - a["t"], 1e-9) for a, b in zip(timeline, timeline[1:])]
    fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    axes[0].plot(t, [p["rss_mb"] for p in timeline])
    axes[0].set_ylabel("RSS, MB")
    axes[1].plot(t, [p["running"] for p in timeline], label="running")
    axes[1].plot(t, [p["waiting"] for p in timeline], label="waiting")
    axes[1].set_ylabel("sequences")
    axes[1].legend()
    axes[2].plot(t, rate)
    axes[2].set_ylabel("tokens/s")
    axes[2].set_xlabel("seconds")
    fig.suptitle("tandem serve under a soak")
    fig.tight_layout()
    fig.savefig(out, dpi=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--disconnect", type=float, default=0.3)
    ap.add_argument("--cancel", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--kv-cache-tokens", type=int, default=8192,
                    help="a pool the clients outgrow: preemption is exercised, and every page of it is touched "
                         "within the first minute, so RSS after it compares like with like")
    ap.add_argument("--no-docs", action="store_true", help="print the figures only")
    ap.add_argument("--note", default="", help="a sentence for the docs about the conditions of the run")
    a = ap.parse_args()

    exe = os.path.join(ROOT, a.build, "bin", "tandem")
    port = free_port()
    cmd = [exe, "serve", "--port", str(port), "--threads", str(a.threads), "--log-level", "warn",
           "--max-connections-per-address", str(4 * a.clients + 64), "--kv-cache-tokens", str(a.kv_cache_tokens)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    try:
        wait_healthy(port, proc, "tandem serve", timeout=120)
        print(f"soak: {' '.join(cmd)}; {a.clients} clients for {a.seconds:.0f} s", flush=True)
        tally, timeline, elapsed = asyncio.run(soak(a, port, proc.pid))
        end = settle(port)
        rss_end = rss_mb(proc.pid)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            healthy = r.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=60)

    after_1min = [p for p in timeline if p["t"] >= 60]
    rss_1min = after_1min[0]["rss_mb"] if after_1min else timeline[-1]["rss_mb"]
    checks = [
        ("running / waiting sequences", f"{end.get('tandem:num_requests_running', -1):.0f} / "
         f"{end.get('tandem:num_requests_waiting', -1):.0f}",
         end.get("tandem:num_requests_running", 1) == 0 and end.get("tandem:num_requests_waiting", 1) == 0),
        ("requests in flight", f"{end.get('tandem:requests_in_flight', -1):.0f}",
         end.get("tandem:requests_in_flight", 1) == 0),
        ("KV blocks outside the prefix cache", f"{end.get('tandem:kv_blocks_used', -1):.0f} (of "
         f"{end.get('tandem:kv_blocks_total', 0):.0f}; {end.get('tandem:kv_blocks_cached', 0):.0f} cached)",
         end.get("tandem:kv_blocks_used", 1) == 0),
        ("RSS at the end vs after 1 min", f"{rss_end:.0f} vs {rss_1min:.0f} MB ({rss_end / rss_1min - 1:+.1%})",
         abs(rss_end / rss_1min - 1) <= 0.10),
        ("unexpected errors", str(tally.n_errors), tally.n_errors == 0),
        ("/health at the end", "200" if healthy else "not 200", healthy),
    ]
    for name, value, ok in checks:
        print(f"soak: {'ok  ' if ok else 'FAIL'} {name}: {value}")
    result = {"date": time.strftime("%Y-%m-%d"), "clients": a.clients, "seconds": elapsed,
              "planned_seconds": a.seconds, "note": a.note, "threads": a.threads,
              "kv_cache_tokens": a.kv_cache_tokens,
              "disconnect": a.disconnect, "cancel": a.cancel, "requests": tally.requests,
              "completed": tally.completed, "disconnected": tally.disconnected, "cancelled": tally.cancelled,
              "tokens": tally.tokens, "rss_1min": rss_1min, "rss_end": rss_end,
              "rss_peak": max(p["rss_mb"] for p in timeline),
              "preemptions": end.get("tandem:preemptions_total", 0), "errors": tally.errors,
              "checks": checks, "timeline": timeline,
              "command": f"make soak SOAK_SECONDS={a.seconds:.0f}" if a.clients == 256 else " ".join(sys.argv)}
    if not a.no_docs:
        os.makedirs(os.path.join(ROOT, "docs", "bench"), exist_ok=True)
        with open(os.path.join(ROOT, "docs", "bench", "soak.json"), "w") as f:
            json.dump(result, f, indent=1)
        plot(timeline, os.path.join(ROOT, "docs", "bench", "soak.png"))
        write_docs(result)
    sys.exit(0 if all(ok for _, _, ok in checks) else 1)


if __name__ == "__main__":
    main()
