"""The WebSocket endpoint (/v1/ws, docs/websocket.md) with the Python websockets client:
several generations on one socket, cancel mid-prefill and mid-decode, errors, flow control."""
import json
import socket
import time

import httpx
from websockets.sync.client import connect

from conftest import Server


def ws_url(server):
    return server.url.replace("http://", "ws://") + "/v1/ws"


def recv(ws, timeout=120):
    return json.loads(ws.recv(timeout=timeout))


def collect(ws, ids):
    text = {i: "" for i in ids}
    done = {}
    while len(done) < len(ids):
        f = recv(ws)
        assert f["type"] in ("delta", "done"), f
        if f["type"] == "delta":
            assert f["id"] not in done
            text[f["id"]] += f["text"]
        else:
            done[f["id"]] = f
    return text, done


def test_concurrent_generations_on_one_socket(server):
    prompts = {"g1": "What is the capital of France?", "g2": "Name three colors.", "g3": "Count to five."}
    with connect(ws_url(server)) as ws:
        for gid, p in prompts.items():
            ws.send(json.dumps({"type": "start", "id": gid, "messages": [{"role": "user", "content": p}],
                                "max_tokens": 10, "temperature": 0}))
        text, done = collect(ws, list(prompts))
    for gid, p in prompts.items():
        assert done[gid]["finish_reason"] in ("stop", "length")
        assert done[gid]["usage"]["completion_tokens"] <= 10
        assert done[gid]["usage"]["prompt_tokens"] > 0
        http = httpx.post(server.url + "/v1/chat/completions", timeout=120,
                          json={"messages": [{"role": "user", "content": p}], "max_tokens": 10,
                                "temperature": 0}).json()
        assert text[gid] == http["choices"][0]["message"]["content"]


def test_cancel_mid_decode_frees_blocks(server):
    with connect(ws_url(server)) as ws:
        ws.send(json.dumps({"type": "start", "id": "long", "prompt": "Count: 1, 2, 3,", "max_tokens": 1000,
                            "ignore_eos": True}))
        deltas = 0
        while deltas < 3:
            f = recv(ws)
            assert f["type"] == "delta"
            deltas += 1
        ws.send(json.dumps({"type": "cancel", "id": "long"}))
        while True:
            f = recv(ws)
            if f["type"] == "done":
                break
        assert f["finish_reason"] == "cancelled"
        assert 3 <= f["usage"]["completion_tokens"] < 1000
    m = server.wait_idle()
    assert m["tandem:num_requests_running"] == 0
    assert m["tandem:kv_blocks_used"] == 0


def test_cancel_mid_prefill_frees_blocks(server):
    long_prompt = "The quick brown fox jumps over the lazy dog. " * 500  # ~5000 tokens: several prefill steps
    with connect(ws_url(server)) as ws:
        ws.send(json.dumps({"type": "start", "id": "p", "prompt": long_prompt, "max_tokens": 5}))
        deadline = time.time() + 60
        while time.time() < deadline:
            m = server.metrics()
            if m["tandem:num_requests_running"] >= 1 and m["tandem:kv_blocks_used"] > 0:
                break
            time.sleep(0.005)
        ws.send(json.dumps({"type": "cancel", "id": "p"}))
        f = recv(ws)
        assert f["type"] == "done", f  # no delta: it was still in prefill
        assert f["finish_reason"] == "cancelled"
        assert f["usage"]["completion_tokens"] == 0
    m = server.wait_idle()
    assert m["tandem:num_requests_running"] == 0
    assert m["tandem:kv_blocks_used"] == 0


def test_errors_keep_the_socket_open(server):
    with connect(ws_url(server)) as ws:
        ws.send("not json")
        f = recv(ws)
        assert f["type"] == "error" and f["status"] == 400
        ws.send(json.dumps({"type": "start", "id": "x", "messages": [{"role": "user", "content": "hi"}],
                            "temperature": 9}))
        f = recv(ws)
        assert f["type"] == "error" and f["id"] == "x" and f["param"] == "temperature"
        ws.send(json.dumps({"type": "cancel", "id": "nope"}))
        assert recv(ws)["status"] == 404
        ws.send(json.dumps({"type": "start", "id": "ok", "messages": [{"role": "user", "content": "hi"}],
                            "max_tokens": 3}))
        _, done = collect(ws, ["ok"])
        assert done["ok"]["usage"]["completion_tokens"] <= 3


def test_closing_the_socket_cancels_everything(server):
    ws = connect(ws_url(server))
    for i in range(4):
        ws.send(json.dumps({"type": "start", "id": f"g{i}", "prompt": "Count: 1, 2,", "max_tokens": 1000,
                            "ignore_eos": True}))
    assert recv(ws)["type"] == "delta"
    ws.close()
    m = server.wait_idle()
    assert m["tandem:num_requests_running"] == 0
    assert m["tandem:kv_blocks_used"] == 0


def test_a_client_that_stops_reading_pauses_the_socket_reads():
    """The session stops reading frames while more than --max-pending-output-bytes of its
    output waits to be sent, and cancels the generations that go on producing once twice that
    waits, so a client that does not read cannot make the server hold ever more. Twelve
    generations would queue about 100 KB behind a client that reads nothing (a 16 KB limit and
    small socket buffers on both sides): those that overflow are cancelled with an error frame;
    a start sent meanwhile is not read, so it does not run, until the client reads again.
    Then every frame arrives, in order, and each generation's tokens add up to its usage."""
    server = Server("--send-buffer-bytes", "8192", "--max-pending-output-bytes", "16384", "--log-level", "warn")
    try:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
        sock.connect(("127.0.0.1", server.port))
        with connect(ws_url(server), sock=sock, max_size=None) as ws:
            ids = [f"g{i}" for i in range(12)]
            for gid in ids:
                ws.send(json.dumps({"type": "start", "id": gid, "prompt": "Count: 1, 2, 3,", "max_tokens": 120,
                                    "ignore_eos": True, "temperature": 0}))
            # Their tokens are all generated (and their output queued) without being read.
            deadline = time.time() + 120
            while time.time() < deadline:
                m = server.metrics()
                if m["tandem:requests_in_flight"] == 0 and m["tandem:num_requests_running"] == 0:
                    break
                time.sleep(0.1)
            assert m["tandem:requests_in_flight"] == 0, m
            # The read already waiting when the queue filled takes one more frame (a cancel for
            # nothing, answered with an error frame); the frame after it waits in the socket.
            ws.send(json.dumps({"type": "cancel", "id": "nothing"}))
            ws.send(json.dumps({"type": "start", "id": "late", "prompt": "Count: 1, 2, 3,", "max_tokens": 2000,
                                "ignore_eos": True}))
            time.sleep(1.5)
            m = server.metrics()
            assert m["tandem:requests_in_flight"] == 0 and m["tandem:num_requests_running"] == 0, \
                "the session read a frame while its output queue was full"

            # Reading again drains the queue; the late start is read and runs.
            tokens = {gid: 0 for gid in ids}
            done = {}
            errors = []
            overflowed = set()
            while len(done) < len(ids) or not errors:
                f = recv(ws)
                assert f["type"] in ("delta", "done", "error"), f
                if f["type"] == "error":
                    if f["id"] == "nothing":
                        assert f["status"] == 404, f
                        errors.append(f)
                    else:
                        assert f["status"] == 503 and "read slower" in f["message"], f
                        overflowed.add(f["id"])
                elif f["type"] == "delta":
                    assert f["id"] not in done, "a delta after its generation's final frame"
                    tokens[f["id"]] += len(f["tokens"])
                else:
                    done[f["id"]] = f
            assert overflowed, "nothing was cancelled although ~100 KB waited behind a 16 KB limit"
            for gid in ids:
                assert tokens[gid] == done[gid]["usage"]["completion_tokens"], "every token arrives in some delta"
                if gid in overflowed:  # unless it ended before the cancel reached it
                    assert done[gid]["finish_reason"] in ("cancelled", "length")
                else:
                    assert done[gid]["usage"]["completion_tokens"] == 120
            f = recv(ws)
            assert f["id"] == "late" and f["type"] == "delta", f
            ws.send(json.dumps({"type": "cancel", "id": "late"}))
            while f["type"] != "done":
                f = recv(ws)
            assert f["id"] == "late" and f["finish_reason"] == "cancelled"
    finally:
        server.stop()
