"""Structured output against a real server with the openai SDK: response_format json_schema and
json_object, a GBNF "grammar", sampled and streamed, with n > 1 and with n-gram drafting; the
output parses and validates against its schema (Python's jsonschema), and grammars the engine
cannot honour are 400s naming the keyword.
"""
import json

import httpx
import jsonschema
import pytest

from conftest import DRAFTED, NGRAM, Server, openai_client

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "maxItems": 3},
        "email": {"type": ["string", "null"], "format": "email"},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
CHAT = [{"role": "user", "content": "Describe a person as JSON."}]


def schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}}


@pytest.fixture(scope="module")
def spec_server():
    with Server(*NGRAM, "--log-level", "warn") as s:
        yield s


def test_json_schema_sampled_outputs_validate(server):
    r = openai_client(server).chat.completions.create(
        model="default", messages=CHAT, response_format=schema_format(PERSON), temperature=0.7, top_p=0.95,
        max_tokens=200, n=3, seed=7)
    for choice in r.choices:
        assert choice.finish_reason == "stop", choice
        jsonschema.validate(json.loads(choice.message.content), PERSON)


def test_json_schema_streamed(server):
    text = ""
    for chunk in openai_client(server).chat.completions.create(
            model="default", messages=CHAT, response_format=schema_format(PERSON), temperature=1.0, max_tokens=200,
            stream=True, seed=3):
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
    jsonschema.validate(json.loads(text), PERSON)


def test_json_object_and_completions(server):
    r = openai_client(server).chat.completions.create(model="default", messages=CHAT,
                                                      response_format={"type": "json_object"}, temperature=0.7,
                                                      max_tokens=120, seed=1)
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    else:  # cut by max_tokens: still a prefix of an object
        assert r.choices[0].message.content.lstrip().startswith("{")
    c = httpx.post(server.url + "/v1/completions", timeout=120, json={
        "prompt": "Answer:", "max_tokens": 8, "temperature": 0.9, "grammar": 'root ::= "yes" | "no"'}).json()
    assert c["choices"][0]["text"] in ("yes", "no"), c


def test_drafts_are_checked_against_the_mask(spec_server):
    """With n-gram drafting on, constrained outputs stay valid (drafts the grammar refuses are rejected)."""
    before = spec_server.metrics().get(DRAFTED, 0)
    c = openai_client(spec_server)
    for seed in range(3):
        r = c.chat.completions.create(model="default", messages=CHAT, response_format=schema_format(PERSON),
                                      temperature=0, max_tokens=200, seed=seed)
        jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)
    after = spec_server.metrics().get(DRAFTED, 0)
    assert after > before, "drafts were proposed for constrained requests"


@pytest.mark.parametrize("body,param,words", [
    ({"response_format": schema_format({"type": "object", "patternProperties": {"^a": {}}})}, "response_format",
     "patternProperties"),
    ({"response_format": schema_format({"type": "string", "pattern": "^(a)\\1$"})}, "response_format",
     "backreference"),
    ({"response_format": {"type": "xml"}}, "response_format.type", "json_schema"),
    ({"response_format": {"type": "json_schema"}}, "response_format.json_schema", "schema"),
    ({"grammar": "root ::= (\"a\""}, "grammar", "grammar"),
])
def test_bad_grammars_are_400s(server, body, param, words):
    r = httpx.post(server.url + "/v1/chat/completions", json={"messages": CHAT, "max_tokens": 4, **body}, timeout=60)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    assert words in err["message"], err
    assert httpx.get(server.url + "/health").status_code == 200
