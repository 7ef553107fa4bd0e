"""Shared helpers and fixtures of the Python tests (tests/py/<room>/ and
tests/e2e/): run programs under stackwatch in a subprocess of the
interpreter being tested; tests marked `root` or `bpftrace` (markers in
pyproject.toml) are skipped, with the reason printed, where that is
missing.

The workload programs are in tests/programs/, on sys.path for every test
(`import corpus`, `import mixed_workload`); this folder is on it too
(`from conftest import run`, `import stats_bounds`)."""
import html.parser
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = os.path.join(ROOT, "tests", "programs")
if PROGRAMS not in sys.path:
    sys.path.insert(0, PROGRAMS)


def run(args, cwd=None, input=None, timeout=120, env=None):
    """Runs `python -m stackwatch ARGS` (or a plain python when args[0] is
    "python") and returns the CompletedProcess. The child inherits neither
    PYTHONPATH nor a coverage configuration (COVERAGE_CORE,
    COVERAGE_PROCESS_START) from the environment; `env` adds to it."""
    cmd = [sys.executable] + (args[1:] if args[0] == "python" else ["-m", "stackwatch"] + args)
    e = dict(os.environ)
    for name in ("PYTHONPATH", "COVERAGE_CORE", "COVERAGE_PROCESS_START"):
        e.pop(name, None)
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


# ---- a flame graph page (stackwatch.render.flamegraph) read back ----

class _Scripts(html.parser.HTMLParser):
    """The <script> elements of a page, as a browser's tokenizer splits
    them: [(attrs, text)]; and the <title> text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts, self.title, self._in = [], "", None

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "title"):
            self._in = (tag, dict(attrs), [])

    def handle_data(self, data):
        if self._in:
            self._in[2].append(data)

    def handle_endtag(self, tag):
        if self._in and tag == self._in[0]:
            if tag == "script":
                self.scripts.append((self._in[1], "".join(self._in[2])))
            else:
                self.title = "".join(self._in[2])
            self._in = None


def parse_page(text):
    p = _Scripts()
    p.feed(text)
    p.close()
    return p


def page_data(text):
    """The embedded data of a page, decoded."""
    (attrs, body), = [s for s in parse_page(text).scripts if s[0].get("id") == "stackwatch-data"]
    assert attrs.get("type") == "application/json"
    return json.loads(body)
