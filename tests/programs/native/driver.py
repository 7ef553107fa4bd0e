"""driver.py - calls the C extension cgraph (tests/py/tracer/test_native_frames.py)
from a Python function, main(), with a Python callback, and prints the
result (31 for run(3), 47 for run(4))."""
import sys

import cgraph


def callback():
    return 1


def main(n):
    return cgraph.run(n, callback)


print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
