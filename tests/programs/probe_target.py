"""A known program for the USDT probe tests: waits until the probes named
on the command line are attached, then runs a known call tree, line events,
a GC and unicode-named functions, and prints what it did as JSON.

Usage: python probe_target.py PROBE[,PROBE...]
"""
import gc
import json
import sys
import time

import stackwatch
from stackwatch import _native


def leaf(i):
    return i


def mid(i):
    return leaf(i) + leaf(i)


def ünïcode_fn():
    return 1


def main():
    wanted = sys.argv[1].split(",")
    stackwatch.probes.watch(0.005)
    print("ready", flush=True)
    deadline = time.monotonic() + 20
    while not all(_native._probe_semaphore(p) for p in wanted):
        if time.monotonic() > deadline:
            print(json.dumps({"error": "probes never attached"}), flush=True)
            return 1
        time.sleep(0.005)
    # The kernel raises a semaphore when the uprobe is registered, a moment
    # before bpftrace's program is attached to it: let it settle.
    time.sleep(0.3)
    _native._probes_poll()            # apply now rather than at the next poll
    for i in range(100):
        mid(i)
    for _ in range(7):
        ünïcode_fn()
    gc.collect()
    stackwatch.probes.unwatch()
    print(json.dumps({"optimize": sys.flags.optimize, "line_of_leaf": leaf.__code__.co_firstlineno + 1}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
