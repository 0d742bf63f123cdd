"""Tenants from the YAML config: API keys, rate limits (429 with Retry-After and the
x-ratelimit-* headers), concurrency caps, and weighted fair share inside the scheduler."""
import textwrap
import threading
import time

import httpx
import openai
import pytest

from conftest import Server, openai_client, temp_file

CHAT = [{"role": "user", "content": "Say hi."}]


def test_unknown_key_is_401(tenant_server):
    with pytest.raises(openai.AuthenticationError) as e:
        openai_client(tenant_server, "sk-nobody").chat.completions.create(model="m", messages=CHAT, max_tokens=2)
    assert e.value.status_code == 401
    r = httpx.post(tenant_server.url + "/v1/completions", json={"prompt": "x", "max_tokens": 1})
    assert r.status_code == 401
    assert r.json()["error"]["type"] == "authentication_error"


def test_known_key_gets_limits_headers(tenant_server):
    raw = openai_client(tenant_server, "sk-alice").chat.completions.with_raw_response.create(
        model="m", messages=CHAT, max_tokens=2)
    assert raw.headers["x-ratelimit-limit-requests"] == "1000"
    assert int(raw.headers["x-ratelimit-remaining-requests"]) < 1000
    assert raw.headers["x-ratelimit-limit-tokens"] == "1000000"
    assert raw.parse().usage.completion_tokens <= 2
    assert 'tandem:requests_total{tenant="alice",status="200"}' in httpx.get(tenant_server.url + "/metrics").text


def test_requests_per_minute(tenant_server):
    c = openai_client(tenant_server, "sk-limited")
    for _ in range(2):
        c.completions.create(model="m", prompt="Hi", max_tokens=1)
    with pytest.raises(openai.RateLimitError) as e:
        c.completions.create(model="m", prompt="Hi", max_tokens=1)
    h = e.value.response.headers
    assert int(h["retry-after"]) >= 1
    assert h["x-ratelimit-limit-requests"] == "2"
    assert h["x-ratelimit-remaining-requests"] == "0"
    assert "requests per minute" in e.value.body["message"]
    m = tenant_server.metrics()
    assert m['tandem:rejections_total{reason="rate_limited"}'] >= 1


def test_tokens_per_minute(tenant_server):
    c = openai_client(tenant_server, "sk-tokens")
    # All 60 tokens spent (a sampled reply that ended early would leave room for the next).
    c.completions.create(model="m", prompt="Hi", max_tokens=60, extra_body={"ignore_eos": True})
    with pytest.raises(openai.RateLimitError) as e:
        c.completions.create(model="m", prompt="Hi", max_tokens=90)
    assert "tokens per minute" in e.value.body["message"]
    assert e.value.response.headers["x-ratelimit-limit-tokens"] == "100"


def hold_stream(server, key):
    """A streaming request that stays in flight until closed (headers come with its first token)."""
    cm = httpx.stream("POST", server.url + "/v1/completions", timeout=120,
                      headers={"authorization": f"Bearer {key}"},
                      json={"prompt": "Count:", "max_tokens": 2000, "ignore_eos": True, "stream": True})
    r = cm.__enter__()
    assert r.status_code == 200
    return cm


def test_concurrency_cap(tenant_server):
    held = hold_stream(tenant_server, "sk-single")
    try:
        with pytest.raises(openai.RateLimitError) as e:
            openai_client(tenant_server, "sk-single").completions.create(model="m", prompt="Hi", max_tokens=1)
        assert "in flight" in e.value.body["message"]
    finally:
        held.__exit__(None, None, None)
    tenant_server.wait_idle()
    openai_client(tenant_server, "sk-single").completions.create(model="m", prompt="Hi", max_tokens=1)


FAIR = textwrap.dedent("""\
    tenants:
      - name: a
        api_keys: [sk-a]
        weight: 1
      - name: b
        api_keys: [sk-b]
        weight: 1
    """)


def test_fair_share_order():
    """Tenant A has 50 requests waiting; B's request, arriving after them, starts within the
    next scheduling round (order, not time: at most max-num-seqs of A's start before it)."""
    with temp_file(FAIR) as path, Server("--config", path, "--max-num-seqs", "2") as server:
        first_token = {}
        lock = threading.Lock()

        def run(name, key):
            with httpx.stream("POST", server.url + "/v1/completions", timeout=300,
                              headers={"authorization": f"Bearer {key}"},
                              json={"prompt": f"Request {name}:", "max_tokens": 6, "stream": True,
                                    "ignore_eos": True, "temperature": 0}) as r:
                assert r.status_code == 200
                # Headers come with the first token (the server holds them until then).
                with lock:
                    first_token[name] = time.monotonic()
                for _ in r.iter_lines():
                    pass

        threads = [threading.Thread(target=run, args=(f"a{i}", "sk-a")) for i in range(50)]
        for t in threads:
            t.start()
        deadline = time.time() + 60
        while server.metrics()["tandem:num_requests_waiting"] < 40 and time.time() < deadline:
            time.sleep(0.01)
        assert server.metrics()["tandem:num_requests_waiting"] >= 40
        b_submitted = time.monotonic()
        tb = threading.Thread(target=run, args=("b", "sk-b"))
        tb.start()
        for t in threads + [tb]:
            t.join()
        started_between = [n for n, ts in first_token.items() if n != "b" and b_submitted < ts < first_token["b"]]
        a_after_b = [n for n, ts in first_token.items() if ts > first_token["b"]]
        print(f"fair share: {len(started_between)} of A's requests started between B's arrival and its first token; "
              f"{len(a_after_b)} started after it")
        assert len(started_between) <= 3, f"{len(started_between)} of A's requests started before B"
        assert len(a_after_b) >= 35


def test_in_flight_cap_is_503():
    server = Server("--max-in-flight", "1", "--log-level", "warn")
    try:
        held = hold_stream(server, "unused")
        try:
            c = openai_client(server)
            with pytest.raises(openai.InternalServerError) as e:
                c.completions.create(model="m", prompt="Hi", max_tokens=1)
            assert e.value.status_code == 503
            assert int(e.value.response.headers["retry-after"]) >= 1
        finally:
            held.__exit__(None, None, None)
        assert server.metrics()['tandem:rejections_total{reason="overloaded"}'] == 1
    finally:
        server.stop()
