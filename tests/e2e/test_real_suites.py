"""Real test suites from PyPI, run plain and under stackwatch.

For each pinned project below, its own test suite (taken from its sdist,
downloaded once into a cache) runs with pytest against the pinned release
installed in this venv (scripts/venv.sh installs it), once per mode:
plain `python -m pytest`, `stackwatch run -o T.swt -m pytest`,
`stackwatch profile -o P.swprof -m pytest`, `stackwatch run -c "import
pytest; ..."`, the console script (`stackwatch run pytest`, found on PATH)
and `python -m cProfile -o C.prof -m pytest`. Every mode must give the plain run's exit status, closing
counts (passed, failed, skipped, xfailed, warnings, subtests...) and
per-test outcomes (read from --junitxml); stackwatch's trace and profile
must read back; and for a few functions of each project the call counts in
the trace must equal cProfile's exactly.

Modes are entries of MODES (an argv builder and a check of what the mode
writes): `stackwatch run -c`, the console script under `stackwatch run`,
and "pytest plugin" (`pytest --stackwatch`) are among them.

The suites are slow (more-itertools about 14 s, toolz 9 s per Python), so
each runs on one version only (SUITE_VERSIONS), and more-itertools in
some modes only (SUITE_MODES): toolz on the oldest (frame objects and the
C trace and profile hooks), more-itertools on the newest (interpreter
frames and sys.monitoring), the two ends of what the tracer's mechanisms
differ by; every version's own
tests in tests/py check each mechanism. STACKWATCH_REAL_SUITES=all runs
both on every version.
"""
import collections
import hashlib
import importlib
import os
import pstats
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from importlib import metadata

import pytest

import stackwatch
from stackwatch import Trace

SUITE_VERSIONS = {"toolz": ("3.9",), "more-itertools": ("3.13",)}
# The modes each suite runs in besides plain: toolz, the quicker, in every
# one; more-itertools, 3 times toolz's cost per run, under `run` and
# cProfile only (its call counts against cProfile's).
SUITE_MODES = {"more-itertools": ("run", "cprofile")}
pytestmark = [pytest.mark.slow]


def skip_unless_here(name, mode=None):
    """Skips the test of project `name` (in `mode`) on the versions it does
    not run on, and in the modes it does not run in."""
    if mode is not None and mode not in SUITE_MODES.get(name, (mode,)):
        pytest.skip(f"{name}'s suite runs under {' and '.join(SUITE_MODES[name])} only; toolz's in every mode")
    here = "%d.%d" % sys.version_info[:2]
    if os.environ.get("STACKWATCH_REAL_SUITES") != "all" and here not in SUITE_VERSIONS[name]:
        pytest.skip(f"{name}'s suite runs on Python {' and '.join(SUITE_VERSIONS[name])} "
                    "(STACKWATCH_REAL_SUITES=all for every version)")

Project = collections.namedtuple("Project", [
    "dist",        # PyPI name
    "version",     # the pinned release (also pinned in scripts/venv.sh)
    "sha256",      # of its sdist
    "copy",        # {path in the sdist: folder in the suite}: its tests
    "ini",         # the pytest.ini written beside them
    "args",        # pytest arguments: what to run
    "min_passed",  # the plain run must pass at least this many tests
    "counted",     # "module:qualname" of functions whose calls must equal cProfile's
])

# The functions in `counted` are chosen so that the two counts must be
# equal:
# - plain functions: one call per frame on every version. (A generator's
#   calls are its resumptions in both tools, but they may part on the edge
#   cases: its creation's frame on 3.11+, close() and throw(), teardown;
#   docs/architecture.md, tests/py/tracer/test_differential.py.)
# - defined once, in a module imported once: pstats keys by (file, first
#   line, name) and keeps one of two code objects that share a key (a
#   reloaded module's functions, two genexprs on one line); the test checks
#   that the trace has one code object for the key.
# - called only on the main thread: cProfile before 3.12 sees no other
#   thread; the test checks this in the trace.
# - called a number of times that depends on no random draw and no hash
#   collision of id-based hashes (toolz's EqualityHashKey.__eq__ varies from
#   run to run; more-itertools' _strong_probable_prime takes random bases,
#   _complex_sumprod runs on sizes drawn by random.randrange): the cProfile
#   and stackwatch runs are two runs of the same tests.
PROJECTS = {
    # toolz keeps its tests inside the package (toolz/tests,
    # toolz/sandbox/tests): they are copied out so that they import the
    # installed toolz, not the sdist's copy beside them. The whole suite
    # runs (about 1 s plain), with the pytest options of toolz's
    # pyproject.toml (warnings are errors); its test_fold forks a
    # multiprocessing.Pool (tests/e2e/test_fork_children.py has what that
    # once broke, reduced).
    "toolz": Project(
        dist="toolz", version="1.2.0",
        sha256="9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490",
        copy={"toolz/tests": "toolz_tests", "toolz/sandbox/tests": "toolz_sandbox_tests"},
        ini="[pytest]\nxfail_strict = true\naddopts = --strict-config --strict-markers -ra\n"
            "filterwarnings =\n    error\n"
            "    ignore:The toolz.compatibility module is no longer needed:DeprecationWarning:\n",
        args=["toolz_tests", "toolz_sandbox_tests"],
        min_passed=180,
        counted=["toolz.functoolz:curry.__call__", "toolz.functoolz:curry.__init__",
                 "toolz.functoolz:_check_sigspec", "toolz.functoolz:InstanceProperty.__get__",
                 "toolz.dicttoolz:merge"],
    ),
    # more-itertools keeps its tests (unittest classes) in tests/ at the
    # sdist's root. Left out: test_primes (13 of the suite's 16 s plain),
    # the next four slowest (2.2 of the 3.8 s left, half the suite's time
    # under cProfile: long loops of one function, none of the counted
    # ones), and two tests that depend on wall time (a 0.1 s limit against a
    # sleep, and a worker thread racing a 0.1 s sleep), whose outcome a
    # loaded machine can change in any mode.
    "more-itertools": Project(
        dist="more-itertools", version="10.8.0",
        sha256="f638ddf8a1a0d134181275fb5d58b086ead7c6a72429ad725c67503f13ba30bd",
        copy={"tests": "tests"},
        ini="[pytest]\n",
        args=["tests",
              "--deselect", "tests/test_recipes.py::PrimeFunctionTests::test_primes",
              "--deselect", "tests/test_more.py::TimeLimitedTests::test_basic",
              "--deselect", "tests/test_more.py::CallbackIterTests::test_abort",
              "--deselect", "tests/test_more.py::ExtractTests::test_all_orderings",
              "--deselect", "tests/test_more.py::DiscreteFourierTransformTests::test_roundtrip",
              "--deselect", "tests/test_recipes.py::PolynomialFromRootsTests::test_large",
              "--deselect", "tests/test_recipes.py::RunningMedianTests::test_vs_statistics_median"],
        min_passed=600,
        counted=["more_itertools.more:peekable.__next__", "more_itertools.more:peekable.__init__",
                 "more_itertools.more:islice_extended.__init__",
                 "more_itertools.more:permutation_index", "more_itertools.more:nth_permutation"],
    ),
}

_BIN = os.path.dirname(sys.executable)
STACKWATCH = ([os.path.join(_BIN, "stackwatch")] if os.path.exists(os.path.join(_BIN, "stackwatch"))
              else [sys.executable, "-m", "stackwatch"])


# --- modes: how the suite is started, and what is checked of its output ----

def _plain(args, out):
    return [sys.executable, "-m", "pytest"] + args, None


def _run(args, out):
    path = os.path.join(out, "trace.swt")
    return STACKWATCH + ["run", "-o", path, "-m", "pytest"] + args, path


def _profile(args, out):
    path = os.path.join(out, "profile.swprof")
    return STACKWATCH + ["profile", "-o", path, "-m", "pytest"] + args, path


def _run_c(args, out):
    # As `python -c "..." ARGS`: pytest reads its arguments from sys.argv.
    path = os.path.join(out, "trace.swt")
    return STACKWATCH + ["run", "-o", path, "-c", "import pytest; raise SystemExit(pytest.console_main())"] + args, path


def _run_script(args, out):
    # The console script `pytest`, found on PATH (Suites._run puts this
    # venv's bin first), as a shell would start it.
    path = os.path.join(out, "trace.swt")
    return STACKWATCH + ["run", "-o", path, "pytest"] + args, path


def _plugin(args, out):
    # The pytest plugin (entry point pytest11): --stackwatch=trace, not a
    # bare --stackwatch, since the suite's paths follow.
    return [sys.executable, "-m", "pytest", "--stackwatch=trace", "--stackwatch-dir", out] + args, out


def _cprofile(args, out):
    path = os.path.join(out, "cprofile.prof")
    return [sys.executable, "-m", "cProfile", "-o", path, "-m", "pytest"] + args, path


def _check_trace(path, project):
    r = subprocess.run(STACKWATCH + ["stats", path], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    t = Trace(path)
    assert t.complete and not t.damage, (t.complete, t.damage)
    assert t.dropped() == 0
    assert f"{t.event_count()} events" in r.stdout.splitlines()[0], r.stdout[:500]
    calls = sum(row.calls for row in t.stats())
    assert calls > 100_000, calls


def _check_plugin(out, project):
    """The plugin's one trace file: read as `stackwatch run`'s is, and a
    region per test that ran (named by its node id), each ended."""
    path, = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".trace.swt")]
    _check_trace(path, project)
    t = Trace(path)
    regions = t.ext_events(kinds=["region_begin", "region_end"])
    names = [e.data["name"] for e in regions if e.kind == "region_begin"]
    assert len(names) >= project.min_passed and len(set(names)) == len(names), len(names)
    assert all("::" in n for n in names), names[:5]
    assert [e.kind for e in regions] == ["region_begin", "region_end"] * len(names)


def _check_profile(path, project):
    r = subprocess.run(STACKWATCH + ["stats", path], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    h = stackwatch.load_profile(path)
    info = h.info()
    assert info["complete"] and not info["damage"], info
    assert info["samples"] > 0, info
    # The samples hold the program's Python stacks: pytest's runner is on
    # nearly every one of them.
    files = set()
    todo = [h.tree().tree()]
    while todo:
        node = todo.pop()
        files.add(node["filename"])
        todo.extend(node["children"])
    assert any(os.sep + "_pytest" + os.sep in f for f in files), sorted(files)[:20]


Mode = collections.namedtuple("Mode", "argv check")
MODES = {
    "plain": Mode(_plain, None),
    "run": Mode(_run, _check_trace),
    "profile": Mode(_profile, _check_profile),
    "run-c": Mode(_run_c, _check_trace),
    "run-script": Mode(_run_script, _check_trace),
    "cprofile": Mode(_cprofile, None),
    "pytest plugin": Mode(_plugin, _check_plugin),
}
# (`stackwatch profile pytest`, the console script under the profiler, is
# tests/py/cli/test_start_forms.py's: the suites cost 5-10 s per mode.)
COMPARED = ["run", "profile", "run-c", "run-script", "cprofile", "pytest plugin"]   # each against "plain"


# --- the suites: download, extract, run ------------------------------------

def _cache_dir(tmp_path_factory):
    if os.environ.get("STACKWATCH_E2E_CACHE"):
        d = os.environ["STACKWATCH_E2E_CACHE"]
    elif sys.prefix != sys.base_prefix:      # a venv: .venv/<version> is ignored by git
        d = os.path.join(sys.prefix, "e2e-cache")
    else:
        d = os.path.join(str(tmp_path_factory.getbasetemp().parent), "stackwatch-e2e-cache")
    os.makedirs(d, exist_ok=True)
    return d


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _made_once(final, make):
    """The folder `final`, made by make(tmp) in a folder beside it and
    renamed into place: runs at once never see half of it."""
    if not os.path.isdir(final):
        os.makedirs(os.path.dirname(final), exist_ok=True)
        tmp = tempfile.mkdtemp(dir=os.path.dirname(final))
        try:
            make(tmp)
            try:
                os.rename(tmp, final)
            except OSError:       # another run made it first
                if not os.path.isdir(final):
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def _sdist(project, cache):
    """The pinned sdist, downloaded once; checked against its sha256."""
    def download(tmp):
        # --no-binary for the project only: its sdist, while pip's isolated
        # build of its metadata takes the build backend as wheels.
        r = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
             "--no-deps", "--no-binary", project.dist, "-d", tmp, f"{project.dist}=={project.version}"],
            capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            pytest.fail(f"pip download of {project.dist}=={project.version} failed:\n{r.stdout}\n{r.stderr}")

    d = _made_once(os.path.join(cache, "sdists", f"{project.dist}-{project.version}"), download)
    files = os.listdir(d)
    assert len(files) == 1 and files[0].endswith(".tar.gz"), (d, files)
    path = os.path.join(d, files[0])
    got = _sha256(path)
    assert got == project.sha256, f"{path}: sha256 {got}, pinned {project.sha256}"
    return path


def _suite_dir(project, cache):
    """A folder holding the project's tests (copied from its sdist) and a
    pytest.ini."""
    def extract(tmp):
        sdist = _sdist(project, cache)
        with tarfile.open(sdist) as tar:
            top = os.path.commonpath([m.name for m in tar.getmembers()])
            for m in tar.getmembers():
                rel = os.path.relpath(m.name, top)
                for src, dst in project.copy.items():
                    if not (m.isfile() and rel.startswith(src + "/")):
                        continue
                    target = os.path.normpath(os.path.join(tmp, dst, rel[len(src) + 1:]))
                    assert target.startswith(tmp + os.sep) and ".." not in rel, m.name
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    with tar.extractfile(m) as f, open(target, "wb") as out:
                        out.write(f.read())
        for dst in project.copy.values():
            assert os.path.isdir(os.path.join(tmp, dst)), f"{sdist} has no {dst}"
        # Its own ini, so that pytest does not take stackwatch's
        # pyproject.toml (above the cache) as the suite's configuration.
        with open(os.path.join(tmp, "pytest.ini"), "w") as f:
            f.write(project.ini)

    return _made_once(os.path.join(cache, f"{project.dist}-{project.version}-tests"), extract)


_SUMMARY = re.compile(r"^=*\s*(\d+ [a-z]+.*?) in [0-9.]+s\b.*$")


def summary_counts(stdout):
    """pytest's closing counts: {"passed": 692, "skipped": 1, ...}."""
    for line in reversed(stdout.splitlines()):
        m = _SUMMARY.match(line.strip())
        if m:
            counts = {}
            for part in m.group(1).split(", "):
                n, what = part.split(" ", 1)
                what = {"error": "errors", "warning": "warnings"}.get(what, what)
                counts[what] = int(n)
            return counts
    raise AssertionError("no pytest summary line in:\n" + stdout[-3000:])


def junit_outcomes(path):
    """{(classname, name): sorted outcomes} from a --junitxml file."""
    out = collections.defaultdict(list)
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = [c.tag + (":" + c.get("type", "") if c.tag == "skipped" else "")
                 for c in case if c.tag in ("failure", "error", "skipped")]
        out[(case.get("classname"), case.get("name"))].append(",".join(sorted(kinds)) or "passed")
    return {k: sorted(v) for k, v in out.items()}


Result = collections.namedtuple("Result", "argv returncode stdout stderr counts outcomes output")


class Suites:
    """Runs each (project, mode) once per session and keeps the result."""

    def __init__(self, tmp_path_factory):
        self.factory = tmp_path_factory
        self.cache = _cache_dir(tmp_path_factory)
        self.results = {}

    def result(self, name, mode):
        key = (name, mode)
        if key not in self.results:
            self.results[key] = self._run(PROJECTS[name], mode)
        return self.results[key]

    def _run(self, project, mode):
        installed = metadata.version(project.dist)
        if installed != project.version:
            pytest.fail(f"{project.dist} {installed} is installed, the test pins {project.version} "
                        f"(scripts/venv.sh installs it)")
        suite = _suite_dir(project, self.cache)
        out = str(self.factory.mktemp(f"{project.dist}-{mode}"))
        junit = os.path.join(out, "junit.xml")
        argv, output = MODES[mode].argv(
            ["-q", "-p", "no:cacheprovider", "--junitxml", junit] + project.args, out)
        env = dict(os.environ)
        for var in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
            env.pop(var, None)
        # Every run the same: no .pyc written by one run and read by the
        # next, and the same hash seed (set and dict orders, so the same
        # code paths).
        env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0",
                   PATH=_BIN + os.pathsep + env.get("PATH", ""))
        r = subprocess.run(argv, cwd=suite, env=env, capture_output=True, text=True, timeout=1800)
        where = f"{' '.join(argv)}\n(in {suite}) exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        assert os.path.exists(junit), where
        return Result(argv, r.returncode, r.stdout, r.stderr, summary_counts(r.stdout),
                      junit_outcomes(junit), output)


@pytest.fixture(scope="module")
def suites(tmp_path_factory):
    return Suites(tmp_path_factory)


def _describe(res):
    return f"{' '.join(res.argv)}\nexit {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"


@pytest.mark.parametrize("mode", COMPARED)
@pytest.mark.parametrize("name", list(PROJECTS))
def test_same_results_as_plain(suites, name, mode):
    skip_unless_here(name, mode)
    project = PROJECTS[name]
    plain = suites.result(name, "plain")
    # The reference is a real run of the suite (not a collection error).
    assert plain.returncode in (0, 1), _describe(plain)
    assert plain.counts.get("passed", 0) >= project.min_passed, _describe(plain)
    got = suites.result(name, mode)
    assert got.returncode == plain.returncode, _describe(got)
    assert got.counts == plain.counts, _describe(got)
    diff = {k: (plain.outcomes.get(k), got.outcomes.get(k))
            for k in set(plain.outcomes) | set(got.outcomes)
            if plain.outcomes.get(k) != got.outcomes.get(k)}
    assert not diff, diff
    if MODES[mode].check:
        MODES[mode].check(got.output, project)


def _resolve(spec):
    """The function named "module:qualname" (a method's function)."""
    module, qualname = spec.split(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("name", list(PROJECTS))
def test_call_counts_equal_cprofile(suites, name):
    skip_unless_here(name)
    project = PROJECTS[name]
    run = suites.result(name, "run")
    prof = suites.result(name, "cprofile")
    # The two runs ran the same tests with the same outcomes.
    assert (run.counts, run.outcomes) == (prof.counts, prof.outcomes), (_describe(run), _describe(prof))

    cprofile = pstats.Stats(prof.output).stats
    trace = Trace(run.output)
    main = {t["index"] for t in trace.threads if t["name"] == "MainThread"}
    rows = collections.defaultdict(list)
    for row in trace.stats():
        rows[row.code].append(row)

    got, expected = {}, {}
    for spec in project.counted:
        code = _resolve(spec).__code__
        key = (code.co_filename, code.co_firstlineno, code.co_name)
        ids = [c.id for c in trace.codes.values() if (c.filename, c.firstlineno, c.name) == key]
        assert len(ids) == 1, (spec, "one code object", ids)
        assert {r.thread for r in rows[ids[0]]} <= main, (spec, "called on other threads")
        got[spec] = sum(r.calls for r in rows[ids[0]])
        expected[spec] = cprofile[key][1] if key in cprofile else 0     # (cc, nc, ...): nc
        assert expected[spec] >= 10, (spec, "called too few times to tell", expected[spec])
    assert got == expected
