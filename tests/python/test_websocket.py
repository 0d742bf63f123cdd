"""The WebSocket endpoint (/v1/ws, docs/websocket.md) with the Python websockets client:
several generations on one socket, cancel mid-prefill and mid-decode, errors."""
import json
import time

import httpx
from websockets.sync.client import connect


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
