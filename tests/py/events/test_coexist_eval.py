"""Another PEP 523 frame evaluator (tests/programs/other_eval.c, compiled
here for the running interpreter) and stackwatch's: installed in either
order, removed in either order, stackwatch restarted under it or after it;
each counts every frame, and no evaluator is left installed once both have
stopped (coexist.py says what every coexistence test checks).
"""
import json
import os
import shutil
import subprocess
import sysconfig

import pytest

from coexist import assert_calls, run_python, sw_counts, w
from conftest import PROGRAMS, missing


OTHER_EVAL_SRC = os.path.join(PROGRAMS, "other_eval.c")
EVAL_PROG = os.path.join(PROGRAMS, "coexist_eval.py")


@pytest.fixture(scope="module")
def other_eval_so(tmp_path_factory):
    """tests/programs/other_eval.c compiled for the running interpreter."""
    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
    if not cc:
        missing("no C compiler (gcc or cc) to build the other frame evaluator")
    inc = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(inc, "Python.h")):
        missing(f"no Python.h in {inc}: the interpreter's headers are not installed")
    out = tmp_path_factory.mktemp("other_eval") / ("other_eval" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    incs = ["-I", inc]
    plat = sysconfig.get_paths().get("platinclude")
    if plat and plat != inc:
        incs += ["-I", plat]
    r = subprocess.run([cc, "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror"] + incs +
                       [OTHER_EVAL_SRC, "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, f"other_eval.c does not compile:\n{r.stderr}"
    return str(out)


def run_eval(so, scenario, tmp_path):
    result = tmp_path / "r.json"
    r = run_python([EVAL_PROG, so, scenario, str(tmp_path), str(result)], tmp_path, timeout=120)
    log = json.loads(result.read_text()) if result.exists() else {}
    return r, log


def test_other_evaluator_installed_before_stackwatch(tmp_path, other_eval_so):
    r, log = run_eval(other_eval_so, "installed_before", tmp_path)
    assert r.returncode == 0, (r.stderr, log)
    assert log["alone"]["watched"] == 465
    # while stackwatch runs on top, the other evaluator still sees every frame
    assert log["together"] == {"watched": 930, "is_current": False, "current_is_default": False,
                               "sw_tracing": True}
    assert log["sw"]["error"] is None
    assert_calls(sw_counts(log["sw"]["path"])[0], w.expected(1))
    # stackwatch's stop() puts the other evaluator back, still counting
    assert log["after_sw_stop"]["is_current"] and log["after_sw_stop"]["watched"] == 930
    assert log["after_sw_stop_run"]["watched"] == 1395
    assert log["prev_is_default"]
    assert log["uninstalled"]["current_is_default"]


def test_other_evaluator_installed_and_removed_while_stackwatch_traces(tmp_path, other_eval_so):
    r, log = run_eval(other_eval_so, "installed_during", tmp_path)
    assert r.returncode == 0, (r.stderr, log)
    assert log["together"] == {"watched": 465, "is_current": True, "current_is_default": False,
                               "sw_tracing": True}
    # the other evaluator's removal puts stackwatch's back: still recording
    assert log["other_gone"]["watched"] == 465 and log["other_gone"]["sw_tracing"]
    assert log["sw"]["error"] is None
    assert_calls(sw_counts(log["sw"]["path"])[0], w.expected(3))
    assert log["end"]["current_is_default"] and not log["end"]["sw_tracing"]


def test_other_evaluator_outlives_stackwatch(tmp_path, other_eval_so):
    r, log = run_eval(other_eval_so, "outlives_stackwatch", tmp_path)
    assert r.returncode == 0, (r.stderr, log)
    assert log["together"]["watched"] == 465 and log["together"]["is_current"]
    assert log["sw"]["error"] is None
    assert_calls(sw_counts(log["sw"]["path"])[0], w.expected(2))
    # stackwatch's stop() leaves the other evaluator installed and counting
    assert log["after_sw_stop"] == {"watched": 930, "is_current": True, "current_is_default": False,
                                    "sw_tracing": False}
    assert log["other_gone"]["watched"] == 930 and not log["other_gone"]["is_current"]
    assert log["done"]


def test_stackwatch_restarted_under_an_evaluator_installed_over_it(tmp_path, other_eval_so):
    r, log = run_eval(other_eval_so, "restart_under_other", tmp_path)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:], log)
    assert log["sw"]["error"] is None and log["sw2"]["error"] is None
    assert_calls(sw_counts(log["sw2"]["path"])[0], w.expected(1))
    assert log["together_again"]["watched"] == 465 + 465
    assert log["end"]["watched"] == 930


def test_stackwatch_session_after_an_evaluator_that_outlived_it(tmp_path, other_eval_so):
    """stackwatch, then the other evaluator on top; stackwatch stops, the
    other evaluator goes (putting stackwatch's back as a pass-through); a new
    stackwatch session is exact."""
    r, log = run_eval(other_eval_so, "restart_after_other", tmp_path)
    assert r.returncode == 0, (r.stderr, log)
    assert log["sw2"]["error"] is None
    assert_calls(sw_counts(log["sw2"]["path"])[0], w.expected(1))
    assert log["done"]


def test_no_evaluator_left_installed_after_the_last_session(tmp_path, other_eval_so):
    """Same sequence as above: once both tools have stopped and stackwatch's
    last session, started while its evaluator was the current one, has
    stopped, no PEP 523 evaluator is left installed (stop() restores the
    previous evaluator when its own is the current one)."""
    r, log = run_eval(other_eval_so, "restart_after_other", tmp_path)
    assert r.returncode == 0, (r.stderr, log)
    assert not log["other_gone"]["current_is_default"]   # stackwatch's, passing through
    assert log["end"]["current_is_default"], log["end"]
