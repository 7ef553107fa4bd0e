"""A parked walk's read made by the thread itself (pystack.c
walk_read_by_thread): the sampled thread, at the instant it takes the
sampler's signal, reads its own state, frames and code objects' headers in
one system call and goes on, where a park holds it in the handler until
the sampler has walked. Its samples must be as exact as a park's, it must
be used where it holds the walk (a stable stack, 3.11+), and a thread the
call could harm (under a seccomp filter) is parked instead."""
import json
import os
import platform
import sys

import pytest

from conftest import PROGRAMS, needs_sampler, run, write

pytestmark = [needs_sampler, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="in-process parks are Linux's")]

sys.path.insert(0, PROGRAMS)
from deep_known import possible_stacks  # noqa: E402

# deep_known's batches under the profiler at 2 kHz, every sample parked
# ahead of its walk; in a thread of its own when asked to install a seccomp
# filter that ends the process at its first process_vm_readv (the
# thread's own calls only, the sampler's thread has none): "first", before
# the profiler starts; "late", after 0.15 s of its batches profiled, or
# more until 60 of its reads were made by itself, the sampler's signal
# blocked from just before it to 50 ms after, so that no request asked of
# the thread before the filter reaches it after (one not answered in 10 ms
# is given up, and the handler then ignores it): what is left, a filter
# installed between a request's question and its signal's arrival, is left
# out (docs/architecture.md).
PROGRAM = r'''
import ctypes, json, signal, sys, threading, time
sys.path.insert(0, sys.argv[2])
import deep_known
from stackwatch.profiler import Profiler

def seccomp_kill_on_process_vm_readv():
    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]
    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]
    # nr == process_vm_readv (310 on x86-64) ? KILL_PROCESS : ALLOW
    code = (Filter * 4)(Filter(0x20, 0, 0, 0), Filter(0x15, 0, 1, 310), Filter(0x06, 0, 0, 0x80000000),
                        Filter(0x06, 0, 0, 0x7FFF0000))
    libc = ctypes.CDLL(None, use_errno=True)
    prog = Prog(4, code)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp")

p = Profiler(rate=2000)
if sys.argv[3] in ("first", "late"):
    # (the profiler's thread is started by the main thread: never filtered)
    ready, go = threading.Event(), threading.Event()
    def work():
        if sys.argv[3] == "first":
            seccomp_kill_on_process_vm_readv()
        ready.set()
        go.wait()
        if sys.argv[3] == "late":
            # (until the thread made 60 reads itself: 0.15 s quiet; on a
            # loaded machine a thread waiting for a CPU answers no request
            # in time, and needs longer)
            until = time.monotonic() + 3
            deep_known.main(0.15)
            while p.stats()["read_by_thread"] < 60 and time.monotonic() < until:
                deep_known.main(0.05)
            sig = {signal.SIGRTMAX - 3}
            signal.pthread_sigmask(signal.SIG_BLOCK, sig)
            seccomp_kill_on_process_vm_readv()
            time.sleep(0.05)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, sig)
            deep_known.main(0.45)
        else:
            deep_known.main(0.6)
    t = threading.Thread(target=work)
    t.start()
    ready.wait()
    p.start()
    go.set()
    t.join()
else:
    p.start()
    deep_known.main(0.6)
p.stop()
p.write(sys.argv[1], format="collapsed")
print(json.dumps(p.stats()))
'''


def profiled(tmp_path, mode):
    out = tmp_path / "stacks.txt"
    prog = write(tmp_path / "prog.py", PROGRAM)
    r = run(["python", prog, str(out), PROGRAMS, mode], env={"STACKWATCH_TEST_PARK_AHEAD": "1"})
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout.strip().splitlines()[-1])
    stacks = {}
    for line in out.read_text().splitlines():
        st, _, n = line.rpartition(" ")
        names = tuple(fr.split(" (")[0] for fr in st.split(";"))
        if "d0" in names or names[-1] in ("batch", "leaf"):
            # (from deep_known's <module>: the program's own frames above it cut)
            stacks[names[names.index("main") - 1:]] = stacks.get(names[names.index("main") - 1:], 0) + int(n)
    return stats, stacks


@pytest.mark.timing
@pytest.mark.versions("3.11", "3.12", "3.13")
def test_parked_walks_read_by_the_thread_are_exact(tmp_path):
    """deep_known.py's stack (34 frames deep at most, its deep end replaced
    tens of thousands of times a second) holds the same code objects from
    one sample to the next: nearly every parked walk is read by the thread
    itself, and every sample is a stack the program can have."""
    stats, stacks = profiled(tmp_path, "plain")
    counts = {k: stats[k] for k in ("ticks", "parked", "read_by_thread", "read_short", "park_failed", "failed")}
    assert stats["parked"] >= 150, counts   # (1,200 ticks asked; 252-302 made in a make test run twice at once)
    # (a read falls short when the stack left the window its last walk
    # read, or met a code object not read up front: then it is parked, and
    # after two in a row ~40 walks are parked at once; quiet, all but the
    # first held)
    assert stats["read_by_thread"] >= 0.8 * stats["parked"], counts
    possible = {("deep_known",) + s[1:] for s in possible_stacks()}
    seen = {("deep_known",) + s[1:]: n for s, n in stacks.items()}
    assert sum(seen.values()) >= 0.9 * stats["stored"], (stats, sum(seen.values()))
    assert set(seen) <= possible, sorted(set(seen) - possible)[:3]
    assert stats["failed"] <= max(5, stats["samples"] // 100), stats


@pytest.mark.versions("3.12")
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the filter names x86-64's system call number")
@pytest.mark.parametrize("when", ["first", "late"])
def test_a_thread_under_seccomp_is_parked_not_asked_to_read(tmp_path, when):
    """A thread under a seccomp filter that ends the process at its first
    process_vm_readv, installed before the profiler starts or while it
    runs, is never asked to make its parked walk's read: the program lives,
    its walks parked. (Asked once in 1,024 reads, "late" was killed at the
    filter's next sample.)"""
    stats, stacks = profiled(tmp_path, when)
    assert stats["parked"] >= 100, stats
    assert sum(stacks.values()) >= 100
    if when == "late" and stats["read_by_thread"] < 50:
        # (its reads before the filter must have been its own for the
        # filter to come between them: twice in a loaded make test none
        # was in 0.15 s, once none in 10 s, its parks answered; by hand
        # beside a lane of tests and a busy loop, 64-149 in 0.15 s)
        keys = ("ticks", "missed", "parked", "parked_ahead", "read_by_thread", "read_short", "park_failed",
                "after_park", "muted_failed", "failed_reads", "failed")
        pytest.skip(f"the thread made no reads of its own before the filter, nothing to judge: "
                    f"{ {k: stats.get(k) for k in keys} }")
