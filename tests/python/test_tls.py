"""TLS on the HTTP/WebSocket front (--ssl-keyfile, --ssl-certfile, --ssl-ca-certs, --ssl-cert-reqs,
docs/security.md): a throwaway CA made with the openssl command at test time, a real server on
127.0.0.1 with a small generated model, and real clients: the openai SDK over https, a websockets
client over wss, and clients that must fail (plain HTTP on the TLS port, a client that does not
trust the CA, a client without a certificate where one is required, a handshake that never ends)
while the server keeps serving."""
import json
import socket
import ssl
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import openai
import pytest
from websockets.sync.client import connect

from conftest import Server, tandem_binary


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-subj", f"/CN=Tandem test {name}",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            cwd=d)


def make_leaf(d, ca, name, usage, san=None):
    """A key and a certificate signed by `ca` for serverAuth or clientAuth."""
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    ext = ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature",
           f"extendedKeyUsage={usage}", "subjectKeyIdentifier=hash", "authorityKeyIdentifier=keyid"]
    if san:
        ext.append(f"subjectAltName={san}")
    (Path(d) / f"{name}.ext").write_text("\n".join(ext) + "\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext", cwd=d)


@pytest.fixture(scope="module")
def pki():
    with tempfile.TemporaryDirectory() as d:
        make_ca(d, "ca")
        make_ca(d, "other-ca")
        make_leaf(d, "ca", "server", "serverAuth", "IP:127.0.0.1,DNS:localhost")
        make_leaf(d, "ca", "client", "clientAuth")
        make_leaf(d, "other-ca", "stranger", "clientAuth")
        subprocess.run([tandem_binary(), "gen-model", "--out", str(Path(d) / "small.gguf"), "--layers", "2",
                        "--embd", "128", "--ctx", "8192"], check=True, capture_output=True, timeout=60)
        yield Path(d)


def server_args(pki, *extra):
    return ("--model", str(pki / "small.gguf"), "--no-tiled-cache", "--log-level", "warn",
            "--ssl-keyfile", str(pki / "server.key"), "--ssl-certfile", str(pki / "server.pem"), *extra)


@pytest.fixture(scope="module")
def tls_server(pki):
    with Server(*server_args(pki, "--ssl-handshake-timeout", "2")) as s:
        yield s


@pytest.fixture(scope="module")
def mtls_server(pki):
    with Server(*server_args(pki, "--ssl-ca-certs", str(pki / "ca.pem"), "--ssl-cert-reqs", "2")) as s:
        yield s


def trusting(pki, cert=None):
    """A client context that trusts the test CA (and presents `cert` when given)."""
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if cert:
        ctx.load_cert_chain(str(pki / f"{cert}.pem"), str(pki / f"{cert}.key"))
    return ctx


def health(server, pki, cert=None):
    return httpx.get(server.url + "/health", verify=trusting(pki, cert), timeout=30)


def chat(server, pki, cert=None, stream=False):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                           http_client=httpx.Client(verify=trusting(pki, cert), timeout=60))
    messages = [{"role": "user", "content": "Hello"}]
    if not stream:
        return client.chat.completions.create(model="default", messages=messages, max_tokens=4, temperature=0)
    return list(client.chat.completions.create(model="default", messages=messages, max_tokens=4, temperature=0,
                                               stream=True))


def test_the_server_announces_https(tls_server):
    assert tls_server.url.startswith("https://127.0.0.1:")


def test_openai_sdk_chat_over_https(tls_server, pki):
    r = chat(tls_server, pki)
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.completion_tokens >= 1
    chunks = chat(tls_server, pki, stream=True)  # SSE through TLS: every chunk through the coroutine's writes
    assert chunks and chunks[-1].choices[0].finish_reason in ("stop", "length")
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == r.choices[0].message.content  # greedy: the same answer either way


def test_a_long_sse_stream_over_tls_arrives_whole_and_in_order(tls_server, pki):
    client = openai.OpenAI(base_url=tls_server.url + "/v1", api_key="unused", max_retries=0,
                           http_client=httpx.Client(verify=trusting(pki), timeout=120))
    args = dict(model="default", prompt="a", max_tokens=500, temperature=0, extra_body={"ignore_eos": True})
    whole = client.completions.create(**args).choices[0].text
    chunks = list(client.completions.create(**args, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens == 500
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole


def test_keep_alive_requests_over_one_tls_connection(tls_server, pki):
    with httpx.Client(verify=trusting(pki), timeout=60) as c:
        for _ in range(3):
            assert c.get(tls_server.url + "/health").status_code == 200
            r = c.post(tls_server.url + "/v1/completions", json={"prompt": "a", "max_tokens": 3})
            assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1


def test_websocket_over_wss(tls_server, pki):
    url = tls_server.url.replace("https://", "wss://") + "/v1/ws"
    with connect(url, ssl=trusting(pki), open_timeout=30) as ws:
        for gid in ("a", "b"):
            ws.send(json.dumps({"type": "start", "id": gid, "messages": [{"role": "user", "content": "Hi"}],
                                "max_tokens": 4, "temperature": 0}))
        done = {}
        while len(done) < 2:
            f = json.loads(ws.recv(timeout=60))
            assert f["type"] in ("delta", "done"), f
            if f["type"] == "done":
                done[f["id"]] = f
    assert all(d["finish_reason"] in ("stop", "length") for d in done.values())


def test_plain_http_on_the_tls_port_fails_cleanly_and_the_server_keeps_serving(tls_server, pki):
    plain = tls_server.url.replace("https://", "http://")
    t0 = time.time()
    r = httpx.get(plain + "/health", timeout=10)
    assert r.status_code == 400 and "https://" in r.json()["error"]["message"]
    assert time.time() - t0 < 5
    assert health(tls_server, pki).status_code == 200


def test_a_client_that_does_not_trust_the_ca_fails_and_the_server_keeps_serving(tls_server, pki):
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(tls_server.url + "/health", timeout=10)  # the system's CAs only
    with pytest.raises(openai.APIConnectionError):
        openai.OpenAI(base_url=tls_server.url + "/v1", api_key="x", max_retries=0, timeout=10).models.list()
    assert health(tls_server, pki).status_code == 200


def metric(server, pki, name):
    text = httpx.get(server.url + "/metrics", verify=trusting(pki), timeout=30).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + " ") or line.startswith(name + "{"))


def test_a_client_that_drops_its_tls_connection_cancels_its_generation(tls_server, pki):
    """The disconnect watcher reads through TLS: a reset while a (non-streamed) answer is being
    generated cancels it at once, long before its 4,000 tokens."""
    before = metric(tls_server, pki, "tandem:requests_cancelled_total")
    s = trusting(pki).wrap_socket(socket.create_connection(("127.0.0.1", tls_server.port), timeout=30),
                                  server_hostname="127.0.0.1")
    body = json.dumps({"prompt": "a", "max_tokens": 4000, "ignore_eos": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    deadline = time.time() + 30
    while metric(tls_server, pki, "tandem:num_requests_running") < 1:
        assert time.time() < deadline, "the generation did not start"
        time.sleep(0.05)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()  # a reset, no close_notify
    t0 = time.time()
    while metric(tls_server, pki, "tandem:requests_cancelled_total") <= before:
        assert time.time() - t0 < 5, "the dropped connection's generation was not cancelled"
        time.sleep(0.05)
    assert metric(tls_server, pki, "tandem:num_requests_running") == 0
    assert health(tls_server, pki).status_code == 200


def read_to_close(s):
    """What the server sends until it closes the connection (a reset counts as the close)."""
    data = b""
    try:
        while chunk := s.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def test_garbage_and_unfinished_handshakes_are_closed_within_the_timeout(tls_server, pki):
    host, port = "127.0.0.1", tls_server.port
    garbage = socket.create_connection((host, port), timeout=10)
    garbage.sendall(b"\x16\x03\x01\x00\x05hello" + bytes(range(256)))
    # A flood of connections that never send a byte, and one that stops mid-ClientHello.
    silent = [socket.create_connection((host, port), timeout=10) for _ in range(40)]
    partial = socket.create_connection((host, port), timeout=10)
    partial.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    t0 = time.time()
    assert health(tls_server, pki).status_code == 200  # served meanwhile
    assert len(read_to_close(garbage)) < 64  # an alert at most, then the close
    for s in [partial, *silent]:
        assert read_to_close(s) == b""  # closed by the server (--ssl-handshake-timeout 2)
    assert time.time() - t0 < 8
    for s in [garbage, partial, *silent]:
        s.close()
    assert chat(tls_server, pki).usage.completion_tokens >= 1


def test_required_client_certificate(mtls_server, pki):
    # Without a certificate: refused (TLS 1.3 reports it at the first read), and nothing served.
    with pytest.raises(httpx.TransportError):
        health(mtls_server, pki)
    # A certificate from another CA: refused too.
    with pytest.raises(httpx.TransportError):
        health(mtls_server, pki, cert="stranger")
    # The CA's client certificate: served, over https and wss.
    assert health(mtls_server, pki, cert="client").status_code == 200
    assert chat(mtls_server, pki, cert="client").usage.completion_tokens >= 1
    url = mtls_server.url.replace("https://", "wss://") + "/v1/ws"
    with connect(url, ssl=trusting(pki, "client"), open_timeout=30) as ws:
        ws.send(json.dumps({"type": "start", "id": "x", "prompt": "a", "max_tokens": 2}))
        while (f := json.loads(ws.recv(timeout=60)))["type"] != "done":
            assert f["type"] == "delta", f


def test_optional_client_certificate(pki):
    """--ssl-cert-reqs 1: a client without a certificate is served; one that shows a certificate
    must show one the CA signed."""
    with Server(*server_args(pki, "--ssl-ca-certs", str(pki / "ca.pem"), "--ssl-cert-reqs", "1")) as s:
        assert health(s, pki).status_code == 200
        assert health(s, pki, cert="client").status_code == 200
        with pytest.raises(httpx.TransportError):
            health(s, pki, cert="stranger")
        assert chat(s, pki).usage.completion_tokens >= 1


@pytest.mark.parametrize("flags,message", [
    (["--ssl-certfile", "{d}/server.pem"], "needs both --ssl-certfile and --ssl-keyfile"),
    (["--ssl-certfile", "{d}/server.pem", "--ssl-keyfile", "{d}/client.key"], "is not the key of --ssl-certfile"),
    (["--ssl-certfile", "{d}/missing.pem", "--ssl-keyfile", "{d}/server.key"], "--ssl-certfile {d}/missing.pem"),
    (["--ssl-certfile", "{d}/server.pem", "--ssl-keyfile", "{d}/server.key", "--ssl-cert-reqs", "2"],
     "--ssl-cert-reqs 2 needs --ssl-ca-certs"),
    (["--ssl-ca-certs", "{d}/ca.pem"], "need TLS"),
    (["--ssl-certfile", "{d}/server.pem", "--ssl-keyfile", "{d}/server.key", "--ssl-cert-reqs", "3"],
     "--ssl-cert-reqs"),
])
def test_bad_tls_flags_are_refused_before_listening(pki, flags, message):
    args = [f.format(d=pki) for f in flags]
    r = subprocess.run([tandem_binary(), "serve", "--port", "0", "--model", str(pki / "small.gguf"), *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert message.format(d=pki) in r.stderr + r.stdout
    assert "listening on" not in r.stdout
