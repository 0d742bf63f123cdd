"""Fixtures that start a real `tandem serve` process on 127.0.0.1 (a free port) and stop it.

The binary comes from $TANDEM_BINARY (CTest sets it) or build/bin/tandem. Every server uses
the default model; tests keep max_tokens small (the model decodes a few hundred tokens/s on
two cores). Also what several test files share: a temporary config file, the openai client,
the n-gram drafting flags and the copying task they draft on.
"""
import contextlib
import os
import re
import signal
import subprocess
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

ROOT = Path(__file__).resolve().parents[2]


def tandem_binary():
    b = os.environ.get("TANDEM_BINARY") or str(ROOT / "build" / "bin" / "tandem")
    if not Path(b).exists():
        pytest.skip(f"no tandem binary at {b}")
    return b


class Server:
    def __init__(self, *args, env=None):
        self.proc = subprocess.Popen(
            [tandem_binary(), "serve", "--port", "0", "--threads", "2", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, **(env or {})})
        self.log = []
        self.port = None
        self.scheme = "http"
        ready = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self.log.append(line)
                m = re.search(r"listening on (https?)://[^:]+:(\d+)", line)
                if m:
                    self.scheme, self.port = m.group(1), int(m.group(2))
                if "ready:" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(120) or self.port is None or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("tandem serve did not start:\n" + "".join(self.log))
        self.url = f"{self.scheme}://127.0.0.1:{self.port}"

    def metrics(self):
        text = httpx.get(self.url + "/metrics", timeout=30).text
        out = {}
        for line in text.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
        return out

    def wait_idle(self, timeout=60):
        """Until nothing runs, waits or holds KV blocks outside the prefix cache."""
        deadline = time.time() + timeout
        m = self.metrics()
        while time.time() < deadline:
            m = self.metrics()
            if (m["tandem:num_requests_running"] == 0 and m["tandem:num_requests_waiting"] == 0
                    and m["tandem:kv_blocks_used"] == 0 and m["tandem:requests_in_flight"] == 0):
                return m
            time.sleep(0.05)
        return m

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.proc.poll() is not None or os.environ.get("TANDEM_PRINT_LOG"):
            print(f"tandem serve (exit status {self.proc.returncode}):\n" + "".join(self.log))
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextlib.contextmanager
def temp_file(text, suffix=".yaml"):
    """The path of a temporary file holding text; the file goes when the block ends."""
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as f:
        f.write(text)
    try:
        yield f.name
    finally:
        os.unlink(f.name)


def openai_client(server, key="unused", timeout=120):
    """The openai SDK on the server's /v1, with no retries (a refusal shows as it comes)."""
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=timeout)


# n-gram drafting at every step (no cost model), so whether a request drafts is not up to timing.
NGRAM = ("--speculative", "ngram", "--no-speculative-adaptive", "--num-speculative-tokens", "4")
DRAFTED = 'tandem:spec_decode_num_draft_tokens_total{method="ngram"}'
ACCEPTED = 'tandem:spec_decode_num_accepted_tokens_total{method="ngram"}'
# A copying task: its answer repeats the prompt, so n-gram lookup finds drafts.
PASSAGE = ("The lighthouse stood at the edge of the cliff for two hundred years. Every night its keeper "
           "climbed the one hundred and twelve steps, trimmed the wick, and watched the ships pass safely "
           "through the narrow channel between the rocks.")
COPY = [{"role": "user", "content": "Copy this text exactly, word for word:\n\n" + PASSAGE}]


@pytest.fixture(scope="session")
def server():
    with Server("--max-num-seqs", "16", "--log-level", "warn") as s:
        yield s


TENANTS = textwrap.dedent("""\
    tenants:
      - name: alice
        api_keys: [sk-alice]
        requests_per_minute: 1000
        tokens_per_minute: 1000000
        weight: 1
      - name: limited
        api_keys: [sk-limited]
        requests_per_minute: 2
        weight: 1
      - name: tokens
        api_keys: [sk-tokens]
        tokens_per_minute: 100
      - name: single
        api_keys: [sk-single]
        max_concurrent_requests: 1
    """)


@pytest.fixture(scope="session")
def tenant_server():
    with temp_file(TENANTS) as path, Server("--config", path, "--log-level", "warn") as s:
        yield s
