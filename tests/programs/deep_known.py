"""A target whose possible stacks are known exactly, for the outside
sampler's rate and "impossible stack" checks (tests/py/cli/test_record_rate.py,
bench/outside.py): its main thread runs main -> batch -> d0 -> d1 -> ... ->
d29 -> leaf, 34 frames with <module>, and the deep end changes fast: d0 .. d24
each call the next once, d25 .. d28 call the next three times, and d29
calls leaf (a short loop) three times, so the stack is 28 to 34 frames
deep and every frame above d24 is replaced tens of thousands of times a
second. Each level is a function of its own, so a stack read while it
changed that joins two instants (a level skipped, repeated or out of
order) is told from a real one: a real stack is <module>, main, batch,
d0 .. dk (0 <= k <= 29), then leaf only when k is 29 (possible_stacks()).

It prints "ready" once running, then runs until killed (or for SECONDS).
For bench/outside.py two more modes: --work N waits for a line on stdin,
runs N batches (20 calls of d0 each), prints the seconds they took and
exits; --batches FILE runs batches until stdin is closed, then writes the
CLOCK_MONOTONIC ns at which each batch ended to FILE (JSON) and exits.

    python deep_known.py [SECONDS]
    python deep_known.py --work N
    python deep_known.py --batches FILE
"""
import json
import sys
import threading
import time

DEPTH = 30
FANOUT_FROM = 25      # d25 .. d29 call the next level (or leaf) this many times
FANOUT = 3


def leaf():
    x = 0
    for i in range(20):
        x += i
    return x


# d0 .. d29, each a function of its own (its own code object and name).
_SOURCE = "".join(
    f"def d{i}():\n"
    + (f"    for _ in range({FANOUT}):\n        {'leaf' if i == DEPTH - 1 else f'd{i + 1}'}()\n"
       if i >= FANOUT_FROM else f"    d{i + 1}()\n")
    for i in range(DEPTH))
exec(compile(_SOURCE, __file__ + ":levels", "exec"))


def possible_stacks():
    """Every stack the main thread can have (outermost first; the names)."""
    out = set()
    for k in range(DEPTH):
        chain = ("<module>", "main", "batch") + tuple(f"d{i}" for i in range(k + 1))
        out.add(chain)
    out.add(chain + ("leaf",))
    out |= {("<module>", "main"), ("<module>", "main", "batch")}
    return out


def recorded_stacks(path):
    """{stack (function names, outermost first): samples} of a collapsed
    file of this target ("name (file:line);... count": stackwatch's and
    py-spy's), to compare with possible_stacks()."""
    stacks = {}
    with open(path) as f:
        for line in f:
            st, _, n = line.rstrip("\n").rpartition(" ")
            k = tuple(fr.split(" (")[0] for fr in st.split(";"))
            stacks[k] = stacks.get(k, 0) + int(n)
    return stacks


def batch():
    for _ in range(20):
        d0()  # noqa: F821 (made by exec above)


def main(seconds):
    end = time.monotonic() + seconds if seconds else None
    print("ready", flush=True)
    while end is None or time.monotonic() < end:
        batch()


def work(n):
    print("ready", flush=True)
    sys.stdin.readline()
    t0 = time.perf_counter()
    for _ in range(n):
        batch()
    print(time.perf_counter() - t0, flush=True)


def batches(path):
    closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    ends = []
    print("ready", flush=True)
    while not closed.is_set():
        batch()
        ends.append(time.monotonic_ns())
    with open(path, "w") as f:
        json.dump(ends, f)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--work"]:
        work(int(sys.argv[2]))
    elif sys.argv[1:2] == ["--batches"]:
        batches(sys.argv[2])
    else:
        main(float(sys.argv[1]) if len(sys.argv) > 1 else None)
