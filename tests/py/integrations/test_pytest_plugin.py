"""The pytest plugin (stackwatch.integrations.pytest_plugin, entry point
pytest11): a small suite with every outcome run plain and with
--stackwatch / --stackwatch=profile gives the same outcomes and exit
status; without the option the plugin loads no native code and hooks
nothing; each test is a region, shown as a slice of its thread in the
Perfetto export (decoded with Perfetto's own schema) and the Chrome
export, around the test's own calls; the profile page has a profile per
test. The pinned real suites run with the plugin in
tests/e2e/test_real_suites.py."""
import ast
import glob
import json
import os
import re

import pytest

from conftest import chrome_slices, needs_sampler, nested, page_data, perfetto_timeline, run, write
from stackwatch import Trace

# The plugin is Python over the tracer and the profiler, whose mechanisms
# each Python's own tests check; it runs on the oldest and the newest.
pytestmark = pytest.mark.versions("3.9", "3.13")

SUITE = """
import threading
import time

import pytest


def spin(seconds):
    # (seconds of the thread's own CPU time: on a busy machine it spins
    # longer, and the sampler, as starved as it, gets as many rounds in)
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += 1
    return n


def test_pass():
    spin(0.05)


def test_fail():
    assert spin(0.001) < 0, "fails on purpose"


@pytest.mark.skip(reason="skipped on purpose")
def test_skip():
    pass


@pytest.mark.xfail(reason="fails on purpose")
def test_xfail():
    assert 0


@pytest.mark.xfail(reason="passes anyway")
def test_xpass():
    pass


@pytest.fixture
def broken():
    raise RuntimeError("fixture breaks")


def test_error(broken):
    pass


@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    assert n


def test_thread():
    t = threading.Thread(target=spin, args=(0.02,), name="helper")
    t.start()
    t.join()
"""
NODEIDS = ["test_suite.py::test_pass", "test_suite.py::test_fail", "test_suite.py::test_skip",
           "test_suite.py::test_xfail", "test_suite.py::test_xpass", "test_suite.py::test_error",
           "test_suite.py::test_param[1]", "test_suite.py::test_param[2]", "test_suite.py::test_thread"]

# What sys.modules and the plugin manager hold at the end of a run.
REPORT = """
import sys


def pytest_sessionfinish(session):
    pm = session.config.pluginmanager
    with open("report.txt", "w") as f:
        f.write(repr({
            "plugin": pm.get_plugin("stackwatch") is not None,
            "modules": sorted(m for m in sys.modules if m.startswith("stackwatch")),
            "registered": sorted(n for n, _ in pm.list_name_plugin() if str(n).startswith("stackwatch")),
        }))
"""


def pytest_run(folder, *args):
    """`python -m pytest -rA ARGS` in folder (no cache, no PYTEST_ADDOPTS)."""
    return run(["python", "-m", "pytest", "-rA", "-p", "no:cacheprovider", *args], cwd=str(folder),
               env={"PYTEST_ADDOPTS": "", "PYTHONDONTWRITEBYTECODE": "1"})


OUTCOME = re.compile(r"(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) ")


def outcomes(r):
    """The short test summary (one line per test and outcome) and the
    closing counts, without the times. Under CI (the CI variable set)
    pytest prints a failure's whole message, whose later lines hold values
    of the run: only the first line of each outcome is kept."""
    lines = r.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "short test summary info" in line)
    summary = sorted(line for line in lines[start + 1:-1] if OUTCOME.match(line))
    counts = re.sub(r" in [0-9.]+s.*", "", lines[-1])
    return summary, counts


@pytest.fixture
def suite(tmp_path):
    write(tmp_path / "test_suite.py", SUITE)
    write(tmp_path / "conftest.py", REPORT)
    return tmp_path


def report(folder):
    return ast.literal_eval((folder / "report.txt").read_text())


@pytest.mark.parametrize("option", ["--stackwatch", "--stackwatch=profile"])
def test_outcomes_unchanged(suite, option):
    plain = pytest_run(suite)
    assert plain.returncode == 1, plain.stdout      # some tests failed
    summary, counts = outcomes(plain)
    assert counts.startswith("=") and "1 failed, 4 passed, 1 skipped, 1 xfailed, 1 xpassed, 1 error" in counts, counts
    assert len(summary) == 9, summary
    out = suite / "out"
    out.mkdir()
    got = pytest_run(suite, option, "--stackwatch-dir", str(out))
    assert got.returncode == plain.returncode, got.stdout + got.stderr
    assert outcomes(got) == (summary, counts)
    written = os.listdir(out)
    assert len(written) == 1, written
    assert f"stackwatch: wrote {out / written[0]}" in got.stdout
    assert not any(m for m in os.listdir(suite) if m.startswith("stackwatch-")), "nothing in the current directory"


def test_inert_without_the_option(suite):
    r = pytest_run(suite)
    assert r.returncode == 1
    rep = report(suite)
    # Loaded through its entry point, and nothing more.
    assert rep["plugin"], rep
    assert rep["modules"] == ["stackwatch", "stackwatch.integrations", "stackwatch.integrations.pytest_plugin"], rep
    assert rep["registered"] == ["stackwatch"], rep
    assert "stackwatch:" not in r.stdout and not glob.glob(str(suite / "stackwatch-*"))
    # With it, the tracer and its hook are there.
    r = pytest_run(suite, "--stackwatch")
    rep = report(suite)
    assert "stackwatch._native" in rep["modules"] and rep["registered"] == ["stackwatch", "stackwatch-trace"], rep
    # -p no:stackwatch switches the plugin off, and then the option is unknown.
    r = pytest_run(suite, "-p", "no:stackwatch", "--stackwatch")
    assert r.returncode == 4 and "unrecognized arguments: --stackwatch" in r.stderr, r.stderr


@pytest.mark.parametrize("args, message", [
    (["--stackwatch", "test_suite.py"], "--stackwatch takes trace or profile, not 'test_suite.py'"),
    (["--stackwatch=nope"], "--stackwatch takes trace or profile, not 'nope'"),
    (["--stackwatch", "--stackwatch-dir", "missing"], "--stackwatch-dir missing: not a directory"),
    (["--stackwatch=profile", "--stackwatch-interval", "1us"], "--stackwatch-interval: "),
])
def test_bad_options(suite, args, message):
    r = pytest_run(suite, *args)
    assert r.returncode == 4, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and message in errors[0], r.stderr


def traced_suite(folder):
    r = pytest_run(folder, "--stackwatch")
    assert r.returncode == 1, r.stdout + r.stderr
    path, = glob.glob(str(folder / "stackwatch-pytest-*.trace.swt"))
    assert f"stackwatch: wrote {path} (" in r.stdout and "9 tests as regions" in r.stdout, r.stdout
    return Trace(path)


def test_regions_in_the_trace(suite):
    t = traced_suite(suite)
    assert t.complete and not t.damage
    regions = t.ext_events(kinds=["region_begin", "region_end"])
    begins = [e for e in regions if e.kind == "region_begin"]
    assert [e.data["name"] for e in begins] == NODEIDS
    # Each begins and ends on the main thread, at one depth: the region
    # nests with the calls.
    main = next(i for i, th in enumerate(t.threads) if th["name"] == "MainThread")
    assert {e.thread for e in regions} == {main}
    assert [e.kind for e in regions] == ["region_begin", "region_end"] * len(NODEIDS)
    for b, e in zip(regions[::2], regions[1::2]):
        assert b.depth == e.depth > 0 and b.t_ns < e.t_ns
    assert t.ext_summary()["counts"] == {"region_begin": 9, "region_end": 9}


def test_regions_are_slices_in_perfetto_and_chrome(suite, tmp_path):
    t = traced_suite(suite)
    tl = perfetto_timeline(t.path, tmp_path / "t.pftrace")
    region_tracks = {u for u, td in tl.tracks.items() if td.name == "regions"}
    assert len(region_tracks) == 1
    track, = region_tracks
    thread_track = tl.tracks[track].parent_uuid
    assert tl.tracks[thread_track].thread.thread_name == "MainThread"
    regions = {name: (b, e) for name, b, e, u, te in tl.slices if u == track}
    assert sorted(regions) == sorted(NODEIDS)
    # Each test function's own slice is inside its region, on the region's thread.
    calls = [(name, b, e) for name, b, e, u, _ in tl.slices if u == thread_track and name.startswith("test_")]
    for nodeid in NODEIDS:
        name = nodeid.split("::")[1].split("[")[0]
        rb, re_ = regions[nodeid]
        inside = [c for c in calls if c[0] == name and rb <= c[1] <= c[2] <= re_]
        # test_skip and test_error are never called.
        assert len(inside) == (0 if name in ("test_skip", "test_error") else 1), (nodeid, inside)

    out = tmp_path / "t.json"
    t.export("chrome", str(out))
    doc = json.loads(out.read_text())
    xs = [e for e in doc["traceEvents"] if e.get("cat") == "region"]
    assert [e["name"] for e in xs] == NODEIDS and all(e["ph"] == "X" for e in xs)
    slices = chrome_slices(doc)
    main_tid = {e["tid"] for e in xs}
    assert len(main_tid) == 1
    for x in xs:
        start, end = x["ts"], x["ts"] + x["dur"]
        inside = [s for s in slices if s[3] == x["tid"] and start <= s[1] <= s[2] <= end]
        name = x["name"].split("::")[1].split("[")[0]
        assert (name in {s[0] for s in inside}) == (name not in ("test_skip", "test_error")), x["name"]
        # The region nests with every call slice of its thread (so the
        # viewers stack it among them): none overlaps it partly.
        for s in slices:
            if s[3] == x["tid"]:
                assert s[2] <= start or s[1] >= end or start <= s[1] <= s[2] <= end or \
                    s[1] <= start <= end <= s[2], (x["name"], s)


def test_regions_into_a_running_session(suite):
    """Under `stackwatch run -m pytest --stackwatch` the regions go into the
    running trace; no second file is made."""
    out = str(suite / "run.swt")
    r = run(["run", "-o", out, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--stackwatch"], cwd=str(suite),
            env={"PYTEST_ADDOPTS": ""})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "9 tests as regions in the running trace" in r.stdout
    # pytest marks the plugin's package for assertion rewriting; imported
    # before pytest here, it must not be warned about (a warning changes
    # the counts, and is an error under -W error).
    assert "warning" not in r.stdout.lower(), r.stdout
    assert not glob.glob(str(suite / "stackwatch-pytest-*"))
    names = [e.data["name"] for e in Trace(out).ext_events(kinds=["region_begin"])]
    assert names == NODEIDS


@needs_sampler
def test_profile_has_a_profile_per_test(suite):
    r = pytest_run(suite, "--stackwatch=profile", "--stackwatch-interval", "500us")
    assert r.returncode == 1, r.stdout + r.stderr
    path, = glob.glob(str(suite / "stackwatch-pytest-*.profile.html"))
    data = page_data(open(path, encoding="utf-8").read())
    by_name = {t["name"]: t for t in data["threads"]}
    # Every profile is a test's (those shorter than one interval have none).
    assert set(by_name) <= set(NODEIDS) and "test_suite.py::test_pass" in by_name, sorted(by_name)
    strings, frames = data["strings"], data["frames"]

    def names(thread):
        flat = thread["nodes"]
        return [strings[frames[flat[i + 1]][0]] for i in range(0, len(flat), 6) if flat[i + 1] >= 0]

    # 50 ms of spin in test_pass, 20 ms in a helper thread of test_thread.
    assert "spin" in names(by_name["test_suite.py::test_pass"])
    assert "test_pass" in names(by_name["test_suite.py::test_pass"])
    assert "spin" in names(by_name["test_suite.py::test_thread"])
    # Stacks are cut below pytest's runner: test_pass's samples start at
    # its call_and_report (a sample that reads the stack while the runner's
    # frame is being left may keep pytest's frames: few).
    tree = nested(data, by_name["test_suite.py::test_pass"])
    below = sum(c["count"] for c in tree["children"] if c["name"] == "call_and_report")
    assert below >= 0.9 * tree["count"], [(c["name"], c["count"]) for c in tree["children"]]
    assert f"stackwatch: wrote {path} (" in r.stdout and "slowest tests by samples:" in r.stdout
