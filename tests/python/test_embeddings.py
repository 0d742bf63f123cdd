"""POST /v1/embeddings and /v1/rerank on `tandem serve --embeddings` (issue 52), driven by the
`openai` SDK (client.embeddings.create) and httpx:

- shapes and usage, L2 normalisation, base64 equal to float, token-id inputs equal to the
  text's tokens, a batch equal to its inputs one by one, `dimensions` (truncated, then
  renormalised; more than the width is a 400);
- 400s: a generation request to an embeddings server and the reverse (naming the server's
  kind), an empty input, an input longer than the context; a tenant's token limit (429);
- every KV block is free once the requests are done (embedding sequences keep no cache);
- rerank on a synthetic Qwen3-Reranker-shaped file (`tandem gen-model --pooling-type 4
  --cls-out 2`): results by score, top_n, return_documents, the /rerank alias;
- an encoder (a gen-model bert file, bge's shape): WordPiece token counts, attention both
  ways, an input computed whole (longer than a step's tokens is a 400), no generation.
Fidelity against llama.cpp is tests/unit/embedding_fidelity_test.cpp.
"""
import base64
import math
import struct
import subprocess
import textwrap

import httpx
import openai
import pytest

from conftest import Server, openai_client, tandem_binary, temp_file

TENANTS = textwrap.dedent("""\
    tenants:
      - name: alice
        api_keys: [sk-alice]
      - name: frugal
        api_keys: [sk-frugal]
        tokens_per_minute: 40
    """)
TEXTS = ["The cat sat on the mat.", "A dog barked at the mailman.", "Stock markets fell sharply on Monday."]


@pytest.fixture(scope="module")
def embed_server():
    with temp_file(TENANTS) as path, Server("--embeddings", "--pooling", "mean", "--max-model-len", "128",
                                            "--config", path, "--log-level", "warn") as s:
        yield s


@pytest.fixture(scope="module")
def client(embed_server):
    return openai_client(embed_server, key="sk-alice")


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def close(a, b, tol=1e-4):
    return len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) <= tol


def test_shapes_usage_and_normalisation(client):
    r = client.embeddings.create(model="m", input=TEXTS, encoding_format="float")
    assert [d.index for d in r.data] == [0, 1, 2]
    assert all(len(d.embedding) == 576 for d in r.data)  # SmolLM2-135M's width
    assert all(abs(norm(d.embedding) - 1) < 1e-5 for d in r.data)
    assert r.usage.prompt_tokens == r.usage.total_tokens > len(TEXTS)
    # Different texts, different vectors; the same text, the same vector.
    assert not close(r.data[0].embedding, r.data[1].embedding, 1e-2)
    again = client.embeddings.create(model="m", input=TEXTS[0], encoding_format="float")
    assert close(again.data[0].embedding, r.data[0].embedding, 1e-6)


def test_base64_equals_float(client, embed_server):
    floats = client.embeddings.create(model="m", input=TEXTS[1], encoding_format="float").data[0].embedding
    # The SDK asks for base64 when no format is given and decodes it.
    decoded = client.embeddings.create(model="m", input=TEXTS[1]).data[0].embedding
    assert close(decoded, floats, 1e-7)
    raw = httpx.post(embed_server.url + "/v1/embeddings", headers={"Authorization": "Bearer sk-alice"},
                     json={"input": TEXTS[1], "encoding_format": "base64"}, timeout=60).json()
    b = base64.b64decode(raw["data"][0]["embedding"])
    assert list(struct.unpack(f"<{len(b) // 4}f", b)) == pytest.approx(floats, abs=1e-7)


def test_token_ids_equal_the_texts_tokens(client, embed_server):
    ids = httpx.post(embed_server.url + "/tokenize", headers={"Authorization": "Bearer sk-alice"},
                     json={"prompt": TEXTS[2]}, timeout=60).json()["tokens"]
    by_text = client.embeddings.create(model="m", input=TEXTS[2], encoding_format="float")
    by_ids = client.embeddings.create(model="m", input=ids, encoding_format="float")
    both = client.embeddings.create(model="m", input=[ids, ids[:3]], encoding_format="float")
    assert by_ids.usage.prompt_tokens == by_text.usage.prompt_tokens == len(ids)
    assert close(by_ids.data[0].embedding, by_text.data[0].embedding, 1e-6)
    assert close(both.data[0].embedding, by_text.data[0].embedding)
    assert len(both.data) == 2


def test_a_batch_equals_its_inputs_one_by_one(client):
    batch = client.embeddings.create(model="m", input=TEXTS * 3, encoding_format="float")
    assert len(batch.data) == 9
    for i, text in enumerate(TEXTS):
        single = client.embeddings.create(model="m", input=text, encoding_format="float").data[0].embedding
        for k in range(3):
            assert close(batch.data[3 * k + i].embedding, single), (i, k)


def test_dimensions_truncate_then_renormalise(client, embed_server):
    full = client.embeddings.create(model="m", input=TEXTS[0], encoding_format="float").data[0].embedding
    short = client.embeddings.create(model="m", input=TEXTS[0], encoding_format="float", dimensions=64).data[0]
    assert len(short.embedding) == 64 and abs(norm(short.embedding) - 1) < 1e-5
    head = full[:64]
    assert close(short.embedding, [x / norm(head) for x in head], 1e-5)
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model="m", input=TEXTS[0], dimensions=577)
    assert "577" in str(e.value) and "576" in str(e.value)


def test_bad_inputs_are_400s(client, embed_server):
    for body, param in [({"input": ""}, "input"), ({"input": []}, "input"), ({}, "input"),
                        ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
                        ({"input": [[1, 2], "x"]}, "input"), ({"input": [10 ** 7]}, "input")]:
        r = httpx.post(embed_server.url + "/v1/embeddings", headers={"Authorization": "Bearer sk-alice"},
                       json=body, timeout=60)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"]["param"] == param, (body, r.text)
    with pytest.raises(openai.BadRequestError) as e:  # longer than --max-model-len 128
        client.embeddings.create(model="m", input="word " * 300)
    assert "context is 128 tokens" in str(e.value)


def test_generation_on_an_embeddings_server_is_a_400(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="m", prompt="Hello", max_tokens=4)
    assert "embeddings (pooling mean)" in str(e.value) and "/v1/embeddings" in str(e.value)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=4)


def test_a_tenants_token_limit_applies(embed_server):
    # 40 tokens a minute: the first request may pass on a full bucket (it is charged its
    # estimate, capped at the bucket, then its real count), the next cannot.
    frugal = openai_client(embed_server, key="sk-frugal")
    long_inputs = ["a long sentence about nothing at all " * 4] * 4
    with pytest.raises(openai.RateLimitError):
        for _ in range(2):
            frugal.embeddings.create(model="m", input=long_inputs)
    with pytest.raises(openai.AuthenticationError):
        openai_client(embed_server, key="sk-nobody").embeddings.create(model="m", input="x")


def test_no_block_is_held_afterwards(client, embed_server):
    client.embeddings.create(model="m", input=TEXTS * 4, encoding_format="float")
    m = embed_server.wait_idle()
    assert m["tandem:kv_blocks_used"] == 0
    assert m["tandem:num_requests_running"] == 0


def test_embeddings_on_a_generation_server_is_a_400():
    with Server("--log-level", "warn", "--max-model-len", "256") as s:
        with pytest.raises(openai.BadRequestError) as e:
            openai_client(s).embeddings.create(model="m", input="Hello")
        assert "text generation" in str(e.value) and "--embeddings" in str(e.value)
        r = httpx.post(s.url + "/v1/rerank", json={"query": "q", "documents": ["a"]}, timeout=60)
        assert r.status_code == 400 and "text generation" in r.json()["error"]["message"]


@pytest.fixture(scope="module")
def rerank_server(tmp_path_factory):
    path = tmp_path_factory.mktemp("rerank") / "qwen3-rank.gguf"
    subprocess.run([tandem_binary(), "gen-model", "-o", str(path), "--arch", "qwen3", "--head-dim", "64",
                    "--untied", "--type", "q8_0", "--seed", "43", "--pooling-type", "4", "--cls-out", "2"],
                   check=True, capture_output=True)
    with Server("--model", str(path), "--log-level", "warn") as s:
        yield s


def test_rerank_orders_by_score(rerank_server):
    docs = ["alpha beta", "gamma", "delta epsilon zeta", "eta theta", "iota"]
    r = httpx.post(rerank_server.url + "/v1/rerank", json={"query": "alpha", "documents": docs}, timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    scores = [x["relevance_score"] for x in body["results"]]
    assert sorted(x["index"] for x in body["results"]) == list(range(len(docs)))
    assert scores == sorted(scores, reverse=True)
    assert all(0 <= s <= 1 for s in scores)  # the yes/no head's softmax
    assert all(x["document"]["text"] == docs[x["index"]] for x in body["results"])
    assert body["usage"]["total_tokens"] > len(docs)
    # Each document is scored alone: the same pair gives the same score in any company.
    alone = httpx.post(rerank_server.url + "/rerank", json={"query": "alpha", "documents": [docs[2]],
                                                            "return_documents": False}, timeout=60).json()
    assert "document" not in alone["results"][0]
    by_index = {x["index"]: x["relevance_score"] for x in body["results"]}
    assert alone["results"][0]["relevance_score"] == pytest.approx(by_index[2], abs=1e-5)
    top = httpx.post(rerank_server.url + "/v1/rerank", json={"query": "alpha", "documents": docs, "top_n": 2},
                     timeout=60).json()
    assert [x["index"] for x in top["results"]] == [x["index"] for x in body["results"][:2]]


def test_rerank_servers_refuse_embeddings_and_bad_bodies(rerank_server):
    r = httpx.post(rerank_server.url + "/v1/embeddings", json={"input": "x"}, timeout=60)
    assert r.status_code == 400 and "rerank" in r.json()["error"]["message"]
    for body, param in [({"documents": ["a"]}, "query"), ({"query": "q", "documents": []}, "documents"),
                        ({"query": "q", "documents": ["a"], "top_n": 0}, "top_n")]:
        r = httpx.post(rerank_server.url + "/v1/rerank", json=body, timeout=60)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, (body, r.text)


@pytest.fixture(scope="module")
def bert_server(tmp_path_factory):
    """An encoder (bge's shape: bert, cls pooling, a WordPiece vocabulary) from gen-model."""
    path = tmp_path_factory.mktemp("bert") / "bert-cls.gguf"
    subprocess.run([tandem_binary(), "gen-model", "-o", str(path), "--arch", "bert", "--kv-heads", "4",
                    "--ctx", "512", "--type", "q8_0", "--seed", "44", "--pooling-type", "2"],
                   check=True, capture_output=True)
    with Server("--model", str(path), "--max-num-batched-tokens", "256", "--log-level", "warn") as s:
        yield s


def test_a_bert_encoder_serves_embeddings(bert_server):
    client = openai_client(bert_server)
    texts = ["Hello, world!", "The quick brown fox jumps over the lazy dog."]
    r = client.embeddings.create(model="m", input=texts, encoding_format="float")
    assert [len(d.embedding) for d in r.data] == [128, 128]
    assert all(abs(norm(d.embedding) - 1) < 1e-5 for d in r.data)
    # WordPiece with [CLS] ... [SEP]: "hello , world !" is 4 words, 6 tokens.
    alone = client.embeddings.create(model="m", input=texts[0], encoding_format="float")
    assert alone.usage.prompt_tokens == 6
    assert close(alone.data[0].embedding, r.data[0].embedding, 1e-5)  # a batch equals its inputs alone
    # Bidirectional: the first token's state (cls pooling) depends on the last word.
    other = client.embeddings.create(model="m", input="Hello, world?", encoding_format="float")
    assert not close(other.data[0].embedding, alone.data[0].embedding, 1e-4)
    # An input is computed whole in one step: longer than the step's tokens is a 400.
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model="m", input=[[180] * 300], encoding_format="float")
    assert "256" in str(e.value)
    ok = client.embeddings.create(model="m", input=[[180] * 250], encoding_format="float")
    assert len(ok.data[0].embedding) == 128
    r = httpx.post(bert_server.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                   timeout=60)
    assert r.status_code == 400 and "embeddings" in r.json()["error"]["message"]
