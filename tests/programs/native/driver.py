"""driver.py - calls the C extension cgraph (tests/py/tracer/test_native_frames.py)
from a Python function, main(), with a Python callback: first on a thread
named "worker" with n = 2, then on the main thread with n from the
command line (default 3), and prints the main thread's result (31 for
run(3), 47 for run(4))."""
import sys
import threading

import cgraph


def callback():
    return 1


def main(n):
    return cgraph.run(n, callback)


worker = threading.Thread(target=main, args=(2,), name="worker")
worker.start()
worker.join()
print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
