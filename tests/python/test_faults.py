"""Faults the server survives, injected with TANDEM_FAULTS (engine/platform/fault_injection.h):
a forward pass that throws, a device worker that dies, a streamer that dies. Each time the
affected requests end with a 500 in OpenAI's shape, nothing leaks, and the next request is
served."""
import os
import tempfile
import textwrap

import httpx
import pytest

from conftest import Server


def complete(server, max_tokens=8, key=None):
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.post(server.url + "/v1/completions", timeout=120, headers=headers,
                      json={"prompt": "Count: 1, 2, 3,", "max_tokens": max_tokens, "ignore_eos": True,
                            "temperature": 0})


def expect_500(r, words):
    assert r.status_code == 500, r.text
    err = r.json()["error"]
    assert err["type"] == "server_error" or err["type"] == "internal_server_error" or err["type"], err
    assert words in err["message"], err


def test_a_forward_pass_that_throws_ends_its_requests_and_the_worker_goes_on():
    s = Server("--log-level", "error", env={"TANDEM_FAULTS": "device.forward:5"})
    try:
        expect_500(complete(s, 40), "forward pass failed")
        m = s.wait_idle()
        assert m["tandem:kv_blocks_used"] == 0
        r = complete(s, 6)
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 6
    finally:
        s.stop()


def test_a_device_worker_that_dies_is_restarted():
    s = Server("--log-level", "error", env={"TANDEM_FAULTS": "device.die:5"})
    try:
        expect_500(complete(s, 40), "device worker failed")
        m = s.wait_idle()
        assert m["tandem:kv_blocks_used"] == 0
        assert m["tandem:device_restarts_total"] == 1
        for _ in range(2):  # a fresh worker: no stale KV behind the prefix cache either
            r = complete(s, 6)
            assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 6
        solo = Server("--log-level", "error")
        try:
            want = complete(solo, 6).json()["choices"][0]["text"]
        finally:
            solo.stop()
        assert r.json()["choices"][0]["text"] == want, "the restarted worker computes what a fresh server does"
    finally:
        s.stop()


def test_a_streamer_that_dies_gives_back_its_slots():
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write("tenants:\n  - name: one\n    api_keys: [sk-one]\n    max_concurrent_requests: 1\n")
    s = Server("--config", f.name, "--log-level", "error", env={"TANDEM_FAULTS": "streamer.tokens:2"})
    try:
        expect_500(complete(s, 40, key="sk-one"), "streamer failed")
        m = s.wait_idle()
        assert m["tandem:requests_in_flight"] == 0 and m["tandem:kv_blocks_used"] == 0
        r = complete(s, 4, key="sk-one")  # the tenant's one slot is free again
        assert r.status_code == 200, r.text
    finally:
        s.stop()
        os.unlink(f.name)


def test_sigterm_drains_then_exits_zero():
    """SIGTERM: no new work; a running request finishes within --shutdown-timeout, a longer
    one is cancelled then, and both streams get their final events; exit status 0."""
    import json
    import signal
    import threading
    import time

    s = Server("--shutdown-timeout", "3", "--log-level", "warn")
    results = {}

    def stream(name, max_tokens):
        events = []
        with httpx.stream("POST", s.url + "/v1/completions", timeout=60,
                          json={"prompt": "Count: 1, 2, 3,", "max_tokens": max_tokens, "ignore_eos": True,
                                "stream": True}) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(line[6:])
        results[name] = events

    try:
        threads = [threading.Thread(target=stream, args=("short", 40)),
                   threading.Thread(target=stream, args=("long", 5000))]
        for t in threads:
            t.start()
        time.sleep(1.0)
        t0 = time.time()
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        try:
            refused = httpx.post(s.url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}, timeout=5)
            assert refused.status_code == 503, refused.text
        except httpx.ConnectError:
            pass  # the listener is closed: refused before HTTP
        for t in threads:
            t.join(30)
        assert s.proc.wait(30) == 0
        assert time.time() - t0 < 12
        for name, want in (("short", "length"), ("long", "stop")):
            ev = results[name]
            assert ev and ev[-1] == "[DONE]", (name, ev[-3:])
            last = json.loads(ev[-2])
            assert last["choices"][0]["finish_reason"] == want, (name, last)
    finally:
        if s.proc.poll() is None:
            s.stop()
