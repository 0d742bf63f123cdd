#!/usr/bin/env python3
"""Every path a document names exists: docs/*.md, README.md and the other Markdown files of
the tree are scanned for repository paths (words under the tree's top-level folders, with
{a,b} alternatives and * patterns expanded), and each must match a file or folder.

Usage: scripts/check-doc-paths.py [repository root]   (exit 1 listing the stale ones)
"""
import glob
import itertools
import os
import re
import subprocess
import sys

ROOTS = ("actors", "bench", "cli", "cmake", "config", "deploy", "docs", "engine", "examples", "gpu", "include",
         "net", "scripts", "tests")
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./{},*+-]*[\w*}])" % "|".join(ROOTS))


def expand(path):
    """engine/x.{h,cpp} -> engine/x.h, engine/x.cpp (several brace groups multiply)."""
    parts = re.split(r"(\{[^{}]*\})", path)
    choices = [p[1:-1].split(",") if p.startswith("{") else [p] for p in parts]
    return ["".join(c) for c in itertools.product(*choices)]


def generated(root, path):
    """A path the tree ignores (.gitignore) is a build output a document may name, such as
    gpu/.bin.tgz, which exists only after the step that makes it."""
    # A folder pattern ("/gpu/.bin/") matches a path that is absent only when named as a folder.
    return any(subprocess.run(["git", "check-ignore", "-q", "--no-index", p], cwd=root).returncode == 0
               for p in (path, path + "/"))


def exists(root, doc_dir, path):
    """A file or folder from the root or from the document's folder (Markdown links), a
    file's stem ("actors/streamer" for streamer.h and streamer.cpp), or a generated path."""
    path = path.rstrip(".")
    for base in (root, os.path.join(root, doc_dir)):
        full = os.path.join(base, path)
        if glob.glob(full) if "*" in path else os.path.exists(full):
            return True
        if glob.glob(glob.escape(full) + ".*"):
            return True
    return generated(root, path)


def markdown_files(root):
    out = subprocess.run(["git", "ls-files", "*.md"], cwd=root, capture_output=True, text=True).stdout.split()
    # Agent prompts, seeds and issue texts are not the tree's documents.
    return [f for f in out if not f.startswith(("tests/data/",))]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    stale = []
    for doc in markdown_files(root):
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for m in PATH.finditer(line):
                    for p in expand(m.group(1)):
                        if not exists(root, os.path.dirname(doc), p):
                            stale.append(f"{doc}:{n}: {p}")
    for s in stale:
        print(s)
    print(f"{len(stale)} stale path(s)" if stale else "every path the documents name exists")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
