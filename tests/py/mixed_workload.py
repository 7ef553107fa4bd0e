"""The 60/30/10 workload the profiler tests sample (test_profiler.py,
test_pprof.py): three functions that spin for fixed slices, interleaved;
and count_of(), which reads a function's samples out of a call tree."""
import time


def spin_until(deadline):
    while time.perf_counter() < deadline:
        pass


# Three functions that spin for fixed slices; each returns the wall time it
# spent (more than asked for when the GIL or the CPU is busy elsewhere).
def f60(d):
    t0 = time.perf_counter()
    spin_until(t0 + d)
    return time.perf_counter() - t0


def f30(d):
    t0 = time.perf_counter()
    spin_until(t0 + d)
    return time.perf_counter() - t0


def f10(d):
    t0 = time.perf_counter()
    spin_until(t0 + d)
    return time.perf_counter() - t0


def mixed_workload(seconds):
    """60/30/10 percent of `seconds` in f60/f30/f10, interleaved in 10 ms
    rounds so that any drift of the sampler over time averages out; returns
    the time each really took."""
    spent = {"f60": 0.0, "f30": 0.0, "f10": 0.0}
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        spent["f60"] += f60(0.006)
        spent["f30"] += f30(0.003)
        spent["f10"] += f10(0.001)
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
