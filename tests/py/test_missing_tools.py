"""A test whose tool is missing (conftest.py: missing(), needs(),
needs_module()) is skipped, with the reason, but fails under CI=true, so
that a green CI never hides an empty run. Checked on a small suite run by
pytest in a subprocess, with conftest.py loaded as a plugin."""
import os
import re

import pytest

from conftest import run

SUITE = '''
from conftest import missing, needs, needs_module

def test_missing():
    missing("sw-no-such-tool is not installed")

@needs("sw-no-such-tool either")
def test_needs():
    pass

@needs(None)
def test_needs_nothing():
    pass

def test_needs_module():
    needs_module("sw_no_such_module", "sw_no_such_module is not installed")
'''


@pytest.mark.parametrize("ci", [None, "true"])
def test_missing_tool_fails_under_ci(tmp_path, ci):
    (tmp_path / "test_tools.py").write_text(SUITE)
    env = {"PYTHONPATH": os.path.dirname(os.path.abspath(__file__)), "PYTEST_ADDOPTS": "", "CI": ci or ""}
    r = run(["python", "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:warnings", "-p", "conftest", "test_tools.py"],
            cwd=str(tmp_path), env=env)
    last = r.stdout.strip().splitlines()[-1]
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (\w+?)s?\b", last)}
    if ci:
        assert r.returncode == 1, r.stdout
        assert counts.get("failed", 0) + counts.get("error", 0) == 3 and counts.get("passed") == 1, last
        assert "skipped" not in counts, last
        assert r.stdout.count("CI is set: a missing tool fails the test") >= 3, r.stdout
    else:
        assert r.returncode == 0 and counts == {"passed": 1, "skipped": 3}, r.stdout
        assert "sw-no-such-tool is not installed" in r.stdout
