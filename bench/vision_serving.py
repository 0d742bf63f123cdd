#!/usr/bin/env python3
"""Images beside streams (issue 55's serving targets), Tandem and llama-server on the same
files, threads and requests:

  ITL   three text streams decode (sampled: temperature 0.7, top_p 0.95, unique prompts,
        128 tokens); their inter-token latency p50/p99 alone, then while a fourth client's
        chat turn with an image is encoded and prefilled. Target: p99 with the image <= 2x
        p99 without.
  TTFT  four clients at once, each a chat turn with its own image: time to the first token.

The language model is gemma-3-270m Q4_K_M (make test-data); the projector is written by
`tandem gen-model --mmproj --arch gemma3` with SigLIP-B/16's width and depth (SmolVLM-256M's
encoder: 12 blocks of 768, FFN 3072, 12 heads) at 448 px: 784 patches of 16 pooled to 49 tokens.
llama-server runs with --mmproj, -fa off, --jinja and the same chat template.

Usage: python3 bench/vision_serving.py [--llama-server PATH] [--build build] [--threads 2]
Writes docs/bench/vision_serving.json and the section in docs/benchmarks.md.
"""
import argparse
import base64
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import httpx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python"))
from bench_docs import ROOT, cpu_name, free_port, stop_server, wait_healthy, write_section  # noqa: E402
from vision_images import png  # noqa: E402

BEGIN, END = "<!-- vision-serving:begin -->", "<!-- vision-serving:end -->"
GEMMA = os.path.expanduser("~/.cache/tandem/models/gemma-3-270m-q4_k_m.gguf")
TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% set role = 'model' if m['role'] == 'assistant' "
            "else m['role'] %}<start_of_turn>{{ role }}\n"
            "{% if m['content'] is string %}{{ m['content'] | trim }}{% else %}{% for p in m['content'] %}"
            "{% if p['type'] == 'text' %}{{ p['text'] }}{% endif %}{% endfor %}{% endif %}<end_of_turn>\n"
            "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
PROJECTOR = ["--mmproj-text-embd", "640", "--mmproj-image-size", "448", "--mmproj-patch", "16", "--mmproj-layers",
             "12", "--mmproj-embd", "768", "--mmproj-ff", "3072", "--mmproj-heads", "12", "--mmproj-merge", "4",
             "--mmproj-output-scale", "0.2", "--seed", "9"]
TOPICS = ["the history of the lighthouse at Alexandria", "how bees choose a new home", "the rules of cricket",
          "why the sky is blue", "the life of a glacier", "how a violin is made", "the tides of the Bay of Fundy"]


def image_uri(k):
    data = png(96, 72, lambda x, y: ((x * (k + 3)) % 256, (y * (2 * k + 5)) % 256, (x * y + 31 * k) % 256))
    return "data:image/png;base64," + base64.b64encode(data).decode()


def stream(client, url, messages, max_tokens, out, key, ignore_eos=True):
    """One streamed chat turn on `client` (an httpx.Client made before the measurement: making
    one costs this machine's cores tens of milliseconds, which the server's steps would feel as
    a stall): the arrival time of every content delta in out[key]."""
    body = {"model": "m", "messages": messages, "max_tokens": max_tokens, "temperature": 0.7, "top_p": 0.95,
            "stream": True, "ignore_eos": ignore_eos}
    t0 = time.perf_counter()
    times = []
    with client.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
                times.append(time.perf_counter())
    out[key] = {"start": t0, "times": times}


def gaps(rec, lo=None, hi=None):
    t = rec["times"]
    return [(b - a) * 1000 for a, b in zip(t, t[1:]) if (lo is None or b >= lo) and (hi is None or a <= hi)]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def encode_seconds(client, url):
    """Tandem's tandem:image_encode_seconds_sum (None for a server without it)."""
    try:
        for line in client.get(url + "/metrics", timeout=30).text.splitlines():
            if line.startswith("tandem:image_encode_seconds_sum "):
                return float(line.split()[1])
    except Exception:
        pass
    return None


def measure(url, round_id):
    """ITL of three text streams alone and beside an image turn; TTFT of four image turns."""
    res = {}
    text = lambda i: [{"role": "user", "content": f"Write a long essay about {TOPICS[(i + round_id) % len(TOPICS)]}."}]
    # Alone.
    out = {}
    clients = [httpx.Client() for _ in range(5)]  # 3 streams, the image turn, the metrics
    ts = [threading.Thread(target=stream, args=(clients[i], url, text(i), 128, out, i)) for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    alone = [g for i in range(3) for g in gaps(out[i])[2:]]
    # Beside an image turn that starts once they decode.
    out = {}
    ts = [threading.Thread(target=stream, args=(clients[i], url, text(i + 3), 128, out, i)) for i in range(3)]
    for t in ts:
        t.start()
    time.sleep(1.0)
    img = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": image_uri(round_id)}},
                                        {"type": "text", "text": "What is in this image?"}]}]
    enc0 = encode_seconds(clients[4], url)
    stream(clients[3], url, img, 8, out, "image", ignore_eos=False)
    enc1 = encode_seconds(clients[4], url)
    for t in ts:
        t.join()
    window = (out["image"]["start"], out["image"]["times"][0] if out["image"]["times"] else time.perf_counter())
    beside = [g for i in range(3) for g in gaps(out[i], *window)]
    # While the image encodes: Tandem's encoder says how long that took (its prefill step
    # follows); llama-server encodes and prefills in one go, so its window is the same.
    encoding = beside
    if enc0 is not None and enc1 is not None:
        encoding = [g for i in range(3) for g in gaps(out[i], window[0], window[0] + (enc1 - enc0))]
    res["itl_alone_p50"], res["itl_alone_p99"] = pct(alone, 0.5), pct(alone, 0.99)
    res["itl_encoding_p50"], res["itl_encoding_p99"] = pct(encoding, 0.5), pct(encoding, 0.99)
    res["itl_beside_p50"], res["itl_beside_p99"] = pct(beside, 0.5), pct(beside, 0.99)
    res["image_ttft_beside_ms"] = (window[1] - window[0]) * 1000
    # Four image turns at once.
    out = {}
    ts = [threading.Thread(target=stream, args=(clients[i], url, [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": image_uri(100 + 4 * round_id + i)}},
        {"type": "text", "text": "Describe the image."}]}], 8, out, i, False)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    ttft = sorted((out[i]["times"][0] - out[i]["start"]) * 1000 for i in range(4) if out[i]["times"])
    res["ttft4_p50"], res["ttft4_max"] = statistics.median(ttft), ttft[-1]
    for c in clients:
        c.close()
    return res


def run_server(cmd, port, what, env=None):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    wait_healthy(port, proc, what, timeout=300)
    return proc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", default="2")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    tandem = os.path.join(a.build, "bin", "tandem")
    work = tempfile.mkdtemp()
    mmproj = os.path.join(work, "mmproj.gguf")
    subprocess.run([tandem, "gen-model", "--mmproj", "--arch", "gemma3", "--out", mmproj, *PROJECTOR], check=True,
                   capture_output=True)
    template = os.path.join(work, "gemma.jinja")
    open(template, "w").write(TEMPLATE)
    load_before = os.getloadavg()[0]
    results = {}
    servers = [("Tandem", lambda port: [tandem, "serve", "--model", GEMMA, "--mmproj", mmproj, "--chat-template",
                                         template, "--threads", a.threads, "--port", str(port), "--log-level", "warn"],
                None)]
    if a.llama_server:
        servers.append(("llama-server", lambda port: [a.llama_server, "-m", GEMMA, "--mmproj", mmproj, "--jinja",
                                                       "--chat-template-file", template, "-t", a.threads, "-fa", "off",
                                                       "-np", "4", "--port", str(port)], None))
    for name, cmd, env in servers:
        port = free_port()
        proc = run_server(cmd(port), port, name, env)
        try:
            url = f"http://127.0.0.1:{port}"
            measure(url, 99)  # warm-up
            rounds = [measure(url, r) for r in range(a.rounds)]
            print(name, rounds, flush=True)
            results[name] = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        finally:
            stop_server(proc)
    load_after = os.getloadavg()[0]
    res = {"cpu": cpu_name(), "date": datetime.date.today().isoformat(), "threads": a.threads, "results": results}
    os.makedirs(os.path.join(ROOT, "docs", "bench"), exist_ok=True)
    json.dump(res, open(os.path.join(ROOT, "docs", "bench", "vision_serving.json"), "w"), indent=2)
    rows = ["| figure | " + " | ".join(results) + (" | Tandem / llama-server |" if len(results) > 1 else " |"),
            "|---|" + "---:|" * (len(results) + (1 if len(results) > 1 else 0))]
    labels = [("itl_alone_p50", "ITL p50, 3 text streams alone (ms)"),
              ("itl_alone_p99", "ITL p99, 3 text streams alone (ms)"),
              ("itl_encoding_p50", "ITL p50 of those streams while a fourth client's image encodes (ms)"),
              ("itl_encoding_p99", "ITL p99 of those streams while a fourth client's image encodes (ms)"),
              ("itl_beside_p50", "ITL p50 of those streams until the image turn's first token (ms)"),
              ("itl_beside_p99", "ITL p99 of those streams until the image turn's first token (ms)"),
              ("image_ttft_beside_ms", "TTFT of the image turn beside the 3 streams (ms)"),
              ("ttft4_p50", "TTFT, 4 image turns at once: median (ms)"),
              ("ttft4_max", "TTFT, 4 image turns at once: slowest (ms)")]
    for k, label in labels:
        vals = [results[n][k] for n in results]
        ratio = f" | {vals[1] / vals[0]:.2f}x" if len(vals) > 1 and vals[0] > 0 else ""
        rows.append(f"| {label} | " + " | ".join(f"{v:.0f}" for v in vals) + ratio + (" |" if ratio or True else ""))
    t = results["Tandem"]
    ratio = t["itl_encoding_p99"] / t["itl_alone_p99"]
    ratio_ttft = t["itl_beside_p99"] / t["itl_alone_p99"]
    section = "\n".join([
        BEGIN, "", "## Images beside streams: ITL and TTFT (issue 55)", "",
        f"{res['cpu']}, {res['date']}, {a.threads} threads, median of {a.rounds} rounds after a warm-up. "
        "gemma-3-270m Q4_K_M with a projector of SigLIP-B/16's width and depth (SmolVLM-256M's encoder) at 448 px "
        "in gemma3's layout (784 patches pooled to 49 image tokens), `gen-model --mmproj` with the arguments in bench/vision_serving.py; "
        "text streams sampled (temperature 0.7, top_p 0.95), 128 tokens each; each image its own. "
        "llama-server: the llama-cpp-python 0.3.36 sdist's, `--mmproj -fa off --jinja -np 4`, the same template. "
        "Last column: llama-server's figure over Tandem's (above 1: Tandem lower).", "", *rows, "",
        f"Target (issue 55): ITL p99 of the other streams while an image encodes <= 2x its value without: "
        f"{ratio:.2f}x ({'met' if ratio <= 2 else 'not met'}); until the image turn's first token, its prefill step "
        f"(49 image rows and the text, computed whole) included: {ratio_ttft:.2f}x. Tandem's encode window is the "
        "encoder's own time (tandem:image_encode_seconds); llama-server encodes and prefills in one go, so both of "
        "its windows run to the first token.", "",
        f"Machine load (1-minute average) before / after: {load_before:.1f} / {load_after:.1f}.", "",
        "Reproduce:", "", "```", "python3 bench/vision_serving.py --llama-server PATH --build build", "```", "", END])
    write_section(section, BEGIN, END)
    print(section)


if __name__ == "__main__":
    main()
