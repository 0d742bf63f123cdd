#!/usr/bin/env python3
"""Image encode time (issue 55): Tandem's vision encoder (bench/vision_bench) against llama.cpp's
libmtmd (llama-mtmd-cli, which prints "mtmd batch encoding done in N ms") on the same
synthetic projector file of a real shape, the same image and the same threads, runs
alternating. Writes the "vision-encode" section of docs/benchmarks.md on a CPU with AVX-512,
"vision-encode-avx2" on one without (the encoder's kernels differ: engine/vision/vision_kernels.h).

  bench/compare_vision.py --build build --mtmd-cli PATH [--threads 2] [--repeat 2] [--layers 27]

gemma3's projector is SigLIP-so400m's shape (896 pixels, 27 blocks of width 1152), made by
`tandem gen-model --mmproj` with a 640-wide output so that gemma-3-270m (make test-data) can
be llama-mtmd-cli's language model; the output width costs one small matrix."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_docs import ROOT, cpu_name, section_tail, write_section  # noqa: E402



def has_avx512():
    try:
        return " avx512f " in open("/proc/cpuinfo").read()
    except OSError:
        return False


KEY = "vision-encode" if has_avx512() else "vision-encode-avx2"
BEGIN, END = f"<!-- {KEY}:begin -->", f"<!-- {KEY}:end -->"
GEMMA3_TEXT = os.path.expanduser(os.path.join(os.environ.get("TANDEM_HOME", "~/.cache/tandem"), "models",
                                              "gemma-3-270m-q4_k_m.gguf"))


def test_png(path, w, h):
    from PIL import Image
    Image.frombytes("RGB", (w, h), bytes(((i * 37 + i // 7) % 251) for i in range(w * h * 3))).save(path)


def tandem_ms(build, mmproj, w, h, threads):
    out = subprocess.run([os.path.join(build, "bin", "vision_bench"), mmproj, "--image", f"{w}x{h}", "--threads",
                          str(threads), "--repeat", "1"], check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["encode_ms"]


def mtmd_ms(cli, mmproj, png, threads):
    p = subprocess.run([cli, "-m", GEMMA3_TEXT, "--mmproj", mmproj, "--image", png, "-p", "hi", "-n", "1", "-t",
                        str(threads), "--temp", "0", "--chat-template", "gemma"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    m = re.search(r"batch encoding done in (\d+) ms", p.stdout)
    if p.returncode or not m:
        sys.exit("compare_vision: llama-mtmd-cli failed:\n" + p.stdout[-2000:])
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--mtmd-cli", required=True, help="llama-mtmd-cli (scripts/build-llama-server.sh builds it)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--layers", type=int, default=27, help="encoder blocks (27: the real shape)")
    ap.add_argument("--image", default="640x480")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    a = ap.parse_args()
    w, h = (int(v) for v in a.image.split("x"))
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        mmproj, png = os.path.join(tmp, "gemma3-mmproj.gguf"), os.path.join(tmp, "image.png")
        subprocess.run([os.path.join(a.build, "bin", "tandem"), "gen-model", "--arch", "gemma3", "--mmproj",
                        "--mmproj-layers", str(a.layers), "--mmproj-text-embd", "640", "-o", mmproj], check=True)
        test_png(png, w, h)
        ours, theirs = [], []
        for r in range(a.repeat):
            ours.append(tandem_ms(a.build, mmproj, w, h, a.threads))
            theirs.append(mtmd_ms(a.mtmd_cli, mmproj, png, a.threads))
            print(f"compare_vision: run {r + 1}: tandem {ours[-1]:.0f} ms, llama-mtmd-cli {theirs[-1]:.0f} ms",
                  flush=True)
    t, m = statistics.median(ours), statistics.median(theirs)
    cmd = (f"python3 bench/compare_vision.py --build build --mtmd-cli PATH/llama-mtmd-cli --threads {a.threads} "
           f"--repeat {a.repeat} --layers {a.layers} --image {a.image}")
    title = "the vision encoder against libmtmd" + ("" if has_avx512() else ", a CPU without AVX-512")
    lines = [BEGIN, f"### Image encode time: {title} (issue 55)", "",
             f"{cpu_name()}, {a.threads} threads, {time.strftime('%Y-%m-%d')}. Synthetic gemma3 projector of "
             f"SigLIP-so400m's shape ({a.layers} blocks, 896 pixels: 4,096 patches, 256 tokens), f16, from "
             f"`tandem gen-model --mmproj`; a {w}x{h} image. Medians of {a.repeat} runs, alternating. libmtmd's "
             "figure is its own \"batch encoding done\" time (preprocessing included); Tandem's is the "
             "encoder's forward pass (preprocessing, about 40-70 ms here, apart).", "",
             "| encoder | encode (ms) | runs (ms) |", "|---|---:|---|",
             f"| Tandem | {t:,.0f} | {', '.join(f'{v:,.0f}' for v in ours)} |",
             f"| llama-mtmd-cli | {m:,.0f} | {', '.join(f'{v:,.0f}' for v in theirs)} |", "",
             f"Tandem / libmtmd speed: **{m / t:.2f}x** (target >= 1.2x: {'met' if m / t >= 1.2 else 'not met'})."]
    lines += section_tail(load_before, os.getloadavg()[0], cmd, END)
    text = "\n".join(lines)
    print(text)
    write_section(text, BEGIN, END, a.out)


if __name__ == "__main__":
    main()
