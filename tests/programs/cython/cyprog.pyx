# cython: profile=True, language_level=3
# cyprog.pyx - the Cython module of tests/py/tracer/test_cython.py: compiled
# by Cython with profile=True, and the same text run as Python (its twin,
# cyprog_twin.py, a copy made by the test), so that the two traces' call
# sequences can be compared. Plain Python syntax only.


def leaf(x):
    return x * 2 + 1


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def fails(n):
    if n % 3 == 0:
        raise ValueError(n)
    return leaf(n)


def guarded(n):
    try:
        return fails(n)
    except ValueError:
        return leaf(-n)


def through(callback, n):
    # A Python function called back from here nests inside this frame.
    total = 0
    for i in range(n):
        total += callback(leaf(i))
    return total


def squares(n):
    for i in range(n):
        yield leaf(i)


def gen_sum(n):
    total = 0
    for x in squares(n):
        total += x
    return total


def main(callback):
    total = fib(6) + gen_sum(3)
    for i in range(5):
        total += guarded(i)
    total += through(callback, 3)
    return total
