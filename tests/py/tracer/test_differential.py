"""Exact means equal: for every corpus program, the per-thread sequence of
calls and returns that stackwatch records equals what a Python-level
sys.setprofile recorder sees (tests/programs/differential.py)."""
import json
import os
import subprocess
import sys

import pytest

import corpus
from conftest import PROGRAMS


# {case: the four ways' results}: one process runs a case's four ways, the
# first test of the case asks for it (a process per way took twice as long)
_RESULTS = {}


def _results(case, tmp_path):
    if case not in _RESULTS:
        out = subprocess.run([sys.executable, os.path.join(PROGRAMS, "differential.py"), case,
                              str(tmp_path / "t.swt"), "all"], capture_output=True, text=True, timeout=300)
        _RESULTS[case] = (out.returncode, out.stderr, json.loads(out.stdout) if out.returncode == 0 else None)
    return _RESULTS[case]


@pytest.mark.parametrize("consumer", ["file", "handler"])
@pytest.mark.parametrize("c_calls", [False, True], ids=["python", "c_calls"])
@pytest.mark.parametrize("case", sorted(corpus.CASES))
def test_matches_setprofile(case, c_calls, consumer, tmp_path):
    """The file tracer and a Python handler (stackwatch.add_handler) both
    see exactly what sys.setprofile sees."""
    rc, stderr, every = _results(case, tmp_path)
    assert rc == 0, stderr
    d = every[f"{'c_calls' if c_calls else 'python'} {consumer}"]
    truth, traced = d["truth"], d["traced"]
    assert d["dropped"] == 0 and d["error"] is None and d["damage"] is None
    assert truth["main"], "the ground truth saw nothing: the harness is broken"
    assert traced["main"] == truth["main"]
    assert len(traced["threads"]) == len(truth["threads"])
    assert traced["threads"] == truth["threads"]
