"""A known program for the USDT probe tests: waits until the probes named
on the command line are attached, then runs a known call tree, line events,
a GC and unicode-named functions, and prints what it did as JSON.

Usage: python probe_target.py PROBE[,PROBE...]

It prints "ready" and waits for "go" on stdin: the test sends it once
bpftrace has attached every probe (its BEGIN probe has run), so no time is
spent waiting for an attach that failed (wait_until_attached, which
objects_target.py uses too).
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


def wait_until_attached(wanted):
    """Says "ready", waits for the test's "go" (sent once bpftrace has
    attached every probe: its BEGIN probe runs only then) and checks that
    the probes' semaphores are raised (the kernel raises them when it
    registers the uprobes, before BEGIN). Returns an error or None."""
    stackwatch.probes.watch(0.005)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return "the test never said go"
    deadline = time.monotonic() + 5
    while not all(_native._probe_semaphore(p) for p in wanted):
        if time.monotonic() > deadline:
            return "probes never attached"
        time.sleep(0.001)
    _native._probes_poll()            # apply now rather than at the next poll
    return None


def main():
    error = wait_until_attached(sys.argv[1].split(","))
    if error:
        print(json.dumps({"error": error}), flush=True)
        return 1
    for i in range(100):
        mid(i)
    for _ in range(7):
        ünïcode_fn()
    gc.collect()
    stackwatch.probes.unwatch()
    print(json.dumps({"optimize": sys.flags.optimize, "line_of_leaf": leaf.__code__.co_firstlineno + 1,
                      "line_of_mid": mid.__code__.co_firstlineno + 1}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
