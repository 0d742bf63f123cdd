"""llama-server with a projector (--mmproj, libmtmd, flash attention off) for the scripts here
that record llama.cpp's answers: started, waited on, asked through /completion, stopped."""
import base64
import contextlib
import json
import os
import subprocess
import time
import urllib.request


@contextlib.contextmanager
def llama_server(server, model, projector, port):
    """Runs llama-server on 127.0.0.1:port until the block ends; yields once /health answers."""
    proc = subprocess.Popen([server, "-m", str(model), "--mmproj", str(projector), "-t", "2", "-fa", "off", "--port",
                             str(port)], env={**os.environ, "LLAMA_MEDIA_MARKER": "<__media__>"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except Exception:
                time.sleep(0.5)
        else:
            raise RuntimeError(f"llama-server on port {port} did not come up")
        yield
    finally:
        proc.terminate()
        proc.wait()


def complete(port, prompt_string, png, n_predict, **fields):
    """/completion of a prompt holding one <__media__> marker, greedy, with 8 log-probabilities
    a token; returns llama-server's JSON answer."""
    body = {"prompt": {"prompt_string": prompt_string, "multimodal_data": [base64.b64encode(png).decode()]},
            "n_predict": n_predict, "temperature": 0, "n_probs": 8, **fields}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())
