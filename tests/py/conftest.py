"""Shared helpers for the Python tests: run programs under stackwatch in a
subprocess of the interpreter being tested; tests marked `root` or
`bpftrace` (markers in pyproject.toml) are skipped, with the reason
printed, where that is missing."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = os.path.join(ROOT, "tests", "programs")


def run(args, cwd=None, input=None, timeout=120, env=None):
    """Runs `python -m stackwatch ARGS` (or a plain python when args[0] is
    "python") and returns the CompletedProcess."""
    cmd = [sys.executable] + (args[1:] if args[0] == "python" else ["-m", "stackwatch"] + args)
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)
    if env:
        e.update(env)
    return subprocess.run(cmd, cwd=cwd, input=input, capture_output=True, text=True,
                          timeout=timeout, env=e)


def pytest_runtest_setup(item):
    reason = None
    if item.get_closest_marker("bpftrace") and not shutil.which("bpftrace"):
        reason = "bpftrace is not installed (scripts/install-deps.sh installs it)"
    elif item.get_closest_marker("root") and os.geteuid() != 0:
        reason = "needs root"
    if reason:
        print(f"skipping {item.name}: {reason}")
        pytest.skip(reason)


@pytest.fixture
def tmp(tmp_path):
    return tmp_path


def write(path, text):
    path.write_text(text)
    return str(path)
