"""Tenants do not share what they should not: prefix-cache entries are salted per tenant on
the server (one tenant cannot time another's prompts through cache hits), unless the config
puts tenants in one prefix_cache_group; tenant config mistakes are refused at start."""
import subprocess
import textwrap

import httpx
import pytest

from conftest import Server, tandem_binary, temp_file

TENANTS = textwrap.dedent("""\
    tenants:
      - name: a
        api_keys: [sk-a]
      - name: b
        api_keys: [sk-b]
      - name: c
        api_keys: [sk-c]
        prefix_cache_group: common
      - name: d
        api_keys: [sk-d]
        prefix_cache_group: common
    """)

PROMPT = "Our confidential plan: " + " ".join(f"step {i} is to review item {i * 7}." for i in range(60))


@pytest.fixture(scope="module")
def iso_server():
    with temp_file(TENANTS) as path, Server("--config", path, "--log-level", "warn") as s:
        yield s


def cached(server, key, prompt=PROMPT):
    r = httpx.post(server.url + "/v1/completions", timeout=120, headers={"authorization": f"Bearer {key}"},
                   json={"prompt": prompt, "max_tokens": 1, "temperature": 0})
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]
    assert usage["prompt_tokens"] > 300
    return usage["prompt_tokens_details"]["cached_tokens"]


def test_a_tenants_prompt_is_not_a_cache_hit_for_another(iso_server):
    assert cached(iso_server, "sk-a") == 0
    assert cached(iso_server, "sk-a") >= 300, "the same tenant hits its own cache"
    assert cached(iso_server, "sk-b") == 0, "tenant b got cached tokens from tenant a's prompt"
    assert cached(iso_server, "sk-b") >= 300


def test_a_shared_group_shares_the_cache(iso_server):
    prompt = "A system prompt every tenant of the group uses. " + PROMPT
    assert cached(iso_server, "sk-c", prompt) == 0
    assert cached(iso_server, "sk-d", prompt) >= 300, "tenants of one prefix_cache_group share entries"
    assert cached(iso_server, "sk-a", prompt) == 0, "a tenant outside the group does not"


def test_duplicate_keys_and_names_are_refused_at_start():
    with temp_file("tenants:\n  - name: default\n    api_keys: [sk-x]\n") as path:
        r = subprocess.run([tandem_binary(), "serve", "--port", "0", "--config", path, "--api-key", "sk-x"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0
        assert "sk-x" not in r.stderr, "the key itself is never printed"
        assert "twice" in r.stderr, r.stderr
        r = subprocess.run([tandem_binary(), "serve", "--port", "0", "--config", path, "--api-key", "sk-new"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and "tenant 'default' appears twice" in r.stderr, r.stderr
