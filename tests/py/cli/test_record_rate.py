"""`stackwatch record --pid PID --rate 100000`: the outside sampler's rate,
its failed samples, and no impossible stack. The target
(tests/programs/deep_known.py) is 28 to 34 frames deep, changes its deep
end tens of thousands of times a second, and its possible stacks are known
exactly (possible_stacks()): every stack recorded must be one of them, a
stack joining two instants being told by a level skipped, repeated or out
of order. And code objects freed and made again at the same addresses
(tests/programs/fresh_codes.py) recorded at that rate: every frame of
fresh code named after the code it ran (3.12 and 3.13 trust the code
objects of a walk by the target's counter of code objects made; 3.13 only
while no subinterpreter was ever made). Python 3.12 and 3.13 only (a run
of a few seconds each); bench/outside.py reports the real rate beside
py-spy and Austin."""
import contextlib
import os
import re
import runpy
import signal
import subprocess
import sys
import time

import pytest

from conftest import PROGRAMS, needs_sampler, run
from stats_bounds import expect_share_at_most
from stackwatch import profiler

TARGET = os.path.join(PROGRAMS, "deep_known.py")
FRESH = os.path.join(PROGRAMS, "fresh_codes.py")   # code objects freed and made again at the same addresses
FRESH_MODULES = 40
TARGET_DEFS = runpy.run_path(TARGET, run_name="deep_known")   # its possible_stacks, recorded_stacks
DURATION = 2.0
# The rate asked, and what the best of up to three runs must reach. On a
# quiet 2-core machine the sampler has a core of its own and runs near the
# rate asked (bench/outside.py reports the real figure); each other job
# that wants a core takes its share of that one: at a load average of 18
# on this VM it reached 2.6k-9k rounds/s, its CPU time ~25-30 us a round.
# So the bound follows the load average at the start: MIN_RATE while it is
# at most BUSY_LOAD (the other core busy; a quiet machine was not seen
# while this was written, so the bound is a third of what that CPU time
# allows), else MIN_RATE_LOADED. The old sampler (a sleep per round, 7
# system calls and a file opened per sample) made 1k-4.5k whatever the
# load.
RATE = 100000
MIN_RATE = 10000
BUSY_LOAD = 3.0
MIN_RATE_LOADED = 2000
MAX_FAILED = 0.005      # the share of failed samples asked for (issue 21)
WINDOW = 0.05           # failed_windows: the window of the failed samples' batch means (40 in 2 s)


@contextlib.contextmanager
def ready_target(args):
    """The program args (which prints "ready" once running) running
    through the block, killed at its end."""
    target = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline() == "ready\n"
        yield target
    finally:
        target.kill()
        target.wait()
        target.stdout.close()


def record(tmp):
    """Records the target for DURATION at RATE; (wall seconds of the
    command, its summary line's numbers, the stacks written)."""
    with ready_target([TARGET]) as target:
        out = tmp / "rec.txt"
        t0 = time.monotonic()
        r = run(["record", "--pid", str(target.pid), "--rate", str(RATE), "--duration", str(DURATION),
                 "--format", "collapsed", "-o", str(out)], timeout=120)
        wall = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    return wall, summary(r.stderr), TARGET_DEFS["recorded_stacks"](out), r.stderr


def failed_windows():
    """Samples the target at RATE for DURATION as record does (the same
    Profiler) and counts the samples tried and failed in each WINDOW:
    ([(tried, failed)], the profiler's stats at the end). Failed samples come in bursts (a walk fails after
    several torn walks in a row), and how many depends on whether the target
    and the sampler run side by side: at a load of 19, 0-9 failed in 20-25k
    samples, torn walks 4 in one run and 1,051 in another, and a quiet run
    of the binomial test once had 631 failed where its bound was 433. So
    their share is judged by the spread of the windows (stats_bounds)."""
    rows = []
    with ready_target([TARGET]) as target:
        p = profiler.Profiler(rate=RATE, pid=target.pid).start()
        try:
            last, end = (0, 0), time.monotonic() + DURATION
            while time.monotonic() < end:
                time.sleep(WINDOW)
                st = p.stats()
                rows.append((st["samples"] - last[0], st["failed"] - last[1]))
                last = (st["samples"], st["failed"])
        finally:
            p.stop()
    return rows, p.stats()


def summary(stderr):
    """(stored, failed, tried, seconds sampled, rounds/s) of record's summary line."""
    m = re.search(r"^stackwatch: (\d+) samples of process \d+ \(Python [\d.]+\) in ([\d.]+) s: [\d.]+% failed "
                  r"\((\d+) of (\d+)\), (\d+) rounds/s achieved of (\d+) asked", stderr, re.M)
    assert m, stderr
    return int(m.group(1)), int(m.group(3)), int(m.group(4)), float(m.group(2)), int(m.group(5))


@needs_sampler
@pytest.mark.timing
@pytest.mark.versions("3.12", "3.13")
def test_record_100khz_no_impossible_stack(tmp):
    """Every stack recorded at 100 kHz is one the program can have; failed
    samples under 0.5% (failed_windows: within the batch-means bound of a
    run's windows); the sampling takes no longer than asked and the command not much
    longer (start-up and writing); the rate reaches MIN_RATE (on a loaded
    machine MIN_RATE_LOADED) in the best of up to three runs."""
    possible = TARGET_DEFS["possible_stacks"]()
    load = os.getloadavg()[0]
    want = MIN_RATE if load <= BUSY_LOAD else MIN_RATE_LOADED
    best = 0
    for attempt in range(3):
        wall, (stored, failed, tried, sampled_s, rate), stacks, stderr = record(tmp)
        assert stacks and sum(stacks.values()) == stored, stderr
        impossible = {s: n for s, n in stacks.items() if s not in possible}
        assert not impossible, (impossible, stderr)
        # Deep stacks were seen: the walk reads all 34 frames.
        assert max(len(s) for s in stacks) == 34, stderr
        assert sampled_s <= DURATION + 0.1, stderr
        assert wall <= DURATION + 10, (wall, stderr)
        best = max(best, rate)
        if best >= want:
            break
    assert best >= want, (load, stderr)
    windows, st = failed_windows()
    expect_share_at_most(windows, MAX_FAILED, windows)
    # The target makes no code objects once running: the check after a
    # walk trusts its 31 code objects by the target's counter of code
    # objects made instead of reading their headers again (pystack.c
    # "Code objects by counter"), but in the first walks.
    assert st["codes_by_counter"] >= 10 * st["samples"], st
    # The check after a walk then reads nothing of its own: what it reads
    # again came at the end of the walk's own read (pystack.c "Checked
    # ahead"), but after a guess missed (a torn walk redone, the first walks).
    assert st["checked_ahead"] >= st["samples"] // 2, st


def fresh_frames_wrong(stacks):
    """The frames of fresh code (fresh_codes.py's modules and compiled
    sources) in stacks ({(frame, ...) outermost first: count}, each frame
    "name (file:first line)") that the program never ran: source j (its
    functions f{j}, C{j}.__init__, the class body C{j}) is the file
    fresh_{j}.py, or <compiled {j % FRESH_MODULES}> once j >= FRESH_MODULES,
    with first lines j % 5 + 1, + 5 and + 4 (the module's code: 1); f{j} is
    called by C{j}.__init__, which, and the class body, the module's code of
    the same file runs, which the import system runs for a module
    (_call_with_frames_removed) and the program's main() for a compiled
    source. A frame named after a code object that lived at its address
    before (the module's code of the last module, freed once it ran) is one
    of these. Returns [(frame, why)]."""
    first_line = {"module": lambda j: 1, "f": lambda j: j % 5 + 1, "init": lambda j: j % 5 + 5,
                  "class": lambda j: j % 5 + 4}
    called_by = {"f": "init", "init": "module", "class": "module"}
    wrong = []
    for stack in stacks:
        caller = None   # (kind, path, j) of the frame before, if of fresh code, else its name
        for frame in stack:
            name, _, where = frame[:-1].partition(" (")
            path, _, line = where.rpartition(":")
            base = os.path.basename(path)
            m = re.fullmatch(r"fresh_(\d+)\.py", base) or re.fullmatch(r"<compiled (\d+)>", base)
            if not m:
                caller = name
                continue
            i = int(m.group(1))
            n = re.fullmatch(r"f(\d+)|C(\d+)\.__init__|C(\d+)|<module>", name)
            if not n:
                wrong.append((frame, "no such function in fresh code"))
                caller = name
                continue
            kind = "f" if n.group(1) else "init" if n.group(2) else "class" if n.group(3) else "module"
            j = int(n.group(1) or n.group(2) or n.group(3) or i)
            in_file = j == i if base.startswith("fresh_") else kind == "module" or (
                j >= FRESH_MODULES and j % FRESH_MODULES == i)
            if not in_file or int(line) != first_line[kind](j):
                wrong.append((frame, "not a function of its file at that line"))
            elif kind == "module" and caller != ("_call_with_frames_removed" if base.startswith("fresh_")
                                                 else "main"):
                wrong.append((frame, f"run by {caller}"))
            elif kind != "module" and (not isinstance(caller, tuple) or caller[0] != called_by[kind] or
                                       caller[1] != path or (kind == "f" and caller[2] != j)):
                wrong.append((frame, f"called by {caller}"))
            caller = (kind, path, j)
    return wrong


@needs_sampler
@pytest.mark.timing
@pytest.mark.versions("3.11", "3.12", "3.13")
def test_record_fresh_code_objects_named_right(tmp):
    """record --pid at 100 kHz of code objects freed and made again at the
    same addresses (tests/programs/fresh_codes.py: modules imported afresh,
    sources compiled and run): every frame of fresh code is one the program
    ran (fresh_frames_wrong). While the target makes code objects the
    check after a walk reads their headers again; it trusts them by the
    target's counter of code objects made only while that stands still
    (3.12+; 3.11 has none: its headers are read every round, the lists of
    code objects and their entries kept from round to round, pystack.c
    code_reads)."""
    modules = tmp / "modules"
    target = subprocess.Popen([sys.executable, FRESH, str(modules), str(FRESH_MODULES), "100000"],
                              stdout=subprocess.DEVNULL)
    try:
        last = modules / f"fresh_{FRESH_MODULES - 1}.py"
        for _ in range(600):
            if last.exists():
                break
            time.sleep(0.05)
        out = tmp / "fresh.txt"
        r = run(["record", "--pid", str(target.pid), "--rate", str(RATE), "--duration", "2.5", "--format",
                 "collapsed", "-o", str(out)], timeout=120)
    finally:
        target.kill()
        target.wait()
    assert r.returncode == 0, r.stderr
    stacks = {}
    with open(out) as f:
        for line in f:
            st, _, n = line.rstrip("\n").rpartition(" ")
            stacks[tuple(st.split(";"))] = int(n)
    assert not fresh_frames_wrong(stacks), fresh_frames_wrong(stacks)[:10]
    in_fresh = sum(n for s, n in stacks.items() if any("fresh_" in fr.rpartition("/")[2] or "(<compiled " in fr
                                                         for fr in s))
    assert in_fresh >= 200, (in_fresh, r.stderr)


SPIN_AFTER = """
import sys, time
if sys.argv[1] == "sub":
    import _interpreters
    _interpreters.destroy(_interpreters.create())
def spin(n):
    if n:
        return spin(n - 1)
    print("ready", flush=True)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        pass
spin(20)
"""


@needs_sampler
@pytest.mark.versions("3.13")
@pytest.mark.parametrize("made", ["none", "sub"])
def test_counter_trusted_only_without_subinterpreters(tmp, made):
    """3.13 keeps a counter of code objects made per interpreter: the main
    one's is trusted (codes_by_counter) only while no other interpreter
    was ever made, as a subinterpreter's code objects would not move it
    (pystack.c "Code objects by counter"). A target spinning 22 frames
    deep: trusted without a subinterpreter, never once one was made and
    destroyed."""
    with ready_target(["-c", SPIN_AFTER, made]) as target:
        p = profiler.Profiler(rate=2000, pid=target.pid).start()
        try:
            time.sleep(0.5)
        finally:
            p.stop()
    st = p.stats()
    assert st["samples"] >= 50, st
    if made == "none":
        assert st["codes_by_counter"] >= 10 * st["samples"], st
    else:
        assert st["codes_by_counter"] == 0, st


STOP_RATE = 50000   # a sampler that spins (over 10 kHz): one that sleeps misses what it owes, as before
# Real-time priorities for record and the process that stops it, where
# this user may set them (root here), else none.
RT = (lambda level: ["chrt", "-f", str(level)]) if subprocess.run(
    ["chrt", "-f", "1", "true"], stderr=subprocess.DEVNULL).returncode == 0 else (lambda level: [])
STOPPER = """import os, signal, sys, time
pid, seconds = int(sys.argv[1]), float(sys.argv[2])
os.kill(pid, signal.SIGSTOP)
t0 = time.monotonic()
time.sleep(seconds)
t1 = time.monotonic()
os.kill(pid, signal.SIGCONT)
print(t1 - t0)
"""


def record_stopped(tmp, stop_s):
    """Records deep_known at STOP_RATE for 0.6 s, the record process itself
    stopped (SIGSTOP, SIGCONT) for stop_s 0.25 s in, as the machine may keep
    a sampler off its CPU: (ticks missed, the seconds it was stopped, the
    summary). (Not longer: a real-time process may run 0.95 s a second
    (sched_rt_runtime_us), and one spinning 1 s was throttled for 50 ms
    near its end, on a loaded machine, when the rest of that CPU's share
    could not be borrowed: 2,483 ticks missed, not the stop's 600.)"""
    with ready_target([TARGET]) as target:
        # (real-time, so that the machine's own stalls do not come on top
        # of the one made here: a make test's load gave 106 stalls over 20
        # ms a second)
        rec = subprocess.Popen(RT(1) + [sys.executable, "-m", "stackwatch", "record", "--pid",
                                str(target.pid), "--rate", str(STOP_RATE), "--duration", "0.6", "--format",
                                "collapsed", "-o", str(tmp / "stopped.txt")], stderr=subprocess.PIPE, text=True)
        first = rec.stderr.readline()
        assert first.startswith(f"stackwatch: recording process {target.pid} "), first
        time.sleep(0.25)
        # (stopped by a process of its own, real-time above record, so
        # that it keeps its CPU while record spins and the target runs: it
        # prints the stop's length, read between the two signals)
        stop = subprocess.run(RT(2) + [sys.executable, "-c", STOPPER, str(rec.pid), str(stop_s)],
                              stdout=subprocess.PIPE, text=True, timeout=60)
        assert stop.returncode == 0
        stopped = float(stop.stdout)
        err = first + rec.stderr.read()
        assert rec.wait(timeout=60) == 0, err
    m = re.search(r", (\d+) ticks missed in \d+ stalls", err)
    return (int(m.group(1)) if m else 0), stopped, err


@needs_sampler
@pytest.mark.timing
@pytest.mark.versions("3.12")
def test_a_stalled_sampler_makes_up_the_ticks_it_owes(tmp):
    """A sampler kept off its CPU makes up the ticks it owes, up to 20 ms
    of them (sampler_loop.h, SW_SAMPLER_MAKE_UP_NS), and misses those
    beyond: stopped 12 ms, no more than 20 of its 600 ticks missed (rounds
    slow now and then); stopped 80 ms, those of the 60 ms beyond missed,
    give or take 5 ms of them. The rule before missed every tick a stall
    owed. The machine's own stalls come on top of the ones made here: the
    best of up to three runs."""
    slack = 0.005 * STOP_RATE
    for attempt in range(3):
        short, _, err_short = record_stopped(tmp, 0.012)
        long, stopped, err_long = record_stopped(tmp, 0.08)
        beyond = (stopped - 0.020) * STOP_RATE
        if short <= 20 and beyond - slack <= long <= beyond + slack:
            break
    assert short <= 20, err_short
    assert beyond - slack <= long <= beyond + slack, (stopped, err_long)
