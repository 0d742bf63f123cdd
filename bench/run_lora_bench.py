#!/usr/bin/env python3
"""LoRA decode steps (issue 54's target: 32 sequences over 8 different rank-16 adapters at
>= 0.8x the tokens/s of the same step without adapters): runs bench/lora_bench (the forward
pass alone, plain and mixed steps alternating and paired) on the Llama-3.2-1B-shaped synthetic
Q4_K_M file (made as bench/compare_quant_types.py makes it when missing), `--rounds` times,
and writes docs/benchmarks.md's "LoRA" section.

Usage: python3 bench/run_lora_bench.py [--build build] [--threads 2] [--rounds 3] [--steps 10]
"""
import argparse
import datetime
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_docs import ROOT, cpu_name, run_json, write_section  # noqa: E402
from compare_quant_types import SHAPES, make  # noqa: E402

BEGIN, END = "<!-- lora-bench:begin -->", "<!-- lora-bench:end -->"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    tandem = os.path.join(a.build, "bin", "tandem")
    models = os.path.join(a.build, "bench-models")
    os.makedirs(models, exist_ok=True)
    path = os.path.join(models, "synthetic-1b-Q4_K_M.gguf")
    make(path, [tandem, "gen-model", "-o", None, "--type", "q4_k_m", "--embd-type", "q8_0"] + SHAPES["1b"])
    rows = []
    for adapters, rank in ((8, 16), (1, 16), (32, 16), (8, 64)):
        runs = [run_json("lora_bench", [os.path.join(a.build, "bin", "lora_bench"), path, "32", str(adapters),
                                        str(rank), str(a.steps), str(a.threads)]) for _ in range(a.rounds)]
        med = lambda k: statistics.median(r[k] for r in runs)  # noqa: E731
        rows.append({"adapters": adapters, "rank": rank, "plain": med("plain_tok_s"), "mixed": med("mixed_tok_s"),
                     "ratio": med("ratio"), "ratios": [r["ratio"] for r in runs], "kernels": runs[0]["kernels"]})
        print(rows[-1], flush=True)
    target = rows[0]["ratio"]
    text = "\n".join([
        BEGIN, "",
        "## LoRA: a decode step over many adapters (issue 54)", "",
        f"{cpu_name()} ({os.cpu_count()} CPUs), {datetime.date.today().isoformat()}, {a.threads} threads, "
        f"{rows[0]['kernels']} kernels. `python3 bench/run_lora_bench.py` (in `make bench`): `bench/lora_bench` "
        "on the Llama-3.2-1B-shaped synthetic Q4_K_M file (16 layers, 2048 wide, FFN 8192), 32 sequences of "
        "32 tokens decoding one token each; the plain step (no adapter) and the mixed step (sequence i on "
        "adapter i % N) alternate, each writing its own position; F16 adapters (convert_lora_to_gguf's default) "
        "on every layer's attn_q/k/v/output and ffn_gate/up/down. Each round's ratio is the median of "
        f"{a.steps} paired steps' plain time over mixed time; the table gives the median of {a.rounds} rounds "
        "(the machine is shared, so only paired figures compare).", "",
        "| adapters in the step | rank | tok/s without | tok/s with | ratio (rounds) |", "|---|---|---|---|---|",
        *[f"| {r['adapters']} | {r['rank']} | {r['plain']:.1f} | {r['mixed']:.1f} | {r['ratio']:.2f} "
          f"({', '.join(f'{x:.2f}' for x in r['ratios'])}) |" for r in rows],
        "",
        f"Target: 32 sequences over 8 rank-16 adapters at >= 0.80x: {target:.2f}x "
        f"({'met' if target >= 0.8 else 'not met'}). What the adapters cost is reading them: each sequence's "
        "chunk of up to four rows reads its adapter's A (in place, summed in llama.cpp's orders: "
        "engine/lora/step_updates.h) and B (transposed, in float) once per step, so the cost grows with the number of distinct adapters in the "
        "step and their rank, not with the rows (8 adapters of rank 16 on this shape: about 190 MB of F32 B "
        "and 84 MB of F16 A per step beside the 640 MB file of base weights; B kept in F16 would halve its part).",
        "", END])
    write_section(text, BEGIN, END)
    print(text)


if __name__ == "__main__":
    main()
