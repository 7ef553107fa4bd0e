"""Workload: a loop that calls a tiny function, beside a long loop with no
calls: ``size`` rounds of spin(4000) (about 60% of the time) and 2,500
calls of tiny() from calls(), tests/programs/leaf_calls.py's (whose test,
tests/py/profiler/test_leaf_shares.py, profiles the same). A sampler whose
walks of the short-lived tiny() frame tear, and which keeps the walks that
do not, shows tiny() at a fraction of its time (bench/profiler_cost.py
compares the leaf shares with every sample parked ahead)."""
import os
import sys

from _harness import main

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "programs"))
import leaf_calls  # noqa: E402


def make(size, args):
    def run():
        leaf_calls.rounds(size)
    return run


if __name__ == "__main__":
    sys.exit(main("short_leaf", make, 100))
