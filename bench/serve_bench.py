#!/usr/bin/env python3
"""Serving benchmark (issues 5 and 20), `tandem serve` against llama.cpp's llama-server on the
same GGUF, the same machine and the same thread count, in one run.

The realistic mix (the headline, issue 20): chat requests as users send them, sampled
(temperature 0.7, top_p 0.95), unique prompts of 20-1,000 tokens (log-uniform; half of them
behind one of two shared system prompts), outputs that end at EOS or at max_tokens (64, 128 or
256; no ignore_eos). Both servers stay up and take turns level by level, --mix-rounds times
(the order reversed each round); each figure is the median over the rounds. Levels: 64
closed-loop clients, and Poisson arrivals at --rates requests/s (open loop: a request is sent
at its arrival time whatever is in flight). A level lasts --mix-seconds, then waits at most
--drain-seconds for the requests in flight and cancels the rest (counted as unfinished: a
server that falls behind cannot stretch the run without bound). Reported per level: completion tokens/s, TTFT and
ITL p50 / p99, goodput (requests per second that met TTFT <= 1 s and a mean inter-token time
<= 100 ms, vLLM's TPOT), and each server's CPU per completion token (user and system time of
all its threads; for Tandem also of the threads outside the model).

The greedy levels (issue 5): 1, 8, 64 and 256 concurrent streaming clients, greedy,
ignore_eos, fixed-length outputs; at 64 clients also the same requests sampled (T 0.7,
top_p 0.95), for what sampling costs a serving run.

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
                            [--mix-seconds 30] [--mix-rounds 3] [--rates 0.25,0.5,1] [--drain-seconds 400]
                            [--threads N] [--llama-server PATH] [--only tandem|llama-server]
                            [--skip-greedy] [--skip-mix]
Progress goes to stderr-like lines on stdout as each level ends.
"""
import argparse
import asyncio
import datetime
import json
import math
import os
import random
import statistics
import socket
import subprocess
import sys
import time

from bench_docs import ROOT, cpu_name, free_port, met, publish, wait_healthy

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
    """Sends one streaming request; appends (t_sent, [t of each content delta], tokens,
    finished, t_end), also when cancelled part way (finished False, tokens = deltas so far)."""
    t_sent = time.perf_counter()
    deltas, usage_tokens, finished = [], None, False
    try:
        async for now, data in conn.post_stream("/v1/chat/completions", body):
            if data == b"[DONE]":
                continue
            msg = json.loads(data)
            if msg.get("usage"):
                usage_tokens = msg["usage"].get("completion_tokens")
            for ch in msg.get("choices") or []:
                if (ch.get("delta") or {}).get("content"):
                    deltas.append(now)
        finished = True
    finally:
        tokens = usage_tokens if finished and usage_tokens is not None else len(deltas)
        record.append((t_sent, deltas, tokens, finished, time.perf_counter()))


GREEDY = {"temperature": 0}
SAMPLED = {"temperature": 0.7, "top_p": 0.95}


async def run_level(port, n_clients, seconds, max_tokens, model_name, sampling=GREEDY):
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
                "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}, **sampling,
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


# --- the realistic mix ------------------------------------------------------------------------

SYSTEM_PROMPTS = [
    "You are Sol, the support assistant of a company that sells garden tools online. Answer in a friendly, "
    "concise way. Orders ship within two working days from the warehouse in Leeds; delivery takes three to "
    "five days in the UK and up to ten days in Europe. Customers may return any unused item within thirty "
    "days for a full refund; used items can be returned only if they are faulty. Every tool has a two-year "
    "guarantee, and the cordless range has five years on the motor. Do not promise discounts, do not share "
    "other customers' details, and when a question is about an order, ask for the order number first. If "
    "the customer is upset, apologise once, then focus on what you can do. Keep answers under 150 words "
    "unless the customer asks for detail, and end with a question if something is still unclear.",
    "You are a writing tutor for secondary-school students. Explain grammar and style with short examples, "
    "never rewrite the student's whole text for them, and point out at most three things per answer, the "
    "most important first. Use British spelling. When the student shares a paragraph, say first what works "
    "well, then what to improve, and suggest one concrete exercise. If asked about facts outside writing, "
    "answer briefly and steer back to the writing task. Be encouraging but honest, and avoid jargon: when "
    "you must use a term such as 'subordinate clause', explain it in one plain sentence. Never include "
    "links, and do not invent quotations or sources.",
]
ASKS = ["Can you help me with this?", "What would you suggest?", "Please summarise this for me.",
        "Explain it simply.", "Write a short reply.", "What are the main points?", "Is this correct?",
        "Give me three ideas.", "How should I answer?", "Rewrite the first sentence more clearly."]
SENTENCES = [
    "I ordered a pair of pruning shears last week and they have not arrived yet.",
    "My essay argues that cities should plant more trees along busy roads.",
    "The meeting moved to Thursday afternoon because two people were travelling.",
    "We tried the recipe twice, but the bread stayed flat both times.",
    "Our team wants to compare three laptops before the end of the month.",
    "The instructions say to charge the battery fully before the first use.",
    "I think the second paragraph repeats what the introduction already says.",
    "The bus from the station was late again, so I missed the start of the lecture.",
    "She asked whether the guarantee also covers the charger and the case.",
    "The report lists costs for heating, electricity and repairs over five years.",
    "My brother says the film is better than the book, and I disagree.",
    "Last spring the river flooded the lower fields for almost two weeks.",
    "The new timetable adds an early train but removes the one at noon.",
    "He wrote that the software crashes whenever he opens a large file.",
    "I need a polite way to tell my neighbour that the hedge blocks our light.",
    "The museum is free on Sundays, but the special exhibition costs extra.",
]


def mix_request(k, tag=""):
    """The k-th request of the mix: the same for both servers, unique across levels and rounds.
    A tag makes a twin: the same lengths, system prompt and max_tokens, another text after the
    system prompt (no prefix-cache hit on the untagged one)."""
    rng = random.Random(1000003 * k + 20)
    user_tokens = int(math.exp(rng.uniform(math.log(20), math.log(1000))))
    words = []
    while len(words) * 1.3 < user_tokens:  # English chat text: about 1.3 tokens per word
        words += rng.choice(SENTENCES).split()
    text = f"{rng.choice(TOPICS).capitalize()}, note {k}{tag}: " + " ".join(words[:max(3, int(user_tokens / 1.3))])
    messages = [{"role": "system", "content": SYSTEM_PROMPTS[rng.randrange(2)]}] if rng.random() < 0.5 else []
    messages.append({"role": "user", "content": f"{text}\n\n{rng.choice(ASKS)}"})
    return {"messages": messages, "max_tokens": rng.choice([64, 128, 256])}


async def run_mix(port, first, seconds, n_clients=None, rate=None, sampling=SAMPLED, model_name="default",
                  drain_s=400, keep=None, good_ttft_s=1.0, extra_body=None, tag=""):
    """Closed loop (n_clients) or Poisson arrivals (rate per second) for `seconds`, then at most
    drain_s for the requests in flight; those still running are cancelled and count as
    unfinished (their tokens so far count; a TTFT they never reached counts as the time
    they waited, a lower bound)."""
    records, errors, idle, k = [], [], [], [first]
    deadline = time.perf_counter() + seconds

    def next_body():
        r = mix_request(k[0], tag)
        k[0] += 1
        return {"model": model_name, "messages": r["messages"], "max_tokens": r["max_tokens"], "stream": True,
                "stream_options": {"include_usage": True}, **sampling, **(extra_body or {})}

    async def one(body):
        conn = idle.pop() if idle else connection(port)
        try:
            await stream_completion(conn, body, records)
            idle.append(conn)
        except asyncio.CancelledError:
            conn.close()
            raise
        except Exception as e:  # counted, and the connection dropped
            errors.append(str(e)[:200])
            conn.close()

    t0 = time.perf_counter()
    tasks = []
    if n_clients:
        async def client():
            while time.perf_counter() < deadline:
                await one(next_body())
        tasks = [asyncio.ensure_future(client()) for _ in range(n_clients)]
    else:
        rng, t = random.Random(first), t0
        while (t := t + rng.expovariate(rate)) < deadline:
            await asyncio.sleep(max(0.0, t - time.perf_counter()))
            tasks.append(asyncio.ensure_future(one(next_body())))
    _, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - time.perf_counter()) + drain_s)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)
    wall = time.perf_counter() - t0
    for c in idle:
        c.close()
    tokens = sum(r[2] for r in records)
    ttft = sorted((r[1][0] if r[1] else r[4]) - r[0] for r in records)
    itl = sorted(b - a for r in records for a, b in zip(r[1], r[1][1:]))
    if keep is not None:  # (sent, [token times], tokens, finished, ...) per request, times from t0
        keep.extend((r[0] - t0, [x - t0 for x in r[1]], r[2], r[3]) for r in records)
    good = sum(1 for r in records if r[3] and r[1] and r[1][0] - r[0] <= good_ttft_s and
               (len(r[1]) < 2 or (r[1][-1] - r[1][0]) / (len(r[1]) - 1) <= 0.1))
    finished = [r for r in records if r[3]]
    return {"requests": len(records), "unfinished": len(records) - len(finished), "errors": len(errors),
            "tokens": tokens, "wall_s": wall, "tok_s": tokens / wall, "ttft_p50_ms": 1e3 * pct(ttft, 50),
            "ttft_p99_ms": 1e3 * pct(ttft, 99), "itl_p50_ms": 1e3 * pct(itl, 50), "itl_p99_ms": 1e3 * pct(itl, 99),
            "goodput_rps": good / wall, "good_fraction": good / max(1, len(records)),
            "mean_output_tokens": sum(r[2] for r in finished) / max(1, len(finished))}


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


CLOCK_TICK = os.sysconf("SC_CLK_TCK")
MODEL_THREADS = ("tandem-device", "tandem-compute")


def thread_times(pid):
    """{tid: (name, user s, system s)} from /proc/<pid>/task/*/stat."""
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            stat = open(f"{base}/{tid}/stat").read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[tid] = (name, int(fields[11]) / CLOCK_TICK, int(fields[12]) / CLOCK_TICK)
    return out


def cpu_per_token(before, after, tokens):
    """µs per completion token: user and system time of all threads, and of those outside the model."""
    r = {"user_us": 0.0, "sys_us": 0.0, "outside_user_us": 0.0, "outside_sys_us": 0.0}
    for tid, (name, u, sy) in after.items():
        _, u0, s0 = before.get(tid, (name, 0.0, 0.0))
        du, ds = 1e6 * (u - u0) / max(1, tokens), 1e6 * (sy - s0) / max(1, tokens)
        r["user_us"] += du
        r["sys_us"] += ds
        if name not in MODEL_THREADS:
            r["outside_user_us"] += du
            r["outside_sys_us"] += ds
    r["total_us"] = r["user_us"] + r["sys_us"]
    return r


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

def start_tandem(exe, model, port, threads, max_seqs, kv_tokens, extra=()):
    cmd = [exe, "serve", "--model", model, "--port", str(port), "--threads", str(threads),
           "--max-num-seqs", str(max_seqs), "--kv-cache-tokens", str(kv_tokens), "--log-level", "warn", *extra]
    return cmd, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_llama_server(exe, model, port, threads, max_seqs, kv_tokens):
    # -nr: no weight repacking (llama.cpp's extra buffer types). On a CPU with AMX its AMX
    # matrix product, which repacking selects, crashes the server at the first request under
    # this machine's hypervisor (SIGSEGV in ggml_backend_amx_mul_mat); elsewhere Q4_1 has no
    # repacked layout, so the flag changes nothing.
    cmd = [exe, "-m", model, "--port", str(port), "--host", "127.0.0.1", "-t", str(threads), "-tb", str(threads),
           "-np", str(max_seqs), "-c", str(kv_tokens), "--no-warmup", "-lv", "0", "-nr"]
    return cmd, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def bench_server(name, start, exe, a, model):
    port = free_port()
    cmd, proc = start(exe, model, port, a.threads, max(a.clients), a.kv_tokens)
    print(f"serve bench: {name}: {' '.join(cmd)}", flush=True)
    try:
        wait_healthy(port, proc, name)
        asyncio.run(run_level(port, 2, 2, 8, "default"))  # warm-up: pages, caches, threads
        rows = []
        levels = [(n, GREEDY) for n in a.clients]
        if 64 in a.clients and getattr(a, "sampled_64", True):
            levels.append((64, SAMPLED))  # the same requests sampled: what sampling costs a run
        sampled = None
        for n, sampling in levels:
            before, times = thread_cpu(proc.pid), thread_times(proc.pid)
            row = asyncio.run(run_level(port, n, a.seconds, a.max_tokens, "default", sampling))
            model_ns, other_ns = cpu_split(before, thread_cpu(proc.pid))
            row["cpu_outside_model_us_per_token"] = other_ns / 1e3 / max(1, row["tokens"])
            row["cpu_model_us_per_token"] = model_ns / 1e3 / max(1, row["tokens"])
            row["cpu"] = cpu_per_token(times, thread_times(proc.pid), row["tokens"])
            if sampling is SAMPLED:
                sampled = row
            else:
                rows.append(row)
            print(f"  {name:12s} {n:4d} clients{' sampled' if sampling is SAMPLED else ''}: {row['tok_s']:7.1f} tok/s"
                  f"  TTFT p50 {row['ttft_p50_ms']:7.1f} p99 {row['ttft_p99_ms']:7.1f} ms  ITL p50 "
                  f"{row['itl_p50_ms']:6.1f} p99 {row['itl_p99_ms']:6.1f} ms  CPU {row['cpu']['total_us']:.0f} µs/token"
                  f"  ({row['requests']} requests, {row['tokens']} tokens)", flush=True)
        return {"command": " ".join(cmd), "levels": rows, "sampled_64": sampled}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def bench_mix(a, model, llama_exe):
    """Both servers up; per round, per level, each server in turn (order reversed each round).
    Returns {"levels": [...], "servers": {name: {"command", "runs": [[per round] per level]}}}."""
    # 64 running sequences at most for both (llama-server's slots), each with room for the
    # longest request (system prompt, 1,000 tokens, 256 out).
    slots = max(a.mix_clients)
    starts = {"tandem": lambda port: start_tandem(a.tandem, model, port, a.threads, slots, a.mix_kv_tokens)}
    if llama_exe:
        starts["llama-server"] = lambda port: start_llama_server(llama_exe, model, port, a.threads, slots,
                                                                 a.mix_kv_tokens)
    servers = {}
    try:
        for name, start in starts.items():
            port = free_port()
            cmd, proc = start(port)
            servers[name] = {"port": port, "proc": proc, "command": " ".join(cmd)}
            print(f"serve bench: mix: {name}: {' '.join(cmd)}", flush=True)
        for name, sv in servers.items():
            wait_healthy(sv["port"], sv["proc"], name)
            asyncio.run(run_mix(sv["port"], 10 ** 8, 4, n_clients=4))  # warm-up
        levels = [{"label": f"{c} clients", "clients": c} for c in a.mix_clients] + \
                 [{"label": f"Poisson {r:g}/s", "rate": r} for r in a.rates]
        runs = {name: [[] for _ in levels] for name in servers}
        names = list(servers)
        for rnd in range(a.mix_rounds):
            for li, lv in enumerate(levels):
                for name in (names if rnd % 2 == 0 else names[::-1]):
                    sv = servers[name]
                    first = (rnd * 64 + li) * 100000  # unique prompts, the same for both servers
                    times = thread_times(sv["proc"].pid)
                    row = asyncio.run(run_mix(sv["port"], first, a.mix_seconds, n_clients=lv.get("clients"),
                                              rate=lv.get("rate"), drain_s=a.drain_seconds))
                    row["cpu"] = cpu_per_token(times, thread_times(sv["proc"].pid), row["tokens"])
                    runs[name][li].append(row)
                    wait_idle(sv["proc"])
                    print(f"  mix round {rnd + 1}/{a.mix_rounds} {lv['label']:14s} {name:12s}: {row['tok_s']:6.1f} tok/s"
                          f"  TTFT p50 {row['ttft_p50_ms']:7.0f} p99 {row['ttft_p99_ms']:7.0f} ms  ITL p50 "
                          f"{row['itl_p50_ms']:5.1f} p99 {row['itl_p99_ms']:6.1f} ms  goodput {row['goodput_rps']:.2f}/s"
                          f"  CPU {row['cpu']['total_us']:.0f} µs/token  ({row['requests']} requests, "
                          f"{row['mean_output_tokens']:.0f} tokens each, {row['unfinished']} cut at the drain limit, "
                          f"{row['errors']} errors)", flush=True)
        return {"levels": levels, "rounds": a.mix_rounds, "seconds": a.mix_seconds, "drain_s": a.drain_seconds,
                "servers": {n: {"command": servers[n]["command"], "runs": runs[n]} for n in servers}}
    finally:
        for sv in servers.values():
            stop(sv["proc"])


def process_cpu_s(pid):
    return sum(u + sy for _, u, sy in thread_times(pid).values())


def wait_idle(proc, max_s=300):
    """Until the server has used under 5% of a core for a second (a server that keeps working
    on requests whose clients left would otherwise slow the next level, the other server's
    too), or max_s."""
    t_end = time.time() + max_s
    last = process_cpu_s(proc.pid)
    while time.time() < t_end:
        time.sleep(1.0)
        now = process_cpu_s(proc.pid)
        if now - last < 0.05:
            return
        last = now


def median_row(rows):
    """Field by field median of one level's rounds."""
    out = {}
    for key in rows[0]:
        if isinstance(rows[0][key], dict):
            out[key] = median_row([r[key] for r in rows])
        elif isinstance(rows[0][key], (int, float)):
            out[key] = statistics.median(r[key] for r in rows)
    return out


# --- report ------------------------------------------------------------------------------------

def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    greedy = bool(res["servers"])  # a named (--name) run has the realistic mix only
    fig, ax = plt.subplots(2 if greedy else 1, 3, figsize=(14, 8 if greedy else 4.5), squeeze=False)
    mix = res.get("mix")
    if mix:
        labels = [lv["label"] for lv in mix["levels"]]
        x = list(range(len(labels)))
        for name, style in (("tandem", "o-"), ("llama-server", "s--")):
            if name not in mix["servers"]:
                continue
            rows = [median_row(r) for r in mix["servers"][name]["runs"]]
            ax[0][0].plot(x, [r["tok_s"] for r in rows], style, label=name)
            ax[0][1].plot(x, [r["ttft_p50_ms"] for r in rows], style, label=f"{name} p50")
            ax[0][1].plot(x, [r["ttft_p99_ms"] for r in rows], style, alpha=0.5, label=f"{name} p99")
            ax[0][2].plot(x, [r["goodput_rps"] for r in rows], style, label=name)
        for a_, title, unit in ((ax[0][0], "realistic mix: completion tokens/s", "tok/s"),
                                (ax[0][1], "realistic mix: TTFT", "ms"),
                                (ax[0][2], "goodput (TTFT <= 1 s, TPOT <= 100 ms)", "requests/s")):
            a_.set_xticks(x)
            a_.set_xticklabels(labels, fontsize=8)
            a_.set_ylabel(unit)
            a_.set_title(title, fontsize=10)
            a_.grid(alpha=0.3)
            a_.legend(fontsize=8)
        ax[0][1].set_yscale("log")
    for name, style in (("tandem", "o-"), ("llama-server", "s--")) if greedy else ():
        if name not in res["servers"]:
            continue
        lv = res["servers"][name]["levels"]
        x = [r["clients"] for r in lv]
        ax[1][0].plot(x, [r["tok_s"] for r in lv], style, label=name)
        ax[1][1].plot(x, [r["ttft_p50_ms"] for r in lv], style, label=f"{name} p50")
        ax[1][1].plot(x, [r["ttft_p99_ms"] for r in lv], style, alpha=0.5, label=f"{name} p99")
        ax[1][2].plot(x, [r["itl_p50_ms"] for r in lv], style, label=f"{name} p50")
        ax[1][2].plot(x, [r["itl_p99_ms"] for r in lv], style, alpha=0.5, label=f"{name} p99")
    for a_, title, unit in ((ax[1][0], "greedy, fixed length: streamed tokens/s", "tok/s"),
                            (ax[1][1], "greedy: TTFT", "ms"),
                            (ax[1][2], "greedy: inter-token latency", "ms")) if greedy else ():
        a_.set_xscale("log", base=2)
        a_.set_xlabel("concurrent streaming clients")
        a_.set_ylabel(unit)
        a_.set_title(title, fontsize=10)
        a_.grid(alpha=0.3)
        a_.legend(fontsize=8)
    if greedy:
        ax[1][1].set_yscale("log")
        ax[1][2].set_yscale("log")
    fig.suptitle(f"Serving {res.get('model_label', 'SmolLM2-135M Q4_1')}, {res['threads']} threads, {res['cpu']}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def mix_markdown(res, cmd):
    m = res["mix"]
    t, l = m["servers"]["tandem"], m["servers"].get("llama-server")
    label = res.get("model_label")
    lines = ["## Serving a realistic mix: Tandem vs llama-server (issue 20)" + (f", {label}" if label else ""), "",
             f"{res['date']}, {res['cpu']}, {res['threads']} compute threads for each server, clients on the same "
             "machine. Chat requests as users send them: sampled (temperature 0.7, top_p 0.95), unique prompts "
             "of 20-1,000 tokens (log-uniform) of which half follow one of two shared system prompts (about 170 "
             "tokens each), max_tokens 64, 128 or 256 and no ignore_eos (outputs end at EOS or there). Both servers "
             f"run side by side with at most {max(lv.get('clients', 0) for lv in m['levels'])} running sequences "
             f"(llama-server's slots) and take turns level by level, {m['rounds']} rounds of {m['seconds']:.0f} s "
             "per level and server, the order reversed each round; each figure is the median over the rounds "
             "(the machine is shared with other work, so single runs scatter). Poisson levels are open loop: "
             f"requests arrive at that rate whatever is in flight. Each level lasts {m['seconds']:.0f} s, then waits "
             f"at most {m.get('drain_s', 400):.0f} s for the requests in flight and cancels the rest (their tokens so "
             "far count; a first token never reached counts as the time waited, a lower bound on TTFT; \"cut\" "
             "below). Goodput: requests per second with TTFT <= 1 s "
             "and a mean inter-token time (TPOT) <= 100 ms. CPU: user + system time of all the server's threads "
             f"per completion token. Reproduce: `{cmd}`.", "",
             "| load | Tandem tok/s | llama-server tok/s | ratio | TTFT p50 / p99 ms (Tandem) | TTFT p50 / p99 ms "
             "(llama-server) | ITL p50 / p99 ms (Tandem) | ITL p50 / p99 ms (llama-server) | goodput req/s "
             "(Tandem / llama-server) | CPU µs per token (Tandem / llama-server) | tokens per reply (Tandem / "
             "llama-server) | requests cut (Tandem / llama-server) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    headline = None
    for li, lv in enumerate(m["levels"]):
        r = median_row(t["runs"][li])
        q = median_row(l["runs"][li]) if l else None
        if lv.get("clients") == 64:
            headline = (r, q)
        dash = "-"
        lines.append(
            f"| {lv['label']} | {r['tok_s']:.0f} | {q['tok_s']:.0f} | {r['tok_s'] / q['tok_s']:.2f}x | " if q else
            f"| {lv['label']} | {r['tok_s']:.0f} | - | - | ")
        lines[-1] += (f"{r['ttft_p50_ms']:.0f} / {r['ttft_p99_ms']:.0f} | "
                      + (f"{q['ttft_p50_ms']:.0f} / {q['ttft_p99_ms']:.0f} | " if q else "- | ")
                      + f"{r['itl_p50_ms']:.1f} / {r['itl_p99_ms']:.1f} | "
                      + (f"{q['itl_p50_ms']:.1f} / {q['itl_p99_ms']:.1f} | " if q else "- | ")
                      + f"{r['goodput_rps']:.2f} / {q['goodput_rps'] if q else dash:{'.2f' if q else ''}} | "
                      + f"{r['cpu']['total_us']:.0f} / {q['cpu']['total_us'] if q else dash:{'.0f' if q else ''}} | "
                      + f"{r['mean_output_tokens']:.0f} / "
                      + (f"{q['mean_output_tokens']:.0f} | " if q else "- | ")
                      + f"{r['unfinished']:.0f} of {r['requests']:.0f} / "
                      + (f"{q['unfinished']:.0f} of {q['requests']:.0f} |" if q else "- |"))
    if headline and headline[1]:
        r, q = headline
        ratio = r["tok_s"] / q["tok_s"]
        lines += ["", f"Targets (issue 20), realistic mix at 64 clients: throughput >= 2x llama-server's: {ratio:.2f}x "
                  f"({met(ratio >= 2)}); p99 TTFT lower: {r['ttft_p99_ms']:.0f} vs {q['ttft_p99_ms']:.0f} ms "
                  f"({met(r['ttft_p99_ms'] < q['ttft_p99_ms'])})."]
    return lines


def named_markers(name):
    """The docs markers of a run published under --name (a second model's mix beside the default's)."""
    return f"<!-- serve-bench-{name}:begin -->", f"<!-- serve-bench-{name}:end -->"


def markdown(res, cmd):
    if res.get("name"):  # a named run is the realistic mix on another model, alone in its section
        begin, end = named_markers(res["name"])
        return "\n".join([begin, *mix_markdown(res, res.get("command", cmd)), "", f"![serving](bench/serve-{res['name']}.png)", "",
                          "Commands: " + "; ".join(f"`{v['command']}`" for v in res["mix"]["servers"].values()),
                          end])
    t, l = res["servers"].get("tandem"), res["servers"].get("llama-server")
    lines = [BEGIN, *(mix_markdown(res, cmd) + [""] if res.get("mix") else []),
             "## Serving, greedy and fixed-length: Tandem vs llama-server (issue 5)", "",
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
            if "cpu" in r64 and "cpu" in q64:
                c, d = r64["cpu"], q64["cpu"]
                share = c["total_us"] / d["total_us"] if d["total_us"] else float("inf")
                lines += ["", f"Server CPU per streamed token at 64 clients, one event per token (issue 20's restated "
                          f"target; user and system time from /proc/<pid>/task/*/stat): Tandem's threads outside the "
                          f"model spend **{c['outside_user_us']:.1f} µs of user time** (target <= 10: "
                          f"{met(c['outside_user_us'] <= 10)}) and {c['outside_sys_us']:.1f} µs of system time per "
                          f"token; all of Tandem's threads {c['total_us']:.0f} µs ({c['user_us']:.0f} user + "
                          f"{c['sys_us']:.0f} system) against llama-server's {d['total_us']:.0f} µs "
                          f"({d['user_us']:.0f} + {d['sys_us']:.0f}): {share:.2f}x (target <= 0.5x: "
                          f"{met(share <= 0.5)})."]
            s64 = t.get("sampled_64")
            if s64:
                cost = r64["tok_s"] / s64["tok_s"] - 1
                lines += ["", f"Sampling's cost (issue 20): the same 64 clients sampled (temperature 0.7, top_p 0.95, "
                          f"the same fixed lengths) stream {s64['tok_s']:.0f} tok/s against {r64['tok_s']:.0f} "
                          f"greedy: {100 * cost:+.1f}% time per token (target <= +10%: {met(cost <= 0.10)})"
                          + (f"; llama-server {l['sampled_64']['tok_s']:.0f} vs {q64['tok_s']:.0f}."
                             if l.get("sampled_64") else ".")]
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
              "The realistic mix's commands: " + "; ".join(f"`{v['command']}`" for v in res["mix"]["servers"].values())
              if res.get("mix") else "", "",
              "Server CPU outside the model = run time of every Tandem thread except `tandem-device` (step "
              "input, forward pass, sampling) and `tandem-compute` (its pool), from /proc/<pid>/task/*/schedstat, "
              "divided by the tokens streamed at that level. It includes the per-request work (HTTP parse, JSON, "
              "admission, tokenization, prefix lookup) spread over the request's tokens.",
              "", f"Commands: `{t['command']}`" + (f"; `{l['command']}`" if l else ""), END]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None, help="a GGUF file (default: the default model)")
    ap.add_argument("--clients", default="1,8,64,256")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--kv-tokens", type=int, default=65536)
    ap.add_argument("--mix-clients", default="64", help="closed-loop client counts of the realistic mix")
    ap.add_argument("--rates", default="0.25,0.5,1", help="Poisson arrival rates of the realistic mix, requests/s")
    ap.add_argument("--mix-seconds", type=float, default=30)
    ap.add_argument("--drain-seconds", type=float, default=400,
                    help="how long a mix level waits for the requests in flight after its last arrival")
    ap.add_argument("--mix-rounds", type=int, default=3)
    ap.add_argument("--mix-kv-tokens", type=int, default=131072)
    ap.add_argument("--skip-mix", action="store_true")
    ap.add_argument("--skip-greedy", action="store_true")
    ap.add_argument("--tandem", default=os.path.join(ROOT, "build", "bin", "tandem"))
    ap.add_argument("--llama-server", default=None, help="default: scripts/build-llama-server.sh")
    ap.add_argument("--only", choices=["tandem", "llama-server"], default=None,
                    help="run one server only; prints the results and leaves docs/ alone")
    ap.add_argument("--stream-interval", type=int, default=4,
                    help="also run Tandem at 64 clients with this --stream-interval (1: skip)")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    ap.add_argument("--from-json", help="re-render docs from a saved docs/bench/serve.json, running nothing")
    ap.add_argument("--name", help="publish the realistic mix alone as docs/bench/serve-NAME.* and its own section "
                    "(for --model runs; implies --skip-greedy)")
    a = ap.parse_args()
    if a.from_json:
        res = json.load(open(a.from_json))
        publish_run(res)
        return 0
    if a.name:
        a.skip_greedy = True
    a.clients = [int(c) for c in a.clients.split(",")]
    a.mix_clients = [int(c) for c in a.mix_clients.split(",")]
    a.rates = [float(r) for r in a.rates.split(",") if r]
    model = a.model or model_path()
    res = {"date": datetime.date.today().isoformat(), "cpu": cpu_name(), "threads": a.threads,
           "seconds": a.seconds, "max_tokens": a.max_tokens, "servers": {}}
    if a.name:
        res["name"], res["model_label"] = a.name, os.path.basename(model)
        res["command"] = " ".join(["python3", os.path.relpath(os.path.abspath(sys.argv[0]), ROOT), *sys.argv[1:]])
    exe = None
    if a.only != "tandem":
        exe = a.llama_server or subprocess.run([os.path.join(ROOT, "scripts", "build-llama-server.sh")],
                                               check=True, stdout=subprocess.PIPE, text=True).stdout.split()[-1]
    if not a.skip_mix and a.only != "llama-server":
        res["mix"] = bench_mix(a, model, exe)
    if not a.skip_greedy:
        if a.only != "llama-server":
            res["send_floor"] = loopback_send_floor()
            print(f"serve bench: loopback send floor: {res['send_floor']['system_us_per_send']:.1f} µs of system "
                  f"time per {res['send_floor']['payload_bytes']}-byte send to {res['send_floor']['clients']} readers",
                  flush=True)
            res["servers"]["tandem"] = bench_server("tandem", start_tandem, a.tandem, a, model)
            if a.stream_interval > 1 and 64 in a.clients:
                # The same 64 clients with several tokens per SSE chunk: what the per-token server
                # CPU is made of besides one event per token.
                b = argparse.Namespace(**vars(a))
                b.clients = [64]
                b.sampled_64 = False
                extra = ["--stream-interval", str(a.stream_interval)]
                res["stream_interval"] = a.stream_interval
                res["servers"]["tandem-interval"] = bench_server(
                    f"tandem --stream-interval {a.stream_interval}",
                    lambda *x: start_tandem(*x, extra=extra), a.tandem, b, model)
        if a.only != "tandem":
            res["servers"]["llama-server"] = bench_server("llama-server", start_llama_server, exe, a, model)
    complete = "mix" in res and (a.name or "tandem" in res["servers"])
    if a.no_write or a.only or not complete:  # a partial run replaces nothing
        print(json.dumps(res, indent=2))
        return 0
    publish_run(res)
    return 0


def publish_run(res):
    if res.get("name"):
        publish(f"serve-{res['name']}", res, plot, markdown, *named_markers(res["name"]))
    else:
        publish("serve", res, plot, markdown, BEGIN, END)


if __name__ == "__main__":
    sys.exit(main())
