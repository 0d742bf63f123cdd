#!/usr/bin/env python3
"""Embeddings per second (issue 52): `tandem serve --embeddings` against llama.cpp's llama-server
(`--embeddings --pooling ...`) on the same GGUF file, the same thread count, one server at a time.

Work: --inputs unique texts of about --tokens tokens each (sentences made from a seeded word
list, cut to the token count with the server's /tokenize), sent two ways:
  batch       one POST /v1/embeddings with all the inputs in its `input` list
  concurrent  one POST per input, all at once from a thread pool (--inputs workers, keep-alive)
embeddings/s = inputs / wall time of the whole request set (client included: the same client
for both servers). Per round each server is started, warmed with a batch of 8 inputs, timed --repeats
times per mode (the round's figure is the median of those), and stopped; the order of the two
servers swaps every round. Reported: each server's median over the rounds, the median of the
per-round ratios Tandem / llama-server and their range (on a shared, noisy machine the ratio
within a round is what holds), and the agreement of the two servers' vectors (cosine of the
normalised embeddings of the first --check inputs) so that both did the same work.

Files: the default model (SmolLM2-135M Q4_1) with mean pooling, and a Qwen3-Embedding-0.6B
shape from `tandem gen-model` (qwen3: 28 layers, 1024 wide, 16/8 heads of 128, FFN 3072, Q8_0,
last-token pooling declared in the file, random weights, the default model's vocabulary).

Writes its section of docs/benchmarks.md, docs/bench/embeddings.json and .png (--redraw: the
section and plot again from that JSON, running nothing).

Usage: python3 bench/compare_embeddings.py --llama-server PATH [--build build] [--threads 2]
           [--rounds 3] [--repeats 1] [--inputs 64] [--tokens 128] [--models-dir DIR]
           [--only default|qwen3]
"""
import argparse
import concurrent.futures
import datetime
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time

import httpx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_docs import (ROOT, cpu_name, free_port, section_tail, stop_server, wait_healthy,  # noqa: E402
                        write_section)

BEGIN, END = "<!-- embeddings-bench:begin -->", "<!-- embeddings-bench:end -->"
SAVED = os.path.join(ROOT, "docs", "bench", "embeddings.json")

# Qwen3-Embedding-0.6B (config.json: 28 layers, hidden 1024, 16/8 heads of 128, FFN 3072, tied
# embedding, rope base 1e6, last-token pooling); the vocabulary is the default model's (49,152
# tokens instead of 151,669: only the embedding table's size differs, and no LM head runs).
QWEN3_EMBEDDING_06B = ["--arch", "qwen3", "--layers", "28", "--embd", "1024", "--heads", "16", "--kv-heads", "8",
                       "--head-dim", "128", "--ff", "3072", "--vocab-from", "default", "--ctx", "32768",
                       "--rope-base", "1000000", "--type", "q8_0", "--embd-type", "q8_0", "--pooling-type", "3",
                       "--name", "Qwen3-Embedding-0.6B shape (random weights)"]


def default_model():
    home = os.environ.get("TANDEM_HOME", os.path.join(os.path.expanduser("~"), ".cache", "tandem"))
    path = os.path.join(home, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(path):
        sys.exit(f"compare_embeddings: {path} is missing; run `make model`")
    return path


def files(models_dir):
    return [
        ("default", "SmolLM2-135M Q4_1 (default model)", "mean", default_model(), None),
        ("qwen3", "Qwen3-Embedding-0.6B shape, Q8_0", "last",
         os.path.join(models_dir, "synthetic-qwen3-embedding-0.6b-Q8_0.gguf"), QWEN3_EMBEDDING_06B),
    ]


def make(path, cmd):
    if os.path.exists(path):
        return
    tmp = path + ".partial"
    subprocess.run([tmp if c is None else c for c in cmd], check=True)
    os.replace(tmp, path)


# --- the texts ---------------------------------------------------------------------------------

SUBJECTS = ["The committee", "Our support team", "A field biologist", "The new library", "Every morning the baker",
            "The harbour master", "A second-year student", "The city council", "My neighbour", "The museum guide",
            "The night shift nurse", "A small software company", "The orchestra", "The river ferry",
            "An old farmer", "The weather service", "The school kitchen", "A travelling salesman",
            "The research group", "The mountain hut"]
VERBS = ["reviewed", "postponed", "described", "repaired", "questioned", "celebrated", "measured", "rebuilt",
         "published", "ignored", "compared", "explained", "tested", "recorded", "cancelled", "welcomed",
         "photographed", "translated", "planned", "delivered"]
OBJECTS = ["the quarterly budget", "a broken water pump", "the results of the soil survey", "an unusual request",
           "the timetable for the winter months", "a collection of letters from 1912", "the safety rules",
           "three crates of apples", "the migration of the swallows", "a new recipe for rye bread",
           "the damaged bridge", "the complaints about noise", "a map of the old town", "the evening concert",
           "the price of heating oil", "an invoice that nobody could explain", "the results of the election",
           "a lost passport", "the design of the new station", "the rainfall of the past decade"]
TAILS = ["before the end of the week.", "after a long and tiring meeting.", "with more care than usual.",
         "although nobody had asked for it.", "while the rain kept falling.", "for the third time this year.",
         "in front of a small audience.", "because the deadline had moved.", "without telling the manager.",
         "as the sun went down over the hills.", "on behalf of the whole village.", "in less than an hour.",
         "despite the strike at the port.", "using notes from the previous visit.", "to everyone's surprise."]
LINKS = ["Later,", "Meanwhile,", "As a result,", "On Tuesday,", "In the afternoon,", "A week later,",
         "Surprisingly,", "According to the report,", "Back at the office,", "That evening,"]


def sentence(rng, first):
    s = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}"
    if not first and rng.random() < 0.5:
        s = rng.choice(LINKS) + " " + s[0].lower() + s[1:]
    return s


def texts(n, seed=52):
    """n distinct paragraphs of about 250 tokens (cut to the target later)."""
    rng, out = random.Random(seed), []
    while len(out) < n:
        t = " ".join(sentence(rng, i == 0) for i in range(12)) + f" (note {rng.randrange(10**6)})"
        if t not in out:
            out.append(t)
    return out


def tandem_count(client, base, text):
    return client.post(f"{base}/tokenize", json={"prompt": text}).json()["count"]


def llama_count(client, base, text):
    return len(client.post(f"{base}/tokenize", json={"content": text}).json()["tokens"])


def cut_to_tokens(client, base, raw, target):
    """Each text cut at a word boundary to the longest prefix of at most `target` tokens
    (Tandem's /tokenize, text only, no BOS/EOS)."""
    out = []
    for t in raw:
        words = t.split(" ")
        lo, hi = 1, len(words)  # largest k with count(words[:k]) <= target
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if tandem_count(client, base, " ".join(words[:mid])) <= target:
                lo = mid
            else:
                hi = mid - 1
        out.append(" ".join(words[:lo]))
    return out


# --- the servers -------------------------------------------------------------------------------

def start_tandem(exe, model, port, threads, pooling, n, tokens):
    cmd = [exe, "serve", "--model", model, "--port", str(port), "--threads", str(threads), "--pooling", pooling,
           "--max-num-seqs", str(n), "--max-num-batched-tokens", str(tokens), "--log-level", "warn"]
    return cmd, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_llama_server(exe, model, port, threads, pooling, n, tokens):
    # Batch and micro-batch hold all the inputs' tokens (one decode for the whole request); one
    # slot per input, room for twice the inputs. -kvu (one KV buffer for all slots): without it
    # (the default once -np is given) this llama.cpp's vectors for inputs batched together are
    # wrong (cosine 0.66-0.93 against the same input sent alone; with -kvu 1.0). -nr as
    # bench/serve_bench.py (no repacking: its AMX path crashes under this machine's hypervisor).
    cmd = [exe, "-m", model, "--port", str(port), "--host", "127.0.0.1", "-t", str(threads), "-tb", str(threads),
           "--embeddings", "--pooling", pooling, "-np", str(n), "-kvu", "-c", str(2 * tokens), "-b", str(tokens),
           "-ub", str(tokens), "--no-warmup", "-lv", "0", "-nr"]
    return cmd, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def embed(client, base, inputs):
    r = client.post(f"{base}/v1/embeddings", json={"model": "m", "input": inputs, "encoding_format": "float"})
    r.raise_for_status()
    body = r.json()
    return [d["embedding"] for d in sorted(body["data"], key=lambda d: d["index"])], body.get("usage", {})


def time_batch(client, base, inputs):
    t0 = time.perf_counter()
    vecs, usage = embed(client, base, inputs)
    dt = time.perf_counter() - t0
    assert len(vecs) == len(inputs)
    return len(inputs) / dt, vecs, usage


def time_concurrent(client, base, inputs, pool):
    t0 = time.perf_counter()
    got = list(pool.map(lambda s: embed(client, base, [s]), inputs))
    dt = time.perf_counter() - t0
    return len(inputs) / dt, [g[0][0] for g in got], sum(g[1].get("prompt_tokens", 0) for g in got)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def run_server(name, start, exe, path, pooling, a, inputs, pool):
    port = free_port()
    cmd, proc = start(exe, path, port, a.threads, pooling, a.inputs, a.inputs * a.tokens)
    print(f"embeddings bench: {name}: {' '.join(cmd)}", flush=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(port, proc, name, timeout=600)
        limits = httpx.Limits(max_connections=a.inputs, max_keepalive_connections=a.inputs)
        with httpx.Client(timeout=3600, limits=limits) as client:
            count = tandem_count if name == "tandem" else llama_count
            counts = [count(client, base, t) for t in inputs]
            time_batch(client, base, inputs[:8])  # warm-up
            batch, conc = [], []
            for _ in range(a.repeats):
                eps, vecs, usage = time_batch(client, base, inputs)
                batch.append(eps)
                eps_c, vecs_c, tok_c = time_concurrent(client, base, inputs, pool)
                conc.append(eps_c)
        res = {"batch": statistics.median(batch), "concurrent": statistics.median(conc),
               "batch_runs": batch, "concurrent_runs": conc, "tokenize": counts,
               "prompt_tokens_batch": usage.get("prompt_tokens"), "prompt_tokens_concurrent": tok_c,
               "check": vecs[:a.check], "self_cos": min(cosine(x, y) for x, y in zip(vecs, vecs_c))}
        print(f"embeddings bench: {name}: batch {res['batch']:.4f}/s, concurrent {res['concurrent']:.4f}/s, "
              f"prompt tokens {res['prompt_tokens_batch']} / {tok_c}", flush=True)
        return res
    finally:
        stop_server(proc)


def bench_file(a, tandem, key, label, pooling, path):
    # The texts, cut to a.tokens with Tandem's tokenizer (a short-lived server).
    port = free_port()
    _, proc = start_tandem(tandem, path, port, a.threads, pooling, a.inputs, a.inputs * a.tokens)
    try:
        wait_healthy(port, proc, "tandem", timeout=600)
        with httpx.Client(timeout=600) as client:
            inputs = cut_to_tokens(client, f"http://127.0.0.1:{port}", texts(a.inputs), a.tokens)
    finally:
        stop_server(proc)
    assert len(set(inputs)) == len(inputs)
    starts = {"tandem": (start_tandem, tandem), "llama-server": (start_llama_server, a.llama_server)}
    rounds = []
    with concurrent.futures.ThreadPoolExecutor(a.inputs) as pool:
        for i in range(a.rounds):
            order = ["tandem", "llama-server"] if i % 2 == 0 else ["llama-server", "tandem"]
            r = {"order": order}
            for name in order:
                start, exe = starts[name]
                r[name] = run_server(name, start, exe, path, pooling, a, inputs, pool)
            rounds.append(r)
    t0, l0 = rounds[0]["tandem"], rounds[0]["llama-server"]
    row = {"key": key, "label": label, "pooling": pooling, "mib": os.path.getsize(path) / 2**20,
           "inputs": a.inputs, "tokens": a.tokens,
           "tokenize_tandem": [min(t0["tokenize"]), max(t0["tokenize"])],
           "tokenize_llama": [min(l0["tokenize"]), max(l0["tokenize"])],
           "prompt_tokens_tandem": t0["prompt_tokens_batch"], "prompt_tokens_llama": l0["prompt_tokens_batch"],
           "cosine_min": min(cosine(x, y) for x, y in zip(t0["check"], l0["check"])),
           "self_cos_min": min(r[s]["self_cos"] for r in rounds for s in ("tandem", "llama-server")),
           "rounds": [{"order": r["order"], **{f"{s}_{m}": r[s][m] for s in ("tandem", "llama-server")
                                               for m in ("batch", "concurrent")}} for r in rounds]}
    for mode in ("batch", "concurrent"):
        t = [r[f"tandem_{mode}"] for r in row["rounds"]]
        l = [r[f"llama-server_{mode}"] for r in row["rounds"]]
        ratios = [x / y for x, y in zip(t, l)]
        row[mode] = {"tandem": statistics.median(t), "llama": statistics.median(l),
                     "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios)}
    return row


# --- the report --------------------------------------------------------------------------------

def markdown(res):
    rows = []
    for r in res["files"]:
        for mode, what in (("batch", f"1 request x {r['inputs']} inputs"),
                           ("concurrent", f"{r['inputs']} concurrent requests x 1")):
            m = r[mode]
            rows.append(f"| {r['label']} | {r['pooling']} | {what} | {len(r['rounds'])} | {m['tandem']:.2f} | "
                        f"{m['llama']:.2f} | "
                        f"{m['ratio']:.2f}x | {m['ratio_min']:.2f}-{m['ratio_max']:.2f}x | "
                        + ", ".join(f"{x[f'tandem_{mode}'] / x[f'llama-server_{mode}']:.2f}" for x in r["rounds"])
                        + " |")
    checks = "; ".join(
        f"{r['label']}: /tokenize {r['tokenize_tandem'][0]}-{r['tokenize_tandem'][1]} tokens (Tandem) and "
        f"{r['tokenize_llama'][0]}-{r['tokenize_llama'][1]} (llama-server) per input, "
        f"{r['prompt_tokens_tandem']} / {r['prompt_tokens_llama']} prompt tokens per batch (usage), "
        f"cosine of the two servers' vectors >= {r['cosine_min']:.6f}" for r in res["files"])
    return [
        BEGIN, "",
        "## Embeddings vs llama-server (issue 52)", "",
        f"{res['cpu']} ({res['cpus']} CPUs), {res['date']}, {res['threads']} threads for each server (each server alone on the machine's cores); "
        f"{res['inputs']} unique English paragraphs of {res['tokens']} tokens or just under (cut at a word with "
        "/tokenize), sent as one `/v1/embeddings` request with all of them, and as one request per input all "
        "at once from a thread pool (keep-alive connections). Embeddings/s = inputs / wall time of the request "
        f"set, client included. Rounds (the table says how many per file): in each, the two servers run one at a "
        f"time, the order swapping every round: started, warmed with a batch of 8 inputs, timed {res['repeats']} "
        "times per way (median), "
        "stopped. Figures: medians over the rounds; ratio: the median of the per-round ratios Tandem / "
        "llama-server, with their range (the machine is shared, so the ratio within a round is the figure that "
        f"holds). Tandem: `tandem serve --pooling P --max-num-seqs {res['inputs']} --max-num-batched-tokens "
        f"{res['inputs'] * res['tokens']}`. llama-server (llama-cpp-python 0.3.36's llama.cpp): `--embeddings "
        f"--pooling P -np {res['inputs']} -kvu -c {2 * res['inputs'] * res['tokens']} -b/-ub "
        f"{res['inputs'] * res['tokens']} -nr`, flash attention auto; `-kvu` (one KV buffer for all slots) because "
        "without it this llama.cpp returns wrong vectors for inputs batched together (cosine 0.66-0.93 against "
        "the same input sent alone, on the default model; 1.0 with it). The Qwen3-Embedding-0.6B shape is "
        "`tandem gen-model` random weights (bench/compare_embeddings.py has the shape) with the default model's "
        "vocabulary.", "",
        "| file | pooling | sent as | rounds | Tandem emb/s | llama-server emb/s | Tandem / llama-server | range "
        "| per round |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ] + rows + ["", f"Same work: {checks}.", "",
                "![Embeddings per second, Tandem vs llama-server](bench/embeddings.png)"]


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(res["files"]), figsize=(5.5 * len(res["files"]), 4.2), squeeze=False)
    for ax, r in zip(axes[0], res["files"]):
        modes = [("batch", f"1 request x {r['inputs']}"), ("concurrent", f"{r['inputs']} requests x 1")]
        for i, (who, name) in enumerate((("tandem", "Tandem"), ("llama", "llama-server"))):
            xs = [x + (i - 0.5) * 0.38 for x in range(len(modes))]
            ax.bar(xs, [r[m][who] for m, _ in modes], 0.38, label=name)
            for x, (m, _) in zip(xs, modes):
                runs = [q[f"{'tandem' if who == 'tandem' else 'llama-server'}_{m}"] for q in r["rounds"]]
                ax.plot([x] * len(runs), runs, "k.", markersize=4)
        for x, (m, _) in enumerate(modes):
            ax.annotate(f"{r[m]['ratio']:.2f}x", (x, max(r[m]['tandem'], r[m]['llama'])), ha="center",
                        va="bottom", fontsize=9)
        ax.set_xticks(range(len(modes)))
        ax.set_xticklabels([t for _, t in modes])
        ax.set_ylabel("embeddings/s")
        ax.set_title(f"{r['label']}, {r['pooling']}", fontsize=9)
        ax.margins(y=0.3)
        ax.legend(fontsize=8, loc="upper center", ncol=2)
    fig.suptitle(f"{r['tokens']}-token inputs, {res['threads']} threads (dots: rounds)", fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--llama-server", help="llama.cpp's llama-server (scripts/build-llama-server.sh builds one)")
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "build", "bench-models"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=1, help="timed runs per way, server and round")
    ap.add_argument("--inputs", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--check", type=int, default=64, help="inputs whose vectors are compared across servers")
    ap.add_argument("--only", choices=["default", "qwen3"])
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--redraw", action="store_true", help="run nothing: the section and plot from the saved JSON")
    a = ap.parse_args()

    if a.redraw:
        res = json.load(open(SAVED))
    else:
        if not a.llama_server:
            sys.exit("compare_embeddings: --llama-server PATH is needed")
        tandem = os.path.join(a.build, "bin", "tandem")
        os.makedirs(a.models_dir, exist_ok=True)
        res = {"cpu": cpu_name(), "cpus": os.cpu_count(), "date": datetime.date.today().isoformat(),
               "threads": a.threads, "rounds": a.rounds, "repeats": a.repeats, "inputs": a.inputs,
               "tokens": a.tokens, "files": []}
        for key, label, pooling, path, spec in files(a.models_dir):
            if a.only and key != a.only:
                continue
            if spec:
                make(path, [tandem, "gen-model", "-o", None] + spec)
            load_before = os.getloadavg()[0]
            row = bench_file(a, tandem, key, label, pooling, path)
            row["load_before"], row["load_after"] = load_before, os.getloadavg()[0]
            row["command"] = (f"python3 bench/compare_embeddings.py --llama-server PATH --threads {a.threads} "
                              f"--rounds {a.rounds} --repeats {a.repeats}" + (f" --only {key}" if a.only else ""))
            print(json.dumps({k: v for k, v in row.items() if k != "rounds"}), flush=True)
            if a.only and os.path.exists(SAVED):  # one file again: the saved others stay
                saved = json.load(open(SAVED))
                keep = {r["key"]: {**{k: saved.get(k) for k in ("load_before", "load_after", "command")}, **r}
                        for r in saved["files"]}
                keep[key] = row
                res["files"] = [keep[k] for k, *_ in files(a.models_dir) if k in keep]
            else:
                res["files"].append(row)
            report(res, a, save=True)  # after each file: a run cut short keeps the files it finished
    if a.redraw:
        report(res, a, save=False)


def report(res, a, save):
    for r in res["files"]:  # a JSON from before the figures per file
        for k in ("load_before", "load_after", "command"):
            r.setdefault(k, res.get(k))
    fs = res["files"]
    text = "\n".join(markdown(res) + section_tail(min(r["load_before"] for r in fs), max(r["load_after"] for r in fs),
                                                   "\n".join(dict.fromkeys(r["command"] for r in fs)), END))
    print(text, flush=True)
    if a.out and res["files"]:
        write_section(text, BEGIN, END, a.out)
        if save:
            os.makedirs(os.path.dirname(SAVED), exist_ok=True)
            with open(SAVED, "w") as f:
                json.dump(res, f, indent=1)
        plot(res, os.path.splitext(SAVED)[0] + ".png")


if __name__ == "__main__":
    main()
