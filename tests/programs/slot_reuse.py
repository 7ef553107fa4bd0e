"""A loop that calls g (which calls h) and then f, at one slot of the
thread's frame stack: f's frame takes the place g's had, and h's dead frame
stays above it, still linked to that slot. h and f each spend their time in
one C call (sum), so a walk that reads the thread state while h runs and
the frames after f was called finds h "called by" f, a stack the program
never had, and a second read may tear the same way (f at the same
instruction). Sampled and traced by tests/py/tracer/test_sample_vs_trace.py,
which asks every sample to be a stack the trace had open (before the check
compared the callers' frames whole: about 1 sample in 4,000 on 3.11).

With `same`, the loop calls g2 (which calls h2) and f2, whose frames are
of one size: h2's dead frame above f2 fits (pystack.c frames_fit), and a
walk torn that way passed every check made while the thread runs (h2
called by f2 in a few samples in 30,000 on 3.11 and 3.13, none on 3.12):
f2 does not hold h2's function, so such a walk is now redone parked
(pystack.c callees_held; docs/architecture.md "Torn stacks"). Run on 3.11
and 3.13 by tests/py/tracer/test_sample_vs_trace.py.

With `blocked` too, the thread blocks the sampler's signal (SIGRTMAX - 3,
nativestack.c) first, so that it cannot be parked: the sampler mutes it and reads it unparked, as a thread
that blocks the signal or times out a park on a busy machine (pystack.c
sample_thread: such a walk must pass callees_held too).

    python slot_reuse.py [DEPTH [ROUNDS [same [blocked]]]]
"""
import signal
import sys

R = range(100)


def h():
    return sum(R)


def g():
    return h()


def f():
    return sum(R)


def h2(_):
    return sum(R)


def g2():
    return h2(R)


def f2():
    return sum(R)


def loop(n):
    t = 0
    for _ in range(n):
        g()
        t += f()
    return t


def loop2(n):
    t = 0
    for _ in range(n):
        g2()
        t += f2()
    return t


def down(k, n, same):
    return down(k - 1, n, same) if k else loop2(n) if same else loop(n)


if __name__ == "__main__":
    if sys.argv[4:5] == ["blocked"]:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMAX - 3})
    down(int(sys.argv[1]) if len(sys.argv) > 1 else 10, int(sys.argv[2]) if len(sys.argv) > 2 else 100000,
         len(sys.argv) > 3 and sys.argv[3] == "same")
