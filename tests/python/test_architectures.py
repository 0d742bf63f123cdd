"""`tandem serve` on the architectures besides llama, driven by the openai SDK.

- The real Gemma 3 270M Q4_K_M file (`make test-data`; skipped when absent): greedy
  completions through the SDK are llama.cpp's continuations (tests/data/fidelity/
  gemma3_270m_q4_k_m.json, made by tests/tools/make_fidelity_vectors.py --gemma3), streamed
  and not; chat through Gemma's turn template (llama.cpp's Gemma 2 template, the same turns,
  from `make test-data`'s corpus) answers.
- Small synthetic files of each architecture (`tandem gen-model --arch`): `tandem info` and
  `tandem generate` run on them (gemma3 on a Q8_0 KV cache too, past its window); the server loads them, reports them, and completes greedily
  and deterministically.
"""
import json
import os
import subprocess
from pathlib import Path

import httpx
import openai
import pytest

from conftest import ROOT, Server, tandem_binary

HOME = Path(os.environ.get("TANDEM_HOME", Path.home() / ".cache" / "tandem"))
GEMMA = HOME / "models" / "gemma-3-270m-q4_k_m.gguf"
GEMMA_TEMPLATE = HOME / "chat-templates" / "google-gemma-2-2b-it.jinja"
VECTORS = ROOT / "tests" / "data" / "fidelity" / "gemma3_270m_q4_k_m.json"
N_TOKENS = 16


def client_of(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


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
    client = client_of(gemma)
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
    client = client_of(gemma)
    case = short_cases()[0]
    whole = client.completions.create(model="gemma", prompt=case["prompt"], max_tokens=N_TOKENS, temperature=0)
    stream = client.completions.create(model="gemma", prompt=case["prompt"], max_tokens=N_TOKENS, temperature=0,
                                       stream=True)
    assert "".join(c.choices[0].text for c in stream if c.choices) == whole.choices[0].text


def test_gemma3_chat_answers(gemma):
    if not GEMMA_TEMPLATE.exists():
        pytest.skip(f"{GEMMA_TEMPLATE} is missing: run `make test-data`")
    r = client_of(gemma).chat.completions.create(
        model="gemma", messages=[{"role": "user", "content": "What is the capital of France?"}], max_tokens=12,
        temperature=0)
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content
    assert r.choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize("arch", ["qwen2", "qwen3", "gemma3", "phi3"])
def test_synthetic_architecture_serves(arch, tmp_path):
    path = tmp_path / f"{arch}.gguf"
    extra = {"qwen3": ["--head-dim", "64"], "gemma3": ["--layers", "6", "--head-dim", "64", "--kv-heads", "1",
                                                      "--sliding-window", "24"],
             "phi3": ["--kv-heads", "4", "--rope-original-ctx", "1024", "--untied"]}.get(arch, [])
    subprocess.run([tandem_binary(), "gen-model", "-o", str(path), "--arch", arch, "--ctx", "4096", *extra],
                   check=True, capture_output=True)
    info = subprocess.run([tandem_binary(), "info", "--model", str(path)], check=True, capture_output=True,
                          text=True).stdout
    assert f"architecture   {arch}" in info
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
        client = client_of(s)
        assert client.models.list().data[0].id
        a = client.completions.create(model=arch, prompt="a b c d e f g h", max_tokens=40, temperature=0)
        b = client.completions.create(model=arch, prompt="a b c d e f g h", max_tokens=40, temperature=0)
        assert a.usage.completion_tokens == 40  # past gemma3's window of 24
        assert a.choices[0].text == b.choices[0].text
    finally:
        s.stop()


def test_prefix_cache_with_sliding_window(tmp_path):
    """A cached prefix longer than gemma3's window (24) gives the continuation the uncached
    server computes: the cache keeps every position, so the window's keys are there."""
    path = tmp_path / "gemma3.gguf"
    subprocess.run([tandem_binary(), "gen-model", "-o", str(path), "--arch", "gemma3", "--layers", "6", "--head-dim",
                    "64", "--kv-heads", "1", "--sliding-window", "24", "--ctx", "4096"], check=True, capture_output=True)
    prefix = " ".join(f"w{i}" for i in range(60))
    prompts = [prefix + " tail one", prefix + " and another tail"]
    texts = {}
    for cached in (True, False):
        s = Server("--model", str(path), "--log-level", "warn", *([] if cached else ["--no-enable-prefix-caching"]))
        try:
            client = client_of(s)
            out = []
            for p in prompts:
                r = client.completions.create(model="g", prompt=p, max_tokens=20, temperature=0)
                out.append(r.choices[0].text)
                hit = (r.usage.prompt_tokens_details.cached_tokens or 0) if r.usage.prompt_tokens_details else 0
                if cached and p is prompts[1]:
                    assert hit > 24, r.usage
                if not cached:
                    assert hit == 0
            texts[cached] = out
        finally:
            s.stop()
    assert texts[True] == texts[False]
