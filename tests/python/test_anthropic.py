"""Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) against a real
server, driven by the anthropic SDK: a translation onto the chat path, so the same
conversation gives the same greedy reply and prompt count as /v1/chat/completions.

Tools and thinking run on the template test_tools_reasoning.py writes for the default model
(Hermes-style tools, <think> sections): a history of earlier calls makes greedy decoding call
the tool again, and enable_thinking opens a thinking section.
"""
import json
import textwrap
import uuid

import anthropic
import httpx
import pytest

from conftest import Server, temp_file
from test_tools_reasoning import TEMPLATE

WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}

TENANTS = textwrap.dedent("""\
    tenants:
      - name: open
        api_keys: [sk-ant-open]
      - name: tiny
        api_keys: [sk-ant-tiny]
        requests_per_minute: 1
    """)


def client(server, key="unused", **kw):
    """The anthropic SDK on the server, with no retries (a refusal shows as it comes)."""
    return anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0, timeout=120, **kw)


def sampling(temperature=0, **extra):
    """Sampling fields as extra body fields: the SDK's create() no longer names them (newer
    Anthropic models fix them), while older clients and agents still send them."""
    return {"extra_body": {"temperature": temperature, **extra}}


def user(text):
    return [{"role": "user", "content": text}]


def weather_history(n=4):
    """n earlier turns in which the assistant called get_weather for Paris, as Anthropic blocks."""
    msgs = []
    for i in range(n):
        msgs += [{"role": "user", "content": "What is the weather in Paris?"},
                 {"role": "assistant", "content": [
                     {"type": "tool_use", "id": f"toolu_{i}", "name": "get_weather", "input": {"city": "Paris"}}]},
                 {"role": "user", "content": [
                     {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "sunny"}]},
                 {"role": "assistant", "content": "It is sunny."}]
    return msgs + [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def tool_server():
    with temp_file(TEMPLATE, ".jinja") as path, Server("--chat-template", path, "--log-level", "warn") as s:
        yield s


@pytest.fixture(scope="module")
def keyed_server():
    with temp_file(TENANTS) as path, Server("--config", path, "--log-level", "warn") as s:
        yield s


def test_a_message_is_the_chat_paths_reply(server):
    msgs = user("Name three colours.")
    m = client(server).messages.create(model="claude-test", max_tokens=12, **sampling(), messages=msgs,
                                       system="You are terse.")
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert m.model == "claude-test"
    assert [b.type for b in m.content] == ["text"] and m.content[0].text
    assert m.stop_reason in ("end_turn", "max_tokens")
    assert 0 < m.usage.output_tokens <= 12 and m.usage.input_tokens + m.usage.cache_read_input_tokens > 10
    chat = httpx.post(server.url + "/v1/chat/completions", timeout=120, json={
        "messages": [{"role": "system", "content": "You are terse."}] + msgs, "max_tokens": 12,
        "temperature": 0}).json()
    assert m.content[0].text == chat["choices"][0]["message"]["content"]
    assert m.usage.input_tokens + m.usage.cache_read_input_tokens == chat["usage"]["prompt_tokens"]
    assert m.usage.output_tokens == chat["usage"]["completion_tokens"]


def test_max_tokens_and_stop_sequences_end_the_reply(server):
    c = client(server)
    msgs = user("Write a long story about a dragon.")
    cut = c.messages.create(model="m", max_tokens=5, messages=msgs, **sampling(ignore_eos=True))
    assert cut.stop_reason == "max_tokens" and cut.stop_sequence is None and cut.usage.output_tokens == 5

    whole = c.messages.create(model="m", max_tokens=24, **sampling(), messages=msgs).content[0].text
    word = whole.split()[len(whole.split()) // 2]
    expected = whole[:whole.find(word)]
    for stops in ([word], ["never-in-the-reply", word]):
        m = c.messages.create(model="m", max_tokens=24, **sampling(), messages=msgs, stop_sequences=stops)
        assert m.stop_reason == "stop_sequence" and m.stop_sequence == word, (stops, m)
        assert (m.content[0].text if m.content else "") == expected
    m = c.messages.create(model="m", max_tokens=24, **sampling(), messages=msgs,
                          stop_sequences=["never-in-the-reply"])
    assert m.stop_reason != "stop_sequence" and m.stop_sequence is None


def test_a_stream_is_anthropics_event_order(server):
    c = client(server)
    msgs = user("Tell me about the sea.")
    # On the wire: each event's name is its data's type; a ping follows message_start (the
    # SDK drops pings, so they are read here).
    body = {"model": "m", "max_tokens": 16, "temperature": 0, "messages": msgs, "stream": True}
    with httpx.stream("POST", server.url + "/v1/messages", json=body, timeout=120) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        wire = [e for e in r.read().decode().split("\n\n") if e]
    names = []
    for e in wire:
        event, data = e.split("\n")
        assert event.startswith("event: ") and data.startswith("data: ")
        names.append(event[len("event: "):])
        assert json.loads(data[len("data: "):])["type"] == names[-1]
    assert names[:2] == ["message_start", "ping"], names

    events = list(c.messages.create(model="m", max_tokens=16, **sampling(), messages=msgs, stream=True))
    kinds = [e.type for e in events]
    assert kinds == [n for n in names if n != "ping"], (kinds, names)
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"], kinds
    # Blocks: start, deltas, stop, with rising indexes and nothing in between.
    open_index, next_index, text = None, 0, ""
    for e in events[1:-2]:
        if e.type == "content_block_start":
            assert open_index is None and e.index == next_index
            open_index, next_index = e.index, next_index + 1
        elif e.type == "content_block_delta":
            assert e.index == open_index and e.delta.type == "text_delta"
            text += e.delta.text
        else:
            assert e.type == "content_block_stop" and e.index == open_index
            open_index = None
    assert open_index is None and next_index == 1
    assert events[0].message.content == [] and events[0].message.stop_reason is None
    final = events[-2]
    assert final.delta.stop_reason in ("end_turn", "max_tokens") and 0 < final.usage.output_tokens <= 16
    whole = c.messages.create(model="m", max_tokens=16, **sampling(), messages=msgs)
    assert text == whole.content[0].text
    assert final.usage.output_tokens == whole.usage.output_tokens
    # The SDK's own accumulation reads the same message.
    with c.messages.stream(model="m", max_tokens=16, **sampling(), messages=msgs) as s:
        assert s.get_final_text() == text
        assert s.get_final_message().usage.output_tokens == whole.usage.output_tokens


def test_a_forced_tool_choice_is_a_tool_use_block(tool_server):
    c = client(tool_server)
    m = c.messages.create(model="m", max_tokens=60, messages=user("Hello there!"), tools=[WEATHER],
                          tool_choice={"type": "tool", "name": "get_weather"}, **sampling(0.8))
    assert m.stop_reason == "tool_use", m
    calls = [b for b in m.content if b.type == "tool_use"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].id
    assert isinstance(calls[0].input["city"], str)

    # Streamed: the input arrives as input_json_delta pieces that join into the same object.
    with c.messages.stream(model="m", max_tokens=60, messages=user("Hello there!"), tools=[WEATHER],
                           tool_choice={"type": "tool", "name": "get_weather"}, **sampling()) as s:
        pieces = [e.delta.partial_json for e in s if e.type == "content_block_delta"
                  and e.delta.type == "input_json_delta"]
        final = s.get_final_message()
    assert pieces and final.stop_reason == "tool_use"
    call = [b for b in final.content if b.type == "tool_use"][0]
    assert json.loads("".join(pieces)) == call.input and isinstance(call.input["city"], str)


def test_a_tool_round_trip(tool_server):
    c = client(tool_server)
    msgs = weather_history()
    m = c.messages.create(model="m", max_tokens=40, **sampling(), messages=msgs, tools=[WEATHER])
    assert m.stop_reason == "tool_use", m
    call = [b for b in m.content if b.type == "tool_use"][0]
    assert call.name == "get_weather" and call.input == {"city": "Paris"}

    # The reply goes back as the assistant's turn, the result as a tool_result block.
    msgs += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]}]
    after = c.messages.create(model="m", max_tokens=12, **sampling(), messages=msgs, tools=[WEATHER])
    assert after.stop_reason != "tool_use" and after.content[0].type == "text", after
    assert "sunny" in after.content[0].text, after
    assert after.usage.input_tokens + after.usage.cache_read_input_tokens > (
        m.usage.input_tokens + m.usage.cache_read_input_tokens) + 5

    # A result for a call nobody made is refused, naming the block.
    with pytest.raises(anthropic.BadRequestError) as e:
        c.messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_nobody", "content": "x"}]}])
    assert "messages[0].content[0].tool_use_id" in e.value.message


def test_thinking_with_a_budget(tool_server):
    c = client(tool_server)
    msgs = user("Tell me about the sea.")
    free = c.messages.create(model="m", max_tokens=12, **sampling(), messages=msgs,
                             thinking={"type": "enabled", "budget_tokens": 1024})
    assert [b.type for b in free.content] == ["thinking"], free
    assert free.content[0].thinking and free.stop_reason == "max_tokens"

    short = c.messages.create(model="m", max_tokens=30, **sampling(), messages=msgs,
                              thinking={"type": "enabled", "budget_tokens": 4})
    kinds = [b.type for b in short.content]
    assert kinds[0] == "thinking" and "text" in kinds, short
    assert len(short.content[0].thinking) < len(free.content[0].thinking)
    assert short.content[0].thinking.strip()[:8] in free.content[0].thinking

    # Streamed: thinking_delta pieces in block 0, then text_delta pieces in a later block.
    deltas = [(e.index, e.delta.type) for e in c.messages.create(
        model="m", max_tokens=30, **sampling(), messages=msgs, stream=True,
        thinking={"type": "enabled", "budget_tokens": 4}) if e.type == "content_block_delta"]
    assert deltas[0] == (0, "thinking_delta") and (1, "text_delta") in deltas, deltas
    assert all(t == "thinking_delta" for i, t in deltas if i == 0)

    # Without thinking the template opens no section: the reply is text.
    plain = c.messages.create(model="m", max_tokens=12, **sampling(), messages=msgs)
    assert [b.type for b in plain.content] == ["text"]


def test_count_tokens_is_the_prompts_usage(server, tool_server):
    # A prompt no earlier request began with: nothing comes from the prefix cache.
    msgs = user(f"Request {uuid.uuid4()}: what now?")
    c = client(server)
    count = c.messages.count_tokens(model="m", messages=msgs, system="Answer in French.").input_tokens
    m = c.messages.create(model="m", max_tokens=2, messages=msgs, system="Answer in French.")
    assert m.usage.cache_read_input_tokens == 0 and count == m.usage.input_tokens > 10, (count, m.usage)

    # With tools and tool turns (the template's tool list may come from the cache: Anthropic's
    # input_tokens leaves cache reads out, so the two add up to the count).
    c = client(tool_server)
    msgs = weather_history(1)[:-1] + msgs
    count = c.messages.count_tokens(model="m", messages=msgs, tools=[WEATHER]).input_tokens
    m = c.messages.create(model="m", max_tokens=2, messages=msgs, tools=[WEATHER])
    assert count == m.usage.input_tokens + m.usage.cache_read_input_tokens, (count, m.usage)
    assert count > c.messages.count_tokens(model="m", messages=msgs).input_tokens + 20, "the tools are counted"


def test_bad_requests_are_invalid_request_errors(server):
    url = server.url + "/v1/messages"
    cases = [
        ({"messages": user("x")}, "max_tokens"),
        ({"max_tokens": 4, "messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
        ({"max_tokens": 4, "messages": []}, "messages"),
        ({"max_tokens": 4, "messages": user("x"), "temperature": 5}, "temperature"),
        ({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
         "messages[0].content[0].source.type"),
        ({"max_tokens": 4, "messages": [{"role": "assistant", "content": [{"type": "image", "source": {}}]}]},
         "messages[0].content[0].type"),
        ({"max_tokens": 4, "messages": user("x"), "tools": [{"type": "web_search_20250305", "name": "s"}]},
         "tools[0].type"),
        ({"max_tokens": 4, "messages": user("x"), "tool_choice": {"type": "any"}}, "tool_choice"),
    ]
    for body, field in cases:
        r = httpx.post(url, json=body, headers={"anthropic-version": "2023-06-01"}, timeout=30)
        assert r.status_code == 400, (body, r.text)
        err = r.json()
        assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error", r.text
        assert field in err["error"]["message"], (field, r.text)
    r = httpx.post(url, content=b"{not json", headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    # The SDK raises the class of the status, with the body's type.
    with pytest.raises(anthropic.BadRequestError) as e:
        client(server).messages.create(model="m", max_tokens=4, messages=[{"role": "tool", "content": "x"}])
    assert e.value.body["error"]["type"] == "invalid_request_error"
    # Other statuses of the routes, same shape.
    r = httpx.get(url, timeout=30)
    assert r.status_code == 405 and r.json()["type"] == "error"
    r = httpx.post(server.url + "/v1/messages/batches", json={}, timeout=30)
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    big = json.dumps({"max_tokens": 4, "messages": user("x" * (2 << 20))})
    r = httpx.post(url, content=big, headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large", r.text


def test_keys_from_either_header(keyed_server, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    bearer = client(keyed_server, "sk-ant-open")
    assert bearer.messages.create(model="m", max_tokens=2, messages=user("Hi")).usage.output_tokens > 0
    header = anthropic.Anthropic(base_url=keyed_server.url, default_headers={"x-api-key": "sk-ant-open"},
                                 max_retries=0, timeout=120)
    assert header.messages.create(model="m", max_tokens=2, messages=user("Hi")).usage.output_tokens > 0
    assert header.messages.count_tokens(model="m", messages=user("Hi")).input_tokens > 0

    wrong = [client(keyed_server, "sk-ant-wrong"),
             anthropic.Anthropic(base_url=keyed_server.url, default_headers={"x-api-key": "sk-ant-wrong"},
                                 max_retries=0, timeout=120)]
    for c in wrong:
        with pytest.raises(anthropic.AuthenticationError) as e:
            c.messages.create(model="m", max_tokens=2, messages=user("Hi"))
        assert e.value.status_code == 401 and e.value.body["error"]["type"] == "authentication_error"
        with pytest.raises(anthropic.AuthenticationError):
            c.messages.count_tokens(model="m", messages=user("Hi"))
        with pytest.raises(anthropic.AuthenticationError):
            list(c.messages.create(model="m", max_tokens=2, messages=user("Hi"), stream=True))
    r = httpx.post(keyed_server.url + "/v1/messages", json={"max_tokens": 2, "messages": user("Hi")}, timeout=30)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"


def test_a_spent_bucket_is_a_rate_limit_error_with_retry_after(keyed_server):
    c = client(keyed_server, "sk-ant-tiny")
    c.messages.create(model="m", max_tokens=1, messages=user("Hi"))
    with pytest.raises(anthropic.RateLimitError) as e:
        c.messages.create(model="m", max_tokens=1, messages=user("Hi"))
    assert e.value.status_code == 429 and e.value.body["error"]["type"] == "rate_limit_error"
    assert int(e.value.response.headers["retry-after"]) >= 1
    assert e.value.response.headers["x-ratelimit-remaining-requests"] == "0"
    with pytest.raises(anthropic.RateLimitError):  # streamed: refused before any event
        list(c.messages.create(model="m", max_tokens=1, messages=user("Hi"), stream=True))


def test_a_client_that_leaves_mid_stream_frees_its_blocks(server):
    before = server.metrics()["tandem:requests_cancelled_total"]
    c = client(server)
    for _ in range(3):
        with c.messages.stream(model="m", max_tokens=2000, messages=user("Count to a thousand."),
                               **sampling(ignore_eos=True)) as s:
            seen = 0
            for e in s:
                seen += e.type == "content_block_delta"
                if seen == 3:
                    break  # leaving the block closes the connection mid-stream
        assert seen == 3
    m = server.wait_idle()
    assert m["tandem:num_requests_running"] == 0 and m["tandem:kv_blocks_used"] == 0, m
    assert m["tandem:requests_in_flight"] == 0, m
    assert server.metrics()["tandem:requests_cancelled_total"] >= before + 3
