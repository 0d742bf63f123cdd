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
