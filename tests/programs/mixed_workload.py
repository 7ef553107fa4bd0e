"""The 60/30/10 workload the profiler tests sample (tests/py/profiler/ and
tests/py/render/): three functions that spin for fixed slices of this thread's
CPU time, interleaved; and count_of(), which reads a function's samples out
of a call tree."""
import time


def stored(p):
    """Samples stored so far by a Profiler or a History (watch())."""
    return p.stats()["stored"] if hasattr(p, "stats") else p.tree().total


def spin_until(deadline, clock=time.perf_counter, p=None, samples=0):
    """Spins until `clock` reaches `deadline`; given a profiler (or a
    history) `p`, goes on (10 ms at a time, at most 30 s) until it has
    stored `samples` samples: a loaded machine makes the sampler miss
    ticks, so a test that needs some samples waits for them rather than
    for a time."""
    give_up = time.perf_counter() + 30
    while True:
        while clock() < deadline:
            pass
        if p is None or stored(p) >= samples or time.perf_counter() > give_up:
            return
        deadline = clock() + 0.01


# Three functions that spin for fixed slices of CPU time; each returns the
# wall time it spent (more than asked for when the GIL or the CPU is busy
# elsewhere). CPU time, not wall time: a function spinning until a wall
# deadline returns at once when its thread resumes after being descheduled
# past it, so a sampler descheduled at the same moment charges the stall to
# the next function; sized in CPU time, the function is still running when
# its thread resumes and the stall is charged to it, where it belongs.
def f60(d):
    t0 = time.perf_counter()
    spin_until(time.thread_time() + d, time.thread_time)
    return time.perf_counter() - t0


def f30(d):
    t0 = time.perf_counter()
    spin_until(time.thread_time() + d, time.thread_time)
    return time.perf_counter() - t0


def f10(d):
    t0 = time.perf_counter()
    spin_until(time.thread_time() + d, time.thread_time)
    return time.perf_counter() - t0


def mixed_workload(seconds, blocks=None):
    """60/30/10 percent of `seconds` in f60/f30/f10, interleaved in 10 ms
    rounds so that any drift of the sampler over time averages out; returns
    the time each really took. With `blocks` (stats_bounds.Blocks), each
    call is also recorded there."""
    spent = {"f60": 0.0, "f30": 0.0, "f10": 0.0}
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for f, d in ((f60, 0.006), (f30, 0.003), (f10, 0.001)):
            spent[f.__name__] += blocks.run(f.__name__, f, d) if blocks else f(d)
    return spent


def count_of(tree, name, key="count"):
    """Samples (or with key="time_ns", their wall time) whose stack passes
    through a function called `name` (outermost occurrence only, so
    recursion is not counted twice)."""
    total = 0
    stack = [tree]
    while stack:
        n = stack.pop()
        if n["name"] == name:
            total += n[key]
        else:
            stack.extend(n["children"])
    return total
