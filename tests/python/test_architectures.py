"""`tandem serve` on the architectures besides llama, driven by the openai SDK.

- The real Gemma 3 270M Q4_K_M file (`make test-data`; skipped when absent): greedy
  completions through the SDK are llama.cpp's continuations (tests/data/fidelity/
  gemma3_270m_q4_k_m.json, made by tests/tools/make_fidelity_vectors.py --gemma3), streamed
  and not; chat through Gemma's turn template (llama.cpp's Gemma 2 template, the same turns,
  from `make test-data`'s corpus) answers. Past its window of 512 the local layers' KV
  blocks are freed (their own pool, docs/architecture.md): a sequence holds at most 36 of
  them while decoding, and greedy continuations, with and without a prefix-cache hit past
  the window, are those of a server holding every block (--disable-hybrid-kv-cache-manager).
- Small synthetic files of each architecture (`tandem gen-model --arch`): `tandem info` and
  `tandem generate` run on them (gemma3 on a Q8_0 KV cache too, past its window); the server
  loads them, reports them (a local layers' pool for gemma3 only), and completes greedily and
  deterministically.
"""
import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from conftest import ROOT, Server, openai_client, tandem_binary

HOME = Path(os.environ.get("TANDEM_HOME", Path.home() / ".cache" / "tandem"))
GEMMA = HOME / "models" / "gemma-3-270m-q4_k_m.gguf"
GEMMA_TEMPLATE = HOME / "chat-templates" / "google-gemma-2-2b-it.jinja"
VECTORS = ROOT / "tests" / "data" / "fidelity" / "gemma3_270m_q4_k_m.json"
N_TOKENS = 16


@pytest.fixture(scope="module")
def gemma():
    if not GEMMA.exists():
        pytest.skip(f"{GEMMA} is missing: run `make test-data`")
    args = ["--model", str(GEMMA), "--max-model-len", "4096", "--log-level", "warn"]
    if GEMMA_TEMPLATE.exists():
        args += ["--chat-template", str(GEMMA_TEMPLATE)]
    s = Server(*args)
    yield s
    s.stop()


def short_cases():
    cases = json.loads(VECTORS.read_text())["cases"]
    return [c for c in cases if len(c["prompt_ids"]) < 64]


def test_gemma3_completions_are_llama_cpps(gemma):
    client = openai_client(gemma)
    matched = 0
    cases = short_cases()
    assert len(cases) >= 4
    for case in cases:
        r = client.completions.create(model="gemma", prompt=case["prompt"], max_tokens=N_TOKENS, temperature=0)
        expected = httpx.post(gemma.url + "/detokenize", json={"tokens": case["generated"][:N_TOKENS]}).json()
        assert r.usage.prompt_tokens == len(case["prompt_ids"])
        assert r.usage.completion_tokens == N_TOKENS
        matched += r.choices[0].text == expected["prompt"]
    assert matched == len(cases)


def test_gemma3_streams_the_same_text(gemma):
    client = openai_client(gemma)
    case = short_cases()[0]
    whole = client.completions.create(model="gemma", prompt=case["prompt"], max_tokens=N_TOKENS, temperature=0)
    stream = client.completions.create(model="gemma", prompt=case["prompt"], max_tokens=N_TOKENS, temperature=0,
                                       stream=True)
    assert "".join(c.choices[0].text for c in stream if c.choices) == whole.choices[0].text


def test_gemma3_chat_answers(gemma):
    if not GEMMA_TEMPLATE.exists():
        pytest.skip(f"{GEMMA_TEMPLATE} is missing: run `make test-data`")
    r = openai_client(gemma).chat.completions.create(
        model="gemma", messages=[{"role": "user", "content": "What is the capital of France?"}], max_tokens=12,
        temperature=0)
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content
    assert r.choices[0].finish_reason in ("stop", "length")


def long_text(n_items, seed):
    colors = ["red", "green", "blue", "amber", "violet", "silver", "black", "white"]
    return " ".join(f"Box {seed * 1000 + i} holds a {colors[(i * 7 + seed) % 8]} stone." for i in range(n_items))


def test_gemma3_frees_out_of_window_blocks_and_continues_as_the_full_cache(gemma):
    """Prompts of ~1,300 tokens (window 512): the hybrid server (this module's) holds at most
    max_blocks = 36 local blocks per decoding sequence and every global block; its greedy
    continuations, and those after a prefix-cache hit of more than the window, equal a
    server's that holds every layer's block for every position and caches nothing."""
    shared = long_text(120, 1)
    prompts = [shared + " Which box holds the violet stone?", shared + " Name the colour of box 1003."]
    client = openai_client(gemma)
    hybrid = []
    for i, p in enumerate(prompts):
        seen = []
        stream = client.completions.create(model="gemma", prompt=p, max_tokens=24, temperature=0, stream=True,
                                           stream_options={"include_usage": True})
        usage = None
        for chunk in stream:
            if chunk.choices:
                seen.append(chunk.choices[0].text)
                m = gemma.metrics()
                if m["tandem:kv_blocks_used"] > 0:  # the sequence is still running
                    assert m["tandem:kv_local_blocks_used"] <= 36, m
                    assert m["tandem:kv_blocks_used"] >= 80, m  # every position's global block
            if chunk.usage:
                usage = chunk.usage
        assert usage.prompt_tokens > 1100, usage
        cached = (usage.prompt_tokens_details.cached_tokens or 0) if usage.prompt_tokens_details else 0
        if i == 1:
            assert cached > 512, usage  # a hit past the window
        hybrid.append("".join(seen))
    m = gemma.wait_idle()
    assert m["tandem:kv_local_blocks_total"] > 0
    assert m["tandem:kv_local_blocks_used"] == 0

    full = Server("--model", str(GEMMA), "--max-model-len", "4096", "--log-level", "warn",
                  "--disable-hybrid-kv-cache-manager", "--no-enable-prefix-caching")
    try:
        assert "tandem:kv_local_blocks_total" not in full.metrics()
        expected = [openai_client(full).completions.create(model="gemma", prompt=p, max_tokens=24,
                                                       temperature=0).choices[0].text for p in prompts]
    finally:
        full.stop()
    assert hybrid == expected


WINDOWED = ("gemma3", "gpt-oss")  # the architectures with sliding-window layers (a local pool)


@pytest.mark.parametrize("arch", ["qwen2", "qwen3", "gemma3", "phi3", "qwen3moe", "mixtral", "gpt-oss"])
def test_synthetic_architecture_serves(arch, tmp_path):
    path = tmp_path / f"{arch}.gguf"
    extra = {"qwen3": ["--head-dim", "64"], "gemma3": ["--layers", "6", "--head-dim", "64", "--kv-heads", "1",
                                                      "--sliding-window", "24"],
             "phi3": ["--kv-heads", "4", "--rope-original-ctx", "1024", "--untied"],
             "qwen3moe": ["--experts", "8", "--experts-used", "2", "--expert-ff", "96"],
             "mixtral": ["--experts", "4", "--experts-used", "2"],
             "gpt-oss": ["--layers", "4", "--experts", "4", "--experts-used", "2", "--sliding-window", "24"]}.get(arch, [])
    subprocess.run([tandem_binary(), "gen-model", "-o", str(path), "--arch", arch, "--ctx", "4096", *extra],
                   check=True, capture_output=True)
    info = subprocess.run([tandem_binary(), "info", "--model", str(path)], check=True, capture_output=True,
                          text=True).stdout
    assert f"architecture   {'llama' if arch == 'mixtral' else arch}" in info
    if arch in ("qwen3moe", "mixtral", "gpt-oss"):
        assert "experts        2 per token of" in info, info
    if arch == "gemma3":
        assert "sliding window 24 on 5 of 6 layers (global: 5)" in info
    gen = subprocess.run([tandem_binary(), "generate", "--model", str(path), "--prompt", "a b c", "--max-tokens", "8",
                          "--temperature", "0", "--threads", "2"], check=True, capture_output=True, text=True,
                         errors="replace")
    assert "generated tokens: 8" in gen.stdout + gen.stderr
    if arch == "gemma3":  # the Q8_0 cache runs the local layers' window too, past it
        gen = subprocess.run([tandem_binary(), "generate", "--model", str(path), "--prompt", "a b c d e f g h",
                              "--max-tokens", "40", "--temperature", "0", "--threads", "2", "--kv-cache-dtype",
                              "q8_0"], check=True, capture_output=True, text=True, errors="replace")
        assert "generated tokens: 40" in gen.stdout + gen.stderr
    s = Server("--model", str(path), "--log-level", "warn")
    try:
        client = openai_client(s)
        assert client.models.list().data[0].id
        # Only a sliding-window model has the local layers' pool (and its metrics).
        assert ("tandem:kv_local_blocks_total" in s.metrics()) == (arch in WINDOWED)
        a = client.completions.create(model=arch, prompt="a b c d e f g h", max_tokens=40, temperature=0)
        b = client.completions.create(model=arch, prompt="a b c d e f g h", max_tokens=40, temperature=0)
        assert a.usage.completion_tokens == 40  # past the window of 24
        assert a.choices[0].text == b.choices[0].text
    finally:
        s.stop()


def test_prefix_cache_with_sliding_window(tmp_path):
    """A cached prefix longer than gemma3's window (24) gives the continuation the uncached
    server computes: the local layers' blocks before the window are freed, and a hit is
    adopted only with the local blocks its window reads (docs/architecture.md). So do n = 2
    choices (forked tables, copied on write) and n-gram speculative decoding (tables trimmed
    after rejected drafts) on the freed local pool, against a server holding every block."""
    path = tmp_path / "gemma3.gguf"
    subprocess.run([tandem_binary(), "gen-model", "-o", str(path), "--arch", "gemma3", "--layers", "6", "--head-dim",
                    "64", "--kv-heads", "1", "--sliding-window", "24", "--ctx", "4096"], check=True, capture_output=True)
    prefix = " ".join(f"w{i}" for i in range(60))
    prompts = [prefix + " tail one", prefix + " and another tail", " ".join(["a b c d e f g h"] * 12)]
    servers = {"cached": [], "uncached": ["--no-enable-prefix-caching", "--disable-hybrid-kv-cache-manager"],
               "speculative": ["--speculative", "ngram", "--num-speculative-tokens", "4"]}
    texts = {}
    for name, flags in servers.items():
        s = Server("--model", str(path), "--log-level", "warn", *flags)
        try:
            client = openai_client(s)
            out = []
            for p in prompts:
                r = client.completions.create(model="g", prompt=p, max_tokens=40, temperature=0, n=2)
                out.append([c.text for c in r.choices])
                hit = (r.usage.prompt_tokens_details.cached_tokens or 0) if r.usage.prompt_tokens_details else 0
                if name == "cached" and p is prompts[1]:
                    assert hit > 24, r.usage
                if name == "uncached":
                    assert hit == 0
            if name == "speculative":
                assert s.metrics()['tandem:spec_decode_num_draft_tokens_total{method="ngram"}'] > 0
            texts[name] = out
        finally:
            s.stop()
    assert texts["cached"] == texts["uncached"] == texts["speculative"]
