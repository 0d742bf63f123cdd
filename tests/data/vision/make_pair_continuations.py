#!/usr/bin/env python3
"""Writes pair_continuations.json: what llama.cpp (llama-server --mmproj, which runs libmtmd,
flash attention off) answers to chat turns with one image on small synthetic pairs of each
vision family that `tandem gen-model` writes (vision_images.py's PAIRS: a language model
whose generated vocabulary holds the family's image tokens, and a projector into its width):
the prompt's token count, the first token's 8 best log-probabilities and the greedy
continuation, token by token (bytes, and the margin of the best score over the second's).
tests/python/test_vision.py replays them through `tandem serve`.

    tests/data/vision/make_pair_continuations.py TANDEM LLAMA_SERVER

The images come from formulas (vision_images.py), so the test needs neither them nor
llama.cpp. What each family does to the image's tokens shows in these numbers: gemma3's
bidirectional attention inside the image, idefics3's slices and tags, qwen2.5-vl's
multimodal RoPE positions.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python"))
from mtmd_server import complete, llama_server  # noqa: E402
from vision_images import PAIR_CASES, PAIR_PROMPT_TEMPLATE, PAIRS, png_of  # noqa: E402


def ask(port, case):
    answer = complete(port, PAIR_PROMPT_TEMPLATE.format(case["prompt"]), png_of(case["image"]), case["max_tokens"],
                      cache_prompt=False)
    probs = answer["completion_probabilities"]
    # Tokens by their bytes: a token that ends inside a UTF-8 character prints as U+FFFD, and
    # llama-server joins the tokens of one character into one entry.
    first = [[t["bytes"], round(t["logprob"], 4)] for t in probs[0]["top_logprobs"]]
    tokens = [[p["bytes"], round(p["top_logprobs"][0]["logprob"] - p["top_logprobs"][1]["logprob"], 4)]
              for p in probs]
    return {**case, "prompt_tokens": answer["tokens_evaluated"], "llama_cpp": answer["content"],
            "llama_cpp_first": first, "llama_cpp_tokens": tokens}


def main():
    tandem, server = sys.argv[1], sys.argv[2]
    work = Path(tempfile.mkdtemp())
    out = []
    port = 18778
    for family, pair in PAIRS.items():
        text_model, projector = work / f"{family}-text.gguf", work / f"{family}-mmproj.gguf"
        subprocess.run([tandem, "gen-model", *pair["text"], "--out", str(text_model)], check=True, capture_output=True)
        subprocess.run([tandem, "gen-model", *pair["projector"], "--out", str(projector)], check=True,
                       capture_output=True)
        with llama_server(server, text_model, projector, port):
            for case in (c for c in PAIR_CASES if c["family"] == family):
                out.append(ask(port, case))
                c = out[-1]
                print(family, c["image"], repr(c["prompt"]), c["prompt_tokens"], "->", repr(c["llama_cpp"]))
    (HERE / "pair_continuations.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
