"""What a hostile or careless client can do to the server, and that it keeps serving:
bounded buffers, half-closes, resets. Each test says the hole it closes."""
import json
import socket
import struct
import time
from pathlib import Path

import httpx

from conftest import Server


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def connect(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return s


def send_endless(s, head, filler, total):
    """Sends head, then `total` bytes of filler with no line end; returns the bytes the
    server took before it closed (or all of them)."""
    s.sendall(head)
    sent = 0
    block = filler * 65536
    try:
        while sent < total:
            sent += s.send(block)
    except (BrokenPipeError, ConnectionResetError):
        pass
    return sent


def read_all(s):
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return out


def test_an_endless_chunk_extension_is_cut_off(server):
    """A chunk header whose extension never ends used to be held whole: 200 MB grew the
    process by about 200 MB per connection. The read buffer's limit now bounds it."""
    before = rss_kib(server.proc.pid)
    s = connect(server)
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n5;ext=")
    sent = send_endless(s, head, b"a", 100 << 20)
    reply = read_all(s)
    s.close()
    assert sent < 100 << 20, "the server took 100 MB of chunk extension"
    assert reply.startswith(b"HTTP/1.1 431"), reply[:200]
    assert rss_kib(server.proc.pid) - before < 16 << 10
    assert httpx.get(server.url + "/health").status_code == 200


def test_an_endless_trailer_is_cut_off(server):
    s = connect(server)
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Trailer: ")
    sent = send_endless(s, head, b"b", 100 << 20)
    reply = read_all(s)
    s.close()
    assert sent < 100 << 20
    assert reply.startswith(b"HTTP/1.1 4"), reply[:200]
    assert httpx.get(server.url + "/health").status_code == 200


def completion_request(body, extra=b""):
    data = json.dumps(body).encode()
    return (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(data)}\r\n\r\n".encode() + data + extra)


def test_a_half_closed_client_gets_its_answer(server):
    """Shutting down the sending side after the request is legal HTTP; such a client used to
    be taken for gone and got no reply."""
    s = connect(server)
    s.sendall(completion_request({"prompt": "The sky is", "max_tokens": 8, "temperature": 0}))
    s.shutdown(socket.SHUT_WR)
    reply = read_all(s)
    s.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), reply[:300]
    assert json.loads(body)["usage"]["completion_tokens"] == 8


def test_a_reset_client_is_found_behind_a_pipelined_byte(server):
    """One byte sent after the request body used to hide a client that then went away (a
    3,000-token generation ran on for 53 s): the watcher stopped at the first byte. It now
    keeps the byte for the next request and keeps watching; the reset cancels at once."""
    before = server.metrics()["tandem:requests_cancelled_total"]
    s = connect(server)
    s.sendall(completion_request({"prompt": "Count: 1, 2, 3,", "max_tokens": 3000, "ignore_eos": True}, b"G"))
    time.sleep(1.0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
    s.close()
    deadline = time.time() + 10
    while time.time() < deadline:
        m = server.metrics()
        if m["tandem:requests_cancelled_total"] > before and m["tandem:num_requests_running"] == 0:
            break
        time.sleep(0.1)
    m = server.metrics()
    assert m["tandem:requests_cancelled_total"] == before + 1, m
    assert m["tandem:num_requests_running"] == 0
    assert server.wait_idle()["tandem:kv_blocks_used"] == 0


def test_a_stream_to_a_closed_client_ends_at_the_first_failed_write(server):
    """A streaming client that closes (FIN) is found by the writes that follow."""
    before = server.metrics()["tandem:requests_cancelled_total"]
    s = connect(server)
    s.sendall(completion_request({"prompt": "Count: 1, 2, 3,", "max_tokens": 3000, "ignore_eos": True,
                                  "stream": True}, b"G"))
    s.recv(4096)  # the stream has started
    s.close()
    deadline = time.time() + 10
    while time.time() < deadline and server.metrics()["tandem:requests_cancelled_total"] == before:
        time.sleep(0.1)
    assert server.metrics()["tandem:requests_cancelled_total"] == before + 1
    assert server.wait_idle()["tandem:kv_blocks_used"] == 0


def test_pipelined_requests_are_answered_in_order(server):
    s = connect(server)
    a = completion_request({"prompt": "One", "max_tokens": 2, "temperature": 0})
    b = completion_request({"prompt": "Two", "max_tokens": 3, "temperature": 0})
    s.sendall(a + b)
    s.shutdown(socket.SHUT_WR)
    reply = read_all(s)
    s.close()
    assert reply.count(b"HTTP/1.1 200") == 2, reply[:500]
    bodies = [json.loads(part.split(b"\r\n\r\n", 1)[1].split(b"HTTP/1.1")[0])
              for part in reply.split(b"HTTP/1.1 200")[1:]]
    assert [x["usage"]["completion_tokens"] for x in bodies] == [2, 3]
