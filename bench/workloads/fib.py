"""Workload: recursive fib(size), one Python call per step (the call-heavy
worst case for a tracer). fib(n) makes 2*F(n+1)-1 calls."""
import sys

from _harness import main


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def make(size, args):
    return lambda: fib(size)


if __name__ == "__main__":
    sys.exit(main("fib", make, 27))
