"""gpu/serve_client.py, the standard-library driver gpu/serve_check.sh runs against
`tandem serve --device cuda` on the GPU machine, run here against a real CPU server on a small
synthetic model (`tandem gen-model`), so that the script cannot rot: every functional case
passes (the WebSocket cancel in prefill included), the greedy answers are recorded, and the
compare mode tells identical answers from different ones.
"""
import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT, Server, tandem_binary

CLIENT = ROOT / "gpu" / "serve_client.py"


@pytest.fixture(scope="module")
def small_server():
    with tempfile.TemporaryDirectory() as d:
        model = Path(d) / "small.gguf"
        subprocess.run([tandem_binary(), "gen-model", "--out", str(model), "--layers", "4", "--embd", "256",
                        "--heads", "4", "--kv-heads", "2", "--ff", "512", "--vocab", "2048", "--type", "f32",
                        "--embd-type", "f32", "--untied", "--ctx", "4096"], check=True, capture_output=True, timeout=60)
        # A small step budget makes the long prompt of the cancel case take many prefill steps.
        s = Server("--model", str(model), "--max-num-batched-tokens", "256", "--max-num-seqs", "16",
                   "--no-tiled-cache", "--log-level", "warn")
        yield s, Path(d)
        s.stop()


def run_client(*args, timeout=240):
    return subprocess.run([sys.executable, str(CLIENT), *args], capture_output=True, text=True, timeout=timeout)


def test_every_functional_case_passes_and_greedy_answers_are_recorded(small_server):
    server, d = small_server
    out = d / "greedy.json"
    r = run_client("check", "--url", server.url, "--greedy-out", str(out))
    lines = r.stdout.splitlines()
    assert r.returncode == 0, r.stdout + r.stderr
    for case in ["health", "chat", "stream", "sampled", "logprobs", "logit_bias", "json_schema", "tools",
                 "ws_cancel", "metrics", "greedy_record"]:
        assert any(line.startswith(f"PASS {case}") for line in lines), (case, r.stdout)
    assert not any(line.startswith("FAIL") for line in lines), r.stdout
    recorded = json.loads(out.read_text())
    assert len(recorded["cases"]) >= 6
    assert all(c["positions"] and len(c["positions"][0]["top"]) == 5 for c in recorded["cases"])

    # The same file twice: identical. A changed token: a difference, and exit status 1.
    r = run_client("compare", str(out), str(out))
    assert r.returncode == 0 and r.stdout.count("SAME") == len(recorded["cases"]), r.stdout
    changed = copy.deepcopy(recorded)
    changed["cases"][0]["positions"][1]["bytes"] = [0xFF, 0xFE]  # a token no top-5 lists
    other = d / "changed.json"
    other.write_text(json.dumps(changed))
    r = run_client("compare", str(out), str(other))
    assert r.returncode == 1, r.stdout
    assert "DIFF chat0: same first 1 tokens" in r.stdout, r.stdout


def test_a_failing_case_is_reported_with_its_reason(small_server):
    server, _ = small_server
    # Against a port nobody serves on, every case fails and the exit status says so.
    r = run_client("check", "--url", "http://127.0.0.1:9", "--only", "chat", "--timeout", "5")
    assert r.returncode == 1
    assert r.stdout.startswith("FAIL health"), r.stdout


def test_the_benchmark_mode_measures_a_short_closed_loop(small_server):
    server, d = small_server
    out = d / "bench.json"
    r = run_client("bench", "--url", server.url, "--clients", "2", "--seconds", "3", "--drain-seconds", "30",
                   "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = json.loads(out.read_text())
    assert row["clients"] == 2 and row["requests"] >= 1 and row["errors"] == 0
    assert row["tok_s"] > 0 and row["ttft_p50_ms"] > 0
