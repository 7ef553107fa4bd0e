"""A forked child must not write into its parent's trace.

Reduced from what toolz's test suite showed under `stackwatch run`
(tests/e2e/test_real_suites.py; its multiprocessing.Pool test): now and
then the parent's trace held some of its calls twice. A child runs Python
code after fork() and before stackwatch's own after-fork hook detaches it
from the parent's file: the at-fork hooks registered before stackwatch's,
such as threading's, which makes a few calls per live thread. When that
code fills the per-thread buffer it inherited, the buffer (the parent's
pending events and the child's first ones) is written to the parent's
file, which the parent also writes.

Here 300 idle threads make that code longer than what the parent records
between two forks, so with small buffers (16K) each buffer boundary the
parent crosses is crossed in some child too, whatever the speed; the
background flusher, which seals buffers every 250 ms and so makes the
outcome depend on speed, is off.
"""
import os
import subprocess
import sys

import pytest

from stackwatch import Trace

pytestmark = pytest.mark.slow

_BIN = os.path.dirname(sys.executable)
STACKWATCH = ([os.path.join(_BIN, "stackwatch")] if os.path.exists(os.path.join(_BIN, "stackwatch"))
              else [sys.executable, "-m", "stackwatch"])

FORKS, CALLS = 100, 300
PROGRAM = f'''
import os, threading, warnings
warnings.simplefilter("ignore", DeprecationWarning)   # 3.12+: fork() with threads
go = threading.Event()
threads = [threading.Thread(target=go.wait) for _ in range(300)]
for t in threads:
    t.start()
def f():
    pass
for n in range({FORKS}):
    for _ in range({CALLS}):
        f()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
go.set()
for t in threads:
    t.join()
'''


@pytest.mark.versions("3.9", "3.12")   # the tracer's two hooks (PEP 523; sys.monitoring)
def test_forked_children_leave_the_parents_trace_alone(tmp_path):
    prog = tmp_path / "forks.py"
    prog.write_text(PROGRAM)
    trace = tmp_path / "t.swt"
    r = subprocess.run(STACKWATCH + ["run", "-q", "--flush-interval", "0", "--buffer-size", "16K",
                                     "-o", str(trace), str(prog)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    t = Trace(str(trace))
    calls = sum(row.calls for row in t.stats() if t.codes[row.code].name == "f")
    # What the parent wrote (its own count, in the trailer) is what the file holds.
    assert (t.event_count(), calls) == (t.meta["events"], FORKS * CALLS)


HANG_PROGRAM = """
import os, sys, threading, time

def f():
    return 1

def work():
    for _ in range(20000):
        f()

hung = 0
for i in range(100):
    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()          # the threads' exit flushes may still be running
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    deadline = time.monotonic() + 20
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            hung += 1
            break
        time.sleep(0.001)
print("hung", hung)
"""


def test_a_child_forked_while_a_thread_exits_does_not_hang(tmp_path):
    """A thread's exit flushes its buffer without the GIL, holding the
    session's and the writer's locks; a fork at that moment used to copy
    them held, and the child waited for them for ever (2-5 children in 100
    on 3.12 under `stackwatch run`). Now the forking thread takes both
    locks around fork() and the child leaves the parent's session inside
    fork(): no child hangs."""
    prog = tmp_path / "hang.py"
    prog.write_text(HANG_PROGRAM)
    r = subprocess.run(STACKWATCH + ["run", "-q", "--no-follow-fork", "-o", str(tmp_path / "t.swt"),
                                     str(prog)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hung 0\n", r.stdout + r.stderr
    t = Trace(str(tmp_path / "t.swt"))
    assert sum(row.calls for row in t.stats() if t.codes[row.code].name == "f") == 100 * 2 * 20000
