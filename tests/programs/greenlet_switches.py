"""Greenlets that switch to each other from inside nested calls, with CPU
work at every level, sampled and traced (`run --sample --events tasks`) by
tests/py/tracer/test_sample_vs_trace.py: each greenlet's stack is rooted at
its run function (worker), not at <module>. Three workers in a ring: each
one, two to four calls down (one of them a generator it iterates), works,
switches to the next, and works again when switched back; the main
greenlet starts them and resumes those whose next one has ended.

    python greenlet_switches.py [ROUNDS]
"""
import sys

import greenlet

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 120
WORKERS = []


def work(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def leaf(k):
    work(1600)
    nxt = WORKERS[(k + 1) % len(WORKERS)]
    if not nxt.dead:
        nxt.switch((k + 1) % len(WORKERS))   # from here, back here later
    return work(800)


def descend(depth, k):
    work(400)
    if depth:
        return descend(depth - 1, k) + 1
    return leaf(k)


def steps(k):
    for depth in range(3):
        work(400)
        yield descend(depth, k)


def worker(k):
    total = 0
    for _ in range(ROUNDS):
        for x in steps(k):
            total += x
    return total


WORKERS.extend(greenlet.greenlet(worker) for _ in range(3))
while not all(g.dead for g in WORKERS):
    for k, g in enumerate(WORKERS):
        if not g.dead:
            g.switch(k)
