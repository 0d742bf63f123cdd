"""gpt-oss's harmony format: its template renders as jinja2 renders it, and replies written in
it come back as OpenAI's fields (analysis -> reasoning_content, final -> content, commentary
to=functions.NAME -> tool_calls), whole and streamed.

The template is gpt-oss-120b's (tests/data/chat_template/gpt-oss.json, made by
tests/tools/make_chat_template_vectors.py with its jinja2 renders). The replies are the
template's own renders of assistant turns, read back through `tandem chat-template
--parse-output`, and hand-written ones that the default model (SmolLM2-135M, which never saw
harmony) is made to write by a GBNF grammar of the very text: the server then parses what the
model wrote, token by token, as it would a gpt-oss model's reply.
"""
import json
import subprocess

import httpx
import pytest

from conftest import ROOT, Server, openai_client, tandem_binary, temp_file

VECTORS = json.loads((ROOT / "tests" / "data" / "chat_template" / "gpt-oss.json").read_text())
SOURCE = VECTORS["source"]

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a zone",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}}

ASK = [{"role": "user", "content": "What is the weather in Paris?"}]

# Replies as gpt-oss writes them after the prompt's "<|start|>assistant".
REASONING_AND_FINAL = ("<|channel|>analysis<|message|>The user wants the weather.<|end|>"
                       "<|start|>assistant<|channel|>final<|message|>It is sunny in Paris.<|return|>")
ONE_CALL = ("<|channel|>analysis<|message|>I need the weather tool.<|end|>"
            "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
            "<|message|>{\"city\": \"Paris\"}<|call|>")
TWO_CALLS = ("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|end|>"
             "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{\"tz\": \"CET\"}<|call|>")


def literal_grammar(text):
    """A GBNF grammar whose only sentence is text."""
    escaped = text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")
    return f'root ::= "{escaped}"'


def cli(*args, stdin=None):
    with temp_file(SOURCE, ".jinja") as path:
        r = subprocess.run([tandem_binary(), "chat-template", "--template-file", path, "--bos", VECTORS["bos"],
                            "--eos", VECTORS["eos"], "--now", str(VECTORS["now"]), *args],
                           input=stdin, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_template_renders_as_jinja2_does():
    cases = VECTORS["cases"]
    lines = [json.dumps({"messages": c["messages"], "tools": c["tools"], "template_kwargs": c["kwargs"],
                         "add_generation_prompt": c["add_generation_prompt"]}) for c in cases]
    out = [json.loads(line) for line in cli("--batch", stdin="\n".join(lines) + "\n").splitlines()]
    assert len(out) == len(cases)
    for i, (c, o) in enumerate(zip(cases, out)):
        if "error" in c:
            assert "error" in o, f"case {i}: jinja2 refuses it ({c['error']})"
        else:
            assert o.get("rendered") == c["rendered"], f"case {i}"


def assistant_turns():
    """The template's renders of a conversation ending with an assistant turn: the turn's text
    after its prompt, and the message it came from."""
    for c in VECTORS["cases"]:
        msgs = c["messages"]
        if c["add_generation_prompt"] or "error" in c or msgs[-1]["role"] != "assistant":
            continue
        prompt = json.loads(cli("--batch", stdin=json.dumps(
            {"messages": msgs[:-1], "tools": c["tools"], "template_kwargs": c["kwargs"],
             "add_generation_prompt": True}) + "\n"))["rendered"]
        assert c["rendered"].startswith(prompt)
        yield c, c["rendered"][len(prompt):]


def test_the_templates_own_assistant_turns_parse_back():
    seen = 0
    for c, reply in assistant_turns():
        want = c["messages"][-1]
        args = ["--messages", json.dumps(c["messages"][:-1]), "--parse-output", reply]
        if c["tools"]:
            args += ["--tools", json.dumps(c["tools"])]
        got = json.loads(cli(*args))
        calls = want.get("tool_calls") or []
        # The template writes a tool call's content, like reasoning, on the analysis channel.
        analysis = want.get("reasoning_content") or (want.get("content") if calls else "") or ""
        assert got.get("reasoning_content", "") == analysis, reply
        assert [(t["function"]["name"], json.loads(t["function"]["arguments"])) for t in got.get("tool_calls", [])] == \
            [(t["function"]["name"], json.loads(t["function"]["arguments"])) for t in calls], reply
        if not calls:
            assert got.get("content") == want["content"], reply
        seen += 1
    assert seen >= 2, "the vectors hold a reasoned answer and a reasoned tool call"


@pytest.fixture(scope="module")
def harmony_server():
    with temp_file(SOURCE, ".jinja") as path, Server("--chat-template", path, "--log-level", "warn") as s:
        yield s


def forced(server, reply, tools=None, stream=False, **extra):
    """The server's answer when the model writes `reply` (forced by a grammar, greedy)."""
    kw = {"tools": tools} if tools else {}
    return openai_client(server).chat.completions.create(
        model="default", messages=ASK, temperature=0, max_tokens=200, stream=stream,
        extra_body={"grammar": literal_grammar(reply), **extra}, **kw)


def test_reasoning_and_final_answer(harmony_server):
    r = forced(harmony_server, REASONING_AND_FINAL)
    m = r.choices[0].message
    assert m.model_extra.get("reasoning_content") == "The user wants the weather."
    assert m.content == "It is sunny in Paris."
    assert r.choices[0].finish_reason == "stop"
    assert not m.tool_calls


def test_one_tool_call(harmony_server):
    r = forced(harmony_server, ONE_CALL, tools=[WEATHER])
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert c.message.model_extra.get("reasoning_content") == "I need the weather tool."
    assert not c.message.content
    [call] = c.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather" and call.id.startswith("call_")
    assert json.loads(call.function.arguments) == {"city": "Paris"}


def test_two_tool_calls(harmony_server):
    r = forced(harmony_server, TWO_CALLS, tools=[WEATHER, TIME])
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    got = [(t.function.name, json.loads(t.function.arguments)) for t in c.message.tool_calls]
    assert got == [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})]
    assert len({t.id for t in c.message.tool_calls}) == 2


def stream_fields(chunks):
    reasoning, content, calls, finish = "", "", {}, None
    for chunk in chunks:
        if not chunk.choices:
            continue
        c = chunk.choices[0]
        reasoning += (c.delta.model_extra or {}).get("reasoning_content") or ""
        content += c.delta.content or ""
        for t in c.delta.tool_calls or []:
            if t.index not in calls:
                assert t.id and t.function.name, "a call's first delta names it"
                calls[t.index] = [t.function.name, ""]
            else:
                assert not t.id, "only the first delta carries the id"
            calls[t.index][1] += t.function.arguments or ""
        finish = c.finish_reason or finish
    return reasoning, content, [(n, json.loads(a)) for _, (n, a) in sorted(calls.items())], finish


def test_streamed_reasoning_and_answer(harmony_server):
    reasoning, content, calls, finish = stream_fields(forced(harmony_server, REASONING_AND_FINAL, stream=True))
    assert (reasoning, content, calls, finish) == ("The user wants the weather.", "It is sunny in Paris.", [], "stop")


def test_streamed_tool_calls(harmony_server):
    reasoning, content, calls, finish = stream_fields(
        forced(harmony_server, TWO_CALLS, tools=[WEATHER, TIME], stream=True))
    assert calls == [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})]
    assert finish == "tool_calls" and not content and not reasoning


def test_no_markers_reach_the_content(harmony_server):
    """Without tools a call's message is dropped, and no harmony marker is ever content."""
    r = forced(harmony_server, ONE_CALL)
    m = r.choices[0].message
    assert not m.tool_calls
    assert "<|" not in (m.content or "")
    assert m.model_extra.get("reasoning_content") == "I need the weather tool."


# A harmony template (its markers) that shows which reasoning effort reached it.
EFFORT_TEMPLATE = ("{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
                   "<|start|>system<|message|>Reasoning: {{ reasoning_effort | default('medium') }}"
                   "{% if reasoning_effort == 'high' %}. Take every step slowly, check each one twice, and only "
                   "then answer.{% endif %}<|end|><|start|>assistant")


def test_reasoning_effort_reaches_the_template():
    with temp_file(EFFORT_TEMPLATE, ".jinja") as path, Server("--chat-template", path, "--log-level", "warn") as s:
        def prompt_tokens(**extra):
            r = httpx.post(s.url + "/v1/chat/completions", timeout=120,
                           json={"messages": ASK, "max_tokens": 1, **extra})
            assert r.status_code == 200, r.text
            return r.json()["usage"]["prompt_tokens"]
        low, high = prompt_tokens(reasoning_effort="low"), prompt_tokens(reasoning_effort="high")
        assert high > low + 10, (low, high)
        r = httpx.post(s.url + "/v1/chat/completions", timeout=30,
                       json={"messages": ASK, "max_tokens": 1, "reasoning_effort": "extreme"})
        assert r.status_code == 400 and "reasoning_effort" in r.json()["error"]["message"]
