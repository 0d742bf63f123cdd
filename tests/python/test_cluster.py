"""Cluster mode: a router and two engine nodes as separate processes on 127.0.0.1
(docs/cluster.md). The router keeps admission and the streamers; the nodes run the model.

- requests sharing a long system prompt go to the node that holds it (router and node metrics);
- a node killed with requests queued on it: those that had streamed nothing finish on the
  other node, and the router rejoins the node when it is back;
- tenant limits are the router's, whatever node runs the request;
- a router with the wrong secret is never joined; with no node it answers 503.
"""
import contextlib
import os
import re
import signal
import socket
import subprocess
import textwrap
import threading
import time

import httpx
import openai
import pytest

from conftest import Server, openai_client, tandem_binary, temp_file

SECRET = "test-cluster-secret-0123456789"
TENANTS = textwrap.dedent("""\
    tenants:
      - name: alice
        api_keys: [sk-alice]
      - name: single
        api_keys: [sk-single]
        max_concurrent_requests: 1
    """)

SYSTEM_A = ("You are the ship's navigator on a long voyage across the northern sea. " * 24).strip()
SYSTEM_B = ("You are a patient teacher of arithmetic who explains every step slowly. " * 24).strip()


def gate_port(node):
    for line in node.log:
        m = re.search(r"routers join at [^:]+:(\d+)", line)
        if m:
            return int(m.group(1))
    raise AssertionError("no gate port in the node's log:\n" + "".join(node.log))


class Node(Server):
    """A node process, returned once its gate listens: its /health turns ready only after a
    router's warm-up (or --warmup-timeout-s), so it cannot wait for the "ready:" line."""

    def __init__(self, *args):
        self.proc = subprocess.Popen(
            [tandem_binary(), "serve", "--port", "0", "--threads", "2", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "TANDEM_CLUSTER_SECRET": SECRET})
        self.log, self.port, self.scheme = [], None, "http"
        gate = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self.log.append(line)
                m = re.search(r"listening on (https?)://[^:]+:(\d+)", line)
                if m:
                    self.scheme, self.port = m.group(1), int(m.group(2))
                if "routers join at" in line:
                    gate.set()
            gate.set()

        threading.Thread(target=pump, daemon=True).start()
        if not gate.wait(120) or self.port is None or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("tandem serve --role node did not start:\n" + "".join(self.log))
        self.url = f"{self.scheme}://127.0.0.1:{self.port}"

    def healthy(self):
        return httpx.get(self.url + "/health", timeout=10).status_code == 200


def start_node(port=0, *extra):
    return Node("--role", "node", "--node-port", str(port), "--max-num-seqs", "1", "--log-level", "warn", *extra)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def series(metrics, name, node):
    return metrics.get(f'{name}{{node="127.0.0.1:{node}"}}', 0.0)


def wait_for(pred, timeout=30, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def cluster():
    nodes = [start_node(), start_node()]
    ports = [gate_port(n) for n in nodes]
    with temp_file(TENANTS) as path:
        router = Server("--role", "router", "--nodes", ",".join(f"127.0.0.1:{p}" for p in ports), "--config", path,
                        "--log-level", "warn", env={"TANDEM_CLUSTER_SECRET": SECRET})
        wait_for(lambda: all(series(router.metrics(), "tandem:cluster_node_up", p) == 1 for p in ports), 30,
                 "the router to join both nodes")
        # Nothing was hot yet: the warm-up is empty and each node turns ready at once.
        wait_for(lambda: all(n.healthy() for n in nodes), 30, "the nodes to be ready")
        state = {"nodes": nodes, "ports": ports, "router": router}
        yield state
        router.stop()
        for n in state["nodes"]:
            n.stop()


def client(router, key="sk-alice"):
    return openai_client(router, key)


def routed(metrics, port):
    return sum(metrics.get(f'tandem:cluster_routed_total{{node="127.0.0.1:{port}",reason="{r}"}}', 0)
               for r in ("prefix", "session", "load"))


def routed_to(router, ports, before):
    """The one node a request went to since `before` (the router's metrics then)."""
    after = router.metrics()
    moved = [p for p in ports if routed(after, p) > routed(before, p)]
    assert len(moved) == 1, (moved, after)
    return moved[0]


def ask(router, system, user, max_tokens=4):
    r = client(router).chat.completions.create(
        model="m", messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        max_tokens=max_tokens, temperature=0)
    return r


def test_shared_system_prompts_go_to_the_node_that_holds_them(cluster):
    router, ports = cluster["router"], cluster["ports"]
    homes = {}
    for system, name in ((SYSTEM_A, "A"), (SYSTEM_B, "B")):
        before = router.metrics()
        ask(router, system, "Hello, who are you?")
        homes[name] = routed_to(router, ports, before)
        time.sleep(0.3)  # the node's KV events reach the router within its 50 ms update period
    for system, name in ((SYSTEM_A, "A"), (SYSTEM_B, "B")):
        for i in range(3):
            before = router.metrics()
            r = ask(router, system, f"Question number {i}: what is {i} plus {i}?")
            assert routed_to(router, ports, before) == homes[name], (name, i)
            assert r.usage.prompt_tokens_details.cached_tokens >= 256, r.usage
    m = router.metrics()
    for p in set(homes.values()):
        assert m[f'tandem:cluster_routed_total{{node="127.0.0.1:{p}",reason="prefix"}}'] >= 3
        assert series(m, "tandem:cluster_node_prefix_cache_hits_total", p) > 0
        assert series(m, "tandem:cluster_node_index_blocks", p) >= 16
    # The nodes' own counters agree: the prefix hits happened where the router sent the requests.
    for node, p in zip(cluster["nodes"], ports):
        if p in homes.values():
            assert node.metrics()["tandem:prefix_cache_hits_total"] >= 3 * 256


def test_a_session_stays_on_its_node(cluster):
    """OpenAI's `user` field keeps a conversation on one node even where load would move it."""
    router, ports = cluster["router"], cluster["ports"]
    homes = []
    for i, topic in enumerate(["volcanoes", "tax law", "jazz", "knitting", "orbits", "bread"]):
        before = router.metrics()
        # A system turn of its own (no shared first block): only the session keeps these together.
        client(router).chat.completions.create(
            model="m", messages=[{"role": "system", "content": f"{topic.title()} facts, number {i}."},
                                 {"role": "user", "content": f"Tell me one fact about {topic}."}],
            max_tokens=3, temperature=0, user="session-42")
        homes.append(routed_to(router, ports, before))
    assert len(set(homes)) == 1, homes
    m = router.metrics()
    assert m[f'tandem:cluster_routed_total{{node="127.0.0.1:{homes[0]}",reason="session"}}'] >= 1, \
        "; ".join(f"{k}={v}" for k, v in m.items() if k.startswith("tandem:cluster_"))
    # A session id longer than the router keeps is refused, naming the field.
    with pytest.raises(openai.BadRequestError, match="user"):
        client(router).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                               max_tokens=1, user="u" * 300)


def test_tenant_limits_are_the_routers(cluster):
    router = cluster["router"]
    results = []

    def run():
        try:
            client(router, "sk-single").chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Count to twenty."}], max_tokens=48,
                temperature=0)
            results.append(200)
        except openai.APIStatusError as e:
            results.append(e.status_code)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert sorted(results) == [200, 429], results
    with pytest.raises(openai.AuthenticationError):
        client(router, "sk-nobody").chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                                             max_tokens=1)


def test_a_killed_nodes_unstarted_requests_finish_elsewhere(cluster):
    router, ports = cluster["router"], cluster["ports"]
    results = {}
    first_token = threading.Event()

    def stream(i):
        try:
            s = client(router).chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"Tell story number {i} about a cat."}],
                max_tokens=300, temperature=0.7, stream=True, extra_body={"ignore_eos": True})
            text = ""
            for chunk in s:
                if chunk.choices and chunk.choices[0].delta.content:
                    text += chunk.choices[0].delta.content
                    first_token.set()
            results[i] = "ok"
        except Exception as e:  # a request that had started on the killed node
            results[i] = f"error: {e}"

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    assert first_token.wait(60)
    time.sleep(0.5)  # both nodes' running sequences have streamed by now
    # Each node runs one sequence at a time (--max-num-seqs 1): the others wait in its queue.
    victim = cluster["nodes"][0]
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait()
    for t in threads:
        t.join(120)
    m = router.metrics()
    retried = series(m, "tandem:cluster_retried_total", ports[0])
    lost = series(m, "tandem:cluster_lost_total", ports[0])
    print("kill:", results, "retried", retried, "lost", lost)
    assert retried >= 1, m
    # Exactly the sequences that had streamed on the dead node failed; every other one finished.
    assert len(results) == 6
    assert sum(1 for v in results.values() if v != "ok") == lost, results
    assert series(m, "tandem:cluster_node_up", ports[0]) == 0
    # New requests avoid the dead node.
    for _ in range(2):
        assert ask(router, SYSTEM_A, "Still there?").choices[0].message.content is not None
    # No slot leaks at the router: nothing in flight once the survivors are done.
    wait_for(lambda: router.metrics()["tandem:requests_in_flight"] == 0, 30, "no requests in flight")
    # The node comes back on its port and the router joins it again.
    cluster["nodes"][0] = start_node(ports[0])
    wait_for(lambda: series(router.metrics(), "tandem:cluster_node_up", ports[0]) == 1, 30, "the rejoin")
    assert series(router.metrics(), "tandem:cluster_joins_total", ports[0]) == 2
    # SYSTEM_A was hot: the rejoined node was warmed with it before it took traffic, then turned ready.
    wait_for(cluster["nodes"][0].healthy, 60, "the rejoined node to be ready")
    m = router.metrics()
    assert series(m, "tandem:cluster_warmups_total", ports[0]) == 1, m
    assert series(m, "tandem:cluster_node_warming", ports[0]) == 0, m


def test_a_node_added_under_load_is_warm_before_its_first_request():
    """Warm-up: a third node that joins while the others are busy prefills the router's hottest
    prefix first, so its first request with that system prompt is a prefix-cache hit."""
    nodes = [start_node(), start_node()]
    ports = [gate_port(n) for n in nodes]
    third = free_port()
    addresses = ",".join(f"127.0.0.1:{p}" for p in ports + [third])
    router = Server("--role", "router", "--nodes", addresses, "--log-level", "warn",
                    env={"TANDEM_CLUSTER_SECRET": SECRET})
    streams, stop = [], threading.Event()
    try:
        wait_for(lambda: all(series(router.metrics(), "tandem:cluster_node_up", p) == 1 for p in ports), 30,
                 "the router to join the two nodes")
        # SYSTEM_A becomes hot: cached on one node and hit three times.
        ask(router, SYSTEM_A, "Hello, who are you?")
        time.sleep(0.3)
        for i in range(3):
            assert ask(router, SYSTEM_A, f"Question {i}?").usage.prompt_tokens_details.cached_tokens > 0
        # Load: long streams keep both nodes busy (one sequence each, the rest queued).
        def load(i):
            s = client(router).chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"Tell a long story number {i}."}],
                max_tokens=2000, temperature=0.7, stream=True, extra_body={"ignore_eos": True})
            with contextlib.suppress(Exception):  # closed at the end of the test
                for _ in s:
                    if stop.is_set():
                        break
                s.close()

        streams = [threading.Thread(target=load, args=(i,), daemon=True) for i in range(4)]
        for t in streams:
            t.start()
        wait_for(lambda: router.metrics()["tandem:requests_in_flight"] == 4, 30, "the load")
        # The third node joins under that load.
        newcomer = start_node(third)
        nodes.append(newcomer)
        wait_for(lambda: series(router.metrics(), "tandem:cluster_node_up", third) == 1, 30, "the third join")
        wait_for(lambda: series(router.metrics(), "tandem:cluster_node_warming", third) == 0, 60, "its warm-up")
        wait_for(newcomer.healthy, 30, "the third node to be ready")
        m = router.metrics()
        assert series(m, "tandem:cluster_warmups_total", third) == 1, m
        assert series(m, "tandem:cluster_warmup_timeouts_total", third) == 0, m
        assert series(m, "tandem:cluster_warmup_tokens_total", third) >= 256, m
        assert routed(m, third) == 0, m  # nothing was routed to it while it warmed
        assert any("cluster node: warm" in line for line in newcomer.log), "".join(newcomer.log)
        time.sleep(0.3)  # its warm blocks reach the router's index within an update period
        # Its first request: the busy nodes lose to the idle one, which holds the prefix already.
        before = router.metrics()
        r = ask(router, SYSTEM_A, "A question for the new node?")
        assert routed_to(router, ports + [third], before) == third
        assert r.usage.prompt_tokens_details.cached_tokens >= 256, r.usage
    finally:
        stop.set()
        for t in streams:
            t.join(60)
        router.stop()
        for n in nodes:
            n.stop()


def test_a_node_no_router_warms_is_ready_after_the_timeout():
    node = start_node(0, "--warmup-timeout-s", "3")
    try:
        assert not node.healthy()  # no router has warmed it yet
        wait_for(node.healthy, 30, "the node to be ready after --warmup-timeout-s")
        assert any("ready anyway" in line for line in node.log), "".join(node.log)
    finally:
        node.stop()


def refuse_handshakes(port, n):
    """n connections the TLS port refuses: junk bytes, and TLS clients with no certificate."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    for i in range(n):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            try:
                if i % 2:
                    s.sendall(os.urandom(600))
                    s.recv(64)
                else:
                    with ctx.wrap_socket(s) as t:
                        t.recv(1)
            except (ssl.SSLError, OSError):
                pass


def test_the_node_link_over_tls_admits_only_the_clusters_ca(tmp_path):
    """--cluster-tls-*: router and node present certificates of the cluster's CA to each other.
    A node whose certificate another CA signed is never joined, nor is a router without TLS.
    Refused handshakes on the node's port (a plain router, junk bytes, TLS clients without a
    certificate) never drop the healthy link, not even the stream running over it: CAF 0.17
    leaves each refusal's OpenSSL error behind, which cli/openssl_error_queue.cpp clears."""
    from test_tls import make_ca, make_leaf

    make_ca(tmp_path, "ca")
    make_ca(tmp_path, "other-ca")
    for name, ca in (("router", "ca"), ("node", "ca"), ("impostor", "other-ca")):
        make_leaf(tmp_path, ca, name, "serverAuth,clientAuth")

    def tls(name):
        return ("--cluster-tls-certfile", str(tmp_path / f"{name}.pem"), "--cluster-tls-keyfile",
                str(tmp_path / f"{name}.key"), "--cluster-tls-ca", str(tmp_path / "ca.pem"))

    def router_of(ports, *extra):
        return Server("--role", "router", "--nodes", ",".join(f"127.0.0.1:{p}" for p in ports), "--log-level",
                      "warn", *extra, env={"TANDEM_CLUSTER_SECRET": SECRET})

    def chat(router):
        r = client(router).chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}],
                                                   max_tokens=3, temperature=0)
        return r.choices[0].message.content

    good, impostor = start_node(0, *tls("node")), start_node(0, *tls("impostor"))
    good_port, impostor_port = gate_port(good), gate_port(impostor)
    assert any("TLS, mutual certificates" in line for line in good.log)
    routers = []
    try:
        router = router_of([good_port], *tls("router"))
        routers.append(router)
        wait_for(lambda: series(router.metrics(), "tandem:cluster_node_up", good_port) == 1, 30, "the TLS join")
        for _ in range(3):
            assert chat(router) is not None
        assert series(router.metrics(), "tandem:cluster_joins_total", good_port) == 1  # one link, kept
        # Refused: a node with another CA's certificate, and a router without TLS, while a
        # stream runs over the healthy link; then junk on the node's port.
        stream = client(router).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Tell me a long story."}], max_tokens=400,
            temperature=0.7, stream=True, extra_body={"ignore_eos": True})
        chunks = iter(stream)
        next(chunks)
        rogue = router_of([impostor_port], *tls("router"))
        plain = router_of([good_port])
        routers += [rogue, plain]
        refuse_handshakes(good_port, 12)
        time.sleep(2.5)  # two more join attempts each
        assert series(rogue.metrics(), "tandem:cluster_node_up", impostor_port) == 0
        assert series(rogue.metrics(), "tandem:cluster_joins_total", impostor_port) == 0
        assert series(plain.metrics(), "tandem:cluster_node_up", good_port) == 0
        assert series(plain.metrics(), "tandem:cluster_joins_total", good_port) == 0
        rogue.stop()
        plain.stop()
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        assert finish == ["length"], finish  # the stream ran to its end across every refusal
        assert good.proc.poll() is None and impostor.proc.poll() is None
        for _ in range(3):
            assert chat(router) is not None
        # One join, never dropped: without the error-queue fix the node's next read after a
        # refusal fails, the router loses the link and joins it a second time.
        assert series(router.metrics(), "tandem:cluster_joins_total", good_port) == 1
    finally:
        for r in routers:
            r.stop()
        good.stop()
        impostor.stop()


def test_silent_connections_on_a_tls_node_port_cost_nothing(tmp_path):
    """Connections that never send their handshake: four per address are held, until
    --ssl-handshake-timeout, the rest closed at once; the node spends no CPU on them (CAF 0.17's
    own TLS acceptor spun a core for each), and a router joins and serves beside them."""
    from test_tls import make_ca, make_leaf

    make_ca(tmp_path, "ca")
    for name in ("router", "node"):
        make_leaf(tmp_path, "ca", name, "serverAuth,clientAuth")

    def tls(name):
        return ("--cluster-tls-certfile", str(tmp_path / f"{name}.pem"), "--cluster-tls-keyfile",
                str(tmp_path / f"{name}.key"), "--cluster-tls-ca", str(tmp_path / "ca.pem"))

    def cpu_seconds(proc):
        fields = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    node = start_node(0, *tls("node"), "--ssl-handshake-timeout", "3")
    port = gate_port(node)
    silent = []
    router = None
    try:
        for _ in range(40):
            silent.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(0.5)
        before = cpu_seconds(node.proc)
        time.sleep(2)
        assert cpu_seconds(node.proc) - before < 0.5, "the node spins on silent connections"

        def closed(s):
            s.setblocking(False)
            try:
                return s.recv(1) == b""
            except BlockingIOError:
                return False
            except OSError:
                return True

        assert sum(closed(s) for s in silent) >= 36  # all but the four held for their handshake
        router = Server("--role", "router", "--nodes", f"127.0.0.1:{port}", "--log-level", "warn", *tls("router"),
                        env={"TANDEM_CLUSTER_SECRET": SECRET})
        wait_for(lambda: series(router.metrics(), "tandem:cluster_node_up", port) == 1, 30, "the TLS join")
        r = client(router).chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}],
                                                   max_tokens=3, temperature=0)
        assert r.choices[0].message.content is not None
        wait_for(lambda: all(closed(s) for s in silent), 10, "the held handshakes to time out")
    finally:
        for s in silent:
            s.close()
        if router:
            router.stop()
        node.stop()


def test_bad_cluster_tls_files_stop_serve_at_start(tmp_path):
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    out = subprocess.run([tandem_binary(), "serve", "--role", "node", "--port", "0", "--cluster-tls-certfile",
                          str(tmp_path / "junk.pem"), "--cluster-tls-keyfile", str(tmp_path / "junk.pem"),
                          "--cluster-tls-ca", str(tmp_path / "junk.pem")],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "TANDEM_CLUSTER_SECRET": SECRET})
    assert out.returncode != 0
    assert "--cluster-tls-certfile" in out.stdout + out.stderr
    out = subprocess.run([tandem_binary(), "serve", "--role", "node", "--port", "0", "--cluster-tls-ca",
                          str(tmp_path / "junk.pem")],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "TANDEM_CLUSTER_SECRET": SECRET})
    assert out.returncode != 0
    assert "go together" in out.stdout + out.stderr


def test_a_wrong_secret_is_never_joined_and_no_node_means_503(cluster):
    ports = cluster["ports"]
    stranger = Server("--role", "router", "--nodes", f"127.0.0.1:{ports[1]}", "--log-level", "warn",
                      env={"TANDEM_CLUSTER_SECRET": "not-the-cluster-secret-at-all"})
    try:
        time.sleep(2.5)  # two join attempts
        m = stranger.metrics()
        assert series(m, "tandem:cluster_node_up", ports[1]) == 0
        r = httpx.post(stranger.url + "/v1/chat/completions", timeout=30,
                       json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
        assert r.status_code == 503, r.text
        assert r.headers.get("retry-after") == "1", r.headers
        assert "engine node" in r.json()["error"]["message"]
    finally:
        stranger.stop()


def test_the_kubernetes_manifests_use_flags_the_binary_has():
    """deploy/kubernetes/: every document parses, and every flag the containers pass exists."""
    import subprocess

    import yaml
    from conftest import ROOT, tandem_binary

    help_text = subprocess.run([tandem_binary(), "serve", "--help"], capture_output=True, text=True).stdout
    docs = list(yaml.safe_load_all((ROOT / "deploy/kubernetes/tandem-cluster.yaml").read_text()))
    kinds = {d["kind"] for d in docs}
    assert {"Secret", "ConfigMap", "StatefulSet", "Deployment", "Service", "HorizontalPodAutoscaler"} <= kinds
    roles = set()
    for d in docs:
        if d["kind"] not in ("StatefulSet", "Deployment"):
            continue
        for c in d["spec"]["template"]["spec"]["containers"]:
            args = c["args"]
            roles.add(args[args.index("--role") + 1])
            for flag in (a for a in args if a.startswith("--")):
                assert re.search(r"(^|\s)" + re.escape(flag) + r"\b", help_text), flag
    assert roles == {"node", "router"}
    # The router lists every node name the autoscaler may create.
    hpa = next(d for d in docs if d["kind"] == "HorizontalPodAutoscaler")
    router = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    nodes = router[router.index("--nodes") + 1].split(",")
    assert len(nodes) == hpa["spec"]["maxReplicas"]
    tenants = yaml.safe_load(next(d for d in docs if d["kind"] == "ConfigMap")["data"]["tenants.yaml"])
    assert tenants["tenants"]


def test_the_inferencepool_variant_uses_flags_the_binary_has():
    """deploy/kubernetes/tandem-inferencepool.yaml (pods behind the inference gateway, no router):
    every document parses, the pods are plain servers, and every flag they pass exists."""
    import subprocess

    import yaml
    from conftest import ROOT, tandem_binary

    help_text = subprocess.run([tandem_binary(), "serve", "--help"], capture_output=True, text=True).stdout
    docs = list(yaml.safe_load_all((ROOT / "deploy/kubernetes/tandem-inferencepool.yaml").read_text()))
    kinds = {d["kind"] for d in docs}
    assert {"InferencePool", "HTTPRoute", "Deployment", "Service", "ConfigMap"} <= kinds
    servers = [c for d in docs if d["kind"] == "Deployment"
               for c in d["spec"]["template"]["spec"]["containers"] if c["args"][0] == "serve"]
    assert servers
    for c in servers:
        assert "--role" not in c["args"]
        for flag in (a for a in c["args"] if a.startswith("--")):
            assert re.search(r"(^|\s)" + re.escape(flag) + r"\b", help_text), flag
