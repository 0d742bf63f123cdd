"""Faults the server survives, injected with TANDEM_FAULTS (engine/platform/fault_injection.h):
a forward pass that throws, a device worker that dies, a streamer that dies. Each time the
affected requests end with a 500 in OpenAI's shape, nothing leaks, and the next request is
served."""
import httpx

from conftest import Server, temp_file


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


def expect_fault_leaves_nothing_held(server, words, key=None):
    """A 40-token request the fault ends with a 500 naming words; then no KV block is held.
    Returns the metrics once the server is idle."""
    expect_500(complete(server, 40, key=key), words)
    m = server.wait_idle()
    assert m["tandem:kv_blocks_used"] == 0
    return m


def expect_served(server, max_tokens):
    r = complete(server, max_tokens)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == max_tokens
    return r


def test_a_forward_pass_that_throws_ends_its_requests_and_the_worker_goes_on():
    with Server("--log-level", "error", env={"TANDEM_FAULTS": "device.forward:5"}) as s:
        expect_fault_leaves_nothing_held(s, "forward pass failed")
        expect_served(s, 6)


def test_a_device_worker_that_dies_is_restarted():
    with Server("--log-level", "error", env={"TANDEM_FAULTS": "device.die:5"}) as s:
        m = expect_fault_leaves_nothing_held(s, "device worker failed")
        assert m["tandem:device_restarts_total"] == 1
        for _ in range(2):  # a fresh worker: no stale KV behind the prefix cache either
            r = expect_served(s, 6)
        with Server("--log-level", "error") as solo:
            want = complete(solo, 6).json()["choices"][0]["text"]
        assert r.json()["choices"][0]["text"] == want, "the restarted worker computes what a fresh server does"


def test_a_streamer_that_dies_gives_back_its_slots():
    tenants = "tenants:\n  - name: one\n    api_keys: [sk-one]\n    max_concurrent_requests: 1\n"
    with temp_file(tenants) as path, Server("--config", path, "--log-level", "error",
                                            env={"TANDEM_FAULTS": "streamer.tokens:2"}) as s:
        m = expect_fault_leaves_nothing_held(s, "streamer failed", key="sk-one")
        assert m["tandem:requests_in_flight"] == 0
        r = complete(s, 4, key="sk-one")  # the tenant's one slot is free again
        assert r.status_code == 200, r.text


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
