"""A guard model screens a tenant's conversations (net/guard.h, docs/serving.md "A guard model"): a
real `tandem serve` with two small synthetic models, the one that answers and a guard whose reply
the server holds by a grammar to "safe" or "unsafe\\nS<n>". The guard renders its prompt with a
Llama-Guard-style template this test writes (GUARD_TEMPLATE, given as the guard's models: entry's
chat_template). The guard's verdicts come from its (random, fixed-seed) weights, so the test first
asks it directly through POST /v1/moderations and then checks that each tenant's requests are
screened exactly as those verdicts say: a flagged input is a 400 content_filter naming the
categories, a flagged reply ends with finish_reason content_filter and none of its text, streamed
or not.
"""
import json
import re
import subprocess
import textwrap
import time

import httpx
import openai
import pytest

from conftest import Server, openai_client, tandem_binary

SMALL = ["--layers", "2", "--embd", "128", "--heads", "2", "--kv-heads", "2", "--ff", "256", "--vocab", "512",
         "--ctx", "1024", "--untied"]
CANDIDATES = [f"Tell me about {w}." for w in (
    "rivers", "knives", "castles", "poison", "gardens", "locks", "bridges", "fire", "owls", "money", "trains",
    "secrets", "storms", "medicine", "pirates", "codes", "deserts", "weapons", "music", "volcanoes", "ghosts",
    "bees", "glass", "robots")]

# Llama Guard 3's hazard categories, in its order (S1..S14).
HAZARDS = ["Violent Crimes", "Non-Violent Crimes", "Sex-Related Crimes", "Child Sexual Exploitation", "Defamation",
           "Specialized Advice", "Privacy", "Intellectual Property", "Indiscriminate Weapons", "Hate",
           "Suicide & Self-Harm", "Sexual Content", "Elections", "Code Interpreter Abuse"]
# OpenAI's moderation categories, and the hazard codes of the same meaning.
OPENAI_CATEGORIES = ["harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent",
                     "self-harm", "self-harm/instructions", "self-harm/intent", "sexual", "sexual/minors", "violence",
                     "violence/graphic"]
OPENAI_NAMES = {"S1": "violence", "S2": "illicit", "S4": "sexual/minors", "S9": "illicit/violent", "S10": "hate",
                "S11": "self-harm", "S12": "sexual"}
# A guard's prompt in Llama Guard's manner, written for this test: the task, the conversation
# (User / Agent turns), the categories, then what to answer. It judges the last turn: the
# user's for an input check or a moderation, the reply (the assistant's) for an output check.
GUARD_TEMPLATE = """\
{%- set judged = 'Agent' if messages[-1]['role'] == 'assistant' else 'User' -%}
{{ bos_token }}[guard-task] Decide whether the last {{ judged }} turn of this conversation falls \
under one of the hazard categories listed below it.

== conversation ==
{% for m in messages -%}
{{ 'Agent' if m['role'] == 'assistant' else 'User' }}: {{ m['content'] | trim }}
{% endfor -%}
== end of conversation ==

== hazard categories ==
{% for n in hazards -%}
S{{ loop.index }}: {{ n }}
{% endfor -%}
== end of categories ==

Provide your safety assessment of that last {{ judged }} turn: answer 'safe', or 'unsafe' and then, \
on the next line, the codes of the categories it falls under separated by commas.
""".replace("hazards", json.dumps(HAZARDS))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("guard")
    # Seed 50: with GUARD_TEMPLATE, a guard that flags some texts (S1), not all. Seed 17: a guard
    # with the synthetic file's own (short) template, for the stream checked every 2 tokens.
    for name, seed in (("main", 1), ("guard", 50), ("quick-guard", 17)):
        subprocess.run([tandem_binary(), "gen-model", "--out", str(d / f"{name}.gguf"), *SMALL, "--seed", str(seed)],
                       check=True, capture_output=True, timeout=60)
    (d / "guard.jinja").write_text(GUARD_TEMPLATE)
    config = textwrap.dedent(f"""\
        models:
          - name: main
            path: {d / 'main.gguf'}
          - name: guard
            path: {d / 'guard.gguf'}
            keep_alive: -1
            chat_template: {d / 'guard.jinja'}
          - name: quick-guard
            path: {d / 'quick-guard.gguf'}
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
            guard: {{model: quick-guard, check: [output], every: 2}}
        """)
    (d / "tandem.yaml").write_text(config)
    with Server("--config", str(d / "tandem.yaml"), "--no-tiled-cache", "--kv-cache-tokens", "4096",
                "--log-level", "info") as s:
        s.dir, s.config = d, d / "tandem.yaml"
        yield s


def moderate(server, texts, key="sk-plain", model="guard"):
    r = httpx.post(server.url + "/v1/moderations", json={"model": model, "input": texts},
                   headers={"Authorization": f"Bearer {key}"}, timeout=120)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == model and body["id"].startswith("modr")
    return body["results"]


def verdicts(server, texts, model="guard"):
    results = moderate(server, texts, model=model)
    assert len(results) == len(texts)
    for res in results:
        codes = res["guard_categories"]  # Tandem's own field: the hazard codes the guard gave
        assert res["flagged"] == bool(codes)
        assert all(c.startswith("S") and c[1:].isdigit() for c in codes)
        # OpenAI's categories, every one named; true (1.0) where a code the guard gave maps to it.
        named = {OPENAI_NAMES[c] for c in codes if c in OPENAI_NAMES}
        assert res["categories"] == {n: n in named for n in OPENAI_CATEGORIES}
        assert res["category_scores"] == {n: 1.0 if n in named else 0.0 for n in OPENAI_CATEGORIES}
        assert res["category_applied_input_types"] == {n: ["text"] for n in OPENAI_CATEGORIES}
    return [res["flagged"] for res in results]


# net/guard.cpp's kGuardGrammar: the guard's reply is held to Llama Guard 3's form.
GUARD_GRAMMAR = 'root ::= "safe" | "unsafe\\nS" code (",S" code)?\ncode ::= "1" [0-4]? | [2-9]'


def guard_says(server, messages, model="guard"):
    """Whether the guard flags `messages`, asked as an output check asks it (the conversation with
    the reply as the assistant's turn, greedy, grammar-held), straight through chat completions."""
    r = openai_client(server, "sk-plain").chat.completions.create(
        model=model, messages=messages, max_tokens=24, temperature=0, extra_body={"grammar": GUARD_GRAMMAR})
    return r.choices[0].message.content.startswith("unsafe")


def conversation(prompt, reply):
    return [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}]


def guard_log_tokens(server, stage, since):
    """The prompt token counts of the guard's checks of `stage` logged since line `since`."""
    deadline = time.time() + 10
    while True:
        found = [int(m.group(1)) for line in server.log[since:]
                 if (m := re.search(r"guard 'guard': " + stage + r" \w+ \(.*\), \d+ turns, (\d+) prompt tokens", line))]
        if found or time.time() > deadline:
            return found
        time.sleep(0.05)


def test_guard_renders_the_test_template(server):
    """The guard model's prompt is GUARD_TEMPLATE rendered (its models: entry's chat_template), not
    the file's own template: the server's guard prompt detokenizes to what `tandem chat-template`
    renders from the template file, and the guard's own request had that many prompt tokens."""
    text = CANDIDATES[1]
    messages = [{"role": "user", "content": text}]
    tok = httpx.post(server.url + "/tokenize", json={"model": "guard", "messages": messages},
                     headers={"Authorization": "Bearer sk-plain"}).json()
    prompt = httpx.post(server.url + "/detokenize", json={"model": "guard", "tokens": tok["tokens"]},
                        headers={"Authorization": "Bearer sk-plain"}).json()["prompt"]
    rendered = subprocess.run([tandem_binary(), "chat-template", "-m", str(server.dir / "guard.gguf"),
                               "--chat-template", str(server.dir / "guard.jinja"), "--messages", json.dumps(messages)],
                              check=True, capture_output=True, text=True, timeout=60).stdout
    assert prompt.rstrip("\n") == rendered.rstrip("\n")
    assert "[guard-task]" in prompt and "User: " + text in prompt and "S14: Code Interpreter Abuse" in prompt
    # The other models keep their own templates.
    other = httpx.post(server.url + "/tokenize", json={"model": "main", "messages": messages},
                       headers={"Authorization": "Bearer sk-plain"}).json()["count"]
    assert other < tok["count"] // 4
    # The guard's own request (a moderation of the same text) had exactly that prompt.
    since = len(server.log)
    moderate(server, text)
    assert guard_log_tokens(server, "moderation", since) == [tok["count"]]
    # --print-config writes the key back.
    shown = subprocess.run([tandem_binary(), "serve", "--config", str(server.config), "--print-config"],
                           check=True, capture_output=True, text=True, timeout=60).stdout
    assert f"chat_template: {server.dir / 'guard.jinja'}" in shown


def test_moderations_endpoint(server):
    flags = verdicts(server, CANDIDATES)
    assert any(flags) and not all(flags), "the guard's weights flag all or none of the candidates"
    # The same text, the same verdict (greedy, grammar-held).
    assert verdicts(server, CANDIDATES[:4]) == flags[:4]
    # The openai SDK reads it.
    client = openai_client(server, "sk-plain")
    r = client.moderations.create(model="guard", input=CANDIDATES[0])
    assert r.results[0].flagged == flags[0]
    # A flagged text in OpenAI's names (this guard says S1, violence) and Tandem's codes, through the SDK.
    flagged = CANDIDATES[flags.index(True)]
    res = client.moderations.create(model="guard", input=flagged).results[0]
    assert res.flagged and res.categories.violence and res.category_scores.violence == 1.0
    assert not res.categories.hate and res.category_scores.sexual_minors == 0.0
    assert res.category_applied_input_types.violence == ["text"]
    assert res.model_extra["guard_categories"] == ["S1"]
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
    # The output check shows the guard the user's turn, then the reply as the assistant's.
    flags = [guard_says(server, conversation(p, t)) for p, t in zip(CANDIDATES, replies)]
    assert any(flags[:8]) and not all(flags[:8]), "the guard flags all or none of the replies"
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
    flags = [guard_says(server, conversation(p, t), model="quick-guard") for p, t in zip(prompts, replies)]
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


def test_output_check_sees_the_conversation(server):
    """An output check classifies the user's turn and then the reply (the assistant's turn), as
    Llama Guard is used: the same reply after two user turns gets each conversation's verdict, and
    the guard's own request held both turns."""
    plain, screened = openai_client(server, "sk-plain"), openai_client(server, "sk-out")

    def first_token(client, prompt):
        return client.chat.completions.create(model="main", messages=[{"role": "user", "content": prompt}],
                                              max_tokens=1, temperature=0).choices[0]

    # One-token replies: many prompts get the same one.
    by_reply = {}
    for p in CANDIDATES:
        by_reply.setdefault(first_token(plain, p).message.content, []).append(p)
    reply, prompts = max(by_reply.items(), key=lambda kv: len(kv[1]))
    flags = {p: guard_says(server, conversation(p, reply)) for p in prompts}
    flagged = [p for p in prompts if flags[p]]
    safe = [p for p in prompts if not flags[p]]
    assert flagged and safe, f"the guard gives {reply!r} one verdict after every user turn"

    def guard_tokens(prompt):
        return httpx.post(server.url + "/tokenize", json={"model": "guard", "messages": conversation(prompt, reply)},
                          headers={"Authorization": "Bearer sk-plain"}).json()["count"]

    def output_check_logged(verdict, prompt):
        # The guard's request for a check: both turns, rendered by its template. The server's log
        # reaches us through a reader thread, possibly after the reply did.
        want = f"guard 'guard': output {verdict} "
        tokens = f"2 turns, {guard_tokens(prompt)} prompt tokens"
        deadline = time.time() + 10
        while time.time() < deadline:
            said = [i for i, line in enumerate(server.log) if want in line and tokens in line]
            if said:
                return said[-1]
            time.sleep(0.05)
        raise AssertionError(f"no {want!r} with {tokens!r} in the log")

    r = first_token(screened, flagged[0])
    assert r.finish_reason == "content_filter" and r.message.content == ""
    since = output_check_logged("flagged", flagged[0]) + 1
    r = first_token(screened, safe[0])
    assert r.finish_reason in ("stop", "length") and r.message.content == reply
    output_check_logged("safe", safe[0])
    # One check per reply: nothing else was asked of the guard about that one-token reply.
    time.sleep(0.2)
    said = [line for line in server.log[since:] if "guard 'guard': output" in line]
    assert len(said) == 1, said
