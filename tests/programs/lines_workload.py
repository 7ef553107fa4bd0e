"""A workload for the profiler's --lines mode: one function whose three
loops, each on one line of its own (marked LOOP60/LOOP30/LOOP10), use
60/30/10 percent of a slice of this thread's CPU time, and record what
each really used (and, given a stats_bounds.Blocks, when it ran).
loop_lines() finds the marked lines in this file."""
import time


def three_loops(d, spent, blocks=None):
    c, m = time.thread_time, time.monotonic_ns
    w0, t0 = m(), c()
    e = t0 + 0.6 * d
    while c() < e: pass  # LOOP60
    w1, t1 = m(), c()
    e = t1 + 0.3 * d
    while c() < e: pass  # LOOP30
    w2, t2 = m(), c()
    e = t2 + 0.1 * d
    while c() < e: pass  # LOOP10
    w3, t3 = m(), c()
    spent["LOOP60"] += t1 - t0
    spent["LOOP30"] += t2 - t1
    spent["LOOP10"] += t3 - t2
    if blocks is not None:
        for mark, a, b, cpu in (("LOOP60", w0, w1, t1 - t0), ("LOOP30", w1, w2, t2 - t1), ("LOOP10", w2, w3, t3 - t2)):
            blocks.add(mark, a, b, round(cpu * 1e9))


def run_rounds(spent, until, blocks=None):
    while not until():
        three_loops(0.01, spent, blocks)  # CALL


def loop_lines():
    """{"LOOP60": line, "LOOP30": line, "LOOP10": line, "CALL": line} of this file."""
    out = {}
    with open(__file__, encoding="utf-8") as f:
        for i, text in enumerate(f, 1):
            for mark in ("LOOP60", "LOOP30", "LOOP10", "CALL"):
                if text.rstrip().endswith("# " + mark):
                    out[mark] = i
    return out
