"""`tandem serve --speculative ngram` through the openai SDK: greedy output is the same with
and without drafting, drafts show in /metrics by method, and `"speculative": false` keeps a
request out of drafting."""
import openai
import pytest

from conftest import ACCEPTED, COPY, DRAFTED, NGRAM, PASSAGE, Server, openai_client


@pytest.fixture(scope="module")
def spec_server():
    with Server(*NGRAM, "--log-level", "warn") as s:
        yield s


@pytest.fixture()
def client(spec_server):
    return openai_client(spec_server)


def copy_text(client, **extra):
    r = client.chat.completions.create(model="default", messages=COPY, max_tokens=48, temperature=0,
                                       extra_body=extra or None)
    assert r.usage.completion_tokens > 0
    return r.choices[0].message.content


def test_drafted_output_equals_plain_output_and_shows_in_metrics(spec_server, client):
    before = spec_server.wait_idle()
    plain = copy_text(client, speculative=False)
    after_plain = spec_server.wait_idle()
    assert after_plain[DRAFTED] == before[DRAFTED], "a request with speculative: false drafted"

    drafted = copy_text(client)
    after = spec_server.wait_idle()
    assert after[DRAFTED] > after_plain[DRAFTED]
    assert after[ACCEPTED] > after_plain[ACCEPTED], "n-gram drafts of a copying task are accepted"
    assert drafted == plain
    assert PASSAGE[:40] in drafted
    # K's distribution over the run: passes by the number of drafts they checked.
    passes = {k: v for k, v in after.items() if k.startswith('tandem:spec_decode_passes_total{method="ngram",k=')}
    assert sum(passes.values()) > 0
    assert all(k.endswith('"}') for k in passes)
    assert any(k.startswith('tandem:spec_decode_k{method="ngram",k=') for k in after)


def test_streamed_drafted_output_equals_plain_output(client):
    plain = copy_text(client, speculative=False)
    stream = client.chat.completions.create(model="default", messages=COPY, max_tokens=48, temperature=0,
                                            stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == plain


def test_a_wrong_type_is_a_400_naming_the_field(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="default", messages=COPY, max_tokens=4,
                                       extra_body={"speculative": "no"})
    assert e.value.body["param"] == "speculative"
