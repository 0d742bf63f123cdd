"""A guard model screens a tenant's conversations (net/guard.h, docs/serving.md "A guard model"): a
real `tandem serve` with two small synthetic models, the one that answers and a guard whose reply
the server holds by a grammar to "safe" or "unsafe\\nS<n>". The guard's verdicts come from its
(random, fixed-seed) weights, so the test first asks it directly through POST /v1/moderations and
then checks that each tenant's requests are screened exactly as those verdicts say: a flagged input
is a 400 content_filter naming the categories, a flagged reply ends with finish_reason
content_filter and none of its text, streamed or not.
"""
import json
import subprocess
import textwrap

import httpx
import openai
import pytest

from conftest import Server, openai_client, tandem_binary, temp_file

SMALL = ["--layers", "2", "--embd", "128", "--heads", "2", "--kv-heads", "2", "--ff", "256", "--vocab", "512",
         "--ctx", "1024", "--untied"]
CANDIDATES = [f"Tell me about {w}." for w in (
    "rivers", "knives", "castles", "poison", "gardens", "locks", "bridges", "fire", "owls", "money", "trains",
    "secrets", "storms", "medicine", "pirates", "codes", "deserts", "weapons", "music", "volcanoes", "ghosts",
    "bees", "glass", "robots")]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("guard")
    for name, seed in (("main", 1), ("guard", 17)):  # seed 17: a guard that flags some texts, not all
        subprocess.run([tandem_binary(), "gen-model", "--out", str(d / f"{name}.gguf"), *SMALL, "--seed", str(seed)],
                       check=True, capture_output=True, timeout=60)
    config = textwrap.dedent(f"""\
        models:
          - name: main
            path: {d / 'main.gguf'}
          - name: guard
            path: {d / 'guard.gguf'}
            keep_alive: -1
        tenants:
          - name: plain
            api_keys: [sk-plain]
          - name: screened-in
            api_keys: [sk-in]
            models: [main]   # the guard need not be among them
            guard: {{model: guard, check: [input]}}
          - name: screened-out
            api_keys: [sk-out]
            guard: {{model: guard, check: [output]}}
          - name: screened-often
            api_keys: [sk-often]
            guard: {{model: guard, check: [output], every: 2}}
        """)
    with temp_file(config) as path:
        s = Server("--config", path, "--no-tiled-cache", "--kv-cache-tokens", "2048", "--log-level", "info")
    with s:
        yield s


def moderate(server, texts, key="sk-plain"):
    r = httpx.post(server.url + "/v1/moderations", json={"model": "guard", "input": texts},
                   headers={"Authorization": f"Bearer {key}"}, timeout=120)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == "guard" and body["id"].startswith("modr")
    return body["results"]


def verdicts(server, texts):
    results = moderate(server, texts)
    assert len(results) == len(texts)
    for res in results:
        assert res["flagged"] == bool(res["categories"])
        assert all(c.startswith("S") and c[1:].isdigit() for c in res["categories"])
        assert set(res["category_scores"]) == set(res["categories"])
    return [res["flagged"] for res in results]


def test_moderations_endpoint(server):
    flags = verdicts(server, CANDIDATES)
    assert any(flags) and not all(flags), "the guard's weights flag all or none of the candidates"
    # The same text, the same verdict (greedy, grammar-held).
    assert verdicts(server, CANDIDATES[:4]) == flags[:4]
    # The openai SDK reads it.
    client = openai_client(server, "sk-plain")
    r = client.moderations.create(model="guard", input=CANDIDATES[0])
    assert r.results[0].flagged == flags[0]
    # Bad input: a 400 naming the field; no model and no guard: a 400 too.
    bad = httpx.post(server.url + "/v1/moderations", json={"model": "guard", "input": 3},
                     headers={"Authorization": "Bearer sk-plain"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "input"
    assert httpx.post(server.url + "/v1/moderations", json={"input": "x"},
                      headers={"Authorization": "Bearer sk-plain"}).status_code == 400
    unknown = httpx.post(server.url + "/v1/moderations", json={"model": "nope", "input": "x"},
                         headers={"Authorization": "Bearer sk-plain"})
    assert unknown.status_code == 404


def test_flagged_input_is_refused(server):
    flags = verdicts(server, CANDIDATES)
    flagged = [t for t, f in zip(CANDIDATES, flags) if f]
    safe = [t for t, f in zip(CANDIDATES, flags) if not f]
    screened = openai_client(server, "sk-in")
    with pytest.raises(openai.BadRequestError) as e:
        screened.chat.completions.create(model="main", messages=[{"role": "user", "content": flagged[0]}],
                                         max_tokens=4)
    err = e.value.response.json()["error"]
    assert err["code"] == "content_filter" and "categories: S" in err["message"]
    # Streamed: the same 400, before any event.
    with pytest.raises(openai.BadRequestError):
        list(screened.chat.completions.create(model="main", messages=[{"role": "user", "content": flagged[0]}],
                                              max_tokens=4, stream=True))
    ok = screened.chat.completions.create(model="main", messages=[{"role": "user", "content": safe[0]}], max_tokens=4)
    assert ok.choices[0].finish_reason in ("stop", "length")
    # The tenant may not use the guard model itself.
    with pytest.raises(openai.NotFoundError):
        screened.chat.completions.create(model="guard", messages=[{"role": "user", "content": safe[0]}], max_tokens=2)
    # A tenant without a guard is not screened.
    plain = openai_client(server, "sk-plain")
    assert plain.chat.completions.create(model="main", messages=[{"role": "user", "content": flagged[0]}],
                                         max_tokens=4).choices[0].finish_reason in ("stop", "length")
    text = httpx.get(server.url + "/metrics").text
    assert 'tandem:guard_checks_total{stage="input",verdict="unsafe"}' in text


def test_flagged_output_ends_with_content_filter(server):
    plain, screened = openai_client(server, "sk-plain"), openai_client(server, "sk-out")

    def reply(client, prompt):
        return client.chat.completions.create(model="main", messages=[{"role": "user", "content": prompt}],
                                              max_tokens=8, temperature=0)

    replies = [reply(plain, p).choices[0].message.content for p in CANDIDATES]
    flags = verdicts(server, replies)
    assert any(flags) and not all(flags), "the guard flags all or none of the replies"
    for prompt, text, flagged in list(zip(CANDIDATES, replies, flags))[:8]:
        r = reply(screened, prompt)
        if flagged:
            assert r.choices[0].finish_reason == "content_filter" and r.choices[0].message.content == ""
        else:
            assert r.choices[0].finish_reason in ("stop", "length") and r.choices[0].message.content == text
        # Streamed: checked at the end (every: 0), so a flagged reply sends none of its text.
        chunks = list(screened.chat.completions.create(
            model="main", messages=[{"role": "user", "content": prompt}], max_tokens=8, temperature=0, stream=True))
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        if flagged:
            assert finish == ["content_filter"] and streamed == ""
        else:
            assert finish[-1] in ("stop", "length") and streamed == text
    text = httpx.get(server.url + "/metrics").text
    assert 'tandem:guard_checks_total{stage="output",verdict="unsafe"}' in text


def test_stream_checked_every_n_tokens(server):
    plain, often = openai_client(server, "sk-plain"), openai_client(server, "sk-often")
    prompts = CANDIDATES[:8]
    replies = [plain.chat.completions.create(model="main", messages=[{"role": "user", "content": p}], max_tokens=8,
                                             temperature=0).choices[0].message.content for p in prompts]
    flags = verdicts(server, replies)
    for prompt, text, flagged in zip(prompts, replies, flags):
        chunks = list(often.chat.completions.create(
            model="main", messages=[{"role": "user", "content": prompt}], max_tokens=8, temperature=0, stream=True))
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        # What went out passed a check: a prefix of the reply; a reply flagged whole never ends well.
        assert text.startswith(streamed)
        if flagged:
            assert finish == ["content_filter"] and streamed != text
        elif finish != ["content_filter"]:
            assert streamed == text
