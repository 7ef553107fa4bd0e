"""What stackwatch's in-process sampler at 1 kHz costs the program in wall
time (issue 20: within 1%), measured within one run of it: the workload
(a call of a few hundred microseconds, bench/profiler_cost.py's workloads
at a small size) runs in batches while windows alternate, one without the
profiler, then one with it (stackwatch.profiler.Profiler, wall mode,
started and stopped at the windows' edges), ROUNDS times; a round's figure
is the mean batch time in its profiled window over the mean in the other
(not medians: a batch is about half a sampling interval, so the median
batch may take no sample at all), the workload's the median round's, with
the quartiles of the rounds. Runs minutes apart differ
by several percent on this VM (its quick and slow spells), windows a
fraction of a second apart share them.

    python bench/profiler_within.py [--workloads fib,methods] [--rounds 40] [--window 0.15] [--quick]

bench/profilers.py prints its line after the table; the last line is JSON.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import profiler_cost  # noqa: E402  (its workloads)

# name -> size: a batch of a few hundred microseconds
SIZES = {"fib": 18, "methods": 400, "richards": 100, "raytrace": 4, "gen_shapes": 1}


def child(name, size, rounds, window, rate):
    from stackwatch.profiler import Profiler
    work = profiler_cost.make(name, size)
    for _ in range(3):
        work()
    clock = time.perf_counter_ns

    def batches(seconds):
        out, end = [], clock() + int(seconds * 1e9)
        t = clock()
        while t < end:
            work()
            t2 = clock()
            out.append(t2 - t)
            t = t2
        return out

    off, on, per_round = [], [], []
    keys = ("ticks", "parked", "read_by_thread", "failed")
    stats = dict.fromkeys(keys, 0)
    for _ in range(rounds):
        a = batches(window)
        prof = Profiler(rate=rate)
        prof.start()
        b = batches(window)
        prof.stop()
        st = prof.stats()
        for k in keys:
            stats[k] += st.get(k) or 0
        off += a
        on += b
        per_round.append(statistics.fmean(b) / statistics.fmean(a))
    print(json.dumps({"workload": name, "size": size, "rounds": rounds, "window": window, "rate": rate,
                      "batch_ns": statistics.median(off), "batches": [len(off), len(on)],
                      "ratio": statistics.median(per_round), "per_round": per_round,
                      "stats": stats, "python": sys.version.split()[0]}))


def measure(python, names, rounds, window, rate=1000, quick=False):
    """{name: result or {"error": ...}}, a process per workload."""
    out = {}
    for name in names:
        p = subprocess.run([python, os.path.abspath(__file__), "--child", name, "--rounds",
                            str(2 if quick else rounds), "--window", str(window), "--rate", str(rate)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        try:
            out[name] = json.loads(p.stdout.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            out[name] = {"error": (p.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1][:300]}
    return out


def text(res):
    """One line: each workload's ratio and per-round quartiles."""
    parts = []
    for name, r in res.items():
        if "error" in r:
            parts.append(f"{name} n/a ({r['error'][:80]})")
            continue
        rs = sorted(r["per_round"])
        q1, q3 = rs[len(rs) // 4], rs[(3 * len(rs)) // 4]
        st = r["stats"]
        parts.append(f"{name} {r['ratio']:.4f}x [{q1:.3f}-{q3:.3f}] ({st['parked']} of {st['ticks']} samples "
                     f"parked, {st['read_by_thread']} of those read by the thread)")
    return ("in-process 1 kHz within one run (mean batch time profiled / not, windows alternating, median "
            "round; the rounds' quartiles): " + "; ".join(parts))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default="fib,methods,richards")
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--window", type=float, default=0.15)
    p.add_argument("--rate", type=int, default=1000)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, SIZES.get(args.child, 1), args.rounds, args.window, args.rate)
        return 0
    names = [n for n in args.workloads.split(",") if n]
    bad = [n for n in names if n not in SIZES]
    if bad:
        print(f"profiler_within.py: unknown workload {bad[0]} (known: {', '.join(SIZES)})", file=sys.stderr)
        return 2
    res = measure(sys.executable, names, args.rounds, args.window, args.rate, args.quick)
    print(text(res), flush=True)
    print(json.dumps(res))
    return 1 if any("error" in r for r in res.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
