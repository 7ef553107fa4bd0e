"""A generator iterated by a thread that runs C code only: the thread's
function is the builtin list(), which resumes the generator with no Python
frame below it (as a C extension's thread consuming a generator does).
Sampled and traced by tests/py/tracer/test_sample_vs_trace.py: its samples
must hold the generator's whole stack, rooted at the generator.

    python c_thread_generator.py [STEPS]
"""
import _thread
import sys
import threading


def work(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def inner(steps):
    for _ in range(steps):
        yield work(2000)


def produce(steps, done):
    try:
        yield from inner(steps)
    finally:
        done.set()


done = threading.Event()
_thread.start_new_thread(list, (produce(int(sys.argv[1]) if len(sys.argv) > 1 else 300, done),))
done.wait()
