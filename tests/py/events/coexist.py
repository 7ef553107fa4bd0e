"""What the coexistence tests (test_coexist_*.py, one file per other tool:
coverage.py, pdb/bdb, a user's sys.settrace/sys.setprofile function,
another PEP 523 frame evaluator, cProfile) share: stackwatch's and the other
tools' call counts, a user's hook functions, a non-interactive debugger,
and the ground truth of the workload's line events.

Every test checks that neither tool disables the other, whether they run
side by side or one starts or stops while the other runs: each tool's
counts stay exact, and what the other installed is still installed after
stackwatch stops.

The workload (tests/programs/coexist_work.py) makes a known number of calls
per function (fib(12) = 465 calls, 200 __init__ calls, 50 len() calls).
Programs that must run in a process of their own (under `coverage run`,
pdb reading stdin, a compiled frame evaluator) are tests/programs/coexist_*.py.

Line events (test_coexist_* tests "..._line_events"): on 3.12+ stackwatch's
line events come from sys.monitoring and every tool gets all of them. On
3.9-3.11 they come from the C trace hook, of which a thread has one: while
another tool's trace function is installed stackwatch's line events on that
thread are not reported, and stackwatch says so (a warning and the session's
error); when the other tool removes its trace function with
sys.settrace(None), stackwatch's comes back.
"""
import bdb
import functools
import json
import os
import pstats
import subprocess
import sys
from collections import Counter

import stackwatch
from stackwatch.tracer.tracefile import ENTER_KINDS, Trace

from conftest import PROGRAMS, run
import coexist_work as w

WORK = "coexist_work.py"
WORK_PATH = os.path.join(PROGRAMS, WORK)
LEN = w.LEN_CALLS
HAS_SYSMON = sys.version_info >= (3, 12)
WORK_GLOB = "*" + WORK
DISPLACED = "trace function"   # in the error and warning of a displaced trace function


# Was a stackwatch bug on 3.13 (fixed; pinned by test_init_calls_exact_when_
# another_tool_runs_python_at_py_start): an __init__ frame entered through the
# frame hook was recorded a second time when a sys.monitoring tool with a
# higher id than stackwatch's ran Python code at the __init__'s PY_START. All
# counts are now compared exactly.
INIT_DOUBLE_BUG = False


def sw_counts(path):
    """stackwatch's calls per function: Python functions of the workload by
    code name, and C functions (c_calls=True) called directly from them by
    qualname, e.g. builtins.len (C calls made by other tools' Python code,
    e.g. coverage's start(), are left out)."""
    t = Trace(path)
    py, c = Counter(), Counter()
    for r in t.stats():
        code = t.codes[r.code]
        if os.path.basename(code.filename) == WORK:
            py[code.name] += r.calls
    for th in range(len(t.threads)):
        stack = []   # code of the open frame at each depth
        for e in t.events(th):
            if e.kind not in ENTER_KINDS or e.synthetic:
                continue
            code = t.codes[e.code]
            del stack[e.depth:]
            parent = stack[-1] if stack and len(stack) == e.depth else None
            if code.filename == "<built-in>" and parent and os.path.basename(parent.filename) == WORK:
                c[code.qualname] += 1
            stack.append(code)
    return py, c


def assert_calls(got, expected, other_runs_python=False):
    """stackwatch's Python call counts equal `expected`; see INIT_DOUBLE_BUG
    for other_runs_python (another tool runs Python code at PY_START)."""
    got, expected = dict(got), dict(expected)
    if INIT_DOUBLE_BUG and other_runs_python:
        n, e = got.pop("__init__", 0), expected.pop("__init__")
        assert e <= n <= 2 * e, (n, e)
    assert got == expected


def profile_counts(prof):
    """cProfile's calls per function: the workload's by code name, and
    builtins.len called from the workload's functions."""
    py, c = Counter(), Counter()
    for (filename, _line, name), (_cc, nc, _tt, _ct, callers) in pstats.Stats(prof).stats.items():
        if os.path.basename(filename) == WORK:
            py[name.split(".")[-1]] += nc
        elif name == "<built-in method builtins.len>":
            for (cfile, _cline, _cname), caller_stats in callers.items():
                if os.path.basename(cfile) == WORK:
                    c["builtins.len"] += caller_stats[0]
    return py, c


def is_work(frame):
    return os.path.basename(frame.f_code.co_filename) == WORK


class UserHooks:
    """A user's sys.settrace and sys.setprofile functions: count calls and
    returns of the workload's functions, and (profile) len() calls made
    from them."""

    def __init__(self):
        self.calls, self.returns, self.c_calls = Counter(), Counter(), Counter()
        self.trace = self._trace     # one bound method each, so that
        self.profile = self._profile  # sys.gettrace() can be compared by `is`

    def _trace(self, frame, event, arg):
        if event == "call" and is_work(frame):
            self.calls[frame.f_code.co_name] += 1
            return self._local
        return None

    def _local(self, frame, event, arg):
        if event == "return":
            self.returns[frame.f_code.co_name] += 1
        return self._local

    def _profile(self, frame, event, arg):
        if not is_work(frame):
            return
        if event == "call":
            self.calls[frame.f_code.co_name] += 1
        elif event == "return":
            self.returns[frame.f_code.co_name] += 1
        elif event == "c_call" and arg is len:
            self.c_calls["builtins.len"] += 1


def run_python(args, tmp_path, input=None, env=None, timeout=180):
    """Runs `python ARGS` in tmp_path (conftest.run: no PYTHONPATH, no
    coverage settings inherited)."""
    return run(["python"] + args, cwd=str(tmp_path), input=input, env=env, timeout=timeout)


def line_of(path, text):
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if text in line:
                return n
    raise AssertionError(f"{text!r} not in {path}")



class StopRecorder(bdb.Bdb):
    """A non-interactive debugger: records where it stops, then continues."""

    def __init__(self):
        super().__init__()
        self.stops = []

    def user_line(self, frame):
        self.stops.append((frame.f_code.co_name, frame.f_lineno, frame.f_locals.get("i")))
        self.set_continue()


def break_on_len(dbg):
    path = os.path.join(PROGRAMS, WORK)
    line = line_of(path, 't += len("abc")')
    assert dbg.set_break(dbg.canonic(w.__file__), line) is None
    return line


HOOKS = {
    "settrace": (sys.settrace, sys.gettrace, "trace"),
    "setprofile": (sys.setprofile, sys.getprofile, "profile"),
}



@functools.lru_cache(maxsize=None)
def _line_truth_once():
    r = subprocess.run([sys.executable, "-c", f"""
import sys, json, collections
sys.path.insert(0, {PROGRAMS!r})
import coexist_work as w
c = collections.Counter()
def tr(frame, event, arg):
    if frame.f_code.co_filename == w.__file__:
        def loc(f, e, a):
            if e == "line":
                c[f.f_lineno] += 1
            return loc
        return loc
sys.settrace(tr)
w.workload()
sys.settrace(None)
print(json.dumps(c))
"""], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def line_truth(k=1):
    """{lineno: n}: the line events of k workload() calls, counted by a
    sys.settrace function in a process where nothing else traces (run once
    per test process: the workload is deterministic)."""
    return {int(n): v * k for n, v in _line_truth_once().items()}


def line_session(tmp_path):
    """Starts a session recording the workload's line events in the file and
    in a handler; returns ({lineno: n} seen by the handler, the handler)."""
    seen = Counter()
    stackwatch.start(str(tmp_path / "l.swt"), events=["line"], lines=[WORK_GLOB])
    h = stackwatch.add_handler(lambda ev: seen.__setitem__(ev.lineno, seen[ev.lineno] + 1),
                               events="line", where=WORK_GLOB)
    return seen, h
