"""Exact and sampled on one timeline (`stackwatch run --sample`): the
sampler's samples are in the trace file on the trace's clock, so the time
inside a long C call (time.sleep, sorted), one slice in the exact trace, is
covered by samples whose stacks hold that function; the exports show them
beside each thread's slices."""
import json
import math
import sys

import pytest

import stackwatch
from conftest import chrome_slices, perfetto_timeline, run, run_traced, slice_of, thread_pos
from stackwatch import Trace

pytestmark = pytest.mark.skipif(sys.version_info >= (3, 14), reason="the sampler supports 3.9-3.13")

PROGRAM = '''\
import threading
import time


def f():
    time.sleep(0.3)


def g():
    return sorted(range(1_500_000, 0, -1))


def nap():
    time.sleep(0.2)


def main():
    th = threading.Thread(target=nap, name="sleeper")
    th.start()
    f()
    g()
    th.join()


main()
'''

RATE_NS = 1_000_000


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    out, r = run_traced(tmp_path_factory.mktemp("samples"), PROGRAM, "--sample=1ms")
    assert " samples" in r.stderr
    return out


def samples_inside(t, name, func, margin):
    """The trace's samples of thread `name` taken inside its call of
    `func`, `margin` ns away from both ends (how many there are depends on
    how busy the machine was: an export must have exactly these)."""
    pos = thread_pos(t, name)
    start, end = slice_of(t, pos, func)
    return [s for s in t.samples(pos) if start + margin <= s.t_ns <= end - margin]


@pytest.mark.parametrize("thread,func,seconds,state", [("MainThread", "f", 0.3, "idle"),
                                                        ("MainThread", "g", None, "running"),
                                                        ("sleeper", "nap", 0.2, "idle")])
@pytest.mark.timing
def test_samples_inside_a_long_c_call(traced, thread, func, seconds, state):
    t = Trace(traced)
    pos = thread_pos(t, thread)
    start, end = slice_of(t, pos, func)
    dur = end - start
    if seconds:
        assert dur >= seconds * 1e9
    inside = [s for s in t.samples(pos) if start <= s.t_ns <= end]
    # Away from the edges (a sample and a call record are taken a few
    # microseconds apart), every sample has the function on its stack.
    core = [s for s in inside if start + 2_000_000 <= s.t_ns <= end - 2_000_000]
    assert core and all(func in [f.name for f in s.stack] for s in core)
    assert all(s.stack[-1].name == func for s in core)  # no Python frame below it: a C call
    if thread == "MainThread":  # the program's own frames only, as in the trace
        assert all(s.stack[0].name == "<module>" and s.stack[0].filename.endswith("prog.py") for s in core)
    # At most one round per interval: a round never starts before its
    # interval, and one the sampler could not make in time, on a loaded
    # machine, is made up right after only while it owes at most
    # SW_SAMPLER_CATCH_UP_NS of them (1 ms: one round here), else skipped:
    # rounds of ticks from 2 intervals before the slice to 1 after it
    # (a 3.11 make test had 303 in a slice of 300.1 ms), the slice holding
    # the ticks of a whole number of intervals, rounded up (a 3.13 make
    # test had 122 in 118.5 ms, its first sample after a stall of 4.6 ms)...
    assert len(inside) <= math.ceil(dur / RATE_NS) + 3, (len(inside), dur)
    # ...and each sample's weight is the wall time since the previous round
    # (the intervals it stands for): the thread's samples tile the time, so
    # those inside the slice add up to its duration, give or take the first
    # one's span (which begins before the slice) and the time from the last
    # one to the next round (of any thread: this one may have ended). Exact
    # however many rounds were missed.
    every = t.samples(pos)
    assert all(b.t_ns - a.t_ns == b.weight_ns for a, b in zip(every, every[1:]))
    covered = sum(s.weight_ns for s in inside)
    next_round = min([s.t_ns for s in t.samples() if s.t_ns > end] or [t.end_ns])
    assert covered - inside[0].weight_ns <= dur <= covered + next_round - inside[-1].t_ns, (covered, dur)
    # What the kernel said the thread was doing.
    states = [s.state for s in core]
    assert states.count(state) > len(states) / 2, states


CHURN = '''\
import threading
import time


def short():
    time.sleep(0.002)


def main():
    for _ in range(100):
        threads = [threading.Thread(target=short) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()


main()
'''


@pytest.mark.timing
def test_threads_that_end_leave_the_others_samples_whole(tmp_path):
    """A thread that ends while a round walks the thread list has its state
    freed under the reader, its link to the next thread overwritten: the
    threads after it (the main thread is last, new threads go first) are
    still sampled that round, the list read again from its head
    (sampler.relisted; several times when threads end together), so the
    main thread's samples tile its time; and a thread state met whose back
    link is not the state that led to it (freed and made again for a
    thread started since, first in the list) has the list read again too,
    so no thread is sampled twice in a round. (Before, that round had no sample
    of them: 3-8 rounds a run of this program, 1 run in ~200 of the one
    above. And the main thread read at a run of the interpreter half made
    with a stale current frame of NULL was taken for a thread without
    Python code, its sample lost: 1 run in ~50; now torn, redone.)"""
    out, _ = run_traced(tmp_path, CHURN, "--sample=1ms")
    t = Trace(out)
    every = t.samples(thread_pos(t, "MainThread"))
    assert len(every) > 100
    assert all(b.t_ns - a.t_ns == b.weight_ns > 0 for a, b in zip(every, every[1:]))   # (one sample a round)


def test_samples_lie_within_the_trace(traced):
    t = Trace(traced)
    samples = t.samples()
    assert len(samples) == t.sample_count() == sum(th["samples"] for th in t.threads)
    assert all(0 <= s.t_ns <= t.end_ns for s in samples)
    assert [s.t_ns for s in samples] == sorted(s.t_ns for s in samples)
    assert {t.threads[s.thread]["name"] for s in samples} >= {"MainThread", "sleeper"}
    # stackwatch's own frames are left out, as in the trace.
    assert not any("stackwatch" in f.filename for s in samples for f in s.stack)
    assert t._t.samples_unattributed == 0


@pytest.mark.timing
def test_perfetto_shows_samples_beside_the_slices(traced, tmp_path):
    t = Trace(traced)
    tl = perfetto_timeline(traced, tmp_path / "t.pftrace")
    samples = []
    for ts, thread_track, te in tl.samples:
        frames = [fr.function_name for fr in te.callstack.frames]
        assert te.name == (frames[-1] if frames else "(no Python frame)")
        samples.append((ts, thread_track, frames))
    assert len(samples) == t.sample_count()
    begin, end, thread_track = [(b, e, tr) for name, b, e, tr, _ in tl.slices
                                if name == "f" and tl.tracks[tr].HasField("thread")][-1]
    inside = [fr for ts, tr, fr in samples if tr == thread_track and begin + 2_000_000 <= ts <= end - 2_000_000]
    assert len(inside) == len(samples_inside(t, "MainThread", "f", 2_000_000)) > 0
    assert all(fr[-1] == "f" for fr in inside)
    assert all(fr[-2] == "main" for fr in inside)


@pytest.mark.timing
def test_chrome_shows_samples(traced, tmp_path):
    out = tmp_path / "t.json"
    r = run(["export", traced, "--format", "chrome", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    t = Trace(traced)
    samples = [e for e in doc["traceEvents"] if e.get("cat") == "sample"]
    assert len(samples) == t.sample_count()
    lo, hi, tid = [(b, e, tid) for name, b, e, tid in chrome_slices(doc) if name == "f"][-1]
    inside = [e for e in samples if e["tid"] == tid and lo + 2000 <= e["ts"] <= hi - 2000]
    assert len(inside) == len(samples_inside(t, "MainThread", "f", 2_000_000)) > 0
    assert all(e["name"] == "f" and e["args"]["stack"].endswith("main;f") for e in inside)


@pytest.mark.timing
def test_stats_reports_samples(traced):
    r = run(["stats", traced])
    assert r.returncode == 0, r.stderr
    t = Trace(traced)
    assert f"samples: {t.sample_count()} (" in r.stdout
    assert "top functions by samples" in r.stdout
    own_f = sum(1 for s in t.samples() if s.stack and s.stack[-1].name == "f")
    table = r.stdout.split("top functions by samples")[1]
    row = next(line for line in table.splitlines() if line.rstrip().endswith("prog.py:5)"))
    # (how many there are depends on how busy the machine was: f's samples
    # in the trace are what the table must count, every one of them; those
    # inside f's slice count only away from its edges, as a sample and a
    # call record are taken microseconds apart: 1 ns from them, 3.9 once had
    # 298 inside and 297 of f)
    assert int(row.split()[0]) == own_f >= len(samples_inside(t, "MainThread", "f", 2_000_000)) > 0


@pytest.mark.timing
def test_api_option(tmp_path):
    import threading
    import time

    from stackwatch.tracer import session as api

    # The sampler samples every Python thread of the process: under
    # pytest -n, xdist's own (started by _thread: not in threading's
    # count) too. Only this test's thread is the program's.
    threads = len(sys._current_frames())

    def sleepy():
        # 100 ms, then until the sampler has stored 150 samples of each
        # thread (a loaded machine makes it miss rounds: wait for samples,
        # not for time)
        time.sleep(0.1)
        give_up = time.perf_counter() + 30
        while api._sampler.stats()["stored"] < 150 * threads and time.perf_counter() < give_up:
            time.sleep(0.01)

    p = str(tmp_path / "a.swt")
    with stackwatch.trace(p, sample="500us") as tr:
        sleepy()
    assert tr.summary.samples >= 150
    t = Trace(p)
    assert t.sample_count() == tr.summary.samples
    mine = thread_pos(t, threading.current_thread().name)
    start, end = slice_of(t, mine, "sleepy")
    inside = [s for s in t.samples(mine) if start + 1_000_000 <= s.t_ns <= end - 1_000_000]
    assert len(inside) > 100 and all(s.stack[-1].name.endswith("sleepy") for s in inside)
    assert not stackwatch.is_tracing()


@pytest.mark.parametrize("value", ["fast", "5", "0hz", "10ns", "-1ms", "1e9hz", "", 3])
def test_api_rejects_bad_sample_values(tmp_path, value):
    with pytest.raises(ValueError):
        stackwatch.start(str(tmp_path / "x.swt"), sample=value)
    assert not stackwatch.is_tracing()


@pytest.mark.parametrize("arg", ["--sample=0", "--sample=abc", "--sample=5", "--sample=10ns", "--sample=0hz",
                                 "--sample=2min"])
def test_cli_rejects_bad_sample_values(tmp_path, arg):
    prog = tmp_path / "p.py"
    prog.write_text("print('ran')\n")
    r = run(["run", arg, "-o", str(tmp_path / "o.swt"), str(prog)])
    assert r.returncode == 2 and "ran" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stackwatch: error: --sample: "), r.stderr


@pytest.mark.timing
def test_cli_sample_before_the_program(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("import time\ntime.sleep(0.2)\nprint('ran')\n")
    r = run(["run", "--sample", "-o", str(tmp_path / "o.swt"), str(prog)])
    assert r.returncode == 0, r.stderr
    r = run(["run", "-o", str(tmp_path / "o.swt"), "--sample", str(prog)])
    assert r.returncode == 0 and "ran" in r.stdout, r.stderr
    # The sampler ran through the program's 0.2 s: at 1 ms, 200 rounds
    # were due, taken or missed (a busy machine makes it miss some; END
    # counts both), and every sample taken is in the file.
    t = Trace(str(tmp_path / "o.swt"))
    # (>= 180: a round late by less than an interval is neither)
    assert t.meta["sampler.ticks"] + t.meta["sampler.missed"] >= 180, t.meta
    assert t.sample_count() == t.meta["sampler.stored"] > 0
    r = run(["run", "--sample", "--no-trace", "--probes", str(prog)])
    assert r.returncode == 2 and "--no-trace" in r.stderr


@pytest.mark.timing
def test_session_stop_stops_the_sampler_first(tmp_path):
    """The session's own stop (here called directly, bypassing the API's
    order) stops the sampler and writes its last samples before END: the
    writer is never used after it closes."""
    import time

    from stackwatch import _native
    from stackwatch.tracer import session as api
    p = str(tmp_path / "d.swt")
    stackwatch.start(p, sample="200us")
    sampler = api._sampler
    give_up = time.perf_counter() + 30
    while sampler.stats()["stored"] <= 50 and time.perf_counter() < give_up:
        time.sleep(0.01)
    _native.stop()
    time.sleep(0.01)
    with pytest.raises(RuntimeError, match="not running"):
        sampler.stop()
    stats = sampler.stats()
    api._sampler = None
    api._session = None
    stackwatch.stop() if stackwatch.is_tracing() else None
    t = Trace(p)
    assert t.complete and t.damage is None
    assert t.sample_count() == stats["stored"] > 50 and stats["dropped"] == 0
    assert all(s.t_ns <= t.end_ns for s in t.samples())


def test_trace_mode_sampler_needs_a_session_and_is_alone(tmp_path):
    from stackwatch import _native
    with pytest.raises(RuntimeError, match="running trace session"):
        _native.Sampler(1_000_000, trace=True).start()
    with stackwatch.trace(str(tmp_path / "one.swt"), sample="1ms"):
        with pytest.raises(RuntimeError, match="already writes"):
            _native.Sampler(1_000_000, trace=True).start()
    with pytest.raises(ValueError, match="wall"):
        _native.Sampler(1_000_000, trace=True, mode="cpu")


def test_trace_mode_sampler_stopped_early_detaches_itself(tmp_path):
    """A sampler that stops by itself writes its last samples and detaches
    from the session (ext/tracer/attachments.h): the stream is free again
    for another producer, which the session's stop then detaches (its
    samples all written before END)."""
    import time

    from stackwatch import _native

    def sampled(s):
        give_up = time.perf_counter() + 30
        while s.stats()["stored"] < 5 and time.perf_counter() < give_up:
            sum(range(20000))
        return s.stats()["stored"]

    p = str(tmp_path / "two.swt")
    with stackwatch.trace(p):
        first = _native.Sampler(500_000, trace=True)
        first.start()
        sampled(first)
        first.stop()
        n1 = first.stats()["stored"]
        second = _native.Sampler(500_000, trace=True)
        second.start()
        sampled(second)
    with pytest.raises(RuntimeError, match="not running"):
        second.stop()
    n2 = second.stats()["stored"]
    t = Trace(p)
    assert t.complete and t.damage is None
    assert n1 >= 5 and n2 >= 5 and t.sample_count() == n1 + n2
    assert all(s.t_ns <= t.end_ns for s in t.samples())
