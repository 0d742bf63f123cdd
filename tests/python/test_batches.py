"""The Batch API (POST /v1/files, /v1/batches) through the real openai SDK against a real
`tandem serve` on 127.0.0.1: a batch runs to completed and every custom_id is answered exactly
once with a real completion (lines that cannot run go to the error file); a cancelled batch
ends cancelled with what finished; a tenant sees only its own files and batches; bad uploads
get OpenAI-shaped 400s; and a server killed with SIGKILL mid-batch, restarted on the same
--batch-dir, finishes the batch with each request answered exactly once."""
import json
import textwrap
import time

import openai
import pytest

from conftest import Server, openai_client, temp_file

TENANTS = textwrap.dedent("""\
    tenants:
      - name: alice
        api_keys: [sk-alice]
      - name: bob
        api_keys: [sk-bob]
    """)
MAX_FILE_BYTES = 65536


def chat_line(cid, question, max_tokens=12, url="/v1/chat/completions"):
    return json.dumps({"custom_id": cid, "method": "POST", "url": url,
                       "body": {"model": "default", "max_tokens": max_tokens, "temperature": 0,
                                "messages": [{"role": "user", "content": question}]}})


def jsonl(lines):
    return ("\n".join(lines) + "\n").encode()


def upload(client, lines, name="in.jsonl"):
    return client.files.create(file=(name, jsonl(lines), "application/jsonl"), purpose="batch")


def wait_for(client, batch_id, states, timeout=300):
    deadline = time.time() + timeout
    b = client.batches.retrieve(batch_id)
    while b.status not in states and time.time() < deadline:
        time.sleep(0.2)
        b = client.batches.retrieve(batch_id)
    assert b.status in states, f"batch still {b.status}: {b}"
    return b


def results(client, file_id):
    if file_id is None:
        return []
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines() if line.strip()]


def serve(batch_dir, config, *extra):
    return Server("--config", config, "--batch-dir", str(batch_dir), "--batch-max-file-bytes", str(MAX_FILE_BYTES),
                  "--max-num-seqs", "16", "--log-level", "warn", *extra)


@pytest.fixture(scope="module")
def config():
    with temp_file(TENANTS) as path:
        yield path


@pytest.fixture(scope="module")
def server(config, tmp_path_factory):
    with serve(tmp_path_factory.mktemp("batches"), config, "--batch-max-in-flight", "4") as s:
        yield s


def test_a_batch_completes_with_every_request_answered_once(server):
    alice = openai_client(server, key="sk-alice")
    good = [chat_line(f"q{i}", f"Name a colour, number {i}.") for i in range(10)]
    bad = chat_line("wrong-url", "Hi", url="/v1/embeddings")
    f = upload(alice, good + [bad])
    assert f.id.startswith("file-") and f.purpose == "batch" and f.bytes > 0
    assert alice.files.retrieve(f.id).filename == "in.jsonl"
    b = alice.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h",
                             metadata={"run": "one"})
    assert b.id.startswith("batch_") and b.status in ("validating", "in_progress")
    assert b.metadata == {"run": "one"}
    b = wait_for(alice, b.id, {"completed", "failed"})
    assert b.status == "completed", b
    assert b.request_counts.total == 11
    assert b.request_counts.completed == 10 and b.request_counts.failed == 1
    assert b.created_at <= b.in_progress_at <= b.completed_at
    out = results(alice, b.output_file_id)
    ids = [r["custom_id"] for r in out]
    assert sorted(ids) == sorted(f"q{i}" for i in range(10)), "each request answered exactly once"
    for r in out:
        assert r["error"] is None and r["id"].startswith("batch_req_")
        assert r["response"]["status_code"] == 200
        body = r["response"]["body"]
        assert body["object"] == "chat.completion"
        assert body["choices"][0]["message"]["content"].strip(), "a real completion"
        assert body["usage"]["completion_tokens"] > 0
        assert r["response"]["request_id"] == body["id"]
    errors = results(alice, b.error_file_id)
    assert [e["custom_id"] for e in errors] == ["wrong-url"]
    assert errors[0]["response"] is None and errors[0]["error"]["code"] == "invalid_url"
    assert alice.files.retrieve(b.output_file_id).purpose == "batch_output"
    listed = [x.id for x in alice.files.list(purpose="batch")]
    assert f.id in listed and b.output_file_id not in listed
    assert b.output_file_id in [x.id for x in alice.files.list()]
    assert alice.files.delete(f.id).deleted
    with pytest.raises(openai.NotFoundError):
        alice.files.retrieve(f.id)


def test_a_large_batch_keeps_a_bounded_number_in_flight(server):
    """--batch-max-in-flight 4: a 300-line batch never has more than 4 requests in admission,
    and an interactive request is answered while it runs."""
    alice = openai_client(server, key="sk-alice")
    f = upload(alice, [chat_line(f"big{i}", "Count to ten.", max_tokens=16) for i in range(300)])
    b = alice.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    peak = 0
    for _ in range(40):
        peak = max(peak, server.metrics()["tandem:requests_in_flight"])
        time.sleep(0.05)
    r = alice.chat.completions.create(model="default", messages=[{"role": "user", "content": "Hi"}], max_tokens=8)
    assert r.choices[0].message.content
    alice.batches.cancel(b.id)
    b = wait_for(alice, b.id, {"cancelled"}, timeout=120)
    assert 1 <= peak <= 4, peak
    assert b.request_counts.completed < 300


def test_completions_endpoint_and_bad_bodies(server):
    alice = openai_client(server, key="sk-alice")
    lines = [json.dumps({"custom_id": f"c{i}", "method": "POST", "url": "/v1/completions",
                         "body": {"prompt": f"Once upon a time, number {i}", "max_tokens": 8}}) for i in range(3)]
    lines.append(json.dumps({"custom_id": "bad-body", "method": "POST", "url": "/v1/completions",
                             "body": {"prompt": "x", "max_tokens": -5}}))
    b = alice.batches.create(input_file_id=upload(alice, lines).id, endpoint="/v1/completions",
                             completion_window="24h")
    b = wait_for(alice, b.id, {"completed", "failed"})
    assert b.status == "completed" and b.request_counts.completed == 3 and b.request_counts.failed == 1
    out = results(alice, b.output_file_id)
    assert sorted(r["custom_id"] for r in out) == ["c0", "c1", "c2"]
    assert all(r["response"]["body"]["object"] == "text_completion" for r in out)
    errors = results(alice, b.error_file_id)
    assert errors[0]["custom_id"] == "bad-body"
    assert errors[0]["response"]["status_code"] == 400
    assert errors[0]["response"]["body"]["error"]["param"] == "max_tokens"


def test_cancel(server):
    alice = openai_client(server, key="sk-alice")
    f = upload(alice, [chat_line(f"long{i}", "Tell me a long story about the sea.", max_tokens=48) for i in range(40)])
    b = alice.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    c = alice.batches.cancel(b.id)
    assert c.status in ("cancelling", "cancelled") and c.cancelling_at
    b = wait_for(alice, b.id, {"cancelled"}, timeout=120)
    assert b.cancelled_at and b.request_counts.completed < 40
    ids = [r["custom_id"] for r in results(alice, b.output_file_id)]
    assert len(ids) == len(set(ids)) == b.request_counts.completed
    done = alice.batches.create(input_file_id=upload(alice, [chat_line("one", "Hi")]).id,
                                endpoint="/v1/chat/completions", completion_window="24h")
    wait_for(alice, done.id, {"completed"})
    with pytest.raises(openai.BadRequestError):
        alice.batches.cancel(done.id)  # a finished batch cannot be cancelled


def test_a_tenant_sees_only_its_own(server):
    alice = openai_client(server, key="sk-alice")
    bob = openai_client(server, key="sk-bob")
    f = upload(alice, [chat_line("private", "Hi")])
    b = alice.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    with pytest.raises(openai.NotFoundError):
        bob.batches.retrieve(b.id)
    with pytest.raises(openai.NotFoundError):
        bob.batches.cancel(b.id)
    with pytest.raises(openai.NotFoundError):
        bob.files.retrieve(f.id)
    with pytest.raises(openai.NotFoundError):
        bob.files.content(f.id)
    with pytest.raises(openai.NotFoundError):
        bob.files.delete(f.id)
    assert f.id not in [x.id for x in bob.files.list()]
    with pytest.raises(openai.BadRequestError):
        bob.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert b.id not in [x.id for x in bob.batches.list(limit=100)]
    mine = [x.id for x in alice.batches.list(limit=100)]
    assert b.id in mine
    # Paging: newest first, `after` continues where a page ended.
    first = alice.batches.list(limit=1)
    assert first.data[0].id == b.id and first.has_more
    assert alice.batches.list(limit=1, after=b.id).data[0].id != b.id
    with pytest.raises(openai.AuthenticationError):
        openai_client(server, key="sk-nobody").batches.list()


def test_bad_files_get_openai_shaped_400s(server):
    alice = openai_client(server, key="sk-alice")
    cases = [
        (b"this is not json\n", "batch", "not valid JSON"),
        (b'{"custom_id": "a"}\n{"custom_id": "a"}\n', "batch", "repeats custom_id"),
        (b'{"method": "POST"}\n', "batch", "custom_id"),
        (jsonl([chat_line("x", "Hi")]), "fine-tune", "purpose"),
        (b"{}\n" * 30000, "batch", "at most"),  # larger than --batch-max-file-bytes
    ]
    for content, purpose, words in cases:
        with pytest.raises(openai.BadRequestError) as e:
            alice.files.create(file=("x.jsonl", content, "application/jsonl"), purpose=purpose)
        assert e.value.status_code == 400
        err = e.value.body
        err = err.get("error", err)
        assert words in err["message"], err
        assert err["type"] == "invalid_request_error"
    f = upload(alice, [chat_line("x", "Hi")])
    for kwargs in ({"endpoint": "/v1/moderations", "completion_window": "24h"},
                   {"endpoint": "/v1/chat/completions", "completion_window": "1h"}):
        with pytest.raises(openai.BadRequestError):
            alice.batches.create(input_file_id=f.id, **kwargs)
    with pytest.raises(openai.BadRequestError):
        alice.batches.create(input_file_id="file-missing", endpoint="/v1/chat/completions", completion_window="24h")
    with pytest.raises(openai.NotFoundError):
        alice.batches.retrieve("batch_missing")


def test_a_killed_server_resumes_and_answers_each_request_once(config, tmp_path):
    n = 30
    lines = [chat_line(f"r{i}", f"Write a sentence about the number {i}.", max_tokens=24) for i in range(n)]
    with serve(tmp_path, config, "--batch-max-in-flight", "2") as s:
        alice = openai_client(s, key="sk-alice")
        b = alice.batches.create(input_file_id=upload(alice, lines).id, endpoint="/v1/chat/completions",
                                 completion_window="24h")
        deadline = time.time() + 120
        done = 0
        while time.time() < deadline:
            done = alice.batches.retrieve(b.id).request_counts.completed
            if done >= 3:
                break
            time.sleep(0.05)
        s.proc.kill()  # SIGKILL: no chance to tidy up
        s.proc.wait()
    assert 3 <= done < n, f"the kill came mid-batch ({done} of {n} answered)"
    with serve(tmp_path, config, "--batch-max-in-flight", "4") as s:
        alice = openai_client(s, key="sk-alice")
        # No request yet: the batch resumes when the server starts, not at its first request.
        def answered_on_disk():
            return sum(line.count('"response":') for f in (tmp_path / "files").glob("*.jsonl")
                       for line in f.read_text().splitlines())
        deadline = time.time() + 60
        while answered_on_disk() <= done and time.time() < deadline:
            time.sleep(0.1)
        assert answered_on_disk() > done
        b = wait_for(alice, b.id, {"completed", "failed"})
        assert b.status == "completed", b
        assert b.request_counts.total == n and b.request_counts.completed == n and b.request_counts.failed == 0
        out = results(alice, b.output_file_id)
        ids = [r["custom_id"] for r in out]
        assert sorted(ids) == sorted(f"r{i}" for i in range(n)), "each request answered exactly once"
        assert all(r["response"]["body"]["choices"][0]["message"]["content"] for r in out)


def test_a_tenants_files_are_bounded(config, tmp_path):
    """--batch-max-tenant-bytes bounds a tenant's files together; deleting makes room; another
    tenant is not affected."""
    lines = [chat_line(f"k{i}", "Hi " + "x" * 40) for i in range(20)]
    size = len(jsonl(lines))
    with serve(tmp_path, config, "--batch-max-tenant-bytes", str(size + size // 2)) as s:
        alice = openai_client(s, key="sk-alice")
        first = upload(alice, lines)
        with pytest.raises(openai.BadRequestError) as e:
            upload(alice, lines)
        assert e.value.body.get("code", e.value.body.get("error", {}).get("code")) == "storage_limit_exceeded"
        upload(openai_client(s, key="sk-bob"), lines)
        alice.files.delete(first.id)
        upload(alice, lines)


def test_a_stopping_server_does_not_record_cut_answers(config, tmp_path):
    """SIGTERM with --shutdown-timeout 0 cancels the requests in flight: those are run again
    after the restart, not recorded cut short (every answer has all its max_tokens)."""
    n, tokens = 16, 48

    def line(i):
        return json.dumps({"custom_id": f"s{i}", "method": "POST", "url": "/v1/chat/completions",
                           "body": {"max_tokens": tokens, "ignore_eos": True, "temperature": 0,
                                    "messages": [{"role": "user", "content": f"Say something about {i}."}]}})

    with serve(tmp_path, config, "--batch-max-in-flight", "4", "--shutdown-timeout", "0") as s:
        alice = openai_client(s, key="sk-alice")
        b = alice.batches.create(input_file_id=upload(alice, [line(i) for i in range(n)]).id,
                                 endpoint="/v1/chat/completions", completion_window="24h")
        deadline = time.time() + 120
        while alice.batches.retrieve(b.id).request_counts.completed < 2 and time.time() < deadline:
            time.sleep(0.05)
        s.stop()  # SIGTERM
    with serve(tmp_path, config) as s:
        alice = openai_client(s, key="sk-alice")
        b = wait_for(alice, b.id, {"completed", "failed"})
        assert b.status == "completed" and b.request_counts.completed == n, b
        out = results(alice, b.output_file_id)
        assert sorted(r["custom_id"] for r in out) == sorted(f"s{i}" for i in range(n))
        assert all(r["response"]["body"]["usage"]["completion_tokens"] == tokens for r in out)
