"""What native frames cost: a workload's wall time plain, under the
profiler at 1 kHz without and with native=True, in alternating rounds
(median of each), printed as a table and as JSON on the last line:

    python bench/profiler_native.py [--rounds 5] [--rate 1000]

Workloads: "python" spins at the bottom of a 50-deep Python stack (the
native stack is ~3 C frames per Python frame on 3.9/3.10, fewer on 3.11+);
"zlib" compresses in C (deep native frames, few Python ones). The cost of
native mode lands on the sampled thread: per sample, one signal, one
unwind of its C stack (libgcc's .eh_frame unwinder) and the wait while the
sampler reads its Python stack.
"""
import argparse
import json
import os
import statistics
import sys
import time
import zlib


def recurse(n, work):
    if n <= 1:
        return work()
    return recurse(n - 1, work) + 1


def spin():
    x = 0
    for i in range(2_000_000):
        x += i
    return x


DATA = os.urandom(1 << 18)


def compress():
    for _ in range(30):
        zlib.compress(DATA, 6)
    return 0


WORKLOADS = {"python": lambda: recurse(50, spin), "zlib": compress}


def timed(fn, profiler):
    t0 = time.perf_counter()
    if profiler is None:
        fn()
        return time.perf_counter() - t0, None
    with profiler as p:
        fn()
    return time.perf_counter() - t0, p.stats()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rate", type=int, default=1000)
    args = ap.parse_args()
    from stackwatch.profiler import Profiler
    configs = {"plain": lambda: None, "python-only": lambda: Profiler(rate=args.rate),
               "native": lambda: Profiler(rate=args.rate, native=True)}
    out = {"python": sys.version.split()[0], "rate": args.rate, "workloads": {}}
    for name, fn in WORKLOADS.items():
        fn()   # warm up
        times = {c: [] for c in configs}
        per_sample = []
        for _ in range(args.rounds):
            for c, make in configs.items():
                t, st = timed(fn, make())
                times[c].append(t)
                if c == "native" and st["samples"]:
                    per_sample.append(st["busy_ns"] / st["ticks"] / 1000)
        med = {c: statistics.median(v) for c, v in times.items()}
        row = {"plain_s": round(med["plain"], 4),
               "python_only_x": round(med["python-only"] / med["plain"], 4),
               "native_x": round(med["native"] / med["plain"], 4),
               "native_round_us": round(statistics.median(per_sample), 1) if per_sample else None}
        out["workloads"][name] = row
        print(f"{name:8} plain {row['plain_s']:.3f}s  python-only x{row['python_only_x']:.3f}  "
              f"native x{row['native_x']:.3f}  (sampler round with native: {row['native_round_us']} us)")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
