#!/usr/bin/env python3
"""Writes continuations.json: llama.cpp's greedy continuations (llama-server with --mmproj,
which runs libmtmd, flash attention off) of chat turns with one image, on gemma-3-270m (make
test-data) and projectors `tandem gen-model --mmproj` makes from the arguments recorded with
each case; tests/python/test_vision.py replays them through `tandem serve` and compares.

    tests/data/vision/make_continuations.py TANDEM LLAMA_SERVER [GEMMA_GGUF]

The images' pixels come from a formula (pixels() below, which the test shares), so neither
the images nor llama.cpp are needed to run the test.
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python"))
from mtmd_server import complete, llama_server  # noqa: E402
from vision_images import CASES, PROMPT_TEMPLATE, png_of  # noqa: E402


def main():
    tandem, server = sys.argv[1], sys.argv[2]
    gemma = sys.argv[3] if len(sys.argv) > 3 else os.path.expanduser("~/.cache/tandem/models/gemma-3-270m-q4_k_m.gguf")
    work = Path(tempfile.mkdtemp())
    out = []
    projectors = {}
    for case in CASES:
        key = tuple(case["projector"])
        if key not in projectors:
            path = work / f"mmproj{len(projectors)}.gguf"
            subprocess.run([tandem, "gen-model", "--mmproj", "--arch", "gemma3", "--out", str(path), *key],
                           check=True, capture_output=True)
            projectors[key] = path
    port = 18777
    for key, path in projectors.items():
        with llama_server(server, gemma, path, port):
            for case in CASES:
                if tuple(case["projector"]) != key:
                    continue
                answer = complete(port, PROMPT_TEMPLATE.format(case["prompt"]), png_of(case["image"]), case["max_tokens"])
                text = answer["content"]
                first = [[t["token"], round(t["logprob"], 4)] for t in answer["completion_probabilities"][0]["top_logprobs"]]
                out.append({**case, "llama_cpp": text, "llama_cpp_first": first})
                print(case["image"], repr(case["prompt"]), "->", repr(text))
    (HERE / "continuations.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
