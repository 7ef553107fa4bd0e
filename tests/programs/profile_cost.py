"""Measures what the statistical profiler costs (a measurement program, not
a test): the sampler's time per sampling round and the rate it sustains
on a 50-deep Python stack, the share of failed stack reads, and the wall
time a CPU-bound program loses to a 1 kHz profiler.

    python tests/programs/profile_cost.py [--depth 50] [--seconds 2]

Wall-clock numbers are noisy on shared machines: A/B runs alternate and
medians are printed.
"""
import argparse
import statistics
import sys
import threading
import time

from stackwatch.profiler import Profiler


def deep(n, seconds):
    if n <= 1:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
        return 0
    return deep(n - 1, seconds) + 1


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def sampler_cost(depth, seconds, interval, threads=1):
    stop = threading.Event()
    extra = [threading.Thread(target=lambda: deep(depth - 2, seconds)) for _ in range(threads - 1)]
    with Profiler(interval=interval, max_depth=depth + 16) as p:
        for t in extra:
            t.start()
        deep(depth - 2, seconds)   # + <module> and sampler_cost = depth frames
        for t in extra:
            t.join()
    stop.set()
    st = p.stats()
    wall = (st["stop_ns"] - st["start_ns"]) / 1e9
    attempts = st["samples"] + st["failed"]
    return {
        "interval": interval,
        "threads": threads,
        "rounds/s": round(st["ticks"] / wall),
        "stacks/s": round(st["samples"] / wall),
        "us/round": round(st["busy_ns"] / max(st["ticks"], 1) / 1000, 1),
        "reads/round": round(st["reads"] / max(st["ticks"], 1), 1),
        "failed %": round(100 * st["failed"] / max(attempts, 1), 3),
        "missed ticks": st["missed"],
        "code cache hit %": round(100 * st["code_hits"] / max(st["code_hits"] + st["code_misses"], 1), 2),
    }


def overhead(rounds=7, n=24, interval="1ms"):
    plain, profiled = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fib(n)
        plain.append(time.perf_counter() - t0)
        with Profiler(interval=interval):
            t0 = time.perf_counter()
            fib(n)
            profiled.append(time.perf_counter() - t0)
    a, b = statistics.median(plain), statistics.median(profiled)
    return {"interval": interval, "plain s": round(a, 4), "profiled s": round(b, 4), "ratio": round(b / a, 3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    print(f"Python {sys.version.split()[0]}, {a.depth}-deep stack, {a.seconds}s per run")
    for iv in ("1ms", "100us", "20us"):
        print(sampler_cost(a.depth, a.seconds, iv))
    print(sampler_cost(a.depth, a.seconds, "1ms", threads=4))
    for iv in ("1ms", "100us"):
        print(overhead(interval=iv))


if __name__ == "__main__":
    main()
