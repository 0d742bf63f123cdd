"""Shared by the bench runners: put a generated section into docs/benchmarks.md between its
markers (replacing the previous one), name the CPU the figures were taken on, and start the
servers they measure (a free port, waiting for /health)."""
import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kernel_table():
    """The kernel table Tandem's CPU engine runs on this machine, by engine/kernels/isa.cpp's rule
    (avx512, avx512f, avx2 or generic): comparisons keep one section per table."""
    flags = set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = set(line.partition(":")[2].split())
                break
    except OSError:
        pass
    if {"avx512f", "avx512bw", "avx512vl"} <= flags:
        return "avx512" if "avx512_vnni" in flags else "avx512f"
    return "avx2" if {"avx2", "fma", "f16c"} <= flags else "generic"


def cpu_name():
    """The CPU's model name, with its family and model numbers: a VM's name alone ("AMD EPYC")
    can stand for several generations."""
    fields = {}
    try:
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    if "model name" not in fields:
        return platform.processor() or "unknown CPU"
    if "cpu family" in fields and "model" in fields:
        return f"{fields['model name']} (family {fields['cpu family']}, model {fields['model']})"
    return fields["model name"]


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port, proc, what, timeout=180):
    """Until GET /health on the port answers 200; exits the runner (naming it and `what`) when
    proc exits first or timeout seconds pass."""
    runner = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    t_end = time.time() + timeout
    while time.time() < t_end:
        if proc.poll() is not None:
            sys.exit(f"{runner}: {what} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.3)
    sys.exit(f"{runner}: {what} not healthy after {timeout} s")


def stop_server(proc):
    """Ends a server a runner started: SIGTERM, then SIGKILL if it is not gone in 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def write_section(section, begin, end, path=os.path.join(ROOT, "docs", "benchmarks.md")):
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    if begin in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: section, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    with open(path, "w") as f:
        f.write(text)


def run_json(what, args):
    """Runs a benchmark binary (progress on its stderr) and returns the JSON object it prints
    as its last line of stdout."""
    print(f"{what}: {' '.join(args)} (progress below)", flush=True)
    out = subprocess.run(args, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def publish(name, res, plot, markdown, begin, end):
    """Writes docs/bench/<name>.json and <name>.png (plot(res, path)), and the section
    markdown(res, cmd) into docs/benchmarks.md between its markers; prints the section."""
    bench_dir = os.path.join(ROOT, "docs", "bench")
    os.makedirs(bench_dir, exist_ok=True)
    with open(os.path.join(bench_dir, name + ".json"), "w") as f:
        json.dump(res, f, indent=2)
    plot(res, os.path.join(bench_dir, name + ".png"))
    section = markdown(res, f"make bench  (or: bench/{os.path.basename(sys.argv[0])})")
    write_section(section, begin, end)
    print(section)


def met(ok):
    """A target's verdict for the "Targets (issue N)" lines."""
    return "met" if ok else "not met"


def probe_table(heading, runs, probe_label, figure_label, figure_key):
    """Markdown rows: per run (rep or round), the compute probe's figure (bench/compute_probe.h,
    JSON key extra_token_cost) above the paired figure it explains (figure_key, a ratio)."""
    return ["| " + heading + " | " + " | ".join(str(i + 1) for i in range(len(runs))) + " |",
            "|---|" + "---:|" * len(runs),
            f"| {probe_label} | " + " | ".join(f"{r['extra_token_cost']:.2f}" for r in runs) + " |",
            f"| {figure_label} | " + " | ".join(f"{r[figure_key]:.2f}x" for r in runs) + " |"]


def section_tail(load_before, load_after, command, end):
    """The lines that close a comparison's section: the machine load around the runs and the
    command that reproduces them."""
    return ["", f"Machine load (1-minute average) before / after: {load_before:.1f} / {load_after:.1f}.", "",
            "Reproduce:", "", "```", command, "```", "", end]
