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


@pytest.mark.xfail(strict=True, reason="stackwatch bug: a forked child writes the parent's pending "
                                       "events into the parent's trace before stackwatch's after-fork "
                                       "hook runs (f counted several times over; all of 3.9-3.13)")
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
