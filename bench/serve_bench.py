#!/usr/bin/env python3
"""Serving benchmark (issue 5): streamed tokens/s, TTFT and inter-token latency at 1, 8, 64
and 256 concurrent streaming clients, for `tandem serve` and llama.cpp's llama-server on the
same GGUF, the same machine and the same thread count, in one run. Also Tandem's server CPU
time per streamed token outside the model.

Every client runs a closed loop for --seconds: it sends a streaming chat completion
(distinct prompt, greedy, ignore_eos, --max-tokens), reads the SSE stream to the end, and
sends the next. Both servers get the same requests, each client over one keep-alive
HTTP/1.1 connection (as an SDK's connection pool would).

  tokens/s   completion tokens streamed / (last stream's end - first request's start)
  TTFT       request sent -> first content delta
  ITL        gaps between consecutive content deltas of one stream

Server CPU per token (Tandem only): every thread's run time from /proc/<pid>/task/*/schedstat,
before and after the level. The model's threads are named: "tandem-device" (the CPU device
worker: step input, forward pass, sampling) and "tandem-compute" (its compute pool). Everything
else (HTTP and WebSocket sessions, JSON, tokenization, admission, scheduling, cache manager,
streamers, detokenization, SSE) is "outside the model".

Writes docs/benchmarks.md (between the serve-bench markers), docs/bench/serve.json and
docs/bench/serve.png.

Usage: bench/serve_bench.py [--clients 1,8,64,256] [--seconds 15] [--max-tokens 64]
                            [--threads N] [--llama-server PATH] [--only tandem|llama-server]
"""
import argparse
import asyncio
import datetime
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

from bench_docs import ROOT, cpu_name, met, publish

BEGIN, END = "<!-- serve-bench:begin -->", "<!-- serve-bench:end -->"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TOPICS = [
    "a lighthouse keeper", "a lost robot", "the first snow of winter", "a market in Marrakesh",
    "a violin maker", "two rival chess players", "a train across Siberia", "a bakery at dawn",
    "a deep-sea diver", "an old library", "a city garden", "a mountain rescue team",
    "a clockmaker's apprentice", "a comet seen from a farm", "a ferry in the fog", "a jazz band",
]


def model_path():
    home = os.environ.get("TANDEM_HOME", os.path.join(os.path.expanduser("~"), ".cache", "tandem"))
    path = os.path.join(home, "models", MODEL_FILE)
    if not os.path.exists(path):
        sys.exit(f"serve_bench: {path} is missing; run `make model`")
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- a small streaming HTTP/1.1 client (chunked or close-delimited bodies) -------------------

async def read_body_chunks(reader, headers):
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()  # the CRLF after the last chunk (no trailers)
                return
            yield await reader.readexactly(size)
            await reader.readexactly(2)
    elif "content-length" in headers:
        yield await reader.readexactly(int(headers["content-length"]))
    else:
        while chunk := await reader.read(65536):
            yield chunk


class connection:
    """One keep-alive HTTP/1.1 connection, as an SDK's connection pool keeps one per client."""

    def __init__(self, port):
        self.port, self.reader, self.writer = port, None, None

    async def post_stream(self, path, body):
        """Yields (arrival time, SSE data payload) for each event of a streamed response."""
        payload = json.dumps(body).encode()
        request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload
        for attempt in (0, 1):
            reused = self.writer is not None
            if not reused:
                self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
            self.writer.write(request)
            await self.writer.drain()
            status = (await self.reader.readline()).split()
            if status or not reused:
                break
            self.close()  # the server closed the idle connection: reconnect once, as SDKs do
        headers = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        if len(status) < 2 or status[1] != b"200":
            rest = b"".join([c async for c in read_body_chunks(self.reader, headers)])
            self.close()
            raise RuntimeError(f"HTTP {status[1:2]}: {rest[:300]!r}")
        buf = b""
        async for chunk in read_body_chunks(self.reader, headers):
            now = time.perf_counter()
            buf += chunk
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if line.startswith(b"data:"):
                        yield now, line[5:].strip()
        if headers.get("connection", "").lower() == "close" or "content-length" not in headers and \
                headers.get("transfer-encoding", "").lower() != "chunked":
            self.close()

    def close(self):
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def stream_completion(conn, body, record):
    """Sends one streaming request; appends (t_sent, [t of each content delta], tokens)."""
    t_sent = time.perf_counter()
    deltas, usage_tokens = [], None
    async for now, data in conn.post_stream("/v1/chat/completions", body):
        if data == b"[DONE]":
            continue
        msg = json.loads(data)
        if msg.get("usage"):
            usage_tokens = msg["usage"].get("completion_tokens")
        for ch in msg.get("choices") or []:
            if (ch.get("delta") or {}).get("content"):
                deltas.append(now)
    record.append((t_sent, deltas, usage_tokens if usage_tokens is not None else len(deltas)))


async def run_level(port, n_clients, seconds, max_tokens, model_name):
    records, counter = [], [0]
    deadline = time.perf_counter() + seconds

    async def client(i):
        conn = connection(port)
        while time.perf_counter() < deadline:
            k = counter[0]
            counter[0] += 1
            body = {
                "model": model_name,
                "messages": [{"role": "user", "content":
                              f"Tell a long story about {TOPICS[k % len(TOPICS)]} (story {k})."}],
                "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True},
            }
            await stream_completion(conn, body, records)
        conn.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(n_clients)))
    wall = time.perf_counter() - t0
    tokens = sum(r[2] for r in records)
    ttft = sorted(r[1][0] - r[0] for r in records if r[1])
    itl = sorted(b - a for r in records for a, b in zip(r[1], r[1][1:]))
    return {"clients": n_clients, "requests": len(records), "tokens": tokens, "wall_s": wall,
            "tok_s": tokens / wall, "ttft_p50_ms": 1e3 * pct(ttft, 50), "ttft_p99_ms": 1e3 * pct(ttft, 99),
            "itl_p50_ms": 1e3 * pct(itl, 50), "itl_p99_ms": 1e3 * pct(itl, 99)}


def pct(xs, p):
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


# --- per-thread CPU time ----------------------------------------------------------------------

def thread_cpu(pid):
    """{tid: (name, run ns)} from /proc/<pid>/task/*/schedstat."""
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            name = open(f"{base}/{tid}/comm").read().strip()
            ns = int(open(f"{base}/{tid}/schedstat").read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        out[tid] = (name, ns)
    return out


def cpu_split(before, after):
    model_ns = other_ns = 0
    for tid, (name, ns) in after.items():
        d = ns - before.get(tid, (name, 0))[1]
        if name in ("tandem-device", "tandem-compute"):
            model_ns += d
        else:
            other_ns += d
    return model_ns, other_ns


# --- what the kernel alone costs per streamed event -------------------------------------------

READER = """
import asyncio, sys
async def one(port):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    while await r.read(65536):
        pass
async def main(port, n):
    await asyncio.gather(*(one(port) for _ in range(n)))
asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
"""


def loopback_send_floor(n_clients=64, rounds=150, gap_s=0.02, payload_bytes=200):
    """System CPU per send() of one SSE-sized chunk to loopback clients, with nothing else.

    A bare loop sends one payload to each of n asyncio readers (another process, as the
    benchmark's clients are) per round, rounds gap_s apart, as a server sends one token to
    every client per step. The sending thread's system time over the sends is what the
    kernel charges the server per streamed event on this machine: on loopback that includes
    the receiver's TCP input path, run in the sender's context. No server can stream one
    event per token for less."""
    import resource
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(n_clients)
    port = listener.getsockname()[1]
    reader = subprocess.Popen([sys.executable, "-c", READER, str(port), str(n_clients)])
    conns = []
    try:
        for _ in range(n_clients):
            c, _ = listener.accept()
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conns.append(c)
        data = b"x" * (payload_bytes - 2) + b"\n\n"
        for c in conns:  # warm-up round
            c.sendall(data)
        time.sleep(gap_s)
        before = resource.getrusage(resource.RUSAGE_THREAD)
        for _ in range(rounds):
            for c in conns:
                c.sendall(data)
            time.sleep(gap_s)
        after = resource.getrusage(resource.RUSAGE_THREAD)
    finally:
        for c in conns:
            c.close()
        listener.close()
        reader.wait(timeout=30)
    sends = rounds * n_clients
    return {"clients": n_clients, "sends": sends, "payload_bytes": payload_bytes, "gap_ms": gap_s * 1e3,
            "system_us_per_send": (after.ru_stime - before.ru_stime) * 1e6 / sends}


# --- the two servers ---------------------------------------------------------------------------

def wait_healthy(port, proc, what, timeout=180):
    t_end = time.time() + timeout
    while time.time() < t_end:
        if proc.poll() is not None:
            sys.exit(f"serve_bench: {what} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.3)
    sys.exit(f"serve_bench: {what} not healthy after {timeout} s")


def start_tandem(exe, model, port, threads, max_seqs, kv_tokens, extra=()):
    cmd = [exe, "serve", "--model", model, "--port", str(port), "--threads", str(threads),
           "--max-num-seqs", str(max_seqs), "--kv-cache-tokens", str(kv_tokens), "--log-level", "warn", *extra]
    return cmd, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_llama_server(exe, model, port, threads, max_seqs, kv_tokens):
    cmd = [exe, "-m", model, "--port", str(port), "--host", "127.0.0.1", "-t", str(threads), "-tb", str(threads),
           "-np", str(max_seqs), "-c", str(kv_tokens), "--no-warmup", "-lv", "0"]
    return cmd, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def bench_server(name, start, exe, a, model):
    port = free_port()
    cmd, proc = start(exe, model, port, a.threads, max(a.clients), a.kv_tokens)
    print(f"serve bench: {name}: {' '.join(cmd)}", flush=True)
    try:
        wait_healthy(port, proc, name)
        asyncio.run(run_level(port, 2, 2, 8, "default"))  # warm-up: pages, caches, threads
        rows = []
        for n in a.clients:
            before = thread_cpu(proc.pid)
            row = asyncio.run(run_level(port, n, a.seconds, a.max_tokens, "default"))
            model_ns, other_ns = cpu_split(before, thread_cpu(proc.pid))
            row["cpu_outside_model_us_per_token"] = other_ns / 1e3 / max(1, row["tokens"])
            row["cpu_model_us_per_token"] = model_ns / 1e3 / max(1, row["tokens"])
            rows.append(row)
            print(f"  {name:12s} {n:4d} clients: {row['tok_s']:7.1f} tok/s  TTFT p50 {row['ttft_p50_ms']:7.1f} "
                  f"p99 {row['ttft_p99_ms']:7.1f} ms  ITL p50 {row['itl_p50_ms']:6.1f} p99 {row['itl_p99_ms']:6.1f} ms"
                  f"  ({row['requests']} requests, {row['tokens']} tokens)", flush=True)
        return {"command": " ".join(cmd), "levels": rows}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


# --- report ------------------------------------------------------------------------------------

def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    for name, style in (("tandem", "o-"), ("llama-server", "s--")):
        if name not in res["servers"]:
            continue
        lv = res["servers"][name]["levels"]
        x = [r["clients"] for r in lv]
        ax[0].plot(x, [r["tok_s"] for r in lv], style, label=name)
        ax[1].plot(x, [r["ttft_p50_ms"] for r in lv], style, label=f"{name} p50")
        ax[1].plot(x, [r["ttft_p99_ms"] for r in lv], style, alpha=0.5, label=f"{name} p99")
        ax[2].plot(x, [r["itl_p50_ms"] for r in lv], style, label=f"{name} p50")
        ax[2].plot(x, [r["itl_p99_ms"] for r in lv], style, alpha=0.5, label=f"{name} p99")
    for a_, title, unit in ((ax[0], "streamed tokens/s", "tok/s"), (ax[1], "TTFT", "ms"), (ax[2], "inter-token latency", "ms")):
        a_.set_xscale("log", base=2)
        a_.set_xlabel("concurrent streaming clients")
        a_.set_ylabel(unit)
        a_.set_title(title)
        a_.grid(alpha=0.3)
        a_.legend(fontsize=8)
    ax[1].set_yscale("log")
    ax[2].set_yscale("log")
    fig.suptitle(f"Serving SmolLM2-135M Q4_1, {res['threads']} threads, {res['cpu']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(res, cmd):
    t, l = res["servers"].get("tandem"), res["servers"].get("llama-server")
    lines = [BEGIN, "## Serving: Tandem vs llama-server (issue 5)", "",
             f"{res['date']}, {res['cpu']}, {res['threads']} compute threads for each server, clients on the "
             f"same machine. Each client streams chat completions in a closed loop for {res['seconds']} s "
             f"(distinct prompts, greedy, ignore_eos, {res['max_tokens']} tokens each, one keep-alive connection "
             f"per client). Reproduce: `{cmd}`.", "",
             "| clients | Tandem tok/s | llama-server tok/s | ratio | TTFT p50 / p99 ms (Tandem) | TTFT p50 / p99 ms (llama-server) "
             "| ITL p50 / p99 ms (Tandem) | ITL p50 / p99 ms (llama-server) | Tandem server CPU outside the model, µs/token |",
             "|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(t["levels"]):
        q = l["levels"][i] if l else None
        ratio = f"{r['tok_s'] / q['tok_s']:.2f}x" if q else "-"
        lines.append(
            f"| {r['clients']} | {r['tok_s']:.0f} | {q['tok_s']:.0f} | {ratio} | " if q else f"| {r['clients']} | {r['tok_s']:.0f} | - | - | ")
        lines[-1] += (f"{r['ttft_p50_ms']:.0f} / {r['ttft_p99_ms']:.0f} | "
                      + (f"{q['ttft_p50_ms']:.0f} / {q['ttft_p99_ms']:.0f} | " if q else "- | ")
                      + f"{r['itl_p50_ms']:.1f} / {r['itl_p99_ms']:.1f} | "
                      + (f"{q['itl_p50_ms']:.1f} / {q['itl_p99_ms']:.1f} | " if q else "- | ")
                      + f"{r['cpu_outside_model_us_per_token']:.1f} |")
    if l:
        r64 = next((r for r in t["levels"] if r["clients"] == 64), None)
        q64 = next((q for q in l["levels"] if q["clients"] == 64), None)
        if r64 and q64:
            ratio = r64["tok_s"] / q64["tok_s"]
            cpu = max(r["cpu_outside_model_us_per_token"] for r in t["levels"] if r["clients"] >= 64)
            lines += ["", f"Targets (issue 5): at 64 clients >= 1.5x llama-server's throughput: {ratio:.2f}x "
                      f"({met(ratio >= 1.5)}); <= 10 µs of server CPU per streamed token outside "
                      f"the model: {cpu:.1f} µs at 64+ clients ({met(cpu <= 10)}; see "
                      "docs/serving.md for where it goes)."]
            f = res.get("send_floor")
            if f:
                lines += ["", f"The kernel's part alone: a bare loop that only `send()`s one {f['payload_bytes']}-byte "
                          f"chunk to each of {f['clients']} loopback readers per round ({f['gap_ms']:.0f} ms apart, "
                          f"as a server streams one token per client per step) spends "
                          f"**{f['system_us_per_send']:.1f} µs** of system time per send on this machine "
                          "(`loopback_send_floor` in bench/serve_bench.py). One SSE event per token costs at least "
                          "that much here, before any HTTP, JSON, detokenization or scheduling."]
    ti = res["servers"].get("tandem-interval")
    if ti:
        r = ti["levels"][0]
        r1 = next((x for x in t["levels"] if x["clients"] == r["clients"]), None)
        lines += ["", f"With `--stream-interval {res['stream_interval']}` ({r['clients']} clients, the same run otherwise; "
                  "the first token of each request at once, then one SSE chunk per "
                  f"{res['stream_interval']} tokens):", "",
                  "| stream interval | tok/s | TTFT p50 / p99 ms | gap between chunks p50 / p99 ms | "
                  "server CPU outside the model, µs/token |", "|---|---|---|---|---|"]
        for n, x in ((1, r1), (res["stream_interval"], r)):
            if x:
                lines.append(f"| {n} | {x['tok_s']:.0f} | {x['ttft_p50_ms']:.0f} / {x['ttft_p99_ms']:.0f} | "
                             f"{x['itl_p50_ms']:.1f} / {x['itl_p99_ms']:.1f} | {x['cpu_outside_model_us_per_token']:.1f} |")
    lines += ["", "![serving](bench/serve.png)", "",
              "Server CPU outside the model = run time of every Tandem thread except `tandem-device` (step "
              "input, forward pass, sampling) and `tandem-compute` (its pool), from /proc/<pid>/task/*/schedstat, "
              "divided by the tokens streamed at that level. It includes the per-request work (HTTP parse, JSON, "
              "admission, tokenization, prefix lookup) spread over the request's tokens.",
              "", f"Commands: `{t['command']}`" + (f"; `{l['command']}`" if l else ""), END]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", default="1,8,64,256")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--kv-tokens", type=int, default=65536)
    ap.add_argument("--tandem", default=os.path.join(ROOT, "build", "bin", "tandem"))
    ap.add_argument("--llama-server", default=None, help="default: scripts/build-llama-server.sh")
    ap.add_argument("--only", choices=["tandem", "llama-server"], default=None,
                    help="run one server only; prints the results and leaves docs/ alone")
    ap.add_argument("--stream-interval", type=int, default=4,
                    help="also run Tandem at 64 clients with this --stream-interval (1: skip)")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    ap.add_argument("--from-json", help="re-render docs from a saved docs/bench/serve.json, running nothing")
    a = ap.parse_args()
    if a.from_json:
        publish("serve", json.load(open(a.from_json)), plot, markdown, BEGIN, END)
        return 0
    a.clients = [int(c) for c in a.clients.split(",")]
    model = model_path()
    res = {"date": datetime.date.today().isoformat(), "cpu": cpu_name(), "threads": a.threads,
           "seconds": a.seconds, "max_tokens": a.max_tokens, "servers": {}}
    if a.only != "llama-server":
        res["send_floor"] = loopback_send_floor()
        print(f"serve bench: loopback send floor: {res['send_floor']['system_us_per_send']:.1f} µs of system time "
              f"per {res['send_floor']['payload_bytes']}-byte send to {res['send_floor']['clients']} readers", flush=True)
        res["servers"]["tandem"] = bench_server("tandem", start_tandem, a.tandem, a, model)
        if a.stream_interval > 1 and 64 in a.clients:
            # The same 64 clients with several tokens per SSE chunk: what the per-token server
            # CPU is made of besides one event per token.
            b = argparse.Namespace(**vars(a))
            b.clients = [64]
            extra = ["--stream-interval", str(a.stream_interval)]
            res["stream_interval"] = a.stream_interval
            res["servers"]["tandem-interval"] = bench_server(
                f"tandem --stream-interval {a.stream_interval}",
                lambda *x: start_tandem(*x, extra=extra), a.tandem, b, model)
    if a.only != "tandem":
        exe = a.llama_server or subprocess.run([os.path.join(ROOT, "scripts", "build-llama-server.sh")],
                                               check=True, stdout=subprocess.PIPE, text=True).stdout.split()[-1]
        res["servers"]["llama-server"] = bench_server("llama-server", start_llama_server, exe, a, model)
    if a.no_write or a.only or "tandem" not in res["servers"]:  # a partial run replaces nothing
        print(json.dumps(res, indent=2))
        return 0
    publish("serve", res, plot, markdown, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
