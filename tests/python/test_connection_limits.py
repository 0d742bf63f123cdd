"""Open connections and slow clients are bounded: past --max-connections a new connection gets
a 503 and is closed at once, and a connection that does not deliver a whole request within
--timeout seconds (idle, or stalled halfway through its headers) is closed, freeing its slot.
Open mode (no API keys) off loopback needs --allow-open-non-loopback."""
import json
import socket
import time

import httpx
import pytest

from conftest import Server

TIMEOUT_S = 2


@pytest.fixture(scope="module")
def small_server():
    s = Server("--max-connections", "3", "--timeout", str(TIMEOUT_S), "--log-level", "warn")
    yield s
    s.stop()


def connect(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return s


def read_until_closed(s, limit_s):
    """Everything the server sends until it closes the connection (or limit_s passes)."""
    s.settimeout(limit_s)
    data = b""
    start = time.time()
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data, time.time() - start
        data += chunk


def rejections(server):
    return server.metrics().get('tandem:rejections_total{reason="overloaded"}', 0.0)


def test_connections_past_the_limit_get_503_and_idle_ones_time_out(small_server):
    before = rejections(small_server)
    idle = [connect(small_server) for _ in range(2)]
    stalled = connect(small_server)
    stalled.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finishes its headers
    time.sleep(0.3)  # the server has accepted all three

    extra = connect(small_server)
    reply, _ = read_until_closed(extra, 5)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503"), reply
    assert b"retry-after: 1" in head.lower()
    length = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    assert length == [len(body)], "the Content-Length must match the body"
    assert json.loads(body)["error"]["message"] == "too many open connections"

    # The idle and the stalled connection are closed once the timeout passes ...
    for s in idle + [stalled]:
        data, waited = read_until_closed(s, TIMEOUT_S + 10)
        assert waited <= TIMEOUT_S + 5
        assert b"200" not in data
        s.close()
    # ... which frees their slots.
    assert httpx.get(small_server.url + "/health", timeout=10).status_code == 200
    assert rejections(small_server) == before + 1


def test_open_mode_off_loopback_starts_only_when_allowed():
    """Without tenants or --api-key, `serve` on 0.0.0.0 refuses to start (a CLI test checks
    the message) unless --allow-open-non-loopback says so; then it serves without keys."""
    s = Server("--host", "0.0.0.0", "--allow-open-non-loopback", "--log-level", "warn")
    try:
        assert httpx.get(s.url + "/health", timeout=10).status_code == 200
        r = httpx.post(s.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=60)
        assert r.status_code == 200, r.text
    finally:
        s.stop()
