"""A target thread that ptrace cannot stop (waiting in the kernel for its
vfork child, state D: tests/programs/vfork_wait.py) holds neither
`attach` nor `record --pid --blocking`: attach says in one line which
thread did not stop and changes nothing; record counts its rounds failed
and ends on time; the thread goes on once its child is gone, traced by
no one (procmem/freeze.h)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import PROGRAMS, built_once, needs_sampler, run
from native_ext import SOURCE, config_flags
from test_dump import one_line_error
from test_record_rate import summary

PROG = os.path.join(PROGRAMS, "vfork_wait.py")
C_SOURCE = os.path.join(SOURCE, "vfork_wait.c")
HELD_MS = 60000   # how long the target's main thread cannot stop, unless its vfork child is killed


def vfork_lib():
    _, key = config_flags(C_SOURCE)

    def build(tmp, cc):
        subprocess.run([cc, "-shared", "-fPIC", "-O1", C_SOURCE, "-o", "vfork_wait.so"], cwd=tmp, check=True,
                       capture_output=True)
    return os.path.join(built_once("vfork_wait", key, build), "vfork_wait.so")


def status(pid, tid, key):
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        return next(line.split()[1] for line in f if line.startswith(key + ":"))


@needs_sampler
@pytest.mark.versions("3.12")
def test_a_thread_that_cannot_stop_holds_nothing(tmp):
    target = subprocess.Popen([sys.executable, PROG, vfork_lib(), str(HELD_MS)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    pid = target.pid
    try:
        assert target.stdout.readline() == "ready\n"
        t0 = time.monotonic()
        while status(pid, pid, "State") != "D" and time.monotonic() - t0 < 5:
            time.sleep(0.005)
        assert status(pid, pid, "State") == "D"
        a = run(["attach", str(pid), "--trace", "--duration", "0.1", "--timeout", "0.3", "-o", str(tmp / "t.swt")])
        one_line_error(a, f"thread {pid} of process {pid} did not stop within 200 ms", "nothing was changed")
        r = run(["record", "--pid", str(pid), "--blocking", "--rate", "50", "--duration", "0.4", "--format",
                 "collapsed", "-o", str(tmp / "r.txt")])
        assert r.returncode == 0, r.stderr
        stored, failed, tried, sampled_s, _ = summary(r.stderr)
        # every round failed while the main thread could not stop; the
        # first waited the bound (200 ms), the others failed at once
        assert stored == 0 and tried >= 5 and failed == tried and sampled_s < 0.4 + 0.2 + 0.3, r.stderr
        assert status(pid, pid, "State") == "D"
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            (child,) = f.read().split()
        os.kill(int(child), signal.SIGKILL)   # its parent goes on
        assert target.stdout.readline() == "back\n"
        for tid in os.listdir(f"/proc/{pid}/task"):
            assert status(pid, tid, "TracerPid") == "0" and status(pid, tid, "State") in "RS", tid
    finally:
        target.kill()
        target.wait()
