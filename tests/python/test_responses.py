"""The Responses API against a real `tandem serve`: POST /v1/responses through the openai SDK's
responses client (plain, streamed, json_schema text.format, continued by previous_response_id,
retrieved and deleted), its errors, tenant isolation of the stored responses, and the WebSocket
mode on /v1/responses with the websockets client (and the SDK's own connect()): events through
response.completed, a continuation on the same socket, one response at a time per stream,
concurrent ones on distinct stream_id lanes, response.cancel and cancel on disconnect.
"""
import json
import time

import httpx
import jsonschema
import openai
import pytest
from websockets.sync.client import connect

from conftest import openai_client

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
ENDS = ("response.completed", "response.incomplete", "response.failed", "error")


def tokenize_chat(server, messages):
    return httpx.post(server.url + "/tokenize", json={"messages": messages}, timeout=60).json()["count"]


def ws_url(server):
    return server.url.replace("http://", "ws://") + "/v1/responses"


def until_end(ws, ends=1):
    """Events until `ends` of them closed a response (or refused one)."""
    out = []
    while ends > 0:
        e = json.loads(ws.recv(timeout=120))
        out.append(e)
        ends -= e["type"] in ENDS
    return out


def test_plain_create(server):
    r = openai_client(server).responses.create(model="default", input="Say hello.", instructions="Be brief.",
                                        max_output_tokens=8, temperature=0, metadata={"case": "plain"})
    assert r.id.startswith("resp_") and r.object == "response"
    assert r.output[0].type == "message" and r.output[0].role == "assistant"
    assert r.output[0].id.startswith("msg_")
    assert r.output_text and r.output[0].content[0].type == "output_text"
    assert r.instructions == "Be brief." and r.metadata == {"case": "plain"} and r.max_output_tokens == 8
    assert 0 < r.usage.output_tokens <= 8
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    if r.usage.output_tokens == 8:
        assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    else:
        assert r.status == "completed" and r.incomplete_details is None
    again = openai_client(server).responses.retrieve(r.id)
    assert again.id == r.id and again.output_text == r.output_text


def test_streamed_events_in_order(server):
    events = list(openai_client(server).responses.create(model="default", input="Count to five.", max_output_tokens=12,
                                                  temperature=0, stream=True))
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"], types
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          events[-1].type] and events[-1].type in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas and deltas == events[-4].text == events[-1].response.output_text
    assert events[0].response.status == "in_progress" and events[0].response.id == events[-1].response.id


def test_json_schema_text_format_validates(server):
    r = openai_client(server).responses.create(
        model="default", input="Describe a person as JSON.", max_output_tokens=120, temperature=0.7, extra_body={"seed": 5},
        text={"format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}})
    assert r.status == "completed", r
    jsonschema.validate(json.loads(r.output_text), PERSON)
    assert r.text.format.type == "json_schema"


def test_continuation_reuses_the_prefix_and_sees_the_earlier_turn(server):
    c = openai_client(server)
    first = c.responses.create(model="default", input="My name is Ada. Greet me.", max_output_tokens=16,
                               temperature=0)
    second = c.responses.create(model="default", input="What is my name?", previous_response_id=first.id,
                                max_output_tokens=8, temperature=0)
    assert second.previous_response_id == first.id
    assert second.usage.input_tokens_details.cached_tokens > 0
    # The prompt is the earlier turn (its input and output) followed by the new input.
    assert second.usage.input_tokens == tokenize_chat(server, [
        {"role": "user", "content": "My name is Ada. Greet me."},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "What is my name?"}])
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens - 2


WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def test_function_calls_and_their_outputs(server):
    c = openai_client(server)
    events = list(c.responses.create(model="default", input="What is the weather in Paris?", tools=[WEATHER],
                                     tool_choice="required", max_output_tokens=64, temperature=0, stream=True))
    done = events[-1].response
    calls = [o for o in done.output if o.type == "function_call"]
    assert done.status == "completed" and len(calls) == 1, done.output
    call = calls[0]
    assert call.name == "get_weather" and call.call_id and "city" in json.loads(call.arguments)
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert args == call.arguments
    assert "response.function_call_arguments.done" in [e.type for e in events]
    # The tool's result goes back as a function_call_output item, continuing the response.
    after = c.responses.create(model="default", previous_response_id=done.id, tools=[WEATHER], max_output_tokens=8,
                               input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}])
    assert after.output[0].type == "message" and after.usage.input_tokens_details.cached_tokens > 0


def test_unknown_or_unstored_previous_response_is_404(server):
    c = openai_client(server)
    with pytest.raises(openai.NotFoundError) as e:
        c.responses.create(model="default", input="x", previous_response_id="resp_000000000000000000000000")
    assert e.value.body["param"] == "previous_response_id"
    assert e.value.body["code"] == "previous_response_not_found"
    unstored = c.responses.create(model="default", input="Hi", max_output_tokens=2, store=False)
    with pytest.raises(openai.NotFoundError):
        c.responses.create(model="default", input="x", previous_response_id=unstored.id, max_output_tokens=2)


def test_delete_forgets_the_response(server):
    c = openai_client(server)
    r = c.responses.create(model="default", input="Hi", max_output_tokens=2)
    c.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve(r.id)
    assert httpx.delete(f"{server.url}/v1/responses/{r.id}").status_code == 404


@pytest.mark.parametrize("body, param, words", [
    ({"model": "m"}, "input", "required"),
    ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role", "robot"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]},
     "input[0].content[0].image_url", "data: URI"),
    ({"input": [{"role": "assistant", "content": [{"type": "input_image", "image_url": "data:,x"}]}]},
     "input[0].content[0].type", "user messages"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type", "web_search"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens", "1"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "name": "n"}}}, "text.format.schema", "schema"),
    ({"input": "x", "background": True}, "background", "not supported"),
])
def test_bad_input_is_400_naming_the_field(server, body, param, words):
    r = httpx.post(server.url + "/v1/responses", json=body, timeout=60)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and words in err["message"], err


def test_a_prompt_longer_than_the_context_is_400_streamed_or_not(server):
    long_input = "word " * 9000  # more tokens than the default model's 8192
    for stream in (False, True):
        r = httpx.post(server.url + "/v1/responses", json={"input": long_input, "stream": stream,
                                                            "max_output_tokens": 4}, timeout=120)
        assert r.status_code == 400, (stream, r.text[:300])
        assert r.json()["error"]["param"] == "input"


def test_tenants_see_only_their_own_responses(tenant_server):
    alice, other = openai_client(tenant_server, "sk-alice"), openai_client(tenant_server, "sk-single")
    r = alice.responses.create(model="default", input="My name is Ada.", max_output_tokens=4)
    with pytest.raises(openai.NotFoundError) as e:
        other.responses.create(model="default", input="What is my name?", previous_response_id=r.id,
                               max_output_tokens=2)
    assert e.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(r.id)
    with pytest.raises(openai.AuthenticationError):
        openai_client(tenant_server, "sk-nobody").responses.create(model="default", input="x",
                                                                   previous_response_id=r.id)
    with pytest.raises(openai.AuthenticationError):
        openai_client(tenant_server, "sk-nobody").responses.create(model="default", input="x", max_output_tokens=2)
    assert alice.responses.create(model="default", input="What is my name?", previous_response_id=r.id,
                                  max_output_tokens=2).previous_response_id == r.id
    text = httpx.get(tenant_server.url + "/metrics").text
    assert 'tandem:requests_total{tenant="alice",status="200"}' in text


def test_websocket_create_then_continue_on_the_same_socket(server):
    with connect(ws_url(server)) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "default", "input": "My name is Ada.",
                            "max_output_tokens": 8, "temperature": 0}))
        first = until_end(ws)
        types = [e["type"] for e in first]
        assert types[0] == "response.created" and types[-1] in ("response.completed", "response.incomplete")
        assert [e["sequence_number"] for e in first] == list(range(len(first)))
        text = "".join(e["delta"] for e in first if e["type"] == "response.output_text.delta")
        assert text == first[-1]["response"]["output"][0]["content"][0]["text"]
        rid = first[-1]["response"]["id"]
        ws.send(json.dumps({"type": "response.create", "input": "What is my name?", "previous_response_id": rid,
                            "max_output_tokens": 4}))
        second = until_end(ws)[-1]["response"]
        assert second["previous_response_id"] == rid
        assert second["usage"]["input_tokens_details"]["cached_tokens"] > 0
        assert second["usage"]["input_tokens"] > first[-1]["response"]["usage"]["input_tokens"]
        ws.send(json.dumps({"type": "response.create", "input": "x", "previous_response_id": "resp_nope"}))
        err = until_end(ws)[-1]
        assert err["type"] == "error" and err["status"] == 404
        assert err["error"]["code"] == "previous_response_not_found"
        ws.send(json.dumps({"input": "x"}))
        err = until_end(ws)[-1]
        assert err["status"] == 400 and err["error"]["param"] == "type" and "response.create" in err["error"]["message"]
        ws.send(json.dumps({"type": "response.create", "input": "x", "tools": [{"type": "file_search"}]}))
        err = until_end(ws)[-1]
        assert err["status"] == 400 and err["error"]["param"] == "tools[0].type", err


def test_websocket_continues_an_unstored_response_on_its_own_connection(server):
    """store: false keeps nothing in the store, but the socket keeps its latest response (as OpenAI's)."""
    with connect(ws_url(server)) as ws:
        ws.send(json.dumps({"type": "response.create", "input": "My name is Ada.", "max_output_tokens": 4,
                            "store": False}))
        rid = until_end(ws)[-1]["response"]["id"]
        ws.send(json.dumps({"type": "response.create", "input": "What is my name?", "previous_response_id": rid,
                            "max_output_tokens": 2}))
        second = until_end(ws)[-1]
        assert second["type"] in ("response.completed", "response.incomplete"), second
        assert second["response"]["usage"]["input_tokens_details"]["cached_tokens"] > 0
    with connect(ws_url(server)) as ws:
        ws.send(json.dumps({"type": "response.create", "input": "x", "previous_response_id": rid}))
        assert until_end(ws)[-1]["error"]["code"] == "previous_response_not_found"
    with pytest.raises(openai.NotFoundError):
        openai_client(server).responses.retrieve(rid)


def test_websocket_one_response_at_a_time_by_default(server):
    with connect(ws_url(server)) as ws:
        ws.send(json.dumps({"type": "response.create", "input": "Tell a long story.", "max_output_tokens": 64,
                            "ignore_eos": True}))
        ws.send(json.dumps({"type": "response.create", "input": "Hi", "max_output_tokens": 2}))
        events = until_end(ws, 2)
        errors = [e for e in events if e["type"] == "error"]
        assert len(errors) == 1 and errors[0]["error"]["code"] == "response_already_in_flight", errors
        assert events[-1]["type"] == "response.incomplete" and events[-1]["response"]["usage"]["output_tokens"] == 64


def test_websocket_concurrent_responses_on_distinct_stream_ids(server):
    with connect(ws_url(server)) as ws:
        for lane in ("a", "b"):
            ws.send(json.dumps({"type": "response.create", "input": f"Say {lane}.", "max_output_tokens": 16,
                                "ignore_eos": True, "stream_id": lane}))
        events = until_end(ws, 2)
        assert not [e for e in events if e["type"] == "error"]
        by_lane = {lane: [e for e in events if e.get("stream_id") == lane] for lane in ("a", "b")}
        assert len(by_lane["a"]) + len(by_lane["b"]) == len(events), "every event names its stream"
        for lane, evs in by_lane.items():
            assert evs[0]["type"] == "response.created" and evs[-1]["type"] == "response.incomplete", lane
            text = "".join(e["delta"] for e in evs if e["type"] == "response.output_text.delta")
            assert text == evs[-1]["response"]["output"][0]["content"][0]["text"]
        assert by_lane["a"][-1]["response"]["id"] != by_lane["b"][-1]["response"]["id"]


def test_websocket_cancel_and_disconnect_stop_the_generation(server):
    with connect(ws_url(server)) as ws:
        ws.send(json.dumps({"type": "response.create", "input": "Tell a long story.", "max_output_tokens": 2000,
                            "ignore_eos": True}))
        assert json.loads(ws.recv(timeout=60))["type"] == "response.created"
        ws.send(json.dumps({"type": "response.cancel"}))
        last = until_end(ws)[-1]
        assert last["type"] == "response.incomplete" and last["response"]["status"] == "cancelled"
        assert last["response"]["usage"]["output_tokens"] < 2000
    ws = connect(ws_url(server))
    ws.send(json.dumps({"type": "response.create", "input": "Tell a long story.", "max_output_tokens": 2000,
                        "ignore_eos": True}))
    while json.loads(ws.recv(timeout=60))["type"] != "response.output_text.delta":
        pass
    ws.close()
    m = server.wait_idle(timeout=20)
    assert m["tandem:num_requests_running"] == 0 and m["tandem:kv_blocks_used"] == 0


def test_websocket_with_the_sdk_and_a_tenant_key(tenant_server):
    c = openai_client(tenant_server, "sk-alice")
    with c.responses.connect() as conn:
        conn.response.create(model="default", input="Hello", max_output_tokens=4)
        for event in conn:
            if event.type in ENDS:
                break
    assert event.type in ("response.completed", "response.incomplete"), event
    assert event.response.output_text and event.response.id.startswith("resp_")
    # The response it made is alice's: another tenant cannot continue it over its own socket.
    with connect(ws_url(tenant_server), additional_headers={"Authorization": "Bearer sk-single"}) as ws:
        ws.send(json.dumps({"type": "response.create", "input": "x", "previous_response_id": event.response.id}))
        err = until_end(ws)[-1]
        assert err["type"] == "error" and err["error"]["code"] == "previous_response_not_found"
