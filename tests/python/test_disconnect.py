"""Clients that drop SSE streams abort their requests: after bursts of dropped curl streams
nothing runs and no KV block is held outside the prefix cache."""
import json
import socket
import subprocess
import time
from urllib.parse import urlparse

from conftest import Server


def test_dropped_sse_streams_abort(server):
    before = server.metrics()["tandem:requests_cancelled_total"]
    body = json.dumps({"prompt": "Count: 1, 2, 3,", "max_tokens": 2000, "ignore_eos": True, "stream": True})
    for burst in range(3):
        procs = [subprocess.Popen(["curl", "-sN", "--max-time", "1.5", "-H", "content-type: application/json",
                                   "-d", body, server.url + "/v1/completions"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(24)]
        for p in procs:
            p.wait()
        m = server.wait_idle()
        assert m["tandem:num_requests_running"] == 0, m
        assert m["tandem:num_requests_waiting"] == 0, m
        assert m["tandem:kv_blocks_used"] == 0, m
        assert m["tandem:requests_in_flight"] == 0, m
    assert server.metrics()["tandem:requests_cancelled_total"] >= before + 3 * 24



def test_a_slow_sse_reader_gets_every_event_in_order():
    """A client that stops reading fills its socket: the server's sends stop fitting (a small
    send buffer here, so that it happens well within the stream) and the rest waits in the
    session's asynchronous write. Once the client reads again, the stream arrives whole:
    every event parses, in order, ending with the usage and [DONE]."""
    server = Server("--send-buffer-bytes", "8192", "--log-level", "warn")
    try:
        raw = read_slowly(urlparse(server.url), pause_s=4)
    finally:
        server.stop()
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0] and b"chunked" in head.lower()
    data = unchunk(payload)
    events = [e[len(b"data: "):] for e in data.split(b"\n\n") if e]
    assert events[-1] == b"[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[-1]["usage"]["completion_tokens"] == 300
    tokens = sum(len(c["choices"][0]["logprobs"]["tokens"]) for c in chunks
                 if c["choices"] and c["choices"][0]["logprobs"])
    assert tokens == 300


def read_slowly(u, pause_s):
    """300 streamed tokens with logprobs (~120 KB of events), read only after pause_s."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    s.connect((u.hostname, u.port))
    body = json.dumps({"prompt": "Count: 1, 2, 3,", "max_tokens": 300, "ignore_eos": True, "stream": True,
                       "logprobs": 5, "stream_options": {"include_usage": True}}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Connection: close\r\n" + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    time.sleep(pause_s)
    raw = b""
    while chunk := s.recv(65536):
        raw += chunk
    s.close()
    return raw


def unchunk(payload):
    """The body of a chunked transfer encoding, checking its framing."""
    data, rest = b"", payload
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            assert rest == b"\r\n"
            return data
        data += rest[:size]
        assert rest[size:size + 2] == b"\r\n"
        rest = rest[size + 2:]
