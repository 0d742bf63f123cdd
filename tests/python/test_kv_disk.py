"""The prefix cache's disk tier (--kv-cache-dir) on real servers on 127.0.0.1: a restarted
server with the same directory answers a prompt it served before from disk (cached tokens,
the same greedy output as the cold answer); files corrupted between runs are misses, removed,
and the answer is still the cold one; a directory full of garbage is trimmed to its bounds,
files that are not the server's are left alone, and the server serves."""
import os
import random
import subprocess
import time

import pytest

from conftest import Server, openai_client, tandem_binary

DOC = "".join(f"Note {i}: the river town of Aldmere trades wool, salt and copper with its neighbours. "
              for i in range(40))
MESSAGES = [{"role": "system", "content": DOC}, {"role": "user", "content": "What does Aldmere trade?"}]


def ask(server, messages=MESSAGES):
    r = openai_client(server).chat.completions.create(model="default", messages=messages, max_tokens=24,
                                                      temperature=0)
    return r.choices[0].message.content, r.usage.prompt_tokens, r.usage.prompt_tokens_details.cached_tokens


def settled(server, timeout=60):
    """The metrics once the spills have reached the disk (the files' count stops moving)."""
    deadline = time.time() + timeout
    server.wait_idle()
    last = None
    while time.time() < deadline:
        m = server.metrics()
        now = (m["tandem:kv_disk_files"], m["tandem:kv_disk_writes_total"])
        if now == last and now[1] > 0:
            return m
        last = now
        time.sleep(0.3)
    return server.metrics()


def block_files(d):
    return sorted(p for p in os.listdir(d) if p.endswith(".kvb"))


def serve(d, *extra):
    return Server("--kv-cache-dir", str(d), "--log-level", "warn", *extra)


def test_a_restarted_server_answers_from_disk(tmp_path):
    with serve(tmp_path) as s:
        cold, n_prompt, cached = ask(s)
        assert n_prompt > 500 and cached == 0
        m = settled(s)
        assert m["tandem:kv_disk_writes_total"] >= n_prompt // 16 - 1
    assert len(block_files(tmp_path)) >= n_prompt // 16 - 1
    assert (tmp_path / "salt.key").exists()
    with serve(tmp_path) as s:
        warm, _, cached = ask(s)
        m = s.metrics()
        assert cached >= n_prompt - 32, "the prompt's blocks came from disk"
        assert warm == cold, "greedy output from disk KV equals the cold output"
        assert m["tandem:kv_disk_hits_total"] >= n_prompt // 16 - 1
        assert m["tandem:kv_disk_hit_tokens_total"] >= n_prompt - 32
        assert m["tandem:kv_disk_corrupt_total"] == 0
        # Another prompt that shares only the system prompt: its prefix is in memory now.
        other, _, cached_other = ask(s, [MESSAGES[0], {"role": "user", "content": "Name the town."}])
        assert cached_other > 400 and other.strip()
    # Without the disk tier the same server type answers the same (the cold reference).
    with Server("--log-level", "warn") as s:
        assert ask(s)[0] == cold


def test_corrupt_files_are_misses_and_removed(tmp_path):
    with serve(tmp_path) as s:
        cold, n_prompt, _ = ask(s)
        settled(s)
    files = block_files(tmp_path)
    assert files
    for name in files:  # one flipped byte in each, the size kept
        p = tmp_path / name
        data = bytearray(p.read_bytes())
        data[len(data) // 2] ^= 0x40
        p.write_bytes(bytes(data))
    with serve(tmp_path) as s:
        text, _, cached = ask(s)
        m = s.metrics()
        assert text == cold, "a corrupt file never changes the output"
        assert cached == 0
        assert m["tandem:kv_disk_corrupt_total"] >= 1
        assert m["tandem:kv_disk_hits_total"] == 0
        settled(s)
    # The first block's file was refused and removed; the recomputed blocks were written anew.
    with serve(tmp_path) as s:
        text, _, cached = ask(s)
        assert text == cold and cached >= n_prompt - 32


def test_a_directory_of_garbage_is_bounded_and_the_server_serves(tmp_path):
    rng = random.Random(5)
    for i in range(300):  # names of block files, sizes no block has
        (tmp_path / f"{0x1000 + i:016x}.kvb").write_bytes(rng.randbytes(rng.randrange(1, 5000)))
    for i in range(20):  # leftovers of interrupted writes
        (tmp_path / f"{0x9000 + i:016x}.kvb.tmp").write_bytes(b"half a block")
    (tmp_path / "README").write_text("not the server's")
    (tmp_path / "nested").mkdir()
    os.symlink("/etc/passwd", tmp_path / f"{0xdead:016x}.kvb")
    limit = 4_000_000  # about ten blocks of the default model
    with serve(tmp_path, "--kv-cache-disk-bytes", str(limit)) as s:
        m = s.metrics()
        assert m["tandem:kv_disk_removed_at_open_total"] == 320
        assert m["tandem:kv_disk_unknown_files"] == 3  # README, nested/, the symlink
        assert m["tandem:kv_disk_files"] == 0
        text, n_prompt, _ = ask(s)
        assert text.strip()
        m = settled(s)
        assert m["tandem:kv_disk_bytes"] <= limit
        assert m["tandem:kv_disk_max_bytes"] == limit
        assert m["tandem:kv_disk_evictions_total"] > 0, "the prompt's blocks outnumber the bound"
        assert m["tandem:kv_disk_files"] == len(block_files(tmp_path)) - 1  # the symlink stays
    assert (tmp_path / "README").exists() and os.path.islink(tmp_path / f"{0xdead:016x}.kvb")
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_an_unusable_directory_is_refused_at_start(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the directory should be")
    for args in (["--kv-cache-dir", str(blocker / "sub")],
                 ["--kv-cache-dir", str(tmp_path / "d"), "--kv-cache-disk-bytes", "0"]):
        r = subprocess.run([tandem_binary(), "serve", "--port", "0", *args], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode != 0, r.stdout + r.stderr
        assert "--kv-cache-" in r.stdout + r.stderr
