"""The Gateway API Inference Extension's model-server protocol (docs/cluster.md): the gauges an
endpoint picker reads from /metrics, scraped under real load and checked against the server's
own state.

- tandem:num_requests_running: the streams the scheduler runs (all open streams, up to
  --max-num-seqs);
- tandem:num_requests_waiting: the streams queued behind them (> 0 once --max-num-seqs is full);
- tandem:kv_cache_usage_ratio: in 0..1, the used share of the KV pool (> 0 while streams run,
  back to the idle value once they end);
- tandem:lora_requests_info: vLLM's label shape (no adapters: empty lists, max_lora 0), its
  value a timestamp.
"""
import re
import threading
import time

import httpx

from conftest import Server, openai_client

MAX_NUM_SEQS = 3
GAUGES = ("tandem:num_requests_running", "tandem:num_requests_waiting", "tandem:kv_cache_usage_ratio",
          "tandem:lora_requests_info")


class Stream:
    """One streaming chat request on its own thread; it reads until told to stop, then closes
    the connection (which aborts the sequence on the server)."""

    def __init__(self, server, i):
        self.first = threading.Event()
        self.stop = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self.run, args=(server, i), daemon=True)
        self.thread.start()

    def run(self, server, i):
        try:
            stream = openai_client(server).chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"Count slowly from {i} upwards."}],
                max_tokens=4000, temperature=0, stream=True, extra_body={"ignore_eos": True})
            for _ in stream:
                self.first.set()
                if self.stop.is_set():
                    break
            stream.close()
        except Exception as e:  # noqa: BLE001 (reported by the test)
            self.error = e
        finally:
            self.first.set()


def scrape(server):
    text = httpx.get(server.url + "/metrics", timeout=30).text
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return text, values


def until(server, pred, timeout=60):
    deadline = time.time() + timeout
    while True:
        text, m = scrape(server)
        if pred(m) or time.time() > deadline:
            return text, m
        time.sleep(0.05)


def test_protocol_gauges_follow_the_servers_state():
    started = time.time()
    with Server("--max-num-seqs", str(MAX_NUM_SEQS), "--log-level", "warn") as server:
        idle = server.wait_idle()
        text, _ = scrape(server)
        for g in GAUGES:
            assert f"# TYPE {g} gauge" in text, g
        assert idle["tandem:num_requests_running"] == 0
        assert idle["tandem:num_requests_waiting"] == 0
        idle_kv = idle["tandem:kv_cache_usage_ratio"]
        assert idle_kv == 0

        # The LoRA info gauge: the label names the picker parses, no adapters, a timestamp.
        m = re.search(r'^tandem:lora_requests_info\{([^}]*)\} (\S+)$', text, re.M)
        assert m, text
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        assert labels == {"max_lora": "0", "running_lora_adapters": "", "waiting_lora_adapters": ""}
        assert started - 5 <= float(m.group(2)) <= time.time()

        streams = []
        try:
            # Fewer streams than --max-num-seqs: every open stream runs, none waits.
            streams = [Stream(server, i) for i in range(MAX_NUM_SEQS - 1)]
            for s in streams:
                assert s.first.wait(60) and s.error is None, s.error
            _, m = until(server, lambda m: m["tandem:num_requests_running"] == len(streams))
            assert m["tandem:num_requests_running"] == len(streams), m
            assert m["tandem:num_requests_waiting"] == 0, m
            assert m["tandem:requests_in_flight"] == len(streams), m
            assert 0 < m["tandem:kv_cache_usage_ratio"] <= 1, m
            assert abs(m["tandem:kv_cache_usage_ratio"] - m["tandem:kv_blocks_used"] / m["tandem:kv_blocks_total"]) < 1e-6

            # Past --max-num-seqs: the rest queue, and the queue gauge counts them.
            streams += [Stream(server, i) for i in range(MAX_NUM_SEQS - 1, MAX_NUM_SEQS + 2)]
            want_waiting = len(streams) - MAX_NUM_SEQS
            _, m = until(server, lambda m: m["tandem:num_requests_waiting"] == want_waiting
                         and m["tandem:num_requests_running"] == MAX_NUM_SEQS)
            assert m["tandem:num_requests_running"] == MAX_NUM_SEQS, m
            assert m["tandem:num_requests_waiting"] == want_waiting > 0, m
            assert m["tandem:requests_in_flight"] == len(streams), m
            assert 0 < m["tandem:kv_cache_usage_ratio"] <= 1, m
            assert abs(m["tandem:kv_cache_usage_ratio"] - m["tandem:kv_blocks_used"] / m["tandem:kv_blocks_total"]) < 1e-6
            # Only the running sequences hold blocks: usage grows while they decode.
            before = m["tandem:kv_cache_usage_ratio"]
            _, m = until(server, lambda m: m["tandem:kv_cache_usage_ratio"] > before, 30)
            assert m["tandem:kv_cache_usage_ratio"] > before, (before, m)
        finally:
            for s in streams:
                s.stop.set()
            for s in streams:
                s.thread.join(120)
        assert all(s.error is None for s in streams), [s.error for s in streams]

        # Every stream closed: back to the idle values.
        m = server.wait_idle()
        assert m["tandem:num_requests_running"] == 0, m
        assert m["tandem:num_requests_waiting"] == 0, m
        assert m["tandem:kv_cache_usage_ratio"] == idle_kv, m


def test_the_inferencepool_manifest_names_gauges_the_server_exports():
    """deploy/kubernetes/tandem-inferencepool.yaml: the picker's metric flags name gauges a
    Tandem server exports, and the pool selects the pods on the port they serve."""
    import yaml
    from conftest import ROOT

    docs = list(yaml.safe_load_all((ROOT / "deploy/kubernetes/tandem-inferencepool.yaml").read_text()))
    pool = next(d for d in docs if d["kind"] == "InferencePool")
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    epp = deployments[pool["spec"]["endpointPickerRef"]["name"]]["spec"]["template"]["spec"]["containers"][0]["args"]
    tandem = next(d for d in deployments.values()
                  if d["spec"]["template"]["metadata"]["labels"] == pool["spec"]["selector"]["matchLabels"])
    args = tandem["spec"]["template"]["spec"]["containers"][0]["args"]
    assert int(args[args.index("--port") + 1]) == pool["spec"]["targetPorts"][0]["number"]
    flags = {"--total-queued-requests-metric": "tandem:num_requests_waiting",
             "--total-running-requests-metric": "tandem:num_requests_running",
             "--kv-cache-usage-percentage-metric": "tandem:kv_cache_usage_ratio",
             "--lora-info-metric": "tandem:lora_requests_info"}
    for flag, name in flags.items():
        assert epp[epp.index(flag) + 1] == name, flag
    route = next(d for d in docs if d["kind"] == "HTTPRoute")
    assert route["spec"]["rules"][0]["backendRefs"][0]["name"] == pool["metadata"]["name"]
    with Server("--log-level", "warn") as server:
        text, _ = scrape(server)
    for name in flags.values():
        assert f"# TYPE {name} gauge" in text, name
