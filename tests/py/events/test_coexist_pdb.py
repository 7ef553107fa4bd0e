"""pdb and bdb while stackwatch traces: a debugger's breakpoints stop exactly
where they would without stackwatch, stackwatch started and stopped inside
debugged code, pdb.set_trace() and `python -m pdb` on a traced program, and
a debugger next to stackwatch's line events (coexist.py says what every
coexistence test checks).
"""
import json
import os
import sys

import stackwatch

from coexist import (DISPLACED, HAS_SYSMON, LEN, WORK_PATH, StopRecorder, assert_calls,
                     break_on_len, line_of, line_session, line_truth, run_python, sw_counts, w)
from conftest import PROGRAMS


def test_bdb_breakpoint_while_stackwatch_traces(tmp_path):
    p = str(tmp_path / "a.swt")
    dbg = StopRecorder()
    line = break_on_len(dbg)
    old = sys.gettrace()
    stackwatch.start(p)
    try:
        dbg.runcall(w.workload)
        tracing = stackwatch.is_tracing()
    finally:
        s = stackwatch.stop()
        sys.settrace(old)
    assert tracing and s.error is None
    # the first line of workload() (runcall stops there), then each pass
    # through the breakpoint
    assert dbg.stops[0][0] == "workload"
    assert dbg.stops[1:] == [("measure", line, i) for i in range(LEN)]
    assert_calls(sw_counts(p)[0], w.expected(1), other_runs_python=True)


def test_stackwatch_started_and_stopped_inside_debugged_code(tmp_path):
    p = str(tmp_path / "a.swt")
    dbg = StopRecorder()
    line = break_on_len(dbg)
    seen = {}

    def body():
        w.workload()
        seen["before"] = sys.gettrace()
        stackwatch.start(p)
        w.workload()
        seen["summary"] = stackwatch.stop()
        seen["after"] = sys.gettrace()
        w.workload()

    old = sys.gettrace()
    try:
        dbg.runcall(body)
    finally:
        if stackwatch.is_tracing():
            stackwatch.stop()
        sys.settrace(old)
    assert seen["summary"].error is None
    # the debugger's trace function survives stackwatch's start and stop
    assert seen["before"] is not None and seen["before"] == seen["after"] == dbg.trace_dispatch
    assert dbg.stops[0][0] == "body"
    assert dbg.stops[1:] == [("measure", line, i) for i in range(LEN)] * 3
    assert_calls(sw_counts(p)[0], w.expected(1), other_runs_python=True)


PDB_PROG = os.path.join(PROGRAMS, "coexist_pdb.py")
PDB_EXPECTED = dict(w.expected(1), fib=465 + 177 + 465)   # fib(12), fib(10), workload()


def test_pdb_set_trace_while_stackwatch_traces(tmp_path):
    trace, result = tmp_path / "a.swt", tmp_path / "r.json"
    # `until` LINE: 3.13's set_trace() stops on its own line, older ones on
    # the next line
    until = line_of(PDB_PROG, "    w.workload()")
    cmds = f"p x * 10\nuntil {until}\np y * 10\nc\n"
    r = run_python([PDB_PROG, "set_trace", str(trace), str(result)], tmp_path, input=cmds)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1440" in r.stdout and "550" in r.stdout, r.stdout
    res = json.loads(result.read_text())
    assert res["error"] is None and (res["x"], res["y"]) == (144, 55)
    assert_calls(sw_counts(str(trace))[0], PDB_EXPECTED, other_runs_python=True)


def test_pdb_breakpoint_hit_inside_stackwatch_session(tmp_path):
    """`python -m pdb prog.py`: a conditional breakpoint in fib() stops the
    program while it traces with stackwatch; pdb's tracing survives
    stackwatch's start and stop."""
    trace, result = tmp_path / "a.swt", tmp_path / "r.json"
    fib_line = line_of(WORK_PATH, "return n if n < 2")
    cmds = "\n".join([
        f"b {WORK_PATH}:{fib_line}, n == 7",
        "c",
        "p n * 100",
        "p 'tracing=%s' % __import__('stackwatch').is_tracing()",
        "disable 1",
        "c",
        "q",
    ]) + "\n"
    r = run_python(["-m", "pdb", PDB_PROG, "plain", str(trace), str(result)], tmp_path, input=cmds)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "700" in r.stdout and "tracing=True" in r.stdout, r.stdout
    res = json.loads(result.read_text())
    assert res["error"] is None and (res["x"], res["y"]) == (144, 55)
    assert res["same_tracer"] and "trace_dispatch" in res["tracer_after"], res
    assert_calls(sw_counts(str(trace))[0], PDB_EXPECTED, other_runs_python=True)


def test_bdb_breakpoints_while_stackwatch_records_lines(tmp_path):
    """A bdb breakpoint hit 50 times while stackwatch records line events:
    the debugger stops exactly as without stackwatch; stackwatch's line
    events are complete before, during (3.12+) and after the debugger ran
    (on 3.9-3.11 the debugger's trace function displaces stackwatch's
    meanwhile, which is reported)."""
    dbg = StopRecorder()
    line = break_on_len(dbg)
    old = sys.gettrace()
    seen, h = line_session(tmp_path)
    try:
        w.workload()
        dbg.runcall(w.workload)
        w.workload()
    finally:
        sys.settrace(old)
        h.remove()
        s = stackwatch.stop()
    assert dbg.stops[0][0] == "workload"
    assert dbg.stops[1:] == [("measure", line, i) for i in range(LEN)]
    if HAS_SYSMON:
        assert s.error is None and dict(seen) == line_truth(3)
    else:
        assert DISPLACED in (s.error or "")   # (the warning is said once per process)
        assert dict(seen) == line_truth(2)
