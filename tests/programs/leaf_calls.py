"""A program whose time is split between a short leaf call and its caller
(issue 20: a sampler that keeps its walks that do not tear, and redoes
the torn ones later, under-counts short leaves). Each round runs spin()
(a loop without calls) and then calls(), a loop calling tiny(), whose
every call lasts well under a microsecond:

    python leaf_calls.py [ROUNDS]
    python leaf_calls.py --compare MIN_SAMPLES [BASELINE]

ROUNDS rounds (default 200) of spin(SPIN) and calls(CALLS). With
--compare, chunks of 500 rounds are profiled in this process (the
profiler's Python API, at 1 kHz), in turn with the default rule and with
every walk parked ahead (STACKWATCH_TEST_PARK_AHEAD=1: each sample the
stack at the instant the thread took the signal, whatever it was), until
each kind has MIN_SAMPLES samples whose leaf is one of the functions
here; printed as JSON: {kind: {"leaves": {function: samples}, "stats":
the profilers' counts summed}} (tests/py/profiler/test_leaf_shares.py).
BASELINE: the default's chunks with STACKWATCH_TEST_PARK_AHEAD=BASELINE
("never": parked only after a torn walk, the rule before issue 20's fix).
Its stack is shallow on purpose: under pytest every walk went to the
parked path (a caller that does not hold its callee, pystack.c
callees_held), which hides the unparked walks' bias."""
import json
import os
import sys
import threading
import time

SPIN = 4000
CALLS = 2500
CHUNK = 500


def tiny(x):
    return x + 1


def calls(n):
    t = 0
    for _ in range(n):
        t = tiny(t)
    return t


def spin(n):
    t = 0
    for i in range(n):
        t += i * i
    return t


def rounds(n):
    for _ in range(n):
        spin(SPIN)
        calls(CALLS)


def leaf_counts(prof, into):
    """Adds this thread's samples whose leaf is spin, calls or tiny, by
    function, to into."""
    try:
        stack = [prof.tree(threading.get_ident())]
    except KeyError:
        return
    while stack:
        node = stack.pop()
        if node.get("self") and node["name"] in ("spin", "calls", "tiny") and node["filename"] == __file__:
            into[node["name"]] = into.get(node["name"], 0) + node["self"]
        stack.extend(node["children"])


def compare(min_samples, baseline=None, seconds=90):
    from stackwatch.profiler import Profiler
    out = {kind: {"leaves": {}, "stats": {}} for kind in ("default", "ahead")}
    rounds(50)   # (warm)
    end = time.perf_counter() + seconds
    i = 0
    while min(sum(o["leaves"].values()) for o in out.values()) < min_samples and time.perf_counter() < end:
        kind = ("default", "ahead")[i % 2]
        i += 1
        if kind == "ahead" or baseline:
            # (read when a profiler starts)
            os.environ["STACKWATCH_TEST_PARK_AHEAD"] = "1" if kind == "ahead" else baseline
        else:
            os.environ.pop("STACKWATCH_TEST_PARK_AHEAD", None)
        with Profiler(interval="1ms") as p:
            rounds(CHUNK)
        leaf_counts(p, out[kind]["leaves"])
        for k, v in p.stats().items():
            if isinstance(v, int) and not isinstance(v, bool):
                out[kind]["stats"][k] = out[kind]["stats"].get(k, 0) + v
    print(json.dumps(out))


def main():
    if sys.argv[1:2] == ["--compare"]:
        compare(int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        rounds(int(sys.argv[1]) if len(sys.argv) > 1 else 200)


if __name__ == "__main__":
    main()
