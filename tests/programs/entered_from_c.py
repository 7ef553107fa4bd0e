"""Python code that C code enters again and again, sampled fast
(tests/py/tracer/test_sample_vs_trace.py): each of these runs a new call
of the interpreter from C (3.12+: its shim frame on the C stack, whose
link is its Python caller), returns, and the next one is entered at the
same place on the C stack. A sample must hold the callers of such a
frame, never the frame alone.

    python entered_from_c.py ROUNDS
"""
import sys


class Meta(type):
    # isinstance() and issubclass() call these from C, on every call
    def __instancecheck__(cls, obj):
        return type(obj).__name__.startswith(cls.__name__)

    def __subclasscheck__(cls, sub):
        return sub.__name__.startswith(cls.__name__)


class Shape(metaclass=Meta):
    pass


class ShapeSquare:
    pass


class Keyed:
    def __init__(self, v):   # called from C by type.__call__
        self.v = v

    def __lt__(self, other):   # called from C by sorted()
        return self.v < other.v


def key(x):
    return -x


def double(x):
    return 2 * x


def checks(items):
    n = 0
    for x in items:
        n += isinstance(x, Shape) + issubclass(type(x), Shape)
    return n


def ordering(n):
    values = sorted(range(n), key=key)   # key() entered from C
    return sorted(Keyed(v) for v in values)[0].v   # __lt__ from C, a generator resumed by C


def mapped(n):
    # map() in a generator: double() entered from C inside a generator
    # that list() (C) resumes
    yield from map(double, range(n))


def round_(i):
    items = [ShapeSquare(), 3, "x", ShapeSquare()] * 8
    return checks(items) + ordering(40) + sum(list(mapped(30))) + i


def main():
    rounds = int(sys.argv[1])
    total = 0
    for i in range(rounds):
        total += round_(i)
    print(total)


main()
