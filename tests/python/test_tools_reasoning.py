"""Tools, tool calls, reasoning content and raw prompts against a real server, with the openai SDK.

The default model (SmolLM2-135M) was not trained for tools, so the server here runs it with a
template written for the test (Hermes-style tools, <think> sections, --chat-template FILE) and
the conversation shows the model earlier turns that called a tool: greedy decoding then
copies the pattern, and the reply is parsed as a real tool call.
"""
import json

import httpx
import pytest

from conftest import Server, openai_client, temp_file

TEMPLATE = r"""
{%- if tools %}<|im_start|>system
You can call functions. Call one as <tool_call>{"name": ..., "arguments": ...}</tool_call>.
<tools>
{%- for t in tools %}
{{ t | tojson }}
{%- endfor %}
</tools><|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'assistant' %}<|im_start|>assistant
{% if m.reasoning_content %}<think>
{{ m.reasoning_content }}
</think>
{% endif %}
{%- if m.content %}{{ m.content }}{% endif %}
{%- if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% endfor %}{% endif %}<|im_end|>
{% elif m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking %}<think>
{% endif %}{% endif %}
"""

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def history(n=4):
    """n earlier turns in which the assistant called get_weather for Paris."""
    msgs = []
    for i in range(n):
        msgs += [{"role": "user", "content": "What is the weather in Paris?"},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": f"call_{i}", "type": "function",
                      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                 {"role": "tool", "tool_call_id": f"call_{i}", "content": "sunny"},
                 {"role": "assistant", "content": "It is sunny."}]
    return msgs + [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def tool_server():
    with temp_file(TEMPLATE, ".jinja") as path, Server("--chat-template", path, "--log-level", "warn") as s:
        yield s


def test_tool_call_parsed_from_the_reply(tool_server):
    r = openai_client(tool_server).chat.completions.create(
        model="default", messages=history(), tools=[WEATHER], temperature=0, max_tokens=40)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    calls = choice.message.tool_calls
    assert calls and calls[0].type == "function" and calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments) == {"city": "Paris"}
    assert calls[0].id.startswith("call_")
    assert not choice.message.content


def test_tool_call_streamed_as_openai_does(tool_server):
    stream = openai_client(tool_server).chat.completions.create(
        model="default", messages=history(), tools=[WEATHER], temperature=0, max_tokens=40, stream=True)
    names, args, ids, finish = [], "", [], None
    for chunk in stream:
        if not chunk.choices:
            continue
        c = chunk.choices[0]
        for t in c.delta.tool_calls or []:
            assert t.index == 0
            if t.id:
                ids.append(t.id)
                names.append(t.function.name)
            args += t.function.arguments or ""
        finish = c.finish_reason or finish
    assert finish == "tool_calls"
    assert names == ["get_weather"] and len(ids) == 1, "the first piece carries id and name, once"
    assert json.loads(args) == {"city": "Paris"}


def test_tools_reach_the_template_and_none_keeps_them_out(tool_server):
    c = openai_client(tool_server)
    msgs = [{"role": "user", "content": "Hi"}]
    with_tools = c.chat.completions.create(model="default", messages=msgs, tools=[WEATHER], max_tokens=1)
    without = c.chat.completions.create(model="default", messages=msgs, max_tokens=1)
    none = c.chat.completions.create(model="default", messages=msgs, tools=[WEATHER], tool_choice="none",
                                     max_tokens=1)
    assert with_tools.usage.prompt_tokens > without.usage.prompt_tokens + 20, "the tool list is in the prompt"
    assert none.usage.prompt_tokens == without.usage.prompt_tokens


def test_without_tools_the_same_reply_is_plain_content(tool_server):
    msgs = history()
    r = httpx.post(tool_server.url + "/v1/chat/completions", timeout=120,
                   json={"messages": msgs, "temperature": 0, "max_tokens": 40}).json()
    assert r["choices"][0]["finish_reason"] != "tool_calls"
    assert "tool_calls" not in r["choices"][0]["message"]
    assert "<tool_call>" in r["choices"][0]["message"]["content"], "no parser without tools: the text stays"


def test_reasoning_content_and_the_thinking_budget(tool_server):
    c = openai_client(tool_server)
    kw = {"chat_template_kwargs": {"enable_thinking": True}}
    msgs = [{"role": "user", "content": "Tell me about the sea."}]
    r = c.chat.completions.create(model="default", messages=msgs, temperature=0, max_tokens=12, extra_body=kw)
    m = r.choices[0].message
    reasoning = m.model_extra.get("reasoning_content")
    assert reasoning, "the prompt opened a thinking section: the reply is reasoning"
    assert not m.content

    # With a budget of 4 the section is closed after ~4 tokens; the answer follows as content.
    r = c.chat.completions.create(model="default", messages=msgs, temperature=0, max_tokens=30,
                                  extra_body={**kw, "thinking_token_budget": 4})
    m = r.choices[0].message
    short = m.model_extra.get("reasoning_content") or ""
    assert short and len(short) < len(reasoning), (short, reasoning)
    assert m.content, "after the forced </think> the model answers"

    # Streamed: reasoning deltas first, then content.
    kinds = []
    for chunk in c.chat.completions.create(model="default", messages=msgs, temperature=0, max_tokens=30,
                                           stream=True, extra_body={**kw, "thinking_token_budget": 4}):
        if chunk.choices:
            d = chunk.choices[0].delta
            if (d.model_extra or {}).get("reasoning_content"):
                kinds.append("r")
            if d.content:
                kinds.append("c")
    assert kinds and kinds[0] == "r" and "c" in kinds
    assert "r" not in kinds[kinds.index("c"):], "no reasoning after the content began"


TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
                   "required": ["zone"]}}}


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_time"}}])
def test_forced_tool_choice_is_a_valid_call(tool_server, choice):
    """tool_choice required or named: the reply is constrained to one call, sampled, with no history to copy."""
    c = openai_client(tool_server)
    for seed in range(3):
        r = c.chat.completions.create(model="default", messages=[{"role": "user", "content": "Hello there!"}],
                                      tools=[WEATHER, TIME], tool_choice=choice, temperature=0.8, seed=seed,
                                      max_tokens=60)
        ch = r.choices[0]
        assert ch.finish_reason == "tool_calls", ch
        call = ch.message.tool_calls[0]
        args = json.loads(call.function.arguments)
        if isinstance(choice, dict) or call.function.name == "get_time":
            assert call.function.name == "get_time" and args["zone"] in ("UTC", "CET"), call
        else:
            assert call.function.name == "get_weather" and isinstance(args["city"], str), call


def test_tool_requests_checked(tool_server):
    url = tool_server.url + "/v1/chat/completions"
    msgs = [{"role": "user", "content": "Hi"}]
    cases = [
        ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0].function.name"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "other"}}}, "tool_choice"),
        ({"tool_choice": "auto"}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        ({"tools": [WEATHER], "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
    ]
    for extra, param in cases:
        r = httpx.post(url, json={"messages": msgs, "max_tokens": 1, **extra}, timeout=30)
        assert r.status_code == 400, (extra, r.text)
        assert r.json()["error"]["param"] == param, r.text


def test_raw_prompts_read_control_tokens(server):
    """/v1/completions reads "<|im_start|>" in a prompt as the control token (one token)."""
    text = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    r = httpx.post(server.url + "/v1/completions", json={"prompt": text, "max_tokens": 1}, timeout=30).json()
    with Server("--plain-text-prompts", "--log-level", "warn") as plain:
        p = httpx.post(plain.url + "/v1/completions", json={"prompt": text, "max_tokens": 1}, timeout=30).json()
    assert r["usage"]["prompt_tokens"] + 10 < p["usage"]["prompt_tokens"], (r["usage"], p["usage"])
