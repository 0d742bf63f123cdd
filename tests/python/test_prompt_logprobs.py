"""Prompt logprobs over HTTP: /v1/completions' echo with logprobs (what lm-evaluation-harness's
loglikelihood tasks send), max_tokens 0 to score without generating, vLLM's prompt_logprobs on
completions and chat, streamed and not, and the requests that cannot be served, with the
openai SDK against a real server on the default model."""
import json
import math

import httpx
import openai
import pytest

from conftest import openai_client

PROMPT = "The capital of France is Paris. The capital of Italy is"


@pytest.fixture()
def client(server):
    return openai_client(server)


def test_echo_scores_the_prompt_without_generating(client):
    r = client.completions.create(model="m", prompt=PROMPT, echo=True, logprobs=2, max_tokens=0)
    c = r.choices[0]
    assert c.text == PROMPT
    assert c.finish_reason == "length"
    assert r.usage.completion_tokens == 0
    lp = c.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == r.usage.prompt_tokens
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None  # nothing precedes it
    assert "".join(lp.tokens).endswith(PROMPT)  # the tokens spell the prompt (after BOS)
    for tok, x, top in zip(lp.tokens[1:], lp.token_logprobs[1:], lp.top_logprobs[1:]):
        assert x <= 0 and math.isfinite(x)
        assert tok in top and top[tok] == pytest.approx(x)  # the prompt token with its alternatives
        assert max(top.values()) <= 0
        assert len(top) in (2, 3)  # two alternatives, and the token when it is not among them


def test_echo_then_generated_tokens_follow_the_prompt(client):
    plain = client.completions.create(model="m", prompt=PROMPT, logprobs=1, max_tokens=4, temperature=0)
    echo = client.completions.create(model="m", prompt=PROMPT, echo=True, logprobs=1, max_tokens=4, temperature=0)
    assert echo.choices[0].text == PROMPT + plain.choices[0].text
    n_prompt = echo.usage.prompt_tokens
    lp = echo.choices[0].logprobs
    assert len(lp.tokens) == n_prompt + echo.usage.completion_tokens
    assert lp.tokens[n_prompt:] == plain.choices[0].logprobs.tokens
    assert lp.token_logprobs[n_prompt:] == pytest.approx(plain.choices[0].logprobs.token_logprobs, abs=1e-4)


def test_a_scored_continuation_has_the_logprobs_it_was_generated_with(client):
    """The loglikelihood computation lm-evaluation-harness does: score context + continuation
    in one echo request and sum the continuation's token logprobs. Here the continuation is
    the model's own greedy output, so each of its tokens must score what it was sampled at."""
    gen = client.completions.create(model="m", prompt=PROMPT, logprobs=0, max_tokens=6, temperature=0)
    cont = gen.choices[0].logprobs.tokens
    r = client.completions.create(model="m", prompt=PROMPT + gen.choices[0].text, echo=True, logprobs=0, max_tokens=0)
    lp = r.choices[0].logprobs
    assert lp.tokens[-len(cont):] == cont, "the same tokens when the text is tokenized whole"
    assert lp.token_logprobs[-len(cont):] == pytest.approx(gen.choices[0].logprobs.token_logprobs, abs=2e-3)
    # Greedy: every continuation token was the most likely one.
    for tok, top in zip(lp.tokens[-len(cont):], lp.top_logprobs[-len(cont):]):
        assert max(top, key=top.get) == tok


def test_a_likely_continuation_scores_above_an_unlikely_one(client):
    def loglikelihood(context, continuation):
        r = client.completions.create(model="m", prompt=context + continuation, echo=True, logprobs=0, max_tokens=0)
        n_ctx = client.completions.create(model="m", prompt=context, echo=True, logprobs=0, max_tokens=0).usage.prompt_tokens
        return sum(r.choices[0].logprobs.token_logprobs[n_ctx:])

    assert loglikelihood(PROMPT, " Rome.") > loglikelihood(PROMPT, " purple.")


def test_vllm_prompt_logprobs_on_completions_and_chat(client, server):
    r = client.completions.create(model="m", prompt=PROMPT, max_tokens=2, temperature=0,
                                  extra_body={"prompt_logprobs": 1})
    plp = r.choices[0].model_extra["prompt_logprobs"]
    assert len(plp) == r.usage.prompt_tokens
    assert plp[0] is None
    for entry in plp[1:]:
        assert 1 <= len(entry) <= 2  # the token, and one alternative unless it is the token
        ranks = sorted(v["rank"] for v in entry.values())
        assert ranks[0] >= 1
        assert all(v["logprob"] <= 0 and isinstance(v["decoded_token"], str) for v in entry.values())
    assert r.choices[0].text and not r.choices[0].text.startswith(PROMPT)  # no echo asked
    chat = httpx.post(server.url + "/v1/chat/completions", timeout=60, json={
        "model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "prompt_logprobs": 0})
    assert chat.status_code == 200, chat.text
    body = chat.json()
    plp = body["choices"][0]["prompt_logprobs"]
    assert len(plp) == body["usage"]["prompt_tokens"] and plp[0] is None
    assert all(len(e) == 1 for e in plp[1:])  # no alternatives: the token alone


def test_streamed_echo_sends_the_prompt_first(server):
    with httpx.stream("POST", server.url + "/v1/completions", timeout=60, json={
            "model": "m", "prompt": PROMPT, "echo": True, "logprobs": 1, "max_tokens": 3, "temperature": 0,
            "stream": True}) as resp:
        assert resp.status_code == 200
        chunks = [json.loads(line[6:]) for line in resp.iter_lines() if line.startswith("data: {")]
    first = chunks[0]["choices"][0]
    assert first["text"] == PROMPT
    assert first["logprobs"]["token_logprobs"][0] is None
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    assert text.startswith(PROMPT) and len(text) > len(PROMPT)


def test_echo_with_nothing_generated_streams_the_prompt_and_ends(server):
    with httpx.stream("POST", server.url + "/v1/completions", timeout=60, json={
            "model": "m", "prompt": PROMPT, "echo": True, "max_tokens": 0, "stream": True}) as resp:
        assert resp.status_code == 200
        lines = [line for line in resp.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == PROMPT
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("body, param", [
    ({"messages": [{"role": "user", "content": "Hi"}], "echo": True}, "echo"),
    ({"prompt": PROMPT, "echo": True, "logprobs": 1, "n": 2}, "n"),
    ({"prompt": PROMPT, "prompt_logprobs": 21}, "prompt_logprobs"),
    ({"prompt": PROMPT, "max_tokens": 0}, "max_tokens"),
])
def test_what_cannot_be_served_is_a_400_naming_the_field(server, body, param):
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    r = httpx.post(server.url + path, json={"model": "m", **body}, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
    assert httpx.get(server.url + "/health").status_code == 200


def test_the_sdk_raises_for_a_bad_request(client):
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="m", prompt=PROMPT, echo=True, logprobs=1, n=2, max_tokens=1)


def lm_eval_loglikelihood(out, ctxlen):
    """lm-evaluation-harness's local-completions parse_logprobs for one choice: the sum of the
    continuation's token logprobs (the last entry is the one generated token) and is_greedy."""
    choice = out["choices"][0]
    logprobs = choice["logprobs"]["token_logprobs"][ctxlen:-1]
    tops = choice["logprobs"]["top_logprobs"][ctxlen:-1]
    return sum(logprobs), all(lp == max(top.values()) for lp, top in zip(logprobs, tops))


def test_lm_eval_tokenized_request_scores_as_the_text_does(server):
    """The request lm-evaluation-harness's local-completions model sends by default: the prompt as
    one list of token ids (its own tokenization of context + continuation), max_tokens 1, logprobs 1,
    echo. The continuation is the model's greedy output, so it must come back greedy."""
    tok = lambda text: httpx.post(server.url + "/tokenize", json={"prompt": text}, timeout=30).json()["tokens"]  # noqa: E731
    gen = httpx.post(server.url + "/v1/completions", timeout=60, json={
        "model": "m", "prompt": PROMPT, "max_tokens": 5, "temperature": 0}).json()
    ctx = tok(PROMPT)
    ids = tok(PROMPT + gen["choices"][0]["text"])
    assert ids[:len(ctx)] == ctx and len(ids) > len(ctx)
    body = {"model": "m", "prompt": [ids], "temperature": 0, "max_tokens": 1, "logprobs": 1, "seed": 1234, "echo": True}
    out = httpx.post(server.url + "/v1/completions", json=body, timeout=60).json()
    assert out["usage"]["prompt_tokens"] == len(ids)
    assert len(out["choices"][0]["logprobs"]["token_logprobs"]) == len(ids) + 1
    ll, greedy = lm_eval_loglikelihood(out, len(ctx))
    assert greedy
    text = httpx.post(server.url + "/v1/completions", timeout=60, json={
        "model": "m", "prompt": PROMPT + gen["choices"][0]["text"], "echo": True, "logprobs": 1,
        "max_tokens": 1, "temperature": 0}).json()
    assert text["usage"]["prompt_tokens"] == len(ids)
    assert ll == pytest.approx(lm_eval_loglikelihood(text, len(ctx))[0], abs=1e-4)
    assert out["choices"][0]["text"].startswith(PROMPT)  # echo of token ids: their text


@pytest.mark.parametrize("prompt, param", [
    ([[1, 2], [3, 4]], "prompt"),
    ([1, -2], "prompt[1]"),
    ([[5, 10 ** 9]], "prompt[0][1]"),
    ([1, "a"], "prompt[1]"),
    ([], "prompt"),
])
def test_token_prompts_are_checked(server, prompt, param):
    r = httpx.post(server.url + "/v1/completions", json={"model": "m", "prompt": prompt}, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
