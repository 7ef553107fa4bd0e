"""coverage.py and stackwatch in one process, with every coverage core
(C tracer, Python tracer, sys.monitoring on 3.12+): coverage started
around stackwatch and inside it, by `coverage run` and by its API; with
stackwatch recording line events, coverage's line data is unchanged
(coexist.py says what every coexistence test checks).
"""
import json
import os

import pytest

from coexist import (DISPLACED, HAS_SYSMON, LEN, WORK, WORK_PATH, assert_calls, line_of, line_truth,
                     run_python, sw_counts, w)
from conftest import PROGRAMS


CORES = ["ctrace", "pytrace",
         pytest.param("sysmon", marks=pytest.mark.skipif(not HAS_SYSMON, reason="sys.monitoring is 3.12+"))]
# What sys.gettrace() / the sys.monitoring coverage tool look like while
# coverage measures with each core.
CORE_STATE = {
    "ctrace": {"gettrace": "CTracer", "monitoring_tool": None},
    "pytrace": {"gettrace": "method", "monitoring_tool": None},
    "sysmon": {"gettrace": None, "monitoring_tool": "coverage.py"},
}
NOT_MEASURING = {"gettrace": None, "gettrace_id": None, "monitoring_tool": None}
COV_PROG = os.path.join(PROGRAMS, "coexist_cov.py")


def marker_lines(path, tag):
    """{line number: set of modes} for lines marked "# TAG: mode, mode"."""
    out = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if f"# {tag}:" in line:
                modes = line.split(f"# {tag}:", 1)[1]
                out[n] = {m.strip() for m in modes.split(",") if m.strip()}
    return out



def coverage_lines(data_file, basename):
    import coverage
    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    for f in data.measured_files():
        if os.path.basename(f) == basename:
            return set(data.lines(f) or ())
    return set()


def check_coverage(data_file, mode):
    executed = coverage_lines(data_file, "coexist_cov.py")
    marks = marker_lines(COV_PROG, "cov")
    assert len(marks) == 4
    for line, modes in marks.items():
        assert (line in executed) == (mode in modes), (mode, line, sorted(executed))
    work = coverage_lines(data_file, WORK)
    for text in ("return n if n < 2", "self.x = x", 't += len("abc")'):
        assert line_of(WORK_PATH, text) in work, text


def check_state(state, core):
    """coverage is measuring, with the core asked for."""
    got = {k: state[k] for k in ("gettrace", "monitoring_tool")}
    assert got == CORE_STATE[core], state


@pytest.mark.parametrize("c_calls", [False, True], ids=["py", "c_calls"])
@pytest.mark.parametrize("core", CORES)
def test_coverage_run_with_stackwatch_started_and_stopped_inside(tmp_path, core, c_calls):
    """`coverage run prog.py` where prog.py traces its middle part with
    stackwatch: coverage measures every line before, during and after; the
    trace has exact counts; coverage's tracer is the same object throughout."""
    data, trace, result = tmp_path / "cov.data", tmp_path / "a.swt", tmp_path / "r.json"
    args = ["-m", "coverage", "run", f"--data-file={data}", COV_PROG, "run", str(trace), str(result)]
    r = run_python(args + (["c_calls"] if c_calls else []), tmp_path, env={"COVERAGE_CORE": core})
    assert r.returncode == 0, r.stderr
    res = json.loads(result.read_text())
    assert res["error"] is None and not res["is_tracing"]
    states = res["states"]
    for phase in ("before", "during", "after"):
        check_state(states[phase], core)
    assert states["before"]["gettrace_id"] == states["during"]["gettrace_id"] == states["after"]["gettrace_id"]
    check_coverage(data, "run")
    py, c = sw_counts(str(trace))
    assert_calls(py, w.expected(1), other_runs_python=core != "sysmon")
    assert c.get("builtins.len") == (LEN if c_calls else None)


@pytest.mark.parametrize("c_calls", [False, True], ids=["py", "c_calls"])
@pytest.mark.parametrize("core", CORES)
def test_coverage_api_started_and_stopped_while_stackwatch_traces(tmp_path, core, c_calls):
    """stackwatch traces the whole program; coverage.Coverage().start() and
    .stop() in the middle: coverage measures exactly the middle part, and
    stackwatch's counts stay exact across both transitions."""
    data, trace, result = tmp_path / "cov.data", tmp_path / "a.swt", tmp_path / "r.json"
    args = [COV_PROG, "api", str(trace), str(result), str(data)]
    r = run_python(args + (["c_calls"] if c_calls else []), tmp_path, env={"COVERAGE_CORE": core})
    assert r.returncode == 0, r.stderr
    res = json.loads(result.read_text())
    assert res["error"] is None and not res["is_tracing"]
    states = res["states"]
    check_state(states["during"], core)
    for phase in ("before", "after"):
        assert states[phase] == NOT_MEASURING, states
    check_coverage(data, "api")
    py, c = sw_counts(str(trace))
    assert_calls(py, w.expected(3), other_runs_python=core != "sysmon")
    assert c.get("builtins.len") == (3 * LEN if c_calls else None)


LINES_PROG = os.path.join(PROGRAMS, "coexist_lines.py")


def lines_of(seen):
    return {int(n): v for n, v in seen.items()}


def coverage_all_lines(data_file):
    import coverage
    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    return {os.path.basename(f): sorted(data.lines(f) or ()) for f in data.measured_files()}


@pytest.mark.parametrize("mode", ["run", "api"])
@pytest.mark.parametrize("core", CORES)
def test_coverage_lines_unchanged_by_stackwatch_line_events(tmp_path, core, mode):
    """The same program measured by coverage with and without stackwatch
    recording line events (file tracer + handler) in it: coverage's line data
    is identical. stackwatch's line events are complete where the version
    allows (3.12+, or coverage's sys.monitoring core); on 3.9-3.11 with a
    trace-function core it reports the lines it could not see, and gets
    every line while coverage is not measuring (api mode, Python tracer)."""
    got = {}
    for sw in ("plain", "sw"):
        data, result = tmp_path / f"{sw}.data", tmp_path / f"{sw}.json"
        trace = str(tmp_path / f"{sw}.swt")
        if mode == "run":
            args = ["-m", "coverage", "run", f"--data-file={data}", LINES_PROG, "run", str(result), trace, sw]
        else:
            args = [LINES_PROG, "api", str(result), trace, sw, str(data)]
        r = run_python(args, tmp_path, env={"COVERAGE_CORE": core})
        assert r.returncode == 0, r.stderr
        got[sw] = (coverage_all_lines(data), json.loads(result.read_text()), r.stderr)
    cov_plain, cov_sw = got["plain"][0], got["sw"][0]
    # the workload's lines are identical; the program itself runs more
    # lines with stackwatch (starting it), and loses none
    assert cov_plain[WORK] == cov_sw[WORK] and len(cov_sw[WORK]) >= 8
    prog = os.path.basename(LINES_PROG)
    if mode == "run":
        assert set(cov_plain[prog]) < set(cov_sw[prog])
    else:
        assert cov_plain == cov_sw
    res, stderr = got["sw"][1], got["sw"][2]
    seen = lines_of(res["lines"])
    full = line_truth(1 if mode == "run" else 3)
    if HAS_SYSMON or (core == "sysmon"):
        assert res["error"] is None and seen == full
    elif mode == "run":
        # coverage's trace function was there first: nothing seen, said so
        assert DISPLACED in (res["error"] or "") and DISPLACED in stderr
        assert seen == {}
    elif core == "pytrace":
        # displaced while coverage measured, said so; complete before and
        # after (coverage's stop() is sys.settrace(None): stackwatch's is back)
        assert DISPLACED in (res["error"] or "") and DISPLACED in stderr
        assert seen == line_truth(2)
    else:
        # coverage's C tracer is installed and removed from C, unseen by
        # stackwatch until its next check (here: stop(), which finds the
        # slot empty and says so): complete before coverage started, then
        # nothing (a known limit, docs/architecture.md)
        assert DISPLACED in (res["error"] or "") and DISPLACED in stderr
        assert seen == line_truth(1)
