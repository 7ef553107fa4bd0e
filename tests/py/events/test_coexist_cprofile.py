"""cProfile (and a sys.setprofile function) next to stackwatch: enabled
around a session or inside one, and with stackwatch recording C calls,
which on 3.9-3.11 share the one C profile hook of a thread
(coexist.py says what every coexistence test checks).
"""
import cProfile
import sys

import pytest

import stackwatch

from coexist import HAS_SYSMON, LEN, UserHooks, assert_calls, profile_counts, sw_counts, w


def test_cprofile_running_while_stackwatch_starts_and_stops(tmp_path):
    p = str(tmp_path / "a.swt")
    prof = cProfile.Profile()
    prof.enable()
    try:
        w.workload()
        stackwatch.start(p)
        w.workload()
        s = stackwatch.stop()
        w.workload()
    finally:
        prof.disable()
    assert s.error is None
    py, c = profile_counts(prof)
    assert py == w.expected(3) and c == {"builtins.len": 3 * LEN}
    assert sw_counts(p)[0] == w.expected(1)


def test_cprofile_enabled_and_disabled_while_stackwatch_traces(tmp_path):
    p = str(tmp_path / "a.swt")
    prof = cProfile.Profile()
    stackwatch.start(p)
    try:
        w.workload()
        prof.enable()
        w.workload()
        prof.disable()
        w.workload()
    finally:
        prof.disable()
        s = stackwatch.stop()
    assert s.error is None
    py, c = profile_counts(prof)
    assert py == w.expected(1) and c == {"builtins.len": LEN}
    assert sw_counts(p)[0] == w.expected(3)


def test_c_calls_with_a_profiler_already_running(tmp_path):
    """stackwatch with c_calls=True started while cProfile runs: cProfile is
    not displaced. On 3.12+ (sys.monitoring) both see every C call; on
    3.9-3.11 the C profile hook is taken, so stackwatch records no C calls
    and its summary says so."""
    p = str(tmp_path / "a.swt")
    prof = cProfile.Profile()
    prof.enable()
    try:
        stackwatch.start(p, c_calls=True)
        w.workload()
        s = stackwatch.stop()
        w.workload()
    finally:
        prof.disable()
    py, c = profile_counts(prof)
    assert py == w.expected(2) and c == {"builtins.len": 2 * LEN}
    spy, sc = sw_counts(p)
    assert_calls(spy, w.expected(1))
    if HAS_SYSMON:
        assert s.error is None and sc["builtins.len"] == LEN
    else:
        assert "profile function" in (s.error or "") and "builtins.len" not in sc


@pytest.mark.parametrize("profiler", ["cProfile", "setprofile"])
def test_c_calls_survive_a_profiler_started_in_the_middle(tmp_path, profiler):
    """c_calls=True session; a profiler is enabled and disabled in the
    middle. The profiler's counts are exact; stackwatch's C-call counts are
    exact too, or else its summary reports that some are missing."""
    p = str(tmp_path / "a.swt")
    prof, u = cProfile.Profile(), UserHooks()
    old = sys.getprofile()
    stackwatch.start(p, c_calls=True)
    try:
        w.workload()
        if profiler == "cProfile":
            prof.enable()
        else:
            sys.setprofile(u.profile)
        w.workload()
        if profiler == "cProfile":
            prof.disable()
        else:
            sys.setprofile(old)
        w.workload()
    finally:
        prof.disable()
        sys.setprofile(old)
        s = stackwatch.stop()
    if profiler == "cProfile":
        py, c = profile_counts(prof)
        assert py == w.expected(1) and c == {"builtins.len": LEN}
    else:
        assert u.calls == w.expected(1) and u.c_calls == {"builtins.len": LEN}
    spy, sc = sw_counts(p)
    assert_calls(spy, w.expected(3), other_runs_python=profiler == "setprofile")
    assert sc["builtins.len"] == 3 * LEN or s.error is not None, (sc, s.error)
