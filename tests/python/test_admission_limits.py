"""Admission's order and the choices of one request: a tenant at its own limit hears so
(429) even when the server is full; the n choices of a request are admitted together and a
refusal charges nothing; n above what the tenant may ever run is a 400 naming the limit."""
import textwrap

import httpx
import pytest

from conftest import Server, temp_file
from test_tenants import hold_stream

TENANTS = textwrap.dedent("""\
    tenants:
      - name: small
        api_keys: [sk-small]
        max_concurrent_requests: 1
      - name: three
        api_keys: [sk-three]
        max_concurrent_requests: 3
        requests_per_minute: 8   # refills one per 7.5 s: the test's few seconds see no refill
      - name: big
        api_keys: [sk-big]
    """)


@pytest.fixture(scope="module")
def limits_server():
    with temp_file(TENANTS) as path, Server("--config", path, "--max-in-flight", "3", "--log-level", "warn") as s:
        yield s


def post(server, key, **body):
    body.setdefault("prompt", "Hi")
    body.setdefault("max_tokens", 1)
    return httpx.post(server.url + "/v1/completions", json=body, timeout=120,
                      headers={"authorization": f"Bearer {key}"})


def test_a_tenant_at_its_limit_hears_429_even_when_the_server_is_full(limits_server):
    held = [hold_stream(limits_server, "sk-small"), hold_stream(limits_server, "sk-big"),
            hold_stream(limits_server, "sk-big")]
    try:
        r = post(limits_server, "sk-small")
        assert r.status_code == 429, r.text  # its own limit, checked before the server's
        assert "in flight" in r.json()["error"]["message"]
        r = post(limits_server, "sk-big")
        assert r.status_code == 503, r.text  # under its (absent) limit: the server is full
    finally:
        for h in held:
            h.__exit__(None, None, None)
    limits_server.wait_idle()


def test_choices_are_admitted_together_and_a_refusal_charges_nothing(limits_server):
    held = hold_stream(limits_server, "sk-three")
    try:
        before = post(limits_server, "sk-three")
        assert before.status_code == 200
        remaining = int(before.headers["x-ratelimit-remaining-requests"])
        # One in flight, three allowed: two choices would fit, three would not.
        r = post(limits_server, "sk-three", n=3)
        assert r.status_code == 429, r.text
        again = post(limits_server, "sk-three")
        assert int(again.headers["x-ratelimit-remaining-requests"]) == remaining - 1, \
            "the refused request of three choices took from the bucket"
        ok = post(limits_server, "sk-three", n=2, max_tokens=2)
        assert ok.status_code == 200, ok.text
        assert len(ok.json()["choices"]) == 2
        assert int(ok.headers["x-ratelimit-remaining-requests"]) == remaining - 2, "one request, not two"
    finally:
        held.__exit__(None, None, None)
    limits_server.wait_idle()


def test_more_choices_than_a_tenant_may_ever_run_is_a_400(limits_server):
    r = post(limits_server, "sk-small", n=2)
    assert r.status_code == 400, r.text
    assert "max_concurrent_requests" in r.json()["error"]["message"]
    r = post(limits_server, "sk-big", n=4)
    assert r.status_code == 400, r.text  # more than --max-in-flight
    assert "more than the server runs at once" in r.json()["error"]["message"]
