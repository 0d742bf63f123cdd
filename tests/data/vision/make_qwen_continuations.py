#!/usr/bin/env python3
"""Writes qwen_continuations.json: what llama.cpp (llama-server --mmproj, which runs libmtmd,
flash attention off) answers to chat turns with one image on a small Qwen2.5-VL pair that
`tandem gen-model` writes (a qwen2vl language model with Qwen2-VL's image tokens, and a
qwen2.5vl projector): the prompt's token count, the first token's 8 best log-probabilities
and the greedy continuation, token by token (bytes, and the margin of the best score over the
second's). tests/python/test_vision.py replays them through `tandem serve`.

    tests/data/vision/make_qwen_continuations.py TANDEM LLAMA_SERVER

The images come from formulas (vision_images.py), so the test needs neither them nor
llama.cpp. Multimodal RoPE shows in these numbers: the image's tokens turn by their grid
positions and the text after it by positions max(w, h) past the image's start.
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python"))
from vision_images import QWEN_CASES, QWEN_PROJECTOR, QWEN_PROMPT_TEMPLATE, QWEN_TEXT_MODEL, png_of  # noqa: E402


def main():
    tandem, server = sys.argv[1], sys.argv[2]
    work = Path(tempfile.mkdtemp())
    text_model, projector = work / "qwen2vl.gguf", work / "qwen25vl-mmproj.gguf"
    subprocess.run([tandem, "gen-model", *QWEN_TEXT_MODEL, "--out", str(text_model)], check=True, capture_output=True)
    subprocess.run([tandem, "gen-model", *QWEN_PROJECTOR, "--out", str(projector)], check=True, capture_output=True)
    port = 18778
    proc = subprocess.Popen([server, "-m", str(text_model), "--mmproj", str(projector), "-t", "2", "-fa", "off",
                             "--port", str(port)], env={**os.environ, "LLAMA_MEDIA_MARKER": "<__media__>"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = []
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except Exception:
                time.sleep(0.5)
        for case in QWEN_CASES:
            img = base64.b64encode(png_of(case["image"])).decode()
            body = {"prompt": {"prompt_string": QWEN_PROMPT_TEMPLATE.format(case["prompt"]), "multimodal_data": [img]},
                    "n_predict": case["max_tokens"], "temperature": 0, "n_probs": 8, "cache_prompt": False}
            req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=300) as r:
                answer = json.loads(r.read())
            probs = answer["completion_probabilities"]
            # Tokens by their bytes: a token that ends inside a UTF-8 character prints as U+FFFD.
            first = [[t["bytes"], round(t["logprob"], 4)] for t in probs[0]["top_logprobs"]]
            # Each generated token with the gap between the two best scores where it was chosen.
            tokens = [[p["bytes"], round(p["top_logprobs"][0]["logprob"] - p["top_logprobs"][1]["logprob"], 4)]
                      for p in probs]
            out.append({**case, "prompt_tokens": answer["tokens_evaluated"], "llama_cpp": answer["content"],
                        "llama_cpp_first": first, "llama_cpp_tokens": tokens})
            print(case["image"], repr(case["prompt"]), answer["tokens_evaluated"], "->", repr(answer["content"]))
    finally:
        proc.terminate()
        proc.wait()
    (HERE / "qwen_continuations.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
