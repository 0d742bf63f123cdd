"""The server config file of `tandem serve --config FILE` and --print-config
(cli/server_config.h): every serve flag is a key, flags given on the command line win, a
tenants file loads as it is, secrets stay hidden, and bad files are one clear line."""
import re
import subprocess
import textwrap
from pathlib import Path

import httpx
import pytest
import yaml

from conftest import ROOT, Server, tandem_binary


def run(*args):
    return subprocess.run([tandem_binary(), "serve", *args], capture_output=True, text=True, timeout=60)


def effective(*args):
    p = run(*args, "--print-config")
    assert p.returncode == 0, p.stderr
    return p.stdout, yaml.safe_load(p.stdout)


def write(tmp_path, text, name="tandem.yaml"):
    f = tmp_path / name
    f.write_text(textwrap.dedent(text))
    return str(f)


def help_keys():
    """The long options `serve --help` lists, as config keys (a --no-X flag is X)."""
    text = run("--help").stdout
    names = set(re.findall(r"^\s+(?:-\w,\s*)?--([a-z][a-z0-9-]*)", text, re.M))
    names -= {"help", "config", "print-config"}
    return {(n[3:] if n.startswith("no-") else n).replace("-", "_") for n in names}


def test_defaults_cover_every_flag():
    text, cfg = effective()
    assert set(cfg) - {"tenants"} == help_keys()
    assert cfg["model"] == "default" and cfg["host"] == "127.0.0.1" and cfg["port"] == 8080
    assert cfg["max_num_seqs"] == 64 and cfg["kv_cache_tokens"] == 0 and cfg["stream_interval"] == 1
    assert cfg["enable_prefix_caching"] is True and cfg["speculative_adaptive"] is True
    assert cfg["allow_open_non_loopback"] is False and cfg["enforce_eager"] is False
    assert cfg["allowed_origins"] == [] and cfg["tenants"] == []
    assert cfg["device"] == "cpu" and cfg["speculative"] == "none" and cfg["shutdown_timeout"] == 30
    assert text.startswith("# tandem serve: the effective configuration (defaults, then no config file")


def test_printed_config_loads_back_unchanged(tmp_path):
    text, _ = effective("--port", "9001", "--no-enable-prefix-caching", "--allowed-origins", "https://a.example")
    body = lambda t: t.split("\n", 1)[1]  # noqa: E731 (the first line names the file)
    again, _ = effective("--config", write(tmp_path, text))
    assert body(again) == body(text)


def test_file_values_apply_and_flags_win(tmp_path):
    path = write(tmp_path, """\
        port: 9000
        max_num_seqs: 7
        max-num-batched-tokens: 1024   # dashes as in the flag
        enable_prefix_caching: true
        allow_open_non_loopback: yes
        allowed_origins: [https://a.example, https://b.example]
        speculative: ngram
        served_model_name: from-file
        log_level: warn
        """)
    _, cfg = effective("--config", path, "--port", "9100", "--no-enable-prefix-caching", "--log-level", "error")
    assert cfg["port"] == 9100 and cfg["enable_prefix_caching"] is False and cfg["log_level"] == "error"
    assert cfg["max_num_seqs"] == 7 and cfg["max_num_batched_tokens"] == 1024
    assert cfg["allow_open_non_loopback"] is True
    assert cfg["allowed_origins"] == ["https://a.example", "https://b.example"]
    assert cfg["speculative"] == "ngram" and cfg["served_model_name"] == "from-file"
    assert f"then {path}, then the command line" in run("--config", path, "--print-config").stdout


def test_list_as_one_comma_separated_string_and_negated_flag_by_its_own_name(tmp_path):
    path = write(tmp_path, """\
        allowed_origins: "https://a.example,https://b.example"
        no_speculative_adaptive: true
        """)
    _, cfg = effective("--config", path)
    assert cfg["allowed_origins"] == ["https://a.example", "https://b.example"]
    assert cfg["speculative_adaptive"] is False


def test_tenants_file_loads_as_it_is_and_keys_stay_hidden(tmp_path):
    tenants = ROOT / "config" / "tenants.example.yaml"
    text, cfg = effective("--config", str(tenants))
    assert [t["name"] for t in cfg["tenants"]] == ["alice", "bob"]
    assert cfg["tenants"][0]["requests_per_minute"] == 120 and cfg["tenants"][0]["weight"] == 2
    assert cfg["tenants"][1]["max_concurrent_requests"] == 4 and cfg["tenants"][1]["kv_cache_share"] == 0.5
    assert cfg["tenants"][0]["kv_cache_share"] == 1
    # Every setting the example gives a tenant is shown (a tenant key added later included).
    for given, shown in zip(yaml.safe_load(tenants.read_text())["tenants"], cfg["tenants"]):
        for key, value in given.items():
            if key != "api_keys":
                assert shown[key] == value, (given["name"], key)
    assert "sk-alice" not in text and "sk-bob" not in text
    assert "api_keys: 2, not shown" in text
    text, cfg = effective("--config", write(tmp_path, "api_key: sk-secret-1\nmetrics_api_key: sk-secret-2\n"))
    assert "sk-secret" not in text
    assert "# api_key: set, not shown" in text and "# metrics_api_key: set, not shown" in text
    assert "api_key" not in cfg and "metrics_api_key" not in cfg


def test_an_empty_file_sets_nothing(tmp_path):
    _, cfg = effective("--config", write(tmp_path, "# nothing yet\n"))
    assert cfg["port"] == 8080


@pytest.mark.parametrize("text,message", [
    ("max_num_seq: 4\n", "unknown key 'max_num_seq' (tandem serve has no --max_num_seq"),
    ("port: eighty\n", "'port': "),
    ("port: [1, 2]\n", "'port' takes one value, not a list"),
    ("port: {a: 1}\n", "'port' takes one value, not a map"),
    ("port:\n", "'port' has no value"),
    ("stream_interval: 0\n", "'stream_interval': --stream-interval: Value 0 not in range 1 to 1024"),
    ("enable_prefix_caching: maybe\n", "'enable_prefix_caching' must be true or false, got 'maybe'"),
    ("speculative: sometimes\n", "'speculative': --speculative: "),
    ("max_num_seqs: 4\nmax-num-seqs: 5\n", "'max-num-seqs' is set twice"),
    ("config: other.yaml\n", "'config': a config file cannot name another one"),
    ("- port: 1\n", "expected a map of settings (key: value), got a list"),
    ("port: 1\n  bad indent: [\n", "config file "),
    ("tenants:\n  - name: x\n", "tenants file "),
])
def test_bad_files_are_one_clear_line(tmp_path, text, message):
    path = write(tmp_path, text)
    p = run("--config", path, "--print-config")
    assert p.returncode != 0
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith(f"tandem: error: config file {path}: ") or "tenants file" in lines[0], lines[0]
    assert message in lines[0], lines[0]


def test_missing_file(tmp_path):
    p = run("--config", str(tmp_path / "absent.yaml"), "--print-config")
    assert p.returncode != 0
    assert "absent.yaml: cannot be read" in p.stderr


def test_a_server_runs_from_its_config_file(tmp_path):
    # The file's host (a TEST-NET address, which cannot be bound) loses to --host; its name,
    # limits and tenants are what the running server uses.
    path = write(tmp_path, """\
        host: 203.0.113.7
        served_model_name: from-config
        max_num_seqs: 4
        log_level: warn
        tenants:
          - name: ops
            api_keys: [sk-ops-123]
        """)
    s = Server("--config", path, "--host", "127.0.0.1")
    try:
        assert httpx.post(s.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 1}).status_code == 401
        auth = {"Authorization": "Bearer sk-ops-123"}
        models = httpx.get(s.url + "/v1/models", headers=auth).json()
        assert [m["id"] for m in models["data"]] == ["from-config"]
        r = httpx.post(s.url + "/v1/completions", headers=auth, timeout=60,
                       json={"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1
    finally:
        s.stop()
