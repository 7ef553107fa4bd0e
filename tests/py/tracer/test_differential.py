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


@pytest.mark.parametrize("consumer", ["file", "handler"])
@pytest.mark.parametrize("c_calls", [False, True], ids=["python", "c_calls"])
@pytest.mark.parametrize("case", sorted(corpus.CASES))
def test_matches_setprofile(case, c_calls, consumer, tmp_path):
    """The file tracer and a Python handler (stackwatch.add_handler) both
    see exactly what sys.setprofile sees."""
    out = subprocess.run([sys.executable, os.path.join(PROGRAMS, "differential.py"), case,
                          str(tmp_path / "t.swt")] + (["c_calls"] if c_calls else []) +
                         (["handler"] if consumer == "handler" else []),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    truth, traced = d["truth"], d["traced"]
    assert d["dropped"] == 0 and d["error"] is None and d["damage"] is None
    assert truth["main"], "the ground truth saw nothing: the harness is broken"
    assert traced["main"] == truth["main"]
    assert len(traced["threads"]) == len(truth["threads"])
    assert traced["threads"] == truth["threads"]
