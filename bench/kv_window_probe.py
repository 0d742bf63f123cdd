#!/usr/bin/env python3
"""What a sliding-window sequence holds in the KV pools (docs/architecture.md, "Freeing what
the window passed"): `tandem serve` on the real gemma-3-270m (scripts/fetch-gemma3.sh) with
--max-model-len 8192, one greedy completion of a ~8,100-token prompt streamed to 8,192 tokens,
and /metrics read after every streamed token: the most global and local blocks held while it
decodes, and the pools' sizes.

Usage: python3 bench/kv_window_probe.py [--binary build/bin/tandem] [--items 740] [extra serve flags]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_bench import metrics  # noqa: E402

HOME = os.environ.get("TANDEM_HOME", os.path.expanduser("~/.cache/tandem"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLORS = ["red", "green", "blue", "amber", "violet", "silver", "black", "white"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "tandem"))
    ap.add_argument("--model", default=os.path.join(HOME, "models", "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--items", type=int, default=740)
    args, extra = ap.parse_known_args()
    proc = subprocess.Popen([args.binary, "serve", "--port", "0", "--threads", "2", "--model", args.model,
                             "--max-model-len", "8192", "--log-level", "warn", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port, ready = [None], threading.Event()

    def pump():
        for line in proc.stdout:
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                port[0] = int(m.group(1))
            if "ready:" in line:
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        if not ready.wait(120) or port[0] is None:
            raise SystemExit("tandem serve did not start")
        url = f"http://127.0.0.1:{port[0]}"
        prompt = " ".join(f"Box {3000 + i} holds a {COLORS[(i * 7 + 3) % 8]} stone." for i in range(args.items))
        body = {"model": "g", "prompt": prompt, "max_tokens": 64, "temperature": 0, "stream": True,
                "stream_options": {"include_usage": True}}
        most, usage, t0 = (0, 0), None, time.time()
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=600) as r:
            for line in r.iter_lines():
                if not line.startswith("data: {"):
                    continue
                event = json.loads(line[len("data: "):])
                if event.get("usage"):
                    usage = event["usage"]
                m = metrics(url)
                if m["tandem:kv_blocks_used"] > 0:
                    most = max(most, (int(m["tandem:kv_blocks_used"]), int(m.get("tandem:kv_local_blocks_used", 0))))
        m = metrics(url)
        if usage:
            print(f"prompt tokens {usage['prompt_tokens']}, generated {usage['completion_tokens']}")
        print(f"pools: {int(m['tandem:kv_blocks_total'])} global blocks, "
              f"{int(m.get('tandem:kv_local_blocks_total', 0))} local blocks")
        print(f"held while decoding, at most: {most[0]} global blocks, {most[1]} local blocks "
              f"({time.time() - t0:.0f} s)")
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
