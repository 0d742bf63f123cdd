"""The scheduler's promises over real sockets: priorities (vLLM's field, lower first) preempt
less urgent running streams, a TTFT target with x-slo-reject is refused at once with 503 when
the queue cannot meet it, and the step budget's metrics follow the cost model.

One running sequence at a time (--max-num-seqs 1), so who runs first is the scheduler's choice
alone, not a matter of timing.
"""
import threading
import time

import httpx
import pytest

from conftest import Server, openai_client

HI = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def one_seq():
    with Server("--max-num-seqs", "1", "--log-level", "warn") as s:
        # A few steps so the cost model has something to predict with.
        openai_client(s).chat.completions.create(model="m", messages=HI, max_tokens=8, temperature=0)
        yield s


def stream_in_background(server, **kw):
    """Starts a streamed chat in a thread; returns (first_token event, result dict, thread)."""
    first, out = threading.Event(), {}

    def run():
        client = openai_client(server)
        n, reason = 0, None
        for chunk in client.chat.completions.create(model="m", messages=HI, stream=True, **kw):
            if chunk.choices and chunk.choices[0].delta.content:
                n += 1
                first.set()
            if chunk.choices and chunk.choices[0].finish_reason:
                reason = chunk.choices[0].finish_reason
        out.update(chunks=n, reason=reason, done=time.monotonic())
        first.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return first, out, t


def test_an_urgent_request_preempts_a_less_urgent_stream(one_seq):
    before = one_seq.metrics()
    first, low, t = stream_in_background(one_seq, max_tokens=400, temperature=0.7,
                                         extra_body={"ignore_eos": True, "priority": 10})
    assert first.wait(60)
    r = openai_client(one_seq).chat.completions.create(model="m", messages=HI, max_tokens=4, temperature=0,
                                                        extra_body={"priority": 0})
    urgent_done = time.monotonic()
    assert r.choices[0].message.content
    t.join(120)
    assert low["reason"] == "length", "the displaced stream resumes and finishes"
    assert urgent_done < low["done"], "with one slot, the urgent request ran while the other was unfinished"
    after = one_seq.metrics()
    assert after["tandem:priority_preemptions_total"] > before["tandem:priority_preemptions_total"]


def test_equal_priorities_wait_their_turn(one_seq):
    before = one_seq.metrics()
    first, low, t = stream_in_background(one_seq, max_tokens=60, temperature=0.7, extra_body={"ignore_eos": True})
    assert first.wait(60)
    openai_client(one_seq).chat.completions.create(model="m", messages=HI, max_tokens=2, temperature=0)
    second_done = time.monotonic()
    t.join(120)
    assert low["done"] < second_done, "no preemption between equals: the second waited"
    assert one_seq.metrics()["tandem:priority_preemptions_total"] == before["tandem:priority_preemptions_total"]


def test_a_ttft_target_the_queue_cannot_meet_is_refused_at_once(one_seq):
    first, low, t = stream_in_background(one_seq, max_tokens=300, temperature=0.7, extra_body={"ignore_eos": True})
    assert first.wait(60)
    body = {"model": "m", "messages": HI, "max_tokens": 2}
    url = one_seq.url + "/v1/chat/completions"
    started = time.monotonic()
    r = httpx.post(url, json=body, headers={"x-slo-ttft-ms": "1", "x-slo-reject": "true"}, timeout=60)
    assert r.status_code == 503, r.text
    assert time.monotonic() - started < 5, "refused at once, not after waiting"
    assert r.headers["retry-after"] == "1"
    assert "x-slo-ttft-ms" in r.json()["error"]["message"]
    # Without x-slo-reject the target only orders the queue: the request is served.
    r = httpx.post(url, json=body, headers={"x-slo-ttft-ms": "1"}, timeout=120)
    assert r.status_code == 200, r.text
    # A target the queue can meet is taken.
    r = httpx.post(url, json={**body, "slo_ttft_ms": 600000}, headers={"x-slo-reject": "true"}, timeout=120)
    assert r.status_code == 200, r.text
    t.join(120)
    assert one_seq.metrics()["tandem:slo_rejected_total"] >= 1


@pytest.mark.parametrize("headers,body,needle", [
    ({"x-slo-ttft-ms": "soon"}, {}, "x-slo-ttft-ms"),
    ({"x-slo-reject": "yes"}, {}, "x-slo-reject"),
    ({}, {"priority": "high"}, "priority"),
    ({}, {"priority": 10**9}, "priority"),
    ({}, {"slo_ttft_ms": -5}, "slo_ttft_ms"),
])
def test_bad_scheduling_fields_get_a_400(one_seq, headers, body, needle):
    r = httpx.post(one_seq.url + "/v1/chat/completions",
                   json={"model": "m", "messages": HI, "max_tokens": 2, **body}, headers=headers, timeout=30)
    assert r.status_code == 400, r.text
    assert needle in r.text


def test_the_step_budget_and_cost_model_are_in_the_metrics(one_seq):
    openai_client(one_seq).chat.completions.create(model="m", messages=HI, max_tokens=16, temperature=0)
    m = one_seq.metrics()
    assert m["tandem:step_budget_tokens"] >= 1
    assert m["tandem:step_measured_seconds"] > 0
    assert m["tandem:step_predicted_seconds"] > 0, "the cost model predicts once it has seen steps"
    assert m["tandem:target_itl_seconds"] == pytest.approx(0.15)
    assert m['tandem:step_cost_seconds{part="prompt_token"}'] > 0
    assert m["tandem:target_ttft_seconds"] == 0, "off by default"
    assert m["tandem:prompt_share_ratio"] == pytest.approx(0.25)
    # The last step's time by phase: each non-negative, the forward pass most of it, and
    # together the measured step.
    phases = {p: m[f'tandem:step_phase_seconds{{phase="{p}"}}'] for p in ("plan", "forward", "sample", "transit", "apply")}
    assert all(v >= 0 for v in phases.values()), phases
    assert phases["forward"] > 0
    assert sum(phases.values()) == pytest.approx(m["tandem:step_measured_seconds"], rel=1e-3, abs=1e-6)


def test_a_waiting_prompt_raises_the_prompt_share_with_target_ttft_ms():
    # One slot: a second request waits behind a long stream; past --target-ttft-ms its wait
    # gives prompts the whole step target, and the share falls back once it has started.
    with Server("--max-num-seqs", "1", "--target-ttft-ms", "100", "--log-level", "warn") as s:
        assert s.metrics()["tandem:target_ttft_seconds"] == pytest.approx(0.1)
        first, long, t = stream_in_background(s, max_tokens=800, temperature=0.7, extra_body={"ignore_eos": True})
        assert first.wait(60)
        assert s.metrics()["tandem:prompt_share_ratio"] == pytest.approx(0.25), "nothing waits yet"
        _, short, t2 = stream_in_background(s, max_tokens=2, temperature=0)
        time.sleep(0.3)  # three times the target: the planner's clock moves with every step
        waiting = s.metrics()
        t.join(120)
        t2.join(120)
        assert short["done"] > long["done"], "the second request waited for the slot"
        assert waiting["tandem:prompt_share_ratio"] == pytest.approx(1.0)
        assert s.metrics()["tandem:prompt_share_ratio"] == pytest.approx(0.25)
