#!/usr/bin/env python3
"""The side-by-side reference for gpu_bench's GEMV table: PyTorch's BF16 matrix-vector
product (torch.matmul of one token against W^T, cuBLAS underneath) on the same shapes,
timed the same way: a CUDA graph of launches cycling through copies of the weights (at
least 512 MB in all, so none is read from L2), the median of five replays.

Prints a markdown table and writes "rows cols GB/s" lines to --out for gpu_bench --torch.
Runs on the GPU machine (gpu/check.sh), where torch is installed; exits 0 with a note when
torch or a GPU is missing.
"""
import argparse
import statistics
import sys

SHAPES = []
for model, E, Q, KV, F, V in (("Llama-3.2-1B", 2048, 2048, 512, 8192, 128256),
                              ("Llama-3-8B", 4096, 4096, 1024, 14336, 128256),
                              ("Qwen2.5-7B", 3584, 3584, 512, 18944, 152064)):
    SHAPES += [(model, "q|k|v", Q + 2 * KV, E), (model, "attn_output", E, Q), (model, "gate|up", 2 * F, E),
               (model, "ffn_down", E, F), (model, "output", V, E)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="torch_gemv.txt")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("torch_gemv: no torch here; skipped")
        return 0
    if not torch.cuda.is_available():
        print("torch_gemv: no CUDA device; skipped")
        return 0
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    # Copy bandwidth (read + write), the same denominator gpu_bench uses.
    a = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        b.copy_(a)
    e.record()
    e.synchronize()
    copy_bw = 2 * a.numel() * 10 / (s.elapsed_time(e) / 1e3)
    del a, b
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, copy bandwidth {copy_bw / 1e9:.0f} GB/s\n")
    print("| model | matrix | rows x cols | torch bf16 GEMV GB/s | % of copy |\n|---|---|---|---|---|")
    lines = []
    for model, name, rows, cols in SHAPES:
        nbytes = rows * cols * 2
        copies = max(1, min(64, -(-(512 << 20) // nbytes)))
        ws = [torch.randn(rows, cols, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(copies)]
        x = torch.randn(1, cols, device=dev, dtype=torch.bfloat16)
        y = torch.empty(1, rows, device=dev, dtype=torch.bfloat16)
        launches = max(copies, 8)
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):  # warm-up outside the capture (cuBLAS handles, heuristics)
            for w in ws:
                torch.matmul(x, w.t(), out=y)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(launches):
                torch.matmul(x, ws[i % copies].t(), out=y)
        g.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(5):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            g.replay()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / 1e3 / launches)
        t = statistics.median(times)
        gbs = nbytes / t / 1e9
        print(f"| {model} | {name} | {rows} x {cols} | {gbs:.0f} | {100 * gbs * 1e9 / copy_bw:.0f}% |")
        lines.append(f"{rows} {cols} {gbs:.1f}")
        del ws, g
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
