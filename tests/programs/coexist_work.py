"""A small deterministic workload for tests/py/events/test_coexist_*.py: what one call
of workload() does is known exactly (EXPECTED), so every tool that watches
it (stackwatch, cProfile, a sys.settrace function, ...) can be checked for
exact counts."""

LEN_CALLS = 50   # builtins.len calls made by one workload()


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Point:
    def __init__(self, x):
        self.x = x


def make_points(n):
    for i in range(n):
        Point(i)


def measure(n):
    t = 0
    for i in range(n):
        t += len("abc")
    return t


def workload():
    fib(12)
    make_points(200)
    measure(LEN_CALLS)


# Python calls per workload(), by code name (all defined in this file).
EXPECTED = {"workload": 1, "fib": 465, "__init__": 200, "make_points": 1, "measure": 1}


def expected(k):
    """Python calls made by k calls of workload()."""
    return {name: n * k for name, n in EXPECTED.items()}
