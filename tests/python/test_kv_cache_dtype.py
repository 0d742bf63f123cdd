"""`tandem serve --kv-cache-dtype q8_0` through the openai SDK: completions, streams, the prefix
cache (a repeated long prompt is served from cached blocks and answers the same) and n-gram
speculative decoding (drafted output equals plain output) on a Q8_0 KV cache; an unknown type
is refused at start with a line naming the flag."""
import subprocess

import pytest

from conftest import ACCEPTED, COPY, NGRAM, PASSAGE, Server, openai_client, tandem_binary


@pytest.fixture(scope="module")
def q8_server():
    with Server("--kv-cache-dtype", "q8_0", *NGRAM, "--log-level", "warn") as s:
        yield s


@pytest.fixture()
def client(q8_server):
    return openai_client(q8_server)


def test_completions_and_streams_agree(client):
    r = client.chat.completions.create(model="default", messages=[{"role": "user", "content": "Name three colors."}],
                                       max_tokens=24, temperature=0, extra_body={"speculative": False})
    text = r.choices[0].message.content
    assert r.usage.completion_tokens > 0 and text.strip()
    stream = client.chat.completions.create(model="default",
                                            messages=[{"role": "user", "content": "Name three colors."}],
                                            max_tokens=24, temperature=0, stream=True,
                                            extra_body={"speculative": False})
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == text


def test_a_repeated_long_prompt_comes_from_the_prefix_cache(client):
    doc = "".join(f"Paragraph {i} talks about rivers, mountains and towns. " for i in range(80))
    messages = [{"role": "system", "content": doc}, {"role": "user", "content": "What is paragraph 3 about?"}]
    first = client.chat.completions.create(model="default", messages=messages, max_tokens=16, temperature=0,
                                           extra_body={"speculative": False})
    second = client.chat.completions.create(model="default", messages=messages, max_tokens=16, temperature=0,
                                            extra_body={"speculative": False})
    assert first.usage.prompt_tokens > 500
    assert second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 32
    assert second.choices[0].message.content == first.choices[0].message.content


def test_drafted_output_equals_plain_output(q8_server, client):
    plain = client.chat.completions.create(model="default", messages=COPY, max_tokens=48, temperature=0,
                                           extra_body={"speculative": False}).choices[0].message.content
    before = q8_server.wait_idle()
    drafted = client.chat.completions.create(model="default", messages=COPY, max_tokens=48,
                                             temperature=0).choices[0].message.content
    after = q8_server.wait_idle()
    assert after[ACCEPTED] > before[ACCEPTED], "n-gram drafts of a copying task are accepted"
    assert drafted == plain
    assert PASSAGE[:40] in drafted


def test_an_unknown_cache_type_is_refused_at_start():
    r = subprocess.run([tandem_binary(), "serve", "--port", "0", "--kv-cache-dtype", "q4_0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "--kv-cache-dtype" in r.stdout + r.stderr
    assert "q4_0" in r.stdout + r.stderr
