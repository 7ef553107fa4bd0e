"""`stackwatch run -m pytest -n 2` (pytest-xdist): the workers execnet
starts are followed like any child process, and the summary line names
each worker's trace.

Ground truth is the suite itself: every test writes its name and its
process's pid to a file, and each worker's trace must hold exactly the
tests that ran in that process, once each.
"""
import os
import sys

import pytest

from stackwatch import Trace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from conftest import needs_module, run  # noqa: E402  (tests/py/conftest.py)

# pytest-xdist's workers and the plugin: the same on every Python.
pytestmark = [pytest.mark.slow, pytest.mark.versions("3.10")]

SUITE = '''
import os

def _ran(name):
    with open("ran.txt", "a") as f:
        f.write(f"{name} {os.getpid()}\\n")

def test_one():
    _ran("test_one")

def test_two():
    _ran("test_two")

def test_three():
    _ran("test_three")

def test_four():
    _ran("test_four")
'''


def test_xdist_workers_named_in_summary(tmp_path):
    needs_module("xdist", "pytest-xdist is not installed (scripts/venv.sh installs it)")
    (tmp_path / "test_suite.py").write_text(SUITE)
    r = run(["run", "-o", "t.swt", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
             "test_suite.py"], cwd=tmp_path, env={"PYTEST_ADDOPTS": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stderr.splitlines()[-1]
    assert last.startswith("stackwatch: wrote ") and "; 2 child processes: " in last, r.stderr
    named = last.split("; 2 child processes: ")[1].split(", ")
    files = sorted(f for f in os.listdir(tmp_path) if f.startswith("t.") and f != "t.swt")
    assert sorted(named) == files, (named, files)
    ran = {}
    for line in (tmp_path / "ran.txt").read_text().splitlines():
        name, pid = line.split()
        ran.setdefault(int(pid), []).append(name)
    assert sum(len(v) for v in ran.values()) == 4
    for f in files:
        t = Trace(str(tmp_path / f))
        calls = {}
        for row in t.stats():
            name = t.codes[row.code].qualname
            if name.startswith("test_"):
                calls[name] = calls.get(name, 0) + row.calls
        assert calls == {name: 1 for name in ran.get(t.meta["pid"], [])}, (f, calls, ran)
    main = Trace(str(tmp_path / "t.swt"))
    assert not [row for row in main.stats() if main.codes[row.code].qualname.startswith("test_")]
