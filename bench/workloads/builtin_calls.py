"""Workload: calls of builtin (C) functions and methods from a Python loop:
each of ``size`` iterations makes six C calls (len, min, abs, str.upper,
dict.get, list.append) and no Python call."""
import sys

from _harness import main


def run(n):
    d = {"a": 1}
    out = []
    s = "abc"
    total = 0
    for i in range(n):
        total += len(s) + min(i, 3) + abs(-i)
        s.upper()
        total += d.get("a", 0)
        out.append(i)
    return total + len(out)


def make(size, args):
    return lambda: run(size)


if __name__ == "__main__":
    sys.exit(main("builtin_calls", make, 200_000))
