"""`stackwatch record --pid` and `stackwatch top`: another process sampled
from outside by the in-process profiler's sampler and frame walker. A
target whose time split is known by construction (tests/programs/
split_603010.py: 60/30/10 of its main thread's CPU time) is recorded, on
this Python and on another release than the tool's; `go tool pprof` reads
the pprof written; a target exiting mid-record leaves a profile and exit
0; `top` runs in tmux with its keys; every bad input is one line."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import NO_GO, PROGRAMS, missing, needs, needs_sampler, run
from go_pprof import top
from mixed_workload import count_of
from stackwatch import load_profile
from stats_bounds import CYCLE, Blocks, time_shares
from test_dump import Parked, one_line_error, pyenv_pythons

TARGET = os.path.join(PROGRAMS, "split_603010.py")
SHARES = {"f60": 0.6, "f30": 0.3, "f10": 0.1}
TOLERANCE = 0.03
TMUX = shutil.which("tmux")
# This Python, and one release of another minor version (3.13, else 3.9,
# else any other the generated layouts know).
OTHER = pyenv_pythons(("13",)) or pyenv_pythons(("9",)) or pyenv_pythons(("9", "10", "11", "12"))
OTHER = {v: p for v, p in OTHER.items() if not v.startswith("%d.%d." % sys.version_info[:2])}
PYTHONS = {"self": sys.executable}
if OTHER:
    v = sorted(OTHER)[-1]
    PYTHONS[v] = OTHER[v]


class Target:
    """split_603010.py running (until stop(), or for `seconds`)."""

    def __init__(self, python=sys.executable, seconds=None, args=()):
        args = [python, TARGET] + ([str(seconds)] if seconds else list(args))
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline() == "ready\n"
        self.pid = self.p.pid

    def stop(self):
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        assert self.p.wait(timeout=60) == 0
        self.p.stdout.close()


def summary_line(stderr):
    m = re.search(r"^stackwatch: (\d+) samples of process \d+ \(Python ([\d.]+)\) in [\d.]+ s: ([\d.]+)% "
                  r"failed \(\d+ of \d+\), (\d+) rounds/s achieved of (\d+) asked", stderr, re.M)
    assert m, stderr
    return int(m.group(1)), m.group(2), float(m.group(3)), int(m.group(4))


class Recorded:
    """A profile file read back, as stats_bounds.time_shares takes a profiler."""

    def __init__(self, path):
        self.h = load_profile(path)
        self.mode = self.h.info()["mode"]

    def history(self, thread_id=None):
        return self.h


def record_shares(tmp, python, *more):
    """Records the target (python runs it) by CPU time with record --pid
    and the options more, and checks its shares of f60/f30/f10 against its
    own log of what it ran: within the bound stats_bounds.time_shares
    derives from the run's cycles (1 false failure in 10,000), and within
    3 points of 60/30/10 once that bound is at most 3 points: on a machine
    busy enough to make it wider, the target is recorded longer (2, 4,
    then 8 s). Returns (the profile read back, its path, record's result,
    the samples stored, the target's version, the failed %)."""
    names = sorted(SHARES)
    for duration in (2.0, 4.0, 8.0):
        truth = tmp / "blocks.json"
        target = Target(python, args=["-", str(truth)])
        try:
            out = tmp / "rec.swprof"
            r = run(["record", "--pid", str(target.pid), "--duration", str(duration), "--rate", "2000",
                     "--cycle", CYCLE, "--mode", "cpu", "-o", str(out)] + list(more), timeout=120)
            assert r.returncode == 0, r.stderr
        finally:
            target.stop()
        stored, target_version, failed_pct, _ = summary_line(r.stderr)
        blocks = Blocks()
        for row in json.loads(truth.read_text()):
            blocks.add(*row)
        prof = Recorded(out)
        bad, report = time_shares(prof, blocks, lambda t: {n: count_of(t, n, "time_ns") for n in names})
        assert not bad, (bad, report, r.stderr)
        if max(report[n][3] for n in names) <= TOLERANCE:
            assert all(abs(report[n][0] - SHARES[n]) <= TOLERANCE for n in names), (report, r.stderr)
            break
    return prof, out, r, stored, target_version, failed_pct


@needs_sampler
@needs(NO_GO)
@pytest.mark.timing
@pytest.mark.parametrize("version", [pytest.param(v, marks=[] if v == "self" else [pytest.mark.versions("3.12")])
                                     for v in sorted(PYTHONS)])
def test_record_shares_within_3_points(tmp, version):
    """The target's own shares of f60/f30/f10 in what record --pid wrote
    are its real ones (record_shares). CPU mode, as the split is one of
    CPU time: at load 16 on 2 cores its bound was 1.2-5 points at 2 s,
    wall mode's 3-26 (a stall of the target is charged to the function it
    stalled in). `go tool pprof` reads the export of the same record: its
    flat samples are the profile's."""
    names = sorted(SHARES)
    prof, out, r, stored, target_version, failed_pct = record_shares(tmp, PYTHONS[version])
    if version != "self":
        assert target_version == version
    assert failed_pct < 5, r.stderr
    # Idle threads are left out by default: the main thread is all of it.
    whole = prof.h.tree().tree()
    assert count_of(whole, "sleeper") == 0 and count_of(whole, "main") == whole["count"] == stored, r.stderr
    pb = tmp / "rec.pb.gz"
    assert run(["export", str(out), "-o", str(pb)]).returncode == 0
    flat = {name: f for name, (f, _) in top(pb, "samples")[2].items()}
    own = {n: 0 for n in names}
    stack = [whole]
    while stack:
        node = stack.pop()
        if node["name"] in own:
            own[node["name"]] += node["self"]
        stack.extend(node["children"])
    assert {n: flat.get(n, 0) for n in names} == own


@needs_sampler
@needs(NO_GO)
@pytest.mark.versions("3.9", "3.12")   # record's end, not the reader: both pending-call eras
def test_target_exits_mid_record(tmp):
    """Without --duration, record runs until the target exits, then writes
    what it sampled (--idle: the sleeping thread's samples too) and exits
    0; `go tool pprof` reads the pprof it wrote."""
    target = Target()
    out = tmp / "rec.pb.gz"
    t0 = time.monotonic()
    rec = subprocess.Popen([sys.executable, "-m", "stackwatch", "record", "--pid", str(target.pid), "--idle",
                            "-o", str(out)], stderr=subprocess.PIPE, text=True)
    # It says when it has begun; the target then runs 1.5 s more and exits.
    first = rec.stderr.readline()
    assert first.startswith(f"stackwatch: recording process {target.pid} (Python "), first
    time.sleep(1.5)
    target.stop()
    r = subprocess.CompletedProcess(rec.args, rec.wait(timeout=60), None, first + rec.stderr.read())
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    assert "(the process exited)" in r.stderr and took < 30, r.stderr
    shown, total, rows = top(out, "samples")
    assert shown == total == summary_line(r.stderr)[0] > 0, r.stderr
    assert {"f60", "f30", "f10", "main", "<module>", "sleeper"} <= set(rows), rows
    assert rows["f60"][0] > rows["f10"][0], rows


@needs_sampler
def test_ctrl_c_ends_record(tmp):
    """Without --duration, SIGINT (Ctrl-C) ends record: what it sampled is
    written, exit 0, the target still running."""
    target = Target()
    out = tmp / "rec.collapsed.txt"
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COVERAGE_CORE")}
        rec = subprocess.Popen([sys.executable, "-m", "stackwatch", "record", "--pid", str(target.pid), "-o",
                                str(out)], stderr=subprocess.PIPE, text=True, env=env)
        first = rec.stderr.readline()      # it has begun (and handles SIGINT)
        assert first.startswith("stackwatch: recording process "), first
        time.sleep(0.5)
        rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=60)
        err = first + err
        assert rec.returncode == 0, err
        assert target.p.poll() is None
    finally:
        target.stop()
    assert summary_line(err)[0] > 0 and "exited" not in err, err
    assert any(line.startswith(("<module>", "f60", "main")) or ";f60" in line for line in out.read_text().splitlines())


@needs_sampler
def test_bad_input_is_one_line(tmp):
    """No such process, not Python, a rate over 200 kHz, this very
    stackwatch (through the sampler's own start), dump --native --locals:
    one line, non-zero exit."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    cases = [(["record", "--pid", str(dead.pid), "--duration", "1"], "no process"),
             (["top", str(dead.pid), "--once"], "no process"),
             (["dump", "--native", "--locals", str(os.getpid())], "--native")]
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        cases += [(["record", "--pid", str(sleeper.pid), "--duration", "1"], "not"),
                  (["record", "--pid", str(sleeper.pid), "--rate", "200001"], "above the maximum of 200000 hz")]
        for args, word in cases:
            r = run(args, timeout=60)
            assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
            assert r.stderr.startswith("stackwatch: error: ") and word in r.stderr.lower(), (args, r.stderr)
    finally:
        sleeper.kill()
        sleeper.wait()
    # The sampler refuses its own process when pointed at it by pid.
    from stackwatch import profiler
    with pytest.raises(ValueError, match="stackwatch"):
        profiler.Profiler(pid=os.getpid()).start()


@needs_sampler
@pytest.mark.versions("3.12")
def test_record_gil_keeps_only_the_gil_holder(tmp):
    """--gil leaves out the samples of the threads not holding the GIL: of
    the target's threads blocked in C without it (the sleeper in a lock's
    wait, the stdin reader in read()), kept with --idle, none is left
    with --idle --gil; the busy main thread's samples stay."""
    target = Target()
    try:
        samples = {}
        for opts in (("--idle",), ("--idle", "--gil")):
            out = tmp / "gil.swprof"
            r = run(["record", "--pid", str(target.pid), "--duration", "0.5", "-o", str(out), *opts], timeout=60)
            assert r.returncode == 0, r.stderr
            # by thread: the main one (its native id is the pid's) or another
            samples[opts] = {"main" if t["native_id"] == target.pid else "other " + str(t["native_id"]): t["samples"]
                             for t in load_profile(out).threads()}
    finally:
        target.stop()
    idle, gil = samples[("--idle",)], samples[("--idle", "--gil")]
    assert len(idle) == 3 and all(n > 0 for n in idle.values()), idle
    assert gil.get("main", 0) > 0 and not any(n for name, n in gil.items() if name != "main"), gil


def test_unsupported_release_and_permission(tmp):
    """record and top refuse a release no layout is known for (3.8), naming
    it, and explain a permission denied (a non-dumpable target, no
    CAP_SYS_PTRACE), with dump's lines: one place words them."""
    releases = pyenv_pythons(("8",))
    if not releases:
        missing("no pyenv CPython 3.8")
    version = max(releases)
    target = Target(releases[version])   # runs on 3.8 too
    try:
        for args in (["record", "--pid", str(target.pid), "--duration", "1"], ["top", str(target.pid), "--once"]):
            one_line_error(run(args), f"runs Python {version}, which this stackwatch cannot read", "3.13.")
    finally:
        target.stop()
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        return
    p = Parked(sys.executable, tmp, prelude="import ctypes; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)")
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COVERAGE_PROCESS_START")}
        r = subprocess.run([setpriv, "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace", sys.executable, "-m",
                            "stackwatch", "record", "--pid", str(p.pid), "--duration", "1"], capture_output=True,
                           text=True, timeout=120, env=env)
        one_line_error(r, f"permission denied reading process {p.pid}", "CAP_SYS_PTRACE", "non-dumpable")
    finally:
        p.stop()


def screen_rows(text):
    """[(own%, total%, function)] of a top screen."""
    rows = []
    for line in text.splitlines():
        m = re.match(r"^\s*([\d.]+)%\s+([\d.]+)%\s+(\S+)", line)
        if m:
            rows.append((float(m.group(1)), float(m.group(2)), m.group(3)))
    return rows


@pytest.mark.versions("3.9", "3.12")   # the view over the same reader on every Python
@needs_sampler
def test_top_once():
    target = Target()
    try:
        r = run(["top", str(target.pid), "--once"], timeout=60)
    finally:
        target.stop()
    assert r.returncode == 0, r.stderr
    assert re.search(r"^\d+ samples/s  GIL [\d.]+%  idle [\d.]+%", r.stdout, re.M), r.stdout
    rows = screen_rows(r.stdout)
    assert rows and rows[0][2] == "f60", r.stdout
    assert [own for own, _, _ in rows] == sorted((own for own, _, _ in rows), reverse=True)


@pytest.mark.versions("3.12")   # the native unwinder is record --pid --native's (test_dump_native.py)
@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64",
                    reason="native frames from outside: Linux x86-64")
@needs_sampler
def test_top_once_native():
    """top --native: the C frames merged in, each row of one naming its
    library; the target's main thread spins on time.thread_time(), whose
    clock_gettime runs in the vDSO (no file: its symbols read from the
    target's memory), where most samples stop it: named, not "??"."""
    target = Target()
    try:
        r = run(["top", str(target.pid), "--once", "--native"], timeout=60)
    finally:
        target.stop()
    assert r.returncode == 0, r.stderr
    rows = {}
    for line in r.stdout.splitlines():
        # (a row is cut at the screen's width: a C function's source path may lose its end)
        m = re.match(r"^\s*([\d.]+)%\s+([\d.]+)%\s+(.+?)  \((.*?)\)?$", line)
        if m:
            rows[(m.group(3), m.group(4))] = (float(m.group(1)), float(m.group(2)))
    assert ("clock_gettime [native]", "[vdso]") in rows and rows[("clock_gettime [native]", "[vdso]")][0] > 0, \
        r.stdout
    assert not [k for k in rows if k[1] == "[vdso]" and k[0].startswith("??")], r.stdout
    # merged: the Python functions and the C ones below them (a sample whose
    # thread could not be stopped in time has its Python frames only)
    python = {k[0] for k in rows if not k[0].endswith(" [native]")}
    assert "f60" in python and [v for k, v in rows.items() if k[0] == "Py_RunMain [native]" and v[1] > 0], r.stdout


@pytest.mark.versions("3.9", "3.12")   # the view over the same reader on every Python
@needs_sampler
def test_top_in_tmux(tmp):
    """top in a real terminal: the busiest function first; 't' sorts by
    total (the main loop first); 'q' quits."""
    if not TMUX:
        missing("tmux is not installed (Debian package tmux; scripts/install-deps.sh installs it)")
    target = Target()
    session = f"swtop{os.getpid()}"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COVERAGE_CORE", "COVERAGE_PROCESS_START")}
    tmux = lambda *a: subprocess.run([TMUX, "-L", session] + list(a), capture_output=True, text=True, env=env,
                                     timeout=30)
    cmd = f"{sys.executable} -m stackwatch top {target.pid}"
    try:
        assert tmux("new-session", "-d", "-s", session, "-x", "150", "-y", "40", cmd).returncode == 0

        def wait_for(check):
            deadline = time.monotonic() + 30
            text = ""
            while time.monotonic() < deadline:
                text = tmux("capture-pane", "-p", "-t", session).stdout
                if check(text):
                    return text
                time.sleep(0.2)
            raise AssertionError(text)

        text = wait_for(lambda t: "sort: own" in t and screen_rows(t))
        assert screen_rows(text)[0][2] == "f60", text
        tmux("send-keys", "-t", session, "t")
        text = wait_for(lambda t: "sort: total" in t and screen_rows(t))
        rows = screen_rows(text)
        assert rows[0][2] in ("main", "<module>") and rows[0][1] >= rows[-1][1], text
        # 'a' shows one thread: the first by id, then the next; the main thread's rows are f60's and its callers'
        tmux("send-keys", "-t", session, "a")
        text = wait_for(lambda t: ", thread " in t)
        tmux("send-keys", "-t", session, "q")
        deadline = time.monotonic() + 30
        while tmux("has-session", "-t", session).returncode == 0:
            assert time.monotonic() < deadline, "top did not quit on q"
            time.sleep(0.2)
    finally:
        tmux("kill-server")
        target.stop()


PARENT = os.path.join(PROGRAMS, "parent_of_workers.py")


def roots(collapsed):
    """{root frame: set of its stacks (tuples of function names, the root
    left out)} of collapsed stacks."""
    out = {}
    for line in collapsed.read_text().splitlines():
        frames = [f.rsplit(" (", 1)[0] for f in line.rsplit(" ", 1)[0].split(";")]
        out.setdefault(frames[0], set()).add(tuple(frames[1:]))
    return out


@needs_sampler
@pytest.mark.versions("3.12")
def test_record_subprocesses(tmp):
    """--subprocesses: a parent running two Python workers (the second on
    another release when there is one) and `sleep`. Without the flag only
    the parent is in the output; with it, one output where each Python
    process is its own root ("pid N NAME"), each worker's stack exactly the
    one it runs (which worker ran which function: their own log), the
    parent's wait under its root, and `sleep` left out without a word."""
    log, stop = tmp / "workers.log", tmp / "stop"
    other = PYTHONS[sorted(OTHER)[-1]] if OTHER else sys.executable
    parent = subprocess.Popen([sys.executable, PARENT, str(log), str(stop), sys.executable, other],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline() == "ready\n"
        alone, merged = tmp / "alone.collapsed.txt", tmp / "merged.collapsed.txt"
        r0 = run(["record", "--pid", str(parent.pid), "--idle", "--duration", "0.3", "-o", str(alone)], timeout=60)
        r = run(["record", "--pid", str(parent.pid), "--subprocesses", "--idle", "--duration", "1", "-o",
                 str(merged)], timeout=60)
    finally:
        stop.write_text("")
        assert parent.wait(timeout=60) == 0
        parent.stdout.close()
    assert r0.returncode == 0 and r.returncode == 0, r0.stderr + r.stderr
    ran = {int(pid): work for pid, work in (line.split() for line in log.read_text().splitlines())}
    assert sorted(ran.values()) == ["work_a", "work_b"], ran
    seen = roots(alone)
    assert list(seen) == ["<module>"] and all(st[:2] == ("main", "wait_for_workers") for st in seen["<module>"]), seen
    seen = roots(merged)
    by_pid = {int(root.split()[1]): stacks for root, stacks in seen.items()}
    assert set(by_pid) == {parent.pid} | set(ran), (seen, r.stderr)
    assert all(root.startswith(f"pid {root.split()[1]} parent_of_workers.py ") for root in seen), seen
    # Every stack is one the process had: the workers burn all the time
    # they are recorded, the parent waits for them.
    assert all(st[:3] == ("<module>", "main", "wait_for_workers") for st in by_pid[parent.pid]), seen
    for pid, work in ran.items():
        assert by_pid[pid] == {("<module>", "worker_main", work, "burn")}, (pid, work, seen)
    assert "2 more processes sampled" in r.stderr and "not in the profile" not in r.stderr, r.stderr


@pytest.mark.versions("3.12")
def test_descendants_both_ways():
    """The descendants of a process tree (sh running two sleeps, one in a
    subshell of its own) are the same from the kernel's lists of children
    as from the scan of every process's parent (the way on a kernel
    without those lists), and are the processes the tree really has."""
    from stackwatch.cli.record_children import _children_scan, descendants
    p = subprocess.Popen(["sh", "-c", "(sleep 30 & wait) & sleep 30 & echo go; wait"], stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"go\n"
        def comms_of(procs):
            try:
                return sorted(open(f"/proc/{pid}/comm").read().strip() for pid, _ in procs)
            except OSError:
                return []
        # Until both sleeps run (a child forked to run one is an sh until
        # its exec).
        deadline = time.monotonic() + 10
        while comms_of(descendants(p.pid)) != ["sh", "sleep", "sleep"] and time.monotonic() < deadline:
            time.sleep(0.01)
        found = descendants(p.pid)
        scan = _children_scan()
        by_scan, todo = [], [p.pid]
        while todo:
            parent = todo.pop(0)
            by_scan += [(k, parent) for k in sorted(scan.get(parent, []))]
            todo += sorted(scan.get(parent, []))
        assert sorted(found) == sorted(by_scan) and len(found) == 3, (found, by_scan)
        assert comms_of(found) == ["sh", "sleep", "sleep"], comms_of(found)
    finally:
        for pid, _ in descendants(p.pid)[::-1]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:      # a subshell ends once its sleep is killed
                pass
        p.kill()
        p.wait()
        p.stdout.close()


@needs_sampler
@pytest.mark.timing
@pytest.mark.versions("3.12")
def test_record_subprocesses_child_shares(tmp):
    """A descendant's profile is as true as the target's: split_603010.py
    run by a parent process, recorded with --subprocesses into profile
    files (the child's beside the parent's, with its pid and parent in
    META), gives the child's own shares of f60/f30/f10 (its log of what
    it ran) within stats_bounds.time_shares's bound (CPU mode, as in
    test_record_shares_within_3_points)."""
    truth = tmp / "blocks.json"
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))",
                               sys.executable, TARGET, "-", str(truth)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline() == "ready\n"
        out = tmp / "rec.swprof"
        r = run(["record", "--pid", str(parent.pid), "--subprocesses", "--duration", "1.5", "--rate", "2000",
                 "--cycle", CYCLE, "--mode", "cpu", "-o", str(out)], timeout=120)
    finally:
        parent.stdin.close()
        assert parent.wait(timeout=60) == 0
        parent.stdout.close()
    assert r.returncode == 0, r.stderr
    files = [p for p in tmp.iterdir() if re.fullmatch(r"rec\.\d+\.swprof", p.name)]
    assert len(files) == 1, (files, r.stderr)
    prof = Recorded(files[0])
    info = prof.h.info()
    assert info["parent_pid"] == parent.pid and f"rec.{info['pid']}.swprof" == files[0].name, info
    blocks = Blocks()
    for row in json.loads(truth.read_text()):
        blocks.add(*row)
    names = sorted(SHARES)
    bad, report = time_shares(prof, blocks, lambda t: {n: count_of(t, n, "time_ns") for n in names})
    assert not bad, (bad, report, r.stderr)
