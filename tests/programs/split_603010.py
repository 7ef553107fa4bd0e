"""A target for `stackwatch record --pid` and `stackwatch top`: its main
thread burns CPU in three functions whose shares of its time are 60%, 30%
and 10% by construction (each round runs f60 for 6 ms, f30 for 3 ms, f10
for 1 ms of this thread's CPU time), and a second thread sleeps (idle).
It prints "ready" once running, then runs for SECONDS (default: until
stdin is closed), and exits 0. With a second argument it writes there what
it really ran, the ground truth of a profile: a JSON list of blocks [name,
start, end, CPU time] (ns; start and end on CLOCK_MONOTONIC, the sampler's
clock), as tests/py/stats_bounds.py's Blocks keeps them.

    python split_603010.py [SECONDS|-] [BLOCKS.json]
"""
import json
import sys
import threading
import time

CLOCK = time.thread_time


# Each function spins in its own body (no callee), so that its samples are
# its own.
def f60():
    end = CLOCK() + 0.006
    while CLOCK() < end:
        pass


def f30():
    end = CLOCK() + 0.003
    while CLOCK() < end:
        pass


def f10():
    end = CLOCK() + 0.001
    while CLOCK() < end:
        pass


def sleeper(stop):
    stop.wait()


def main():
    stop = threading.Event()
    idle = threading.Thread(target=sleeper, args=(stop,), name="sleeper", daemon=True)
    idle.start()
    limit = float(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "-" else None
    blocks = [] if len(sys.argv) > 2 else None
    done = threading.Event()
    if limit is None:
        threading.Thread(target=lambda: (sys.stdin.read(), done.set()), name="stdin", daemon=True).start()
    print("ready", flush=True)
    t0 = time.monotonic()
    while not done.is_set() and (limit is None or time.monotonic() - t0 < limit):
        for f in (f60, f30, f10):
            if blocks is None:
                f()
                continue
            w0, c0 = time.monotonic_ns(), time.thread_time_ns()
            f()
            c1, w1 = time.thread_time_ns(), time.monotonic_ns()
            blocks.append((f.__name__, w0, w1, c1 - c0))
    stop.set()
    if blocks is not None:
        with open(sys.argv[2], "w") as out:
            json.dump(blocks, out)


if __name__ == "__main__":
    main()
