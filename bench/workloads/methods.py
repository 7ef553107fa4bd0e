"""Workload: method calls on small objects. Each of ``size`` iterations
constructs two small objects (a Python __init__ each) and calls a method, a
property and a method through it: five Python calls, all short."""
import sys

from _harness import main


class Vec:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def add(self, other):
        return Vec(self.x + other.x, self.y + other.y)

    def dot(self, other):
        return self.x * other.x + self.y * other.y

    @property
    def norm2(self):
        return self.dot(self)


def run(n):
    acc = Vec(0, 0)
    total = 0
    for i in range(n):
        v = Vec(i, 1)
        acc = acc.add(v)
        total += v.norm2
    return total + acc.x


def make(size, args):
    return lambda: run(size)


if __name__ == "__main__":
    sys.exit(main("methods", make, 200_000))
