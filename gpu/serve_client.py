#!/usr/bin/env python3
"""A driver for a running `tandem serve` that needs only Python's standard library (the GPU
machine has no package registry): http.client for HTTP and SSE, and a small RFC 6455
WebSocket client on a socket.

  serve_client.py check   --url URL [--greedy-out FILE] [--only a,b] [--skip a,b]
  serve_client.py compare A.json B.json [--tie-nats 0.5]
  serve_client.py bench   --url URL [--clients 64,256] [--seconds 30] [--drain-seconds 60] [--out FILE]

check: functional cases, each printing PASS or FAIL with its reason (exit status 1 on any
FAIL): health and models; a chat completion; SSE streaming with include_usage; sampling
(temperature, top_k, top_p, frequency and presence penalties, seed); logprobs with
top_logprobs, greedy and sampled; logit bias; response_format json_schema (the reply parses
and matches the schema); tools with tool_choice required (a parsed call comes back); a
WebSocket generation cancelled in its prefill (docs/websocket.md: a done frame with
finish_reason cancelled and no tokens, KV blocks back in the pool, the socket and the server
still serving); GET /metrics with the tandem: series. With --greedy-out, greedy answers (text,
token bytes, logprob and top-5 alternatives per position) to fixed prompts go to a JSON file.

compare: two such files (a CPU and a GPU server on the same model file): per case the common
prefix and, at the first difference, whether it is a near tie (each token within --tie-nats
of the other in the other's top-5), which numerics may legitimately break either way. Exit
status 1 when a case diverges by more than that.

bench: closed-loop clients with bench/serve_bench.py's realistic mix (unique chat prompts of
20-1,000 tokens, outputs of 64/128/256 tokens, sampled at temperature 0.7 and top_p 0.95),
reporting output tokens/s, TTFT and ITL p50/p99 per client count (asyncio, standard library).
"""
import argparse
import base64
import hashlib
import http.client
import json
import os
import socket
import struct
import sys
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- HTTP ------------------------------------------------------------------------------------

class Http:
    def __init__(self, url, timeout=120):
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.timeout = u.hostname, u.port or 80, timeout

    def request(self, method, path, body=None):
        """(status, headers, parsed JSON or text)."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
            r = c.getresponse()
            raw = r.read().decode("utf-8", "replace")
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw
            return r.status, dict(r.getheaders()), parsed
        finally:
            c.close()

    def post(self, path, body):
        return self.request("POST", path, body)

    def get(self, path):
        return self.request("GET", path)

    def stream(self, path, body):
        """(status, list of SSE data payloads as received, [DONE] included)."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            c.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                return r.status, [r.read().decode("utf-8", "replace")]
            events = []
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.strip()
                if line.startswith(b"data:"):
                    events.append(line[5:].strip().decode())
                    if events[-1] == "[DONE]":
                        break
            return r.status, events
        finally:
            c.close()

    def metrics(self):
        _, _, text = self.get("/metrics")
        out = {}
        for line in str(text).splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
        return out


# --- a minimal WebSocket client (RFC 6455: client frames masked, no extensions) ----------------

class WebSocket:
    GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    def __init__(self, host, port, path, timeout=60):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed during the handshake")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if " 101 " not in lines[0] + " ":
            raise ConnectionError(f"upgrade refused: {lines[0]}")
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        want = base64.b64encode(hashlib.sha1((key + self.GUID).encode()).digest()).decode()
        if headers.get("sec-websocket-accept") != want:
            raise ConnectionError("bad Sec-WebSocket-Accept")

    def _send_frame(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send(self, obj):
        self._send_frame(0x1, json.dumps(obj).encode())

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("socket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self, timeout=60):
        """The next text message as JSON (pings answered, fragments joined)."""
        self.sock.settimeout(timeout)
        message, opcode0 = b"", None
        while True:
            b0, b1 = self._read(2)
            fin, opcode, n = b0 & 0x80, b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            if opcode == 0x8:
                raise ConnectionError(f"server closed the socket: {payload[2:].decode(errors='replace')}")
            if opcode != 0x0:
                opcode0 = opcode
            message += payload
            if fin:
                if opcode0 != 0x1:
                    raise ConnectionError(f"unexpected opcode {opcode0}")
                return json.loads(message)

    def close(self):
        try:
            self._send_frame(0x8, struct.pack("!H", 1000))
        except OSError:
            pass
        self.sock.close()


# --- the functional cases ----------------------------------------------------------------------

class Failure(Exception):
    pass


def require(cond, why):
    if not cond:
        raise Failure(why)


def chat_body(content, **extra):
    return {"model": "default", "messages": [{"role": "user", "content": content}], **extra}


def ok_chat(http, body):
    status, _, r = http.post("/v1/chat/completions", body)
    require(status == 200, f"HTTP {status}: {str(r)[:300]}")
    require(isinstance(r, dict) and r.get("choices"), f"no choices: {str(r)[:300]}")
    return r


def case_health(http, ctx):
    status, _, r = http.get("/health")
    require(status == 200, f"/health answered {status}: {r}")
    status, _, m = http.get("/v1/models")
    require(status == 200 and m.get("data"), f"/v1/models answered {status}: {str(m)[:200]}")
    ctx["max_model_len"] = int(m["data"][0].get("max_model_len") or 2048)
    return f"max_model_len {ctx['max_model_len']}"


def case_chat(http, ctx):
    r = ok_chat(http, chat_body("Write one sentence about the sea.", max_tokens=16, temperature=0))
    ch = r["choices"][0]
    require(isinstance(ch["message"].get("content"), str), f"no content: {ch}")
    require(ch["finish_reason"] in ("stop", "length"), f"finish_reason {ch['finish_reason']}")
    u = r.get("usage") or {}
    require(0 < u.get("completion_tokens", 0) <= 16, f"usage {u}")
    require(u.get("total_tokens") == u.get("prompt_tokens", 0) + u["completion_tokens"], f"usage {u}")
    ctx["greedy_text"] = ch["message"]["content"]
    return f"{u['completion_tokens']} tokens, finish {ch['finish_reason']}"


def case_stream(http, ctx):
    body = chat_body("Write one sentence about the sea.", max_tokens=16, temperature=0, stream=True,
                     stream_options={"include_usage": True})
    status, events = http.stream("/v1/chat/completions", body)
    require(status == 200, f"HTTP {status}: {events[:1]}")
    require(events and events[-1] == "[DONE]", "the stream did not end with [DONE]")
    chunks = [json.loads(e) for e in events[:-1]]
    require(all(c.get("object") == "chat.completion.chunk" for c in chunks), "a chunk is not a chat.completion.chunk")
    text = "".join((ch.get("delta") or {}).get("content") or "" for c in chunks for ch in c.get("choices") or [])
    finishes = [ch.get("finish_reason") for c in chunks for ch in c.get("choices") or [] if ch.get("finish_reason")]
    require(finishes and finishes[-1] in ("stop", "length"), f"finish reasons {finishes}")
    last = chunks[-1]
    require(last.get("choices") == [] and last.get("usage"), f"no usage chunk last: {str(last)[:200]}")
    n = last["usage"]["completion_tokens"]
    require(0 < n <= 16, f"usage {last['usage']}")
    same = text == ctx.get("greedy_text")
    return f"{len(chunks)} chunks, {n} tokens, same text as unstreamed: {'yes' if same else 'no'}"


SAMPLED = dict(temperature=0.8, top_k=40, top_p=0.9, frequency_penalty=0.5, presence_penalty=0.3, seed=11)


def case_sampled(http, ctx):
    body = chat_body("Name three colours.", max_tokens=24, **SAMPLED)
    a = ok_chat(http, body)
    b = ok_chat(http, body)
    for r in (a, b):
        require(0 < r["usage"]["completion_tokens"] <= 24, f"usage {r['usage']}")
    two = ok_chat(http, {**body, "n": 2})
    require(len(two["choices"]) == 2, f"n=2 gave {len(two['choices'])} choices")
    same = a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]
    return f"{a['usage']['completion_tokens']} tokens; seed repeats its text: {'yes' if same else 'no'}"


def check_logprobs(content, top_n, greedy):
    require(content, "no logprobs content")
    for k, e in enumerate(content):
        require(e["logprob"] <= 1e-6, f"position {k}: logprob {e['logprob']} > 0")
        tops = e["top_logprobs"]
        require(len(tops) == top_n, f"position {k}: {len(tops)} alternatives, asked {top_n}")
        lps = [t["logprob"] for t in tops]
        require(lps == sorted(lps, reverse=True), f"position {k}: alternatives not best first: {lps}")
        if greedy and tops:  # the argmax is the best alternative
            require(abs(tops[0]["logprob"] - e["logprob"]) < 1e-4,
                    f"position {k}: greedy token's logprob {e['logprob']} is not the best {tops[0]['logprob']}")
        if tops and e["logprob"] > tops[-1]["logprob"] + 1e-4:
            require(any(t["bytes"] == e["bytes"] for t in tops), f"position {k}: a token above the last "
                                                                 f"alternative is not listed")


def case_logprobs(http, ctx):
    r = ok_chat(http, chat_body("Write one sentence about the sea.", max_tokens=12, temperature=0, logprobs=True,
                                top_logprobs=5))
    check_logprobs(r["choices"][0]["logprobs"]["content"], 5, True)
    s = ok_chat(http, chat_body("Write one sentence about the sea.", max_tokens=12, logprobs=True, top_logprobs=3,
                                **SAMPLED))
    check_logprobs(s["choices"][0]["logprobs"]["content"], 3, False)
    n = len(r["choices"][0]["logprobs"]["content"])
    require(n == r["usage"]["completion_tokens"], f"{n} logprob entries for {r['usage']['completion_tokens']} tokens")
    return "greedy top-5 and sampled top-3 consistent"


def case_logit_bias(http, ctx):
    status, _, t = http.post("/tokenize", {"prompt": "x"})
    require(status == 200 and t.get("tokens"), f"/tokenize: {status} {t}")
    tok = t["tokens"][-1]
    r = ok_chat(http, chat_body("Say something.", max_tokens=6, temperature=0, logit_bias={str(tok): 100},
                                logprobs=True))
    content = r["choices"][0]["logprobs"]["content"]
    require(len(content) == 6, f"{len(content)} tokens, wanted 6")
    got = [e["token"] for e in content]
    require(all(g == "x" for g in got), f"+100 bias on 'x' ({tok}) gave {got}")
    # Log-probabilities are of the model's own distribution, before the bias.
    require(all(e["logprob"] <= 1e-6 for e in content), "logprob > 0")
    ban = ok_chat(http, chat_body("Say something.", max_tokens=6, temperature=0, logit_bias={str(tok): -100},
                                  logprobs=True, top_logprobs=1))
    require(all(e["token"] != "x" for e in ban["choices"][0]["logprobs"]["content"]),
            "a -100 bias did not ban the token")
    return f"token {tok} forced by +100 (raw logprobs {content[0]['logprob']:.3f}...), banned by -100"


CHOICE_SCHEMA = {
    "type": "object",
    "properties": {"colour": {"type": "string", "enum": ["red", "green", "blue"]}, "ok": {"type": "boolean"},
                   "size": {"type": "integer", "minimum": 1, "maximum": 9}},
    "required": ["colour", "ok", "size"],
    "additionalProperties": False,
}


def matches_choice_schema(v):
    return (isinstance(v, dict) and set(v) == {"colour", "ok", "size"} and v["colour"] in ("red", "green", "blue")
            and isinstance(v["ok"], bool) and isinstance(v["size"], int) and not isinstance(v["size"], bool)
            and 1 <= v["size"] <= 9)


def case_json_schema(http, ctx):
    fmt = {"type": "json_schema", "json_schema": {"name": "choice", "schema": CHOICE_SCHEMA, "strict": True}}
    out = []
    for body in (chat_body("Pick a colour as JSON.", max_tokens=120, temperature=0, response_format=fmt),
                 chat_body("Pick a colour as JSON.", max_tokens=120, response_format=fmt, **SAMPLED)):
        ch = ok_chat(http, body)["choices"][0]
        require(ch["finish_reason"] == "stop", f"finish_reason {ch['finish_reason']}: {ch['message']['content']!r}")
        try:
            v = json.loads(ch["message"]["content"])
        except ValueError as e:
            raise Failure(f"reply is not JSON ({e}): {ch['message']['content']!r}")
        require(matches_choice_schema(v), f"reply does not match the schema: {v}")
        out.append(json.dumps(v, separators=(",", ":")))
    return "greedy " + out[0] + ", sampled " + out[1]


TIME_TOOL = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
                   "required": ["zone"], "additionalProperties": False}}}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]}},
                   "required": ["city"], "additionalProperties": False}}}


def case_tools(http, ctx):
    out = []
    for extra in ({"temperature": 0}, SAMPLED):
        r = ok_chat(http, chat_body("What time is it?", max_tokens=80, tools=[TIME_TOOL, WEATHER_TOOL],
                                    tool_choice="required", **extra))
        ch = r["choices"][0]
        require(ch["finish_reason"] == "tool_calls", f"finish_reason {ch['finish_reason']}: {str(ch)[:300]}")
        calls = ch["message"].get("tool_calls") or []
        require(calls, f"no tool_calls: {str(ch)[:300]}")
        fn = calls[0]["function"]
        args = json.loads(fn["arguments"])
        if fn["name"] == "get_time":
            require(args.get("zone") in ("UTC", "CET"), f"arguments {args}")
        else:
            require(fn["name"] == "get_weather" and args.get("city") in ("Paris", "Oslo"), f"call {fn}")
        out.append(f"{fn['name']}({json.dumps(args)})")
    return ", ".join(out)


def wait_for(http, pred, timeout):
    deadline = time.time() + timeout
    m = http.metrics()
    while time.time() < deadline:
        m = http.metrics()
        if pred(m):
            return True, m
        time.sleep(0.005)
    return False, m


def idle(m):
    return (m.get("tandem:num_requests_running", 1) == 0 and m.get("tandem:num_requests_waiting", 1) == 0
            and m.get("tandem:kv_blocks_used", 1) == 0)


def case_ws_cancel(http, ctx):
    status, _, t = http.post("/tokenize", {"prompt": "The quick brown fox jumps over the lazy dog. "})
    require(status == 200, f"/tokenize: {status}")
    per = max(1, t["count"])
    # A prompt of most of the context: several prefill steps at the server's token budget.
    reps = max(1, int(0.8 * ctx.get("max_model_len", 2048)) // per)
    prompt = "The quick brown fox jumps over the lazy dog. " * reps
    ws = WebSocket(http.host, http.port, "/v1/ws")
    try:
        ws.send({"type": "start", "id": "p", "prompt": prompt, "max_tokens": 4})
        started, _ = wait_for(http, lambda m: m.get("tandem:num_requests_running", 0) >= 1
                              and m.get("tandem:kv_blocks_used", 0) > 0, 60)
        require(started, "the generation never started")
        ws.send({"type": "cancel", "id": "p"})
        f = ws.recv(60)
        require(f["type"] == "done", f"first frame after the cancel: {str(f)[:200]} (the prefill had ended)")
        require(f["finish_reason"] == "cancelled", f"finish_reason {f.get('finish_reason')}")
        require(f["usage"]["completion_tokens"] == 0, f"usage {f['usage']}")
        ok, m = wait_for(http, idle, 60)
        require(ok, f"not idle after the cancel: running {m.get('tandem:num_requests_running')}, "
                    f"kv_blocks_used {m.get('tandem:kv_blocks_used')}")
        ws.send({"type": "start", "id": "after", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
                 "temperature": 0})
        text, done = "", None
        while done is None:
            f = ws.recv(120)
            require(f.get("id") == "after", f"unexpected frame {str(f)[:200]}")
            if f["type"] == "delta":
                text += f.get("text", "")
            elif f["type"] == "done":
                done = f
            else:
                raise Failure(f"frame {str(f)[:200]}")
        require(done["finish_reason"] in ("stop", "length") and done["usage"]["completion_tokens"] > 0,
                f"the next generation on the socket: {done}")
    finally:
        ws.close()
    ok_chat(http, chat_body("Hi", max_tokens=2))
    return f"prompt of ~{reps * per} tokens cancelled in prefill; socket and server kept serving"


METRIC_SERIES = ["tandem:time_to_first_token_seconds_bucket", "tandem:inter_token_latency_seconds_bucket",
                 "tandem:request_queue_time_seconds_count", 'tandem:requests_total{tenant="default",status="200"}',
                 'tandem:prompt_tokens_total{tenant="default"}', 'tandem:generation_tokens_total{tenant="default"}',
                 "tandem:num_requests_running", "tandem:num_requests_waiting", "tandem:kv_blocks_total",
                 "tandem:kv_blocks_used", "tandem:kv_blocks_free", "tandem:kv_cache_usage_ratio",
                 "tandem:prefix_cache_queries_total", "tandem:requests_cancelled_total",
                 "tandem:scheduler_steps_total"]


def case_metrics(http, ctx):
    m = http.metrics()
    missing = [s for s in METRIC_SERIES if not any(k == s or k.startswith(s + "{") for k in m)]
    require(not missing, f"missing series: {missing}")
    require(m["tandem:kv_blocks_total"] > 0, "kv_blocks_total is 0")
    require(m["tandem:scheduler_steps_total"] > 0, "no scheduler steps counted")
    require(m['tandem:generation_tokens_total{tenant="default"}'] > 0, "no generated tokens counted")
    if "ws_cancel" in ctx.get("passed", ()):
        require(m["tandem:requests_cancelled_total"] >= 1, "the cancel was not counted")
    return f"{len(METRIC_SERIES)} series; {int(m['tandem:kv_blocks_total'])} KV blocks"


CASES = [("health", case_health), ("chat", case_chat), ("stream", case_stream), ("sampled", case_sampled),
         ("logprobs", case_logprobs), ("logit_bias", case_logit_bias), ("json_schema", case_json_schema),
         ("tools", case_tools), ("ws_cancel", case_ws_cancel), ("metrics", case_metrics)]


# --- greedy answers for a CPU/GPU comparison -----------------------------------------------------

GREEDY_PROMPTS = ["Write one sentence about the sea.", "List three fruits.", "What is 2 + 2?",
                  "Tell a short story about a lighthouse keeper.", "Translate 'good morning' to French.",
                  "Describe a cat in five words."]


def record_greedy(http, path, max_tokens=32):
    cases = []
    for i, prompt in enumerate(GREEDY_PROMPTS):
        body = chat_body(prompt, max_tokens=max_tokens, temperature=0, logprobs=True, top_logprobs=5)
        r = ok_chat(http, body)
        ch = r["choices"][0]
        cases.append({"name": f"chat{i}", "prompt": prompt, "text": ch["message"]["content"],
                      "finish_reason": ch["finish_reason"],
                      "positions": [{"bytes": e["bytes"], "logprob": e["logprob"],
                                     "top": [[t["bytes"], t["logprob"]] for t in e["top_logprobs"]]}
                                    for e in ch["logprobs"]["content"]]})
    with open(path, "w") as f:
        json.dump({"url": f"http://{http.host}:{http.port}", "cases": cases}, f, indent=1)
    return len(cases)


def compare_files(a_path, b_path, tie_nats):
    a, b = (json.load(open(p)) for p in (a_path, b_path))
    worst = 0
    by_name = {c["name"]: c for c in b["cases"]}
    for ca in a["cases"]:
        cb = by_name.get(ca["name"])
        if cb is None:
            print(f"DIFF {ca['name']}: missing from {b_path}")
            worst = 2
            continue
        pa, pb = ca["positions"], cb["positions"]
        k = 0
        while k < min(len(pa), len(pb)) and pa[k]["bytes"] == pb[k]["bytes"]:
            k += 1
        if k == len(pa) == len(pb):
            print(f"SAME {ca['name']}: {len(pa)} tokens identical")
            continue
        if k == min(len(pa), len(pb)):
            print(f"DIFF {ca['name']}: one answer ends at {k} tokens, the other has {max(len(pa), len(pb))}")
            worst = max(worst, 1)
            continue

        def gap(p, other_bytes):  # how far below p's own token the other one ranks, in nats
            for tb, lp in p["top"]:
                if tb == other_bytes:
                    return p["logprob"] - lp
            return float("inf")

        g = max(gap(pa[k], pb[k]["bytes"]), gap(pb[k], pa[k]["bytes"]))
        tie = g <= tie_nats
        print(f"{'TIE ' if tie else 'DIFF'} {ca['name']}: same first {k} tokens; then {bytes(pa[k]['bytes'])!r} vs "
              f"{bytes(pb[k]['bytes'])!r}, gap {g:.4f} nats ({'a near tie' if tie else 'beyond ' + str(tie_nats)}); "
              f"logprob at 0: {pa[0]['logprob']:.4f} vs {pb[0]['logprob']:.4f}")
        worst = max(worst, 0 if tie else 1)
    return worst


# --- the benchmark -------------------------------------------------------------------------------

def bench(url, clients, seconds, drain_s, first_request):
    """bench/serve_bench.py's realistic mix, closed loop, per client count."""
    import asyncio
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import serve_bench  # standard library only (asyncio)
    port = urllib.parse.urlsplit(url).port
    rows, k = [], first_request
    for n in clients:
        r = asyncio.run(serve_bench.run_mix(port, k, seconds, n_clients=n, drain_s=drain_s))
        k += 100000
        r["clients"] = n
        rows.append(r)
        print(f"bench {n} clients: {r['tok_s']:.1f} output tok/s, {r['requests']} requests "
              f"({r['unfinished']} unfinished, {r['errors']} errors), TTFT p50 {r['ttft_p50_ms']:.0f} ms "
              f"p99 {r['ttft_p99_ms']:.0f} ms, ITL p50 {r['itl_p50_ms']:.1f} ms p99 {r['itl_p99_ms']:.1f} ms",
              flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--url", required=True)
    c.add_argument("--greedy-out")
    c.add_argument("--only", default="")
    c.add_argument("--skip", default="")
    c.add_argument("--timeout", type=float, default=300, help="seconds per HTTP request")
    d = sub.add_parser("compare")
    d.add_argument("a")
    d.add_argument("b")
    d.add_argument("--tie-nats", type=float, default=0.5)
    b = sub.add_parser("bench")
    b.add_argument("--url", required=True)
    b.add_argument("--clients", default="64,256")
    b.add_argument("--seconds", type=float, default=30)
    b.add_argument("--drain-seconds", type=float, default=60)
    b.add_argument("--first-request", type=int, default=0)
    b.add_argument("--out")
    a = ap.parse_args()

    if a.cmd == "compare":
        sys.exit(compare_files(a.a, a.b, a.tie_nats))
    if a.cmd == "bench":
        rows = bench(a.url, [int(x) for x in a.clients.split(",") if x], a.seconds, a.drain_seconds, a.first_request)
        if a.out:
            with open(a.out, "w") as f:
                json.dump(rows, f, indent=1)
        sys.exit(0 if all(r["requests"] > 0 and r["errors"] == 0 for r in rows) else 1)

    http = Http(a.url, a.timeout)
    only = {x for x in a.only.split(",") if x}
    skip = {x for x in a.skip.split(",") if x}
    ctx, failed = {"passed": set()}, 0
    for name, fn in CASES:
        if (only and name not in only and name != "health") or name in skip:
            continue
        t0 = time.time()
        try:
            note = fn(http, ctx)
            ctx["passed"].add(name)
            print(f"PASS {name} ({time.time() - t0:.1f} s): {note}", flush=True)
        except Failure as e:
            failed += 1
            print(f"FAIL {name} ({time.time() - t0:.1f} s): {e}", flush=True)
        except Exception as e:  # a crash of the case is a failure with its reason
            failed += 1
            print(f"FAIL {name} ({time.time() - t0:.1f} s): {type(e).__name__}: {e}", flush=True)
    if a.greedy_out:
        try:
            n = record_greedy(http, a.greedy_out)
            print(f"PASS greedy_record: {n} answers in {a.greedy_out}", flush=True)
        except Exception as e:
            failed += 1
            print(f"FAIL greedy_record: {type(e).__name__}: {e}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
