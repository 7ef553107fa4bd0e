"""Workload: a loop that calls a tiny function, beside a long loop with no
calls: ``size`` rounds of spin(4000) (about 60% of the time) and 2,500
calls of tiny() from calls(). A sampler whose walks of the short-lived
tiny() frame tear, and which keeps the walks that do not, shows tiny()
at a fraction of its time (bench/profiler_cost.py compares the leaf
shares with every sample parked ahead)."""
import sys

from _harness import main


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


def make(size, args):
    def run():
        for _ in range(size):
            spin(4000)
            calls(2500)
    return run


if __name__ == "__main__":
    sys.exit(main("short_leaf", make, 100))
