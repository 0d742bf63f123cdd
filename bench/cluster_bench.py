#!/usr/bin/env python3
"""Cluster benchmark (issue 24, `make bench-cluster`): a router and 1-3 engine nodes as
processes on this machine (docs/cluster.md).

Workload: 8 system prompts of about 1,000 tokens each. Every request is one of them plus a
unique user question (after a warm-up, not counted, that sends each system prompt once), sampled at T 0.7 / top_p 0.95, max_tokens 32, streamed. --clients
closed-loop clients run for --seconds.

Two experiments:
- scaling: kv-aware routing over 1, 2 and 3 nodes. Completion tokens/s, and tokens per CPU
  second of the node processes (their utime + stime): the nodes share this machine's cores,
  so CPU-normalised figures are what a node on its own machine would add;
- policy: kv-aware vs round-robin on the same nodes. Prefix hit rate (cached prompt tokens
  / prompt tokens, from each response's usage), TTFT p50 / p99, tokens/s.

Writes docs/benchmarks.md (between the cluster-bench markers), docs/bench/cluster.json and
docs/bench/cluster.png.

Usage: bench/cluster_bench.py [--build build] [--nodes 1,2,3] [--clients 8] [--seconds 45]
                              [--threads-per-node 1] [--no-write]
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

import httpx

from bench_docs import ROOT, cpu_name, free_port, publish

SECRET = "cluster-bench-secret-0123456789"
TOPICS = ["a lighthouse keeper", "a travelling cartographer", "a baker in a mountain town", "a ship's engineer",
          "a botanist in the rainforest", "a chess teacher", "a radio astronomer", "a beekeeper"]


def system_prompt(i):
    # About 1,000 tokens of SmolLM2's vocabulary: a persona and a long list of house rules.
    rules = " ".join(f"Rule {k} for {TOPICS[i]}: answer plainly, cite the log entry {k * 7 + i}, and never repeat "
                     f"the previous answer word for word." for k in range(1, 46))
    return f"You are {TOPICS[i]}. {rules}"


class Proc:
    def __init__(self, exe, *args):
        self.proc = subprocess.Popen([exe, "serve", "--log-level", "warn", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, "TANDEM_CLUSTER_SECRET": SECRET})
        self.lines = []
        self.ready = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()
        if not self.ready.wait(180) or self.proc.poll() is not None:
            raise RuntimeError("tandem serve did not start:\n" + "".join(self.lines))

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            # A node is up once routers can join it; its own readiness waits for a router's
            # warm-up (docs/cluster.md), which starts only when the router joins.
            if "ready:" in line or "routers join at" in line:
                self.ready.set()
        self.ready.set()

    def port(self, pattern):
        for line in self.lines:
            m = re.search(pattern, line)
            if m:
                return int(m.group(1))
        raise RuntimeError("no port in:\n" + "".join(self.lines))

    def cpu_s(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def metrics(url):
    out = {}
    for line in httpx.get(url + "/metrics", timeout=30).text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def one_request(client, url, rng, n, system=None):
    body = {"messages": [{"role": "system", "content": system_prompt(rng.randrange(8) if system is None else system)},
                         {"role": "user", "content": f"Question {n}: what happened on day {rng.randrange(10**6)}?"}],
            "max_tokens": 32, "temperature": 0.7, "top_p": 0.95, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft = None
    usage = None
    with client.stream("POST", url + "/v1/chat/completions", json=body, timeout=300) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices") and chunk["choices"][0]["delta"].get("content") and ttft is None:
                ttft = time.perf_counter() - t0
            if chunk.get("usage"):
                usage = chunk["usage"]
    return ttft, usage


def run_load(url, clients, seconds, seed):
    deadline = time.time() + seconds
    records = []
    lock = threading.Lock()

    def client_loop(i):
        rng = random.Random(seed * 1000 + i)
        n = 0
        with httpx.Client() as c:
            while time.time() < deadline:
                ttft, usage = one_request(c, url, rng, n)
                n += 1
                with lock:
                    records.append((ttft, usage))

    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(clients) as ex:
        list(ex.map(client_loop, range(clients)))
    wall = time.time() - t0
    done = [(t, u) for t, u in records if u]
    tokens = sum(u["completion_tokens"] for _, u in done)
    prompt = sum(u["prompt_tokens"] for _, u in done)
    cached = sum((u.get("prompt_tokens_details") or {}).get("cached_tokens", 0) for _, u in done)
    ttfts = sorted(t * 1000 for t, _ in done if t is not None)
    pct = lambda p: ttfts[min(len(ttfts) - 1, int(p * len(ttfts)))] if ttfts else float("nan")
    return {"requests": len(done), "tokens_per_s": tokens / wall, "completion_tokens": tokens,
            "prefix_hit_rate": cached / prompt if prompt else 0.0, "ttft_p50_ms": pct(0.5), "ttft_p99_ms": pct(0.99),
            "wall_s": wall}


def run_cluster(exe, n_nodes, policy, a, seed):
    nodes = [Proc(exe, "--role", "node", "--port", "0", "--node-port", str(free_port()), "--threads",
                  str(a.threads_per_node), "--max-num-seqs", "16") for _ in range(n_nodes)]
    try:
        gates = [n.port(r"routers join at [^:]+:(\d+)") for n in nodes]
        router = Proc(exe, "--role", "router", "--port", "0", "--routing-policy", policy, "--nodes",
                      ",".join(f"127.0.0.1:{g}" for g in gates))
        try:
            http_port = router.port(r"listening on http://[^:]+:(\d+)")
            url = f"http://127.0.0.1:{http_port}"
            deadline = time.time() + 30
            while time.time() < deadline:
                m = metrics(url)
                if sum(v for k, v in m.items() if k.startswith("tandem:cluster_node_up")) == n_nodes:
                    break
                time.sleep(0.2)
            # Warm-up, not counted: each system prompt once, one after another, so every run starts
            # with each prompt cached on one node (where this policy put it).
            with httpx.Client() as c:
                for i in range(8):
                    one_request(c, url, random.Random(i), -1 - i, system=i)
            time.sleep(0.2)  # the nodes' KV events reach the router
            cpu0 = [n.cpu_s() for n in nodes]
            res = run_load(url, a.clients, a.seconds, seed)
            node_cpu = sum(n.cpu_s() - c for n, c in zip(nodes, cpu0))
            m = metrics(url)
            res.update(nodes=n_nodes, policy=policy, node_cpu_s=node_cpu,
                       tokens_per_node_cpu_s=res["completion_tokens"] / node_cpu if node_cpu else 0.0,
                       decision_us=1e6 * m.get("tandem:cluster_routing_decision_seconds_total", 0)
                       / max(1, m.get("tandem:cluster_routing_decisions_total", 1)))
            print(f"cluster-bench: {n_nodes} node(s) {policy}: {res['tokens_per_s']:.1f} tok/s, hit rate "
                  f"{res['prefix_hit_rate']:.2f}, TTFT p50/p99 {res['ttft_p50_ms']:.0f}/{res['ttft_p99_ms']:.0f} ms",
                  flush=True)
            return res
        finally:
            router.stop()
    finally:
        for n in nodes:
            n.stop()


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    sc = res["scaling"]
    ax1.bar([str(r["nodes"]) for r in sc], [r["tokens_per_node_cpu_s"] * r["nodes"] for r in sc], color="#4c72b0")
    ax1.set_xlabel("nodes")
    ax1.set_ylabel("tokens per node-CPU-second x nodes")
    ax1.set_title("Scaling (CPU-normalised)")
    pol = res["policy"]
    ax2.bar([r["policy"] for r in pol], [r["ttft_p99_ms"] for r in pol], color=["#55a868", "#c44e52"])
    ax2.set_ylabel("TTFT p99 (ms)")
    ax2.set_title("kv-aware vs round-robin")
    for i, r in enumerate(pol):
        ax2.text(i, r["ttft_p99_ms"], f"hit {r['prefix_hit_rate']:.0%}", ha="center", va="bottom")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(res, cmd):
    lines = ["<!-- cluster-bench:begin -->", "## Cluster mode: nodes and routing policies (issue 24)", "",
             f"`{res['cmd']}` on {res['cpu']} ({os.cpu_count()} CPUs), {res['date']}. Router and nodes are "
             "processes on this one machine, so they share its cores: the CPU-normalised column (completion "
             "tokens per CPU-second of the node processes) is what each node would add on its own machine. "
             f"Workload: 8 system prompts of about 1,000 tokens, a unique question each, sampled (T 0.7, top_p "
             f"0.95), max_tokens 32, {res['clients']} closed-loop streaming clients, {res['seconds']:.0f} s per run after "
             "a warm-up that sends each system prompt once (not counted). "
             f"Machine load (1-minute average) before / after: {res['load_before']:.1f} / {res['load_after']:.1f}.",
             "", "| nodes | policy | requests | tok/s | tok per node-CPU-s | prefix hit rate | TTFT p50 ms | "
             "TTFT p99 ms | routing µs/decision |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["scaling"] + res["policy"][1:]:
        lines.append(f"| {r['nodes']} | {r['policy']} | {r['requests']} | {r['tokens_per_s']:.1f} | "
                     f"{r['tokens_per_node_cpu_s']:.1f} | {r['prefix_hit_rate']:.2f} | {r['ttft_p50_ms']:.0f} | "
                     f"{r['ttft_p99_ms']:.0f} | {r['decision_us']:.1f} |")
    kv, rr = res["policy"]
    lines += ["", f"kv-aware vs round-robin on {kv['nodes']} nodes: prefix hit rate {kv['prefix_hit_rate']:.2f} vs "
              f"{rr['prefix_hit_rate']:.2f}, TTFT p99 {kv['ttft_p99_ms']:.0f} vs {rr['ttft_p99_ms']:.0f} ms "
              f"({rr['ttft_p99_ms'] / kv['ttft_p99_ms']:.2f}x lower with kv-aware).", "",
              "![cluster](bench/cluster.png)", "<!-- cluster-bench:end -->"]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--nodes", default="1,2,3")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=45)
    ap.add_argument("--threads-per-node", type=int, default=1)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    exe = os.path.join(a.build, "bin", "tandem")
    counts = [int(x) for x in a.nodes.split(",")]
    res = {"cpu": cpu_name(), "date": datetime.date.today().isoformat(), "clients": a.clients, "seconds": a.seconds,
           "cmd": "python3 bench/cluster_bench.py " + " ".join(sys.argv[1:]), "load_before": os.getloadavg()[0]}
    res["scaling"] = [run_cluster(exe, n, "kv-aware", a, seed=1) for n in counts]
    two = max(c for c in counts if c <= 2) if any(c <= 2 for c in counts) else counts[0]
    kv = next(r for r in res["scaling"] if r["nodes"] == two)
    res["policy"] = [kv, run_cluster(exe, two, "round-robin", a, seed=1)]
    res["load_after"] = os.getloadavg()[0]
    if a.no_write:
        print(markdown(res, ""))
        return
    publish("cluster", res, plot, markdown, "<!-- cluster-bench:begin -->", "<!-- cluster-bench:end -->")


if __name__ == "__main__":
    main()
