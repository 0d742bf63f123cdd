"""Clients that drop SSE streams abort their requests: after bursts of dropped curl streams
nothing runs and no KV block is held outside the prefix cache."""
import json
import subprocess


def test_dropped_sse_streams_abort(server):
    before = server.metrics()["tandem:requests_cancelled_total"]
    body = json.dumps({"prompt": "Count: 1, 2, 3,", "max_tokens": 2000, "ignore_eos": True, "stream": True})
    for burst in range(3):
        procs = [subprocess.Popen(["curl", "-sN", "--max-time", "1.5", "-H", "content-type: application/json",
                                   "-d", body, server.url + "/v1/completions"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(24)]
        for p in procs:
            p.wait()
        m = server.wait_idle()
        assert m["tandem:num_requests_running"] == 0, m
        assert m["tandem:num_requests_waiting"] == 0, m
        assert m["tandem:kv_blocks_used"] == 0, m
        assert m["tandem:requests_in_flight"] == 0, m
    assert server.metrics()["tandem:requests_cancelled_total"] >= before + 3 * 24
