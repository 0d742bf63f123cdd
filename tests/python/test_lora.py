"""LoRA adapters (--lora NAME=PATH[:SCALE]) on a real `tandem serve` over the default model, with
adapters `tandem gen-model --lora` writes for it: /v1/models lists them as <model>:NAME; the
model name and llama-server's `lora` field pick one (the same output either way, and not the
base's); an unknown adapter is a 404 (name) or 400 (id) naming the available ones; the prefix
cache never serves one adapter's (or the base's) blocks to another (usage's cached_tokens); a
tenant's default adapter and the config file's `lora` list. Fidelity against llama-server's
--lora: bench/compare_lora.py (CTest lora_fidelity)."""
import subprocess

import httpx
import openai
import pytest

from conftest import Server, openai_client, tandem_binary, temp_file

PROMPT = "The capital of France is"
# A prompt of several full KV blocks (16 tokens each), so a repeat is served from the cache.
LONG = "".join(f"Entry {i}: the harbour of Vell ships amber, tin and dried fish to the south. " for i in range(12))


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    d = tmp_path_factory.mktemp("lora")
    paths = []
    for i, strength in ((1, "0.3"), (2, "0.3")):
        p = d / f"adapter{i}.gguf"
        subprocess.run([tandem_binary(), "gen-model", "--lora", "default", "--out", str(p), "--seed", str(i),
                        "--lora-strength", strength], check=True, capture_output=True)
        paths.append(str(p))
    return paths


@pytest.fixture(scope="module")
def server(adapters):
    with Server("--lora", f"sql={adapters[0]}", "--lora", f"chat={adapters[1]}:0.5", "--log-level", "warn") as s:
        yield s


def base_name(server):
    return httpx.get(server.url + "/v1/models", timeout=30).json()["data"][0]["id"]


def complete(server, model, prompt=PROMPT, **extra):
    r = openai_client(server).completions.create(model=model, prompt=prompt, max_tokens=12, temperature=0,
                                                 extra_body=extra or None)
    return r.choices[0].text, r.usage.prompt_tokens_details.cached_tokens


def test_adapters_are_listed_as_model_colon_name(server):
    data = httpx.get(server.url + "/v1/models", timeout=30).json()["data"]
    base = data[0]["id"]
    ids = [m["id"] for m in data]
    assert ids == [base, f"{base}:sql", f"{base}:chat"]
    assert all(m["parent"] == base for m in data[1:])
    # The SDK's models.list() sees them too.
    assert [m.id for m in openai_client(server).models.list().data] == ids


def test_the_model_name_and_the_lora_field_pick_an_adapter(server):
    base = base_name(server)
    plain, _ = complete(server, base)
    sql, _ = complete(server, f"{base}:sql")
    chat, _ = complete(server, f"{base}:chat")
    assert sql != plain and chat != plain and sql != chat
    # llama-server's field: ids in --lora order, the scale as given (chat's default is 0.5).
    assert complete(server, base, lora=[{"id": 0, "scale": 1.0}])[0] == sql
    assert complete(server, base, lora=[{"id": 0, "scale": 0}, {"id": 1, "scale": 0.5}])[0] == chat
    assert complete(server, base, lora=[{"id": 1, "scale": 1.0}])[0] not in (chat, plain)
    assert complete(server, base, lora=[{"id": 0, "scale": 0}])[0] == plain  # scale 0: the base
    # Chat and streaming take the adapter alike.
    c = openai_client(server)
    msgs = [{"role": "user", "content": "Name a colour."}]
    whole = c.chat.completions.create(model=f"{base}:sql", messages=msgs, max_tokens=10, temperature=0)
    streamed = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
        model=f"{base}:sql", messages=msgs, max_tokens=10, temperature=0, stream=True) if ch.choices)
    assert streamed == whole.choices[0].message.content
    plain_chat = c.chat.completions.create(model=base, messages=msgs, max_tokens=10, temperature=0)
    assert plain_chat.choices[0].message.content != whole.choices[0].message.content


def test_an_unknown_adapter_is_refused_naming_the_available_ones(server):
    c = openai_client(server)
    base = base_name(server)
    with pytest.raises(openai.NotFoundError) as e:
        c.completions.create(model=f"{base}:nope", prompt=PROMPT, max_tokens=4)
    assert "sql (id 0), chat (id 1)" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        c.completions.create(model=base, prompt=PROMPT, max_tokens=4, extra_body={"lora": [{"id": 7, "scale": 1}]})
    assert "no adapter with id 7" in str(e.value) and "sql (id 0)" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        c.completions.create(model=base, prompt=PROMPT, max_tokens=4,
                             extra_body={"lora": [{"id": 0, "scale": 1}, {"id": 1, "scale": 1}]})
    assert "one per request" in str(e.value)
    with pytest.raises(openai.BadRequestError):
        c.completions.create(model=base, prompt=PROMPT, max_tokens=4, extra_body={"lora": {"id": 0}})
    # The server goes on serving.
    assert complete(server, base)[0]


def test_the_prefix_cache_is_not_shared_across_adapters(server):
    base = base_name(server)
    server.wait_idle()
    first, cached = complete(server, base, LONG)
    assert cached == 0
    repeat, cached = complete(server, base, LONG)
    assert repeat == first and cached > 100, "the base's repeat hits its own blocks"
    sql, cached = complete(server, f"{base}:sql", LONG)
    assert cached == 0, "the base's blocks never serve an adapter"
    again, cached = complete(server, f"{base}:sql", LONG)
    assert (again, cached > 100) == (sql, True), "the adapter's repeat hits its own blocks"
    assert complete(server, f"{base}:chat", LONG)[1] == 0
    # The same adapter at another scale is another KV too.
    assert complete(server, base, LONG, lora=[{"id": 0, "scale": 0.7}])[1] == 0
    assert complete(server, base, LONG, lora=[{"id": 0, "scale": 1.0}])[1] > 100  # = sql at its scale 1


TENANTS = """\
lora:
  - sql={path}
tenants:
  - name: tuned
    api_keys: [key-tuned]
    lora: sql
  - name: plain
    api_keys: [key-plain]
"""


def test_a_tenant_default_adapter_from_the_config_file(adapters):
    with temp_file(TENANTS.format(path=adapters[0])) as cfg, Server("--config", cfg, "--log-level", "warn") as s:
        base = base_name(s)

        def text(key, model):
            r = openai_client(s, key).completions.create(model=model, prompt=PROMPT, max_tokens=12, temperature=0)
            return r.choices[0].text

        tuned = text("key-tuned", base)
        assert tuned == text("key-plain", f"{base}:sql")
        assert tuned != text("key-plain", base)
        # Naming another choice wins over the default: the field at scale 0 is the base.
        r = openai_client(s, "key-tuned").completions.create(model=base, prompt=PROMPT, max_tokens=12, temperature=0,
                                                             extra_body={"lora": [{"id": 0, "scale": 0}]})
        assert r.choices[0].text == text("key-plain", base)


def test_a_bad_adapter_file_stops_the_server_with_its_name(tmp_path, adapters):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(open(adapters[0], "rb").read()[:4096])
    r = subprocess.run([tandem_binary(), "serve", "--port", "0", "--lora", f"x={bad}"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0
    assert "bad.gguf" in r.stderr + r.stdout
    r = subprocess.run([tandem_binary(), "serve", "--port", "0", "--lora", "no-path="], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0 and "--lora" in r.stderr + r.stdout
