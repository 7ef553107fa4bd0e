"""How fast can stackwatch's sampler go? Profiles a thread spinning at the
bottom of a 50-deep Python stack at one rate for a while and prints the
sampler's counters as JSON (bench/run.py runs it at rising rates):

    python bench/profiler_rate.py --rate 20000 [--seconds 1] [--depth 50] [--mode wall]

A tick is "missed" when the sampler started a round more than one interval
late (the rounds it skipped); missed_off_cpu, those of stalls over 2 ms
(the sampler kept off its CPU); busy_ns is the time spent in rounds.
"""
import argparse
import json
import sys
import time


def recurse(n, seconds):
    """n frames of recurse() (plus this script's two), then spin."""
    if n <= 1:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
        return 0
    return recurse(n - 1, seconds) + 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=int, required=True)
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--depth", type=int, default=50)
    p.add_argument("--mode", choices=("wall", "cpu"), default="wall")
    args = p.parse_args()
    from stackwatch.profiler import Profiler
    recurse(args.depth, 0.05)   # warm up
    prof = Profiler(rate=args.rate, mode=args.mode)
    with prof:
        recurse(args.depth, args.seconds)
    st = prof.stats()
    tree = prof.tree()
    depth = 0
    node = tree
    while node["children"]:
        node = max(node["children"], key=lambda c: c["count"])
        depth += 1
    out = {k: st[k] for k in ("interval_ns", "ticks", "missed", "missed_off_cpu", "busy_ns", "samples", "failed", "stored")}
    out.update(rate=args.rate, deepest_stack=depth, python=sys.version.split()[0])
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
