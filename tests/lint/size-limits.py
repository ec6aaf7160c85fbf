#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Lint: no C source file over MAX_FILE lines, no function over MAX_FUNC.

Usage: size-limits.py ROOT
Walks the C sources (.c, .h) under ROOT/{core,index,fs,tests}. A function
is a brace block that opens in column 0 after a line that names it. Prints
each offender as FILE:LINE and exits 1 when there is one; 0 otherwise.
The limits keep files and functions small enough to review whole; raising
one needs a reason written next to the constant.
"""
import os
import re
import sys

MAX_FILE = 1200
MAX_FUNC = 100
DIRS = ("core", "index", "fs", "tests")

NAME = re.compile(r"^[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\(")


def strip(line):
    """A line without string and character literals and // comments."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//")[0]


def check(path, out):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) > MAX_FILE:
        out.append(f"{path}:1: file has {len(lines)} lines (max {MAX_FILE})")
    depth, start, name, in_comment = 0, None, None, False
    for i, raw in enumerate(lines):
        s = strip(raw)
        # Drop /* ... */ comments, also across lines.
        buf = ""
        j = 0
        while j < len(s):
            if in_comment:
                k = s.find("*/", j)
                if k < 0:
                    j = len(s)
                else:
                    in_comment, j = False, k + 2
            else:
                k = s.find("/*", j)
                if k < 0:
                    buf += s[j:]
                    j = len(s)
                else:
                    buf += s[j:k]
                    in_comment, j = True, k + 2
        if depth == 0 and buf.startswith("{"):
            start, name = i, None
            for back in range(i - 1, max(i - 8, -1), -1):
                m = NAME.match(lines[back])
                if m:
                    name = m.group(1)
                    break
        depth += buf.count("{") - buf.count("}")
        if depth == 0 and start is not None:
            n = i - start + 1
            if name and n > MAX_FUNC:
                out.append(f"{path}:{start + 1}: function {name} has "
                           f"{n} lines (max {MAX_FUNC})")
            start = None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    out = []
    for d in DIRS:
        for dirpath, dirnames, files in os.walk(os.path.join(root, d)):
            dirnames.sort()
            for fn in sorted(files):
                if fn.endswith((".c", ".h")):
                    check(os.path.join(dirpath, fn), out)
    for line in out:
        print(line)
    if out:
        print(f"size-limits: {len(out)} over the limits")
        return 1
    print("size-limits: every file and function within the limits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
