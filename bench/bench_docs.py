"""Shared by the bench runners: put a generated section into docs/benchmarks.md between its
markers (replacing the previous one), and name the CPU the figures were taken on."""
import os
import platform
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def write_section(section, begin, end, path=os.path.join(ROOT, "docs", "benchmarks.md")):
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    if begin in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: section, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    with open(path, "w") as f:
        f.write(text)
