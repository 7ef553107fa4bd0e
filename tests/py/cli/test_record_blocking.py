"""`stackwatch record --pid PID --blocking` (and `top --blocking`): every
sampling round read with all the target's threads stopped (ptrace), so no
stack is read torn. The known-split target (split_603010.py) keeps its
60/30/10 within 3 points of its own log; the torn-prone deep_known.py
(its deep end changes tens of thousands of times a second, its possible
stacks known exactly) gives 0 failed samples and no impossible stack, on
3.12 and on 3.10 (frames as heap objects, another walk); a target that
cannot be stopped (traced already, by strace) is one line, exit 1.
`dump --blocking` reads the stacks of one instant: a possible one."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import NO_GO, missing, needs, needs_sampler, run
from stackwatch import profiler
from test_dump import one_line_error
from test_record import Target, record_shares
from test_record_rate import TARGET as DEEP, TARGET_DEFS, summary

BLOCKING = re.compile(r"; blocking: the process stopped (\d+) us per round$", re.M)
STRACE = shutil.which("strace")


@needs_sampler
@needs(NO_GO)
@pytest.mark.timing
@pytest.mark.versions("3.12")
def test_record_blocking_shares_within_3_points(tmp):
    """--blocking: the shares are the target's real ones (record_shares),
    no sample failed, and the summary gives the stop's cost per round."""
    _, _, r, stored, _, failed_pct = record_shares(tmp, sys.executable, "--blocking")
    assert stored > 0 and failed_pct == 0, r.stderr
    assert BLOCKING.search(r.stderr) and "not read" not in r.stderr, r.stderr


KEYS = ("ticks", "samples", "failed", "torn", "retried", "blocked_rounds", "block_failed", "native_samples",
        "native_failed")


@needs_sampler
@pytest.mark.versions("3.10", "3.12")
def test_blocking_torn_prone_never_fails(tmp):
    """deep_known.py at 5 kHz with record --blocking: no failed sample (of
    thousands on a quiet machine, tens at load 20), every stack one the
    program can have, the deepest seen; and no walk even torn (and redone:
    unblocked at this rate ~340 a second were, on 3.12 at load 7), counted
    by Profiler(blocking=True), on 3.12 with native=True too (the unwinder
    reads the threads the round stopped: native frames in every sample),
    over a window after its first round (that one reads the target's files,
    its CFI and line tables: seconds on a busy machine)."""
    possible = TARGET_DEFS["possible_stacks"]()
    target = subprocess.Popen([sys.executable, DEEP], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline() == "ready\n"
        out = tmp / "rec.txt"
        r = run(["record", "--pid", str(target.pid), "--blocking", "--rate", "5000", "--duration", "1",
                 "--format", "collapsed", "-o", str(out)], timeout=120)
        assert r.returncode == 0, r.stderr
        stored, failed, tried, _, _ = summary(r.stderr)
        # (a stop waits for the target to get a CPU: at load 21 a round took 22 ms, 41 rounds in 1 s)
        assert failed == 0 and tried >= 20 and stored == tried, r.stderr
        assert BLOCKING.search(r.stderr), r.stderr
        stacks = TARGET_DEFS["recorded_stacks"](out)
        impossible = {s: n for s, n in stacks.items() if s not in possible}
        assert not impossible, (impossible, r.stderr)
        assert max(len(s) for s in stacks) == 34, r.stderr
        # dump --blocking: the stack of one instant, a possible one
        for _ in range(3):
            d = run(["dump", str(target.pid), "--blocking", "--json"])
            assert d.returncode == 0, d.stderr
            (thread,) = json.loads(d.stdout)
            assert not thread["failed"] and tuple(f["function"] for f in reversed(thread["frames"])) in possible, d.stdout
        for native in [False, True] if sys.version_info[:2] == (3, 12) else [False]:
            p = profiler.Profiler(rate=5000, pid=target.pid, blocking=True, native=native).start()
            try:
                end = time.monotonic() + 60
                while p.stats()["ticks"] < 1 and time.monotonic() < end:
                    time.sleep(0.01)
                before = p.stats()
                time.sleep(0.5)
            finally:
                p.stop()
            st = {k: p.stats()[k] - before[k] for k in KEYS}
            assert st["samples"] > 0 and st["blocked_rounds"] == st["ticks"] > 0, st
            assert st["failed"] == st["torn"] == st["retried"] == st["block_failed"] == 0, st
            assert st["native_samples"] == (st["samples"] if native else 0) and st["native_failed"] == 0, st
    finally:
        target.kill()
        target.wait()
        target.stdout.close()


def tracer_of(pid):
    """The TracerPid of process pid (0: none)."""
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^TracerPid:\s*(\d+)", f.read(), re.M).group(1))


@needs_sampler
@pytest.mark.versions("3.12")
def test_blocking_refused_when_traced():
    """A target strace traces already cannot be stopped by another tracer:
    record --blocking and top --blocking say so in one line (ptrace's
    reason and what to do, as dump --native words it), exit 1; without
    --blocking the same target is read (memory reads need no stop)."""
    if not STRACE:
        missing("strace is not installed (Debian package strace)")
    target = Target()
    tracer = subprocess.Popen([STRACE, "-qq", "-o", os.devnull, "-p", str(target.pid)], stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + 30
        while tracer_of(target.pid) == 0:
            assert time.monotonic() < end and tracer.poll() is None, "strace did not attach"
            time.sleep(0.05)
        for args in (["record", "--pid", str(target.pid), "--blocking", "--duration", "1"],
                     ["top", str(target.pid), "--once", "--blocking"], ["dump", str(target.pid), "--blocking"]):
            one_line_error(run(args, timeout=60), f"process {target.pid} blocking: ",
                           "Operation not permitted", "traced already")
        r = run(["top", str(target.pid), "--once"], timeout=60)
        assert r.returncode == 0 and "f60" in r.stdout, r.stderr
        # (and dump --blocking does not go with --native: one line, exit 2)
        r = run(["dump", str(target.pid), "--blocking", "--native"])
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "--blocking" in r.stderr, r.stderr
    finally:
        tracer.terminate()
        tracer.wait()
        tracer.stderr.close()
        target.stop()
