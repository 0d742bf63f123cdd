#!/usr/bin/env python3
"""Image encode time (issue 55): Tandem's vision encoder (bench/vision_bench) against llama.cpp's
libmtmd (llama-mtmd-cli, which prints "mtmd batch encoding done in N ms") on the same
synthetic projector file of a real shape, the same image and the same threads, runs
alternating. Writes the "vision-encode" section of docs/benchmarks.md on a CPU with AVX-512,
"vision-encode-avx2" on one without (the encoder's kernels differ: engine/vision/vision_kernels.h);
for qwen2.5vl "vision-encode-qwen(-avx2)", for qwen2vl "vision-encode-qwen2vl(-avx2)", for idefics3
"vision-encode-smolvlm(-avx2)".

  bench/compare_vision.py --build build --mtmd-cli PATH [--family gemma3|qwen2.5vl|qwen2vl|idefics3] [--threads 2]
                          [--repeat 2] [--layers N] [--image WxH]

gemma3's projector is SigLIP-so400m's shape (896 pixels, 27 blocks of width 1152), made by
`tandem gen-model --mmproj` with a 640-wide output so that gemma-3-270m (make test-data) can
be llama-mtmd-cli's language model; the output width costs one small matrix. qwen2.5vl's is
Qwen2.5-VL-3B's vision tower (32 blocks of width 1280, windows of 112 pixels, full attention
every 8th block, 2048 out) at the image's own size, beside a one-block qwen2vl language model
2048 wide that gen-model writes for llama-mtmd-cli. qwen2vl's is Qwen2-VL-2B's (32 blocks of
width 1280, FFN 5120, every block attending to the whole image, 1536 out), likewise.
idefics3's is SmolVLM-256M's encoder
(SigLIP-B/16 at 512 px: 12 blocks of width 768, 4 x 4 pixel shuffle into 64 tokens a tile, 576
out) with the image resized to 1536 on its longer side and cut into tiles, beside a one-block
llama 576 wide with SmolVLM's image tokens. llama-mtmd-cli runs with its defaults (flash
attention on)."""
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


def section_key(family):
    name = {"gemma3": "", "qwen2.5vl": "-qwen", "qwen2vl": "-qwen2vl", "idefics3": "-smolvlm"}[family]
    return "vision-encode" + name + ("" if has_avx512() else "-avx2")


GEMMA3_TEXT = os.path.expanduser(os.path.join(os.environ.get("TANDEM_HOME", "~/.cache/tandem"), "models",
                                              "gemma-3-270m-q4_k_m.gguf"))


def test_png(path, w, h):
    from PIL import Image
    Image.frombytes("RGB", (w, h), bytes(((i * 37 + i // 7) % 251) for i in range(w * h * 3))).save(path)


def tandem_ms(build, mmproj, w, h, threads):
    out = subprocess.run([os.path.join(build, "bin", "vision_bench"), mmproj, "--image", f"{w}x{h}", "--threads",
                          str(threads), "--repeat", "1"], check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["encode_ms"]


def mtmd_ms(cli, text_model, template, mmproj, png, threads):
    p = subprocess.run([cli, "-m", text_model, "--mmproj", mmproj, "--image", png, "-p", "hi", "-n", "1", "-t",
                        str(threads), "--temp", "0", "--chat-template", template],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # One "batch encoding done" per encoder batch: idefics3 encodes each tile as its own.
    done = re.findall(r"batch encoding done in (\d+) ms", p.stdout)
    if p.returncode or not done:
        sys.exit("compare_vision: llama-mtmd-cli failed:\n" + p.stdout[-2000:])
    return float(sum(float(ms) for ms in done))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--mtmd-cli", required=True, help="llama-mtmd-cli (scripts/build-llama-server.sh builds it)")
    ap.add_argument("--family", choices=["gemma3", "qwen2.5vl", "qwen2vl", "idefics3"], default="gemma3")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--layers", type=int, default=0, help="encoder blocks (0: the real shape's, 27, 32 or 12)")
    ap.add_argument("--image", default="", help="WxH (default: 640x480; 644x476 for the Qwen-VL families)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    a = ap.parse_args()
    qwen, smolvlm = a.family in ("qwen2.5vl", "qwen2vl"), a.family == "idefics3"
    qwen2 = a.family == "qwen2vl"
    text_width = "1536" if qwen2 else "2048"  # Qwen2-VL-2B's language model, Qwen2.5-VL-3B's
    a.layers = a.layers or (32 if qwen else 12 if smolvlm else 27)
    a.image = a.image or ("644x476" if qwen else "640x480")
    w, h = (int(v) for v in a.image.split("x"))
    tandem = os.path.join(a.build, "bin", "tandem")
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        mmproj, png = os.path.join(tmp, "mmproj.gguf"), os.path.join(tmp, "image.png")
        if qwen:
            text_model, template = os.path.join(tmp, "qwen2vl.gguf"), "chatml"
            subprocess.run([tandem, "gen-model", "--arch", "qwen2vl", "--mmproj", "--mmproj-family", a.family,
                            "--mmproj-layers", str(a.layers), "-o", mmproj], check=True)
            subprocess.run([tandem, "gen-model", "--arch", "qwen2vl", "--embd", text_width, "--heads", "16", "--kv-heads",
                            "2", "--ff", "256", "--layers", "1", "--vocab", "1024", "--image-tokens", "qwen2vl",
                            "--untied", "-o", text_model], check=True)
        elif smolvlm:
            text_model, template = os.path.join(tmp, "smolvlm-text.gguf"), "chatml"
            subprocess.run([tandem, "gen-model", "--arch", "llama", "--mmproj", "--mmproj-layers", str(a.layers),
                            "--mmproj-image-size", "512", "--mmproj-patch", "16", "--mmproj-embd", "768",
                            "--mmproj-ff", "3072", "--mmproj-heads", "12", "--mmproj-merge", "4",
                            "--mmproj-text-embd", "576", "--mmproj-longest-edge", "1536", "-o", mmproj], check=True)
            subprocess.run([tandem, "gen-model", "--arch", "llama", "--embd", "576", "--heads", "9", "--kv-heads", "3",
                            "--ff", "256", "--layers", "1", "--vocab", "1024", "--image-tokens", "idefics3",
                            "--untied", "-o", text_model], check=True)
        else:
            text_model, template = GEMMA3_TEXT, "gemma"
            subprocess.run([tandem, "gen-model", "--arch", "gemma3", "--mmproj", "--mmproj-layers", str(a.layers),
                            "--mmproj-text-embd", "640", "-o", mmproj], check=True)
        test_png(png, w, h)
        ours, theirs = [], []
        for r in range(a.repeat):
            ours.append(tandem_ms(a.build, mmproj, w, h, a.threads))
            theirs.append(mtmd_ms(a.mtmd_cli, text_model, template, mmproj, png, a.threads))
            print(f"compare_vision: run {r + 1}: tandem {ours[-1]:.0f} ms, llama-mtmd-cli {theirs[-1]:.0f} ms",
                  flush=True)
    t, m = statistics.median(ours), statistics.median(theirs)
    key = section_key(a.family)
    begin, end = f"<!-- {key}:begin -->", f"<!-- {key}:end -->"
    cmd = (f"python3 bench/compare_vision.py --build build --mtmd-cli PATH/llama-mtmd-cli --family {a.family} "
           f"--threads {a.threads} --repeat {a.repeat} --layers {a.layers} --image {a.image}")
    title = ("the vision encoder against libmtmd" +
             (", Qwen2-VL" if qwen2 else ", Qwen2.5-VL" if qwen else ", SmolVLM" if smolvlm else "") +
             ("" if has_avx512() else ", a CPU without AVX-512"))
    if qwen2:
        shape = (f"Synthetic qwen2vl projector of Qwen2-VL-2B's vision tower ({a.layers} blocks of width 1280, FFN "
                 "5120, every block attending to the whole image), f16, from `tandem gen-model --arch qwen2vl "
                 f"--mmproj --mmproj-family qwen2vl`; a {w}x{h} image at its own size. llama-mtmd-cli with its "
                 "defaults (flash attention on).")
    elif qwen:
        shape = (f"Synthetic qwen2.5vl projector of Qwen2.5-VL-3B's vision tower ({a.layers} blocks of width 1280, "
                 "windows of 112 pixels, full attention every 8th block), f16, from `tandem gen-model --arch "
                 f"qwen2vl --mmproj`; a {w}x{h} image at its own size. llama-mtmd-cli with its defaults (flash "
                 "attention on).")
    elif smolvlm:
        shape = (f"Synthetic idefics3 projector of SmolVLM-256M's encoder (SigLIP-B/16 at 512 pixels: {a.layers} "
                 "blocks of width 768, 1,024 patches a tile, 4 x 4 pixel shuffle into 64 tokens), f16, from `tandem "
                 f"gen-model --arch llama --mmproj`; a {w}x{h} image resized to 1536 on its longer side: 3 x 3 tiles "
                 "and the overview. llama-mtmd-cli with its defaults (flash attention on).")
    else:
        shape = (f"Synthetic gemma3 projector of SigLIP-so400m's shape ({a.layers} blocks, 896 pixels: 4,096 "
                 f"patches, 256 tokens), f16, from `tandem gen-model --mmproj`; a {w}x{h} image.")
    lines = [begin, f"### Image encode time: {title} (issue 55)", "",
             f"{cpu_name()}, {a.threads} threads, {time.strftime('%Y-%m-%d')}. {shape} Medians of {a.repeat} runs, "
             "alternating. libmtmd's figure is its own \"batch encoding done\" time, summed over its batches "
             "(preprocessing included); "
             "Tandem's is the encoder's forward pass (preprocessing, tens of milliseconds, apart).", "",
             "| encoder | encode (ms) | runs (ms) |", "|---|---:|---|",
             f"| Tandem | {t:,.0f} | {', '.join(f'{v:,.0f}' for v in ours)} |",
             f"| llama-mtmd-cli | {m:,.0f} | {', '.join(f'{v:,.0f}' for v in theirs)} |", "",
             f"Tandem / libmtmd speed: **{m / t:.2f}x** (target >= 1.2x: {'met' if m / t >= 1.2 else 'not met'})."]
    lines += section_tail(load_before, os.getloadavg()[0], cmd, end)
    text = "\n".join(lines)
    print(text)
    write_section(text, begin, end, a.out)


if __name__ == "__main__":
    main()
