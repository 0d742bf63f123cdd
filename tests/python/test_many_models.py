"""Several models in one server (models/supervisor.h, docs/serving.md "Several models"): a real
`tandem serve` with small synthetic models made by `tandem gen-model`, driven with the openai SDK
and httpx. Each model is picked by its name, an alias or NAME:ADAPTER; models load on first use
and unload when idle past keep_alive or when the memory budget needs room (least recently used
first, never one a request holds); a request waits for a loading model within a bound, then 503.
Every route that serves a model picks it so: generation, /tokenize, /detokenize, count_tokens,
/v1/embeddings and rerank, the WebSocket's start and response.create frames, and each line of a
batch.
"""
import json
import shutil
import subprocess
import textwrap
import threading
import time

import httpx
import openai
import pytest
from websockets.sync.client import connect

from conftest import Server, openai_client, tandem_binary, temp_file

# Q4_0 matrices (the embeddings and head too): every kernel table tiles them for steps of any
# size, so a loaded model counts its file and KV pool alone (the AVX2 table keeps a Q8_0 head's
# tiles beside its rows; test_counted_bytes_include_tiled_copies_kept_beside_rows).
SMALL = ["--layers", "2", "--embd", "128", "--heads", "2", "--kv-heads", "2", "--ff", "256", "--vocab", "512",
         "--ctx", "1024", "--untied", "--type", "q4_0", "--embd-type", "q4_0"]  # untied: each seed's replies differ
SMALL_NO_VOCAB = [x for i, x in enumerate(SMALL) if x != "--vocab" and (i == 0 or SMALL[i - 1] != "--vocab")]
# Large enough that its load (the weights re-laid in memory) and its decode take a while.
BIG = ["--layers", "4", "--embd", "1024", "--heads", "8", "--kv-heads", "4", "--ff", "2816", "--vocab", "2048",
       "--ctx", "1024", "--type", "q4_0", "--embd-type", "q4_0"]
KV_TOKENS = 1024
HI = [{"role": "user", "content": "Hello there, how are you?"}]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    out = {}
    for name, seed in (("a", 1), ("b", 2), ("c", 3), ("d", 4)):
        out[name] = d / f"{name}.gguf"
        subprocess.run([tandem_binary(), "gen-model", "--out", str(out[name]), *SMALL, "--seed", str(seed)],
                       check=True, capture_output=True, timeout=60)
    # Another vocabulary (fewer merges: more tokens for the same text), and an embeddings model
    # (the file declares mean pooling).
    for name, extra in (("t", ["--vocab", "300"]), ("e", ["--vocab", "512", "--pooling-type", "1"])):
        out[name] = d / f"{name}.gguf"
        subprocess.run([tandem_binary(), "gen-model", "--out", str(out[name]), *SMALL_NO_VOCAB, *extra, "--seed", "7"],
                       check=True, capture_output=True, timeout=60)
    out["big"] = d / "big.gguf"
    subprocess.run([tandem_binary(), "gen-model", "--out", str(out["big"]), *BIG, "--seed", "9"], check=True,
                   capture_output=True, timeout=120)
    return out


def kv_bytes(layers, kv_heads, head_dim, tokens=KV_TOKENS):
    return 2 * layers * kv_heads * head_dim * 2 * tokens  # K and V, f16


def small_bytes(files):
    return files["a"].stat().st_size + kv_bytes(2, 2, 64)


def big_bytes(files):
    return files["big"].stat().st_size + kv_bytes(4, 4, 128)


# A fault (models/supervisor.cpp): every load first waits this long, as on a slow disk, so a
# model is seen loading and a request can outwait its bound.
SLOW = {"TANDEM_SLOW_MODEL_LOAD_MS": "1500"}


def listed(files, names):
    """The models: list of these test models, each kept until the budget needs room."""
    return "".join(f"- name: {n}\n  path: {files[n]}\n  keep_alive: -1\n" for n in names)


def serve(files, models_yaml, *args, tenants="", env=None):
    yaml = "models:\n" + textwrap.indent(textwrap.dedent(models_yaml), "  ") + tenants
    f = temp_file(yaml)
    path = f.__enter__()
    try:
        return Server("--config", path, "--no-tiled-cache", "--kv-cache-tokens", str(KV_TOKENS), "--max-num-seqs",
                      "4", *args, env=env)
    finally:
        f.__exit__(None, None, None)


def states(server, key=None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    data = httpx.get(server.url + "/v1/models", headers=headers, timeout=30).json()["data"]
    return {m["id"]: m for m in data}


def wait_state(server, model, state, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if states(server)[model]["state"] == state:
            return True
        time.sleep(0.05)
    return False


def ask(client, model, max_tokens=4):
    return client.chat.completions.create(model=model, messages=HI, max_tokens=max_tokens, temperature=0)


def fingerprint(client, model):
    """The greedy reply's tokens with their logprobs: which weights answered."""
    r = client.chat.completions.create(model=model, messages=HI, max_tokens=4, temperature=0, logprobs=True)
    return r.model, [(t.token, round(t.logprob, 4)) for t in r.choices[0].logprobs.content]


class MemoryWatch:
    """Polls /v1/models; the bytes of models loading, loaded or unloading at each look."""

    def __init__(self, server):
        self.server, self.peak, self.looks, self.stop = server, 0, 0, False
        self.seen = {}
        self.look()  # the first look before the test goes on
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            self.look()
            time.sleep(0.01)

    def look(self):
        ms = states(self.server)
        self.peak = max(self.peak, sum(m["bytes"] for m in ms.values() if m["state"] != "unloaded"))
        for name, m in ms.items():
            self.seen.setdefault(name, []).append(m["state"])
        self.looks += 1

    def end(self):
        self.stop = True
        self.thread.join()
        self.look()  # what the test saw last is in it


def exposition(text):
    """The samples of a Prometheus text exposition by series, checked as a scraper reads it: one
    HELP and TYPE per family, before its samples, which are together and under its name."""
    series, seen, family = {}, set(), None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            family = line.split()[2]
            assert family not in seen, f"{family} twice"
            seen.add(family)
        elif line.startswith("# TYPE "):
            assert line.split()[2] == family, line
        elif line:
            name, value = line.rsplit(" ", 1)
            assert name.split("{")[0] in (family, family + "_bucket", family + "_sum", family + "_count"), line
            assert name not in series, f"{name} twice"
            series[name] = float(value)
    return series


def test_models_by_name_alias_and_unknown(files):
    with serve(files, f"""\
            - name: a
              path: {files['a']}
            - name: b
              path: {files['b']}
              aliases: [bee, gpt-4o-mini]
            """) as s:
        client = openai_client(s)
        (ma, fa), (mb, fb) = fingerprint(client, "a"), fingerprint(client, "b")
        assert ma == "a" and mb == "b"
        assert fa != fb  # different weights answered
        # An alias is the same model: the same greedy answer, the same logprobs.
        assert fingerprint(client, "bee") == ("bee", fb)
        assert fingerprint(client, "gpt-4o-mini") == ("gpt-4o-mini", fb)
        assert states(s)["b"]["state"] == "loaded"
        # No model named: the default (the first).
        none = httpx.post(s.url + "/v1/chat/completions",
                          json={"messages": HI, "max_tokens": 4, "temperature": 0, "logprobs": True},
                          timeout=60).json()
        assert none["model"] == "a"
        assert [(t["token"], round(t["logprob"], 4)) for t in none["choices"][0]["logprobs"]["content"]] == fa
        with pytest.raises(openai.NotFoundError) as e:
            ask(client, "nope")
        body = e.value.response.json()["error"]
        assert body["code"] == "model_not_found" and body["param"] == "model"
        assert "nope" in body["message"] and "a, b" in body["message"]
        # Streamed too, and the completions and Responses paths pick the same way.
        chunks = list(client.chat.completions.create(model="b", messages=HI, max_tokens=4, stream=True))
        assert chunks and all(c.model == "b" for c in chunks)
        assert client.completions.create(model="b", prompt="Hi", max_tokens=3).model == "b"
        assert client.responses.create(model="bee", input="Hi", max_output_tokens=3).model == "bee"
        with pytest.raises(openai.NotFoundError):
            client.completions.create(model="zzz", prompt="Hi", max_tokens=3)
        # /v1/models lists both with their states and the accounted bytes (file + KV pool).
        ms = states(s)
        assert set(ms) == {"a", "b"} and ms["b"]["aliases"] == ["bee", "gpt-4o-mini"]
        assert ms["a"]["pinned"] and ms["b"]["bytes"] == small_bytes(files)
        # Metrics carry the model: the requests' counters, and each loaded model's engine series.
        text = httpx.get(s.url + "/metrics").text
        assert 'tandem:requests_total{tenant="default",status="200",model="b"}' in text
        assert 'tandem:generation_tokens_total{tenant="default",model="a"}' in text
        series = exposition(text)
        for m in ("a", "b"):
            assert series[f'tandem:ready{{model="{m}"}}'] == 1
            assert series[f'tandem:scheduler_steps_total{{model="{m}"}}'] > 0
            assert series[f'tandem:kv_blocks_total{{model="{m}"}}'] == KV_TOKENS // 16
            assert series[f'tandem:step_cost_seconds{{model="{m}",part="fixed"}}'] >= 0
        assert not any(name.startswith("tandem:scheduler_steps_total") and "model=" not in name for name in series)
        # Without --admin-api-key the operator routes are off.
        assert httpx.post(s.url + "/models/load", json={"model": "b"}).status_code == 403


def test_states_keep_alive_and_waiting_stream(files):
    with serve(files, f"""\
            - name: a
              path: {files['a']}
            - name: big
              path: {files['big']}
              keep_alive: 2s
            """, env=SLOW) as s:
        assert states(s)["big"]["state"] == "unloaded" and states(s)["a"]["state"] == "loaded"
        watch = MemoryWatch(s)
        client = openai_client(s)
        # A stream for a model that is not loaded waits for it and gets its first event once it runs.
        t0 = time.time()
        stream = client.chat.completions.create(model="big", messages=HI, max_tokens=4, stream=True)
        first = next(iter(stream))
        assert first.model == "big" and time.time() - t0 >= 1.5
        rest = list(stream)
        assert rest[-1].choices[0].finish_reason in ("stop", "length")
        assert states(s)["big"]["state"] == "loaded"  # idle less than its keep_alive
        assert wait_state(s, "big", "unloaded", timeout=20)
        idle_for = time.time() - t0
        watch.end()
        assert idle_for >= 2
        seen = watch.seen["big"]
        # In order: unloaded, loading, loaded, (unloading,) unloaded.
        order = [x for i, x in enumerate(seen) if i == 0 or seen[i - 1] != x]
        assert order[0] == "unloaded" and "loading" in order and "loaded" in order
        assert order.index("loading") < order.index("loaded") < len(order) - 1 and order[-1] == "unloaded"
        # Used again: loads again.
        assert ask(client, "big").model == "big"


def test_load_timeout_503_with_retry_after(files):
    with serve(files, f"""\
            - name: a
              path: {files['a']}
            - name: big
              path: {files['big']}
            """, "--models-load-timeout", "0.5", env=SLOW) as s:
        t0 = time.time()
        r = httpx.post(s.url + "/v1/chat/completions", json={"model": "big", "messages": HI, "max_tokens": 2},
                       timeout=60)
        waited = time.time() - t0
        assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1
        assert r.json()["error"]["code"] == "model_loading" and "big" in r.json()["error"]["message"]
        assert 0.4 <= waited < 1.5  # the bound, not the whole load
        assert states(s)["big"]["state"] == "loading"
        # A stream past the bound gets the same 503 before any event.
        with pytest.raises(openai.APIStatusError) as e:
            list(openai_client(s).chat.completions.create(model="big", messages=HI, max_tokens=2, stream=True))
        assert e.value.status_code == 503
        # The load went on: the model comes up and then serves.
        assert wait_state(s, "big", "loaded")
        assert ask(openai_client(s), "big").model == "big"
        # Other models serve while one loads.
        assert ask(openai_client(s), "a").model == "a"


def test_budget_evicts_least_recently_used(files):
    one = small_bytes(files)
    budget = 3 * one + one // 2  # the default and two more
    with serve(files, listed(files, ("a", "b", "c", "d")), "--models-memory-budget", str(budget)) as s:
        watch = MemoryWatch(s)
        client = openai_client(s)
        for name in ("b", "c", "b"):  # b used last: c is the least recently used
            assert ask(client, name).model == name
        ms = states(s)
        assert ms["b"]["state"] == ms["c"]["state"] == "loaded"
        assert ask(client, "d").model == "d"
        ms = states(s)
        assert ms["c"]["state"] in ("unloading", "unloaded")
        assert ms["b"]["state"] == ms["d"]["state"] == ms["a"]["state"] == "loaded"
        assert ask(client, "c").model == "c"  # now b is the least recently used
        assert wait_state(s, "b", "unloaded")
        watch.end()
        assert watch.looks >= 3 and watch.peak <= budget + one


def test_budget_never_evicts_a_running_stream(files):
    one, big = small_bytes(files), big_bytes(files)
    budget = one + big + one + one // 2  # the default, big and one small
    with serve(files, listed(files, ("a", "big", "b", "c")), "--models-memory-budget", str(budget)) as s:
        watch = MemoryWatch(s)
        client = openai_client(s)
        assert ask(client, "b").model == "b"
        stream = client.chat.completions.create(model="big", messages=HI, max_tokens=400, stream=True,
                                                extra_body={"ignore_eos": True})
        it = iter(stream)
        next(it)  # big runs
        # While it streams, b and c take turns in the room left; big stays.
        assert ask(client, "c").model == "c"
        assert ask(client, "b").model == "b"
        assert states(s)["big"]["state"] == "loaded" and states(s)["big"]["in_use"] == 1
        n = 1 + sum(1 for _ in it)
        watch.end()
        assert n > 10
        big_seen = watch.seen["big"]
        assert all(x == "loaded" for x in big_seen[big_seen.index("loaded"):]), big_seen
        assert "unloaded" in watch.seen["c"] or "unloading" in watch.seen["c"] or states(s)["c"]["state"] != "loaded"
        assert watch.peak <= budget + big


def resident_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def test_resident_memory_stays_in_the_budget(files, tmp_path):
    """What the process holds, not only what the supervisor counts: while big models take turns
    in a budget with room for two, the server's resident memory (VmRSS, sampled every 5 ms)
    never grows past what it held at start by more than the budget's room plus one model (the
    swap's), and an unloaded model's memory is given back (seven loads in the room of three)."""
    bigs = {"big": files["big"]}
    for n, seed in (("big2", 10), ("big3", 11)):
        bigs[n] = tmp_path / f"{n}.gguf"
        subprocess.run([tandem_binary(), "gen-model", "--out", str(bigs[n]), *BIG, "--seed", str(seed)], check=True,
                       capture_output=True, timeout=120)
    one, big = small_bytes(files), big_bytes(files)
    budget = one + 2 * big + big // 2  # the default and two big ones
    with serve(files, listed({**files, **bigs}, ("a", *bigs)), "--models-memory-budget", str(budget)) as s:
        client = openai_client(s)
        assert ask(client, "a").model == "a"
        start = resident_bytes(s.proc.pid)
        peak, stop = [start], threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], resident_bytes(s.proc.pid))
                time.sleep(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            for name in ("big", "big2", "big3", "big", "big2", "big3", "big"):
                assert ask(client, name, max_tokens=8).model == name
            assert wait_state(s, "big2", "unloaded")
        finally:
            stop.set()
            sampler.join()
        grown = peak[0] - start
        assert grown <= (budget - one) + big + (16 << 20), (grown >> 20, budget >> 20, big >> 20)
        # Every big model was in memory at some point: the bound is not met by loading nothing.
        assert grown >= big // 2, (grown >> 20, big >> 20)


def cpu_has_avx2():
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    return {"avx2", "fma", "f16c"} <= set(flags)


@pytest.mark.skipif(not cpu_has_avx2(), reason="the AVX2 kernel table needs AVX2, FMA and F16C")
def test_counted_bytes_include_tiled_copies_kept_beside_rows(files, tmp_path):
    """The AVX2 table tiles Q4_1 for steps of one to three tokens only, so a Q4_1 model keeps
    its tiled copy beside the rows its prompt steps read: the budget counts both. A Q4_0
    model's tiles replace its rows there, and the portable table tiles nothing: file and KV
    pool alone."""
    q4_1 = tmp_path / "q4_1.gguf"
    subprocess.run([tandem_binary(), "gen-model", "--out", str(q4_1), *BIG[:BIG.index("--type")], "--type", "q4_1",
                    "--seed", "9"], check=True, capture_output=True, timeout=120)
    models = {**files, "q4_1": q4_1}
    counted = {}
    for isa in ("avx2", "generic"):
        with serve(models, listed(models, ("a", "big", "q4_1")), env={"TANDEM_ISA": isa}) as s:
            client = openai_client(s)
            for name in ("big", "q4_1"):
                assert ask(client, name, max_tokens=4).model == name
            counted[isa] = {name: states(s)[name]["bytes"] for name in ("big", "q4_1")}
    kv = kv_bytes(4, 4, 128)
    for isa in ("avx2", "generic"):
        assert counted[isa]["big"] == files["big"].stat().st_size + kv, (isa, counted)
    assert counted["generic"]["q4_1"] == q4_1.stat().st_size + kv, counted
    # The tiled copy of its layers' matrices (the embedding rows are not tiled): most of the file.
    extra = counted["avx2"]["q4_1"] - counted["generic"]["q4_1"]
    assert q4_1.stat().st_size // 2 < extra < q4_1.stat().st_size, counted


def test_operator_load_and_unload(files):
    with serve(files, f"""\
            - name: a
              path: {files['a']}
            - name: b
              path: {files['b']}
            """, "--admin-api-key", "sk-admin") as s:
        url = s.url
        assert httpx.post(url + "/models/load", json={"model": "b"}).status_code == 401
        assert httpx.post(url + "/models/load", json={"model": "b"},
                          headers={"Authorization": "Bearer wrong"}).status_code == 401
        admin = {"Authorization": "Bearer sk-admin"}
        r = httpx.post(url + "/models/load", json={"model": "b"}, headers=admin, timeout=60)
        assert r.status_code == 200 and r.json()["state"] == "loaded" and r.json()["id"] == "b"
        assert states(s)["b"]["state"] == "loaded"
        r = httpx.post(url + "/models/unload", json={"model": "b"}, headers=admin)
        assert r.status_code == 200 and r.json()["state"] in ("unloading", "unloaded")
        assert wait_state(s, "b", "unloaded")
        r = httpx.post(url + "/models/unload", json={"model": "a"}, headers=admin)
        assert r.status_code == 409 and r.json()["error"]["code"] == "model_pinned"
        assert httpx.post(url + "/models/load", json={"model": "x"}, headers=admin).status_code == 404
        assert httpx.post(url + "/models/load", json={}, headers=admin).status_code == 400
        assert httpx.get(url + "/health").status_code == 200


def test_tenant_limited_to_models(files):
    tenants = textwrap.dedent("""\
        tenants:
          - name: alice
            api_keys: [sk-alice]
            models: [b]
          - name: bob
            api_keys: [sk-bob]
        """)
    with serve(files, f"""\
            - name: a
              path: {files['a']}
            - name: b
              path: {files['b']}
            """, tenants=tenants) as s:
        alice, bob = openai_client(s, "sk-alice"), openai_client(s, "sk-bob")
        with pytest.raises(openai.NotFoundError) as e:
            ask(alice, "a")
        assert "b" in e.value.response.json()["error"]["message"]
        assert ask(alice, "b").model == "b"
        # Naming no model: the tenant's first.
        r = httpx.post(s.url + "/v1/chat/completions", json={"messages": HI, "max_tokens": 2},
                       headers={"Authorization": "Bearer sk-alice"}, timeout=60)
        assert r.status_code == 200 and r.json()["model"] == "b"
        assert ask(bob, "a").model == "a" and ask(bob, "b").model == "b"
        with pytest.raises(openai.AuthenticationError):
            ask(openai_client(s, "sk-nobody"), "b")
        assert list(states(s, "sk-alice")) == ["b"]
        assert sorted(states(s, "sk-bob")) == ["a", "b"]


def test_tenant_limits_count_every_model(files):
    """A tenant's limits are the server's, not each model's (actors/tenant_ledger.h): requests to
    several models draw on one request bucket and one concurrency cap, so naming another model
    never buys a tenant more."""
    tenants = textwrap.dedent("""\
        tenants:
          - name: carol
            api_keys: [sk-carol]
            requests_per_minute: 3
          - name: dave
            api_keys: [sk-dave]
            max_concurrent_requests: 1
        """)
    with serve(files, f"""\
            - name: a
              path: {files['a']}
            - name: b
              path: {files['b']}
            - name: big
              path: {files['big']}
            """, tenants=tenants) as s:
        def chat(model, key, **extra):
            return httpx.post(s.url + "/v1/chat/completions",
                              json={"model": model, "messages": HI, "max_tokens": 2, **extra},
                              headers={"Authorization": f"Bearer {key}"}, timeout=60)

        remaining = []
        for model in ("a", "b", "a"):
            r = chat(model, "sk-carol")
            assert r.status_code == 200 and r.json()["model"] == model, r.text
            remaining.append(int(r.headers["x-ratelimit-remaining-requests"]))
        assert remaining == [2, 1, 0]
        r = chat("b", "sk-carol")
        assert r.status_code == 429 and "3 requests per minute" in r.json()["error"]["message"], r.text
        assert float(r.headers["retry-after"]) > 0
        # One stream at a time for dave, whichever model holds it: while big's runs (seconds of
        # decoding), b refuses him.
        with httpx.stream("POST", s.url + "/v1/chat/completions",
                          json={"model": "big", "messages": HI, "max_tokens": 400, "stream": True,
                                "ignore_eos": True},
                          headers={"Authorization": "Bearer sk-dave"}, timeout=60) as stream:
            lines = stream.iter_lines()
            assert next(line for line in lines if line.startswith("data:"))
            r = chat("b", "sk-dave")
            assert r.status_code == 429 and "in flight" in r.json()["error"]["message"], r.text
        # The stream's slot comes back when it ends, on either model.
        deadline = time.time() + 30
        while (r := chat("b", "sk-dave")).status_code == 429 and time.time() < deadline:
            time.sleep(0.1)
        assert r.status_code == 200 and r.json()["model"] == "b", r.text


def adapter_for_a(files, tmp_path):
    """A LoRA adapter (gen-model --lora) for model a's file."""
    adapter = tmp_path / "x.gguf"
    subprocess.run([tandem_binary(), "gen-model", "--lora", str(files["a"]), "--out", str(adapter), "--seed", "5"],
                   check=True, capture_output=True, timeout=60)
    return adapter


def test_adapters_belong_to_the_default_model(files, tmp_path):
    adapter = adapter_for_a(files, tmp_path)
    with serve(files, f"""\
            - name: a
              path: {files['a']}
            - name: b
              path: {files['b']}
            """, "--lora", f"x={adapter}") as s:
        client = openai_client(s)
        base, with_x = fingerprint(client, "a")[1], fingerprint(client, "a:x")
        assert with_x[0] == "a:x" and with_x[1] != base  # the adapter changes the answer
        ms = states(s)
        assert ms["a:x"]["parent"] == "a" and "b:x" not in ms
        for wrong in ("a:y", "b:x"):
            with pytest.raises(openai.NotFoundError) as e:
                ask(client, wrong)
            assert "adapter" in e.value.response.json()["error"]["message"]


def test_a_tenants_default_adapter_applies_to_the_default_model_only(files, tmp_path):
    adapter = adapter_for_a(files, tmp_path)
    tenants = textwrap.dedent("""\
        tenants:
          - name: carol
            api_keys: [sk-carol]
            lora: x
          - name: dave
            api_keys: [sk-dave]
        """)
    with serve(files, f"""\
            - name: a
              path: {files['a']}
            - name: b
              path: {files['b']}
            """, "--lora", f"x={adapter}", tenants=tenants) as s:
        carol, dave = openai_client(s, "sk-carol"), openai_client(s, "sk-dave")
        # On the adapters' model carol's default applies; on the other model she gets its base,
        # as dave does (this was a 500: the default looked for on a model without adapters).
        assert fingerprint(carol, "a")[1] == fingerprint(dave, "a:x")[1] != fingerprint(dave, "a")[1]
        assert fingerprint(carol, "b")[1] == fingerprint(dave, "b")[1]


# The routes beside generation pick the model too: /tokenize, /detokenize, count_tokens,
# /v1/embeddings (and rerank), the WebSocket's start frames and the Responses API's WebSocket mode.
TEXT = "Hello there, how are you?"


def cli_ids(path, text=TEXT):
    """The token ids `tandem tokenize --model PATH` gives: what that model's tokenizer says."""
    out = subprocess.run([tandem_binary(), "tokenize", "--model", str(path), "--json", "--prompt", text], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    return json.loads(out)["ids"]


def not_found_naming(r, names):
    """A 404 whose message names every model the caller may use (OpenAI's shape or Anthropic's)."""
    assert r.status_code == 404, r.text
    err = r.json()["error"]
    assert ", ".join(names) in err["message"], err
    return err


def test_tokenizer_routes_pick_the_model(files):
    with serve(files, f"""\
            - name: a
              path: {files['a']}
            - name: t
              path: {files['t']}
            """) as s:
        ids_a, ids_t = cli_ids(files["a"]), cli_ids(files["t"])
        assert ids_a != ids_t and max(ids_a) >= 300  # a's merges reach past t's vocabulary

        def post(path, body):
            return httpx.post(s.url + path, json=body, timeout=60)

        assert states(s)["t"]["state"] == "unloaded"
        r = post("/tokenize", {"model": "t", "prompt": TEXT})
        assert r.status_code == 200 and r.json()["tokens"] == ids_t, r.text
        assert states(s)["t"]["state"] == "loaded"  # the request loaded it
        assert post("/tokenize", {"model": "a", "prompt": TEXT}).json()["tokens"] == ids_a
        assert post("/tokenize", {"prompt": TEXT}).json()["tokens"] == ids_a  # no model: the default
        # Chat messages through each model's template.
        chat_t = post("/tokenize", {"model": "t", "messages": [{"role": "user", "content": TEXT}]}).json()
        chat_a = post("/tokenize", {"model": "a", "messages": [{"role": "user", "content": TEXT}]}).json()
        assert chat_t["count"] > chat_a["count"] and max(chat_t["tokens"]) < 300 <= max(chat_a["tokens"])

        # /detokenize reads ids with the named model's vocabulary: a's ids past 299 are not t's.
        assert post("/detokenize", {"model": "t", "tokens": ids_t}).json()["prompt"] == TEXT
        assert post("/detokenize", {"model": "a", "tokens": ids_a}).json()["prompt"] == TEXT
        r = post("/detokenize", {"model": "t", "tokens": ids_a})
        assert r.status_code == 400 and "0 to 299" in r.json()["error"]["message"], r.text
        assert post("/detokenize", {"tokens": ids_a}).status_code == 200

        # Anthropic's count_tokens: the named model's template and tokens.
        msgs = [{"role": "user", "content": TEXT}]
        count = {m: post("/v1/messages/count_tokens", {"model": m, "messages": msgs}).json()["input_tokens"]
                 for m in ("a", "t")}
        assert count["a"] == chat_a["count"] and count["t"] == chat_t["count"]

        # An unknown model: a 404 naming the models, on each route (Anthropic's shape for count_tokens).
        for path, body in (("/tokenize", {"prompt": TEXT}), ("/detokenize", {"tokens": [1]})):
            err = not_found_naming(post(path, {**body, "model": "nope"}), ["a", "t"])
            assert err["code"] == "model_not_found" and err["param"] == "model"
        r = post("/v1/messages/count_tokens", {"model": "nope", "messages": msgs})
        assert r.json()["type"] == "error" and r.json()["error"]["type"] == "not_found_error"
        not_found_naming(r, ["a", "t"])


def test_embeddings_pick_the_model(files):
    with serve(files, f"""\
            - name: a
              path: {files['a']}
            - name: e
              path: {files['e']}
            """) as s:
        client = openai_client(s)
        assert states(s)["e"]["state"] == "unloaded"
        r = client.embeddings.create(model="e", input=["Hello there", "Good night"], encoding_format="float")
        assert r.model == "e" and len(r.data) == 2 and len(r.data[0].embedding) == 128
        assert states(s)["e"]["state"] == "loaded"
        # a serves generation: an embeddings request naming it (or naming none: the default) is
        # its 400, so the vectors above came from e.
        for body in ({"model": "a", "input": "Hello"}, {"input": "Hello"}):
            r = httpx.post(s.url + "/v1/embeddings", json=body, timeout=60)
            assert r.status_code == 400 and "text generation" in r.json()["error"]["message"], r.text
        # e serves embeddings only.
        with pytest.raises(openai.BadRequestError):
            ask(client, "e")
        not_found_naming(httpx.post(s.url + "/v1/embeddings", json={"model": "nope", "input": "x"}), ["a", "e"])
        not_found_naming(httpx.post(s.url + "/v1/rerank", json={"model": "nope", "query": "q", "documents": ["d"]}),
                         ["a", "e"])
        text = httpx.get(s.url + "/metrics").text
        assert 'tandem:requests_total{tenant="default",status="200",model="e"}' in text


def ws_url(server, path="/v1/ws"):
    return server.url.replace("http://", "ws://") + path


def ws_generation(ws, frame):
    """One /v1/ws generation: its text and its done frame (or the error frame)."""
    ws.send(json.dumps(frame))
    text = ""
    while True:
        f = json.loads(ws.recv(timeout=120))
        if f["type"] == "delta":
            text += f["text"]
        else:
            return text, f


def ws_response(ws, frame):
    """One Responses API WebSocket response: its events up to the last (or the error event)."""
    ws.send(json.dumps(frame))
    events = []
    while True:
        e = json.loads(ws.recv(timeout=120))
        events.append(e)
        if e["type"] in ("response.completed", "response.incomplete", "response.failed", "error"):
            return events


def http_text(server, model, **extra):
    body = {"messages": HI, "max_tokens": 8, "temperature": 0, "ignore_eos": True, **extra}
    if model:
        body["model"] = model
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def test_websocket_generations_pick_the_model(files):
    with serve(files, listed(files, ("a", "b", "c"))) as s:
        assert states(s)["b"]["state"] == states(s)["c"]["state"] == "unloaded"
        start = {"type": "start", "messages": HI, "max_tokens": 8, "temperature": 0, "ignore_eos": True}
        with connect(ws_url(s)) as ws:
            text_b, done = ws_generation(ws, {**start, "id": "g1", "model": "b"})
            assert done["type"] == "done" and done["usage"]["completion_tokens"] == 8, done
            assert states(s)["b"]["state"] == "loaded"  # the start frame loaded it
            text_a, _ = ws_generation(ws, {**start, "id": "g2"})  # no model: the default
            _, err = ws_generation(ws, {**start, "id": "g3", "model": "nope"})
            assert err["type"] == "error" and err["id"] == "g3" and err["status"] == 404, err
            assert "a, b, c" in err["message"]
            # The socket goes on after the error.
            assert ws_generation(ws, {**start, "id": "g4", "model": "b"})[0] == text_b
        assert text_a != text_b  # different weights
        assert text_b == http_text(s, "b") and text_a == http_text(s, None)

        # The Responses API's WebSocket mode: response.create's model.
        create = {"type": "response.create", "input": "Hello there, how are you?", "max_output_tokens": 8,
                  "temperature": 0}
        with connect(ws_url(s, "/v1/responses")) as ws:
            end = ws_response(ws, {**create, "model": "c"})[-1]
            assert end["type"] in ("response.completed", "response.incomplete"), end
            assert end["response"]["model"] == "c"
            assert states(s)["c"]["state"] == "loaded"
            ws_c = end["response"]["output"][0]["content"][0]["text"] if end["response"]["output"] else ""
            err = ws_response(ws, {**create, "model": "nope"})[-1]
            assert err["type"] == "error" and err["status"] == 404 and "a, b, c" in err["error"]["message"], err
        http_c = httpx.post(s.url + "/v1/responses", timeout=120,
                            json={k: v for k, v in create.items() if k != "type"} | {"model": "c"}).json()
        assert ws_c == (http_c["output"][0]["content"][0]["text"] if http_c["output"] else "")
        text = httpx.get(s.url + "/metrics").text
        assert 'tandem:requests_total{tenant="default",status="200",model="b"}' in text


def test_other_routes_wait_for_a_loading_model_then_503(files):
    with serve(files, f"""\
            - name: a
              path: {files['a']}
            - name: big
              path: {files['big']}
            """, "--models-load-timeout", "0.3", env=SLOW) as s:
        for path, body in (("/tokenize", {"prompt": "Hi"}), ("/v1/embeddings", {"input": "Hi"})):
            r = httpx.post(s.url + path, json={**body, "model": "big"}, timeout=60)
            assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1, r.text
            assert r.json()["error"]["code"] == "model_loading"
        with connect(ws_url(s)) as ws:
            _, err = ws_generation(ws, {"type": "start", "id": "w", "model": "big", "messages": HI, "max_tokens": 2})
            assert err["type"] == "error" and err["status"] == 503 and err["retry_after"] >= 1, err
        assert states(s)["big"]["state"] == "loading"
        assert wait_state(s, "big", "loaded")
        assert httpx.post(s.url + "/tokenize", json={"model": "big", "prompt": "Hi"}).status_code == 200


def test_batch_lines_pick_their_model(files, tmp_path):
    """The Batch API (net/batch/batch_runner.cpp): each line's body.model picks its model, loaded on first
    use as for a chat request; a line naming an unknown model ends in the error file with a 404
    naming the models while the other lines run."""
    with serve(files, listed(files, ["a", "b"]), "--batch-dir", str(tmp_path / "batches")) as s:
        client = openai_client(s)
        assert states(s)["b"]["state"] == "unloaded"
        lines = []
        for cid, model in (("to-a", "a"), ("to-b", "b"), ("to-none", None), ("to-nope", "nope")):
            body = {"messages": HI, "max_tokens": 4, "temperature": 0, "logprobs": True}
            if model:
                body["model"] = model
            lines.append(json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body}))
        f = client.files.create(file=("in.jsonl", ("\n".join(lines) + "\n").encode(), "application/jsonl"),
                                purpose="batch")
        b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
        deadline = time.time() + 120
        while b.status not in ("completed", "failed", "expired", "cancelled") and time.time() < deadline:
            time.sleep(0.2)
            b = client.batches.retrieve(b.id)
        assert b.status == "completed", b
        assert (b.request_counts.total, b.request_counts.completed, b.request_counts.failed) == (4, 3, 1)
        out = {r["custom_id"]: r for r in map(json.loads, client.files.content(b.output_file_id).text.splitlines())}
        errors = [json.loads(x) for x in client.files.content(b.error_file_id).text.splitlines()]
        assert sorted(out) == ["to-a", "to-b", "to-none"]
        assert states(s)["b"]["state"] == "loaded"  # loaded for its line

        def answered(cid):
            body = out[cid]["response"]["body"]
            assert out[cid]["response"]["status_code"] == 200
            return body["model"], [(t["token"], round(t["logprob"], 4)) for t in body["choices"][0]["logprobs"]["content"]]

        # Each line was answered by the weights it named (the default model's for none).
        assert answered("to-a") == fingerprint(client, "a")
        assert answered("to-b") == fingerprint(client, "b")
        assert answered("to-none") == fingerprint(client, "a")
        assert answered("to-a") != answered("to-b")
        assert [e["custom_id"] for e in errors] == ["to-nope"]
        resp = errors[0]["response"]
        assert resp["status_code"] == 404
        err = resp["body"]["error"]
        assert err["param"] == "model" and err["code"] == "model_not_found" and "a, b" in err["message"], err


def test_each_model_keeps_its_own_disk_tier(files, tmp_path):
    """--kv-cache-dir DIR gives each model DIR/NAME: a restarted server answers each model's
    prompt from its own files (cached tokens, the cold greedy answer), and one model's blocks
    never serve another, even for the same prompt."""
    doc = "".join(f"Line {i}: the mill by the ford grinds barley and rye for three villages. " for i in range(12))
    messages = [{"role": "system", "content": doc}, {"role": "user", "content": "What does the mill grind?"}]
    models = listed(files, ["a", "b"])

    def answer(client, model):
        r = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0)
        return r.choices[0].message.content, r.usage.prompt_tokens, r.usage.prompt_tokens_details.cached_tokens

    def spilled(d):
        return sorted(p.name for p in d.glob("*.kvb")) if d.exists() else []

    with serve(files, models, "--kv-cache-dir", str(tmp_path)) as s:
        client = openai_client(s)
        cold_a, n_prompt, cached = answer(client, "a")
        assert n_prompt > 200 and cached == 0
        cold_b, _, cached = answer(client, "b")
        assert cached == 0, "a's blocks never serve b"
        deadline = time.time() + 60  # spills reach the disk after the step that evicts or ends
        while time.time() < deadline and not (len(spilled(tmp_path / "a")) >= n_prompt // 16 - 1
                                              and len(spilled(tmp_path / "b")) >= n_prompt // 16 - 1):
            time.sleep(0.2)
    files_a, files_b = spilled(tmp_path / "a"), spilled(tmp_path / "b")
    assert len(files_a) >= n_prompt // 16 - 1 and len(files_b) >= n_prompt // 16 - 1
    assert not set(files_a) & set(files_b), "each model names its blocks with its own identity"
    assert not spilled(tmp_path), "nothing is spilled outside the models' directories"

    # b's files alone: b answers from disk, a (its directory gone) computes cold.
    shutil.rmtree(tmp_path / "a")
    with serve(files, models, "--kv-cache-dir", str(tmp_path)) as s:
        client = openai_client(s)
        warm_b, _, cached = answer(client, "b")
        assert cached >= n_prompt - 32, "b's prompt came back from DIR/b"
        assert warm_b == cold_b
        again_a, _, cached = answer(client, "a")
        assert cached == 0, "b's files never serve a"
        assert again_a == cold_a
