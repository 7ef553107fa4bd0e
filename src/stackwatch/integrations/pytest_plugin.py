"""The pytest plugin (entry point `pytest11: stackwatch`, so every pytest
run in an environment with stackwatch installed loads this module).

    pytest --stackwatch            trace the run: one trace file, each test a region
    pytest --stackwatch=profile    profile each test: one HTML flame graph, a profile per test
    pytest --stackwatch ... --stackwatch-dir DIR   (default: the current directory)

Without --stackwatch the plugin only adds its options: it imports nothing
of stackwatch (no native code), registers no hook around tests and costs
nothing. With it, the work is done by a second plugin object registered at
configure time (Tracing or Profiling below); neither changes a test's
outcome: whatever stackwatch meets while marking or sampling a test is
reported once at the end, never raised into the test.

Trace mode starts a tracing session when pytest is configured (so the
collection is in the trace too) and stops it when pytest ends; each test
(its setup, call and teardown: pytest_runtest_protocol) is a region named
by its node id, which the Perfetto and Chrome exports show as a slice on
the test's thread. Under `stackwatch run -m pytest --stackwatch` the
running session gets the regions and no second file is made.

Profile mode runs a statistical profiler (stackwatch.profiler) around each
test, its stacks cut below pytest's runner, and writes one HTML flame
graph in which each test is a profile of its own (the page's selector;
"all" merges them), plus a summary in pytest's terminal report.
"""
import inspect
import os
import sys

import pluggy
import pytest

MODES = ("trace", "profile")

# Around each test: a new-style wrapper where pluggy has them (1.1+), which
# pluggy runs directly in its hook call loop; an old-style one would run
# inside pluggy's own adapter generator there, and a region begun in it
# would not nest with the traced frames. Older pluggy runs old-style
# wrappers directly. The generators below work as either kind.
_AROUND = (pytest.hookimpl(wrapper=True)
           if "wrapper" in inspect.signature(pluggy.HookimplMarker.__call__).parameters
           else pytest.hookimpl(hookwrapper=True))


def pytest_addoption(parser):
    group = parser.getgroup("stackwatch", "stackwatch: trace or profile the tests")
    group.addoption("--stackwatch", nargs="?", const="trace", default=None, metavar="trace|profile",
                    help="trace the run into one trace file, each test a named region (--stackwatch "
                    "or --stackwatch=trace), or profile each test into one HTML flame graph "
                    "(--stackwatch=profile)")
    group.addoption("--stackwatch-dir", default=None, metavar="DIR",
                    help="directory of stackwatch's files (default: the current directory)")
    group.addoption("--stackwatch-interval", default="1ms", metavar="DURATION",
                    help="sampling interval of --stackwatch=profile (default 1ms, at least 20us)")


def pytest_configure(config):
    mode = config.getoption("stackwatch", None)
    if mode is None:
        return
    if mode not in MODES:
        raise pytest.UsageError(f"--stackwatch takes trace or profile, not {mode!r} (write --stackwatch=trace "
                                "or --stackwatch=profile, or put the test paths before --stackwatch)")
    folder = config.getoption("stackwatch_dir") or os.getcwd()
    if not os.path.isdir(folder):
        raise pytest.UsageError(f"--stackwatch-dir {folder}: not a directory")
    if mode == "trace":
        plugin = Tracing(folder)
    else:
        from ..profiler import interval_ns
        interval = config.getoption("stackwatch_interval")
        try:
            ns = interval_ns(interval)
        except ValueError as e:
            raise pytest.UsageError(f"--stackwatch-interval: {e}") from None
        plugin = Profiling(folder, interval, ns)
    try:
        plugin.begin()
    except (OSError, RuntimeError, ValueError) as e:
        raise pytest.UsageError(f"--stackwatch: {e}") from None
    config.pluginmanager.register(plugin, "stackwatch-" + mode)


def _output(folder, what, suffix):
    return os.path.join(folder, f"stackwatch-pytest-{os.getpid()}.{what}{suffix}")


class _Plugin:
    """What both modes share: the problems met (reported once, never raised
    into a test) and the terminal summary."""

    def __init__(self, folder):
        self.folder = folder
        self.problems = []
        self.lines = []

    def problem(self, what, e):
        if len(self.problems) < 5:
            self.problems.append(f"{what}: {type(e).__name__}: {e}")

    def pytest_terminal_summary(self, terminalreporter):
        if not self.lines and not self.problems:
            return
        terminalreporter.section("stackwatch")
        for line in self.lines:
            terminalreporter.write_line(line)
        for p in self.problems:
            terminalreporter.write_line(f"stackwatch: problem: {p}")


class Tracing(_Plugin):
    """--stackwatch=trace: one session for the whole run, a region per test."""

    def __init__(self, folder):
        super().__init__(folder)
        self.path = None
        self.tests = 0

    def begin(self):
        from ..tracer import session
        if session.is_tracing():
            return   # `stackwatch run -m pytest --stackwatch`: that session gets the regions
        path = _output(self.folder, "trace", ".swt")
        session.start(path, meta={"command": "pytest"})
        self.path = path

    @_AROUND
    def pytest_runtest_protocol(self, item):
        # stackwatch's own frames are never recorded, so the region nests
        # inside pluggy's call of the hook, around the test's frames.
        from ..tracer import regions
        begun = False
        try:
            begun = regions.region_begin(item.nodeid)
        except Exception as e:
            self.problem(f"region of {item.nodeid}", e)
        try:
            return (yield)
        finally:
            if begun:
                self.tests += 1
                try:
                    regions.region_end()
                except Exception as e:
                    self.problem(f"end of the region of {item.nodeid}", e)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        # After the other plugins' sessionfinish; the terminal summary,
        # which says where the trace is, comes after it.
        self.finish()

    def pytest_unconfigure(self, config):
        # pytest ended without a session (a usage error after configure).
        if self.path is not None:
            self.finish()
            for line in self.lines:
                print(line, file=sys.stderr)

    def finish(self):
        if self.path is None:
            self.lines.append(f"stackwatch: {self.tests} tests as regions in the running trace")
            return
        from ..tracer import session
        path, self.path = self.path, None
        if not session.is_tracing():
            self.lines.append(f"stackwatch: tracing into {path} was stopped by a test")
            return
        try:
            summary = session.stop()
        except Exception as e:
            self.problem(f"stopping the trace {path}", e)
            return
        extra = f", error: {summary.error}" if summary.error else ""
        self.lines.append(f"stackwatch: wrote {path} ({summary.events} events, {self.tests} tests as "
                          f"regions{extra})")


class Profiling(_Plugin):
    """--stackwatch=profile: a profiler per test, one flame graph page."""

    def __init__(self, folder, interval, interval_ns):
        super().__init__(folder)
        self.interval, self.interval_ns = interval, interval_ns
        self.trees = []      # (nodeid, CallTree) of the tests with samples
        self.empty = 0       # tests without a sample (shorter than the interval)
        self.samples = 0
        self.path = _output(folder, "profile", ".html")
        self.anchor = None

    def begin(self):
        from ..render import formats   # noqa: F401  (checks now that the package loads)
        open(self.path, "a").close()   # the folder is writable (the page is written at the end)
        try:
            from _pytest import runner
            self.anchor = runner.runtestprotocol.__code__   # stacks are cut below it
        except (ImportError, AttributeError):
            self.anchor = None

    @_AROUND
    def pytest_runtest_protocol(self, item):
        from ..profiler import Profiler
        p = None
        try:
            p = Profiler(interval=self.interval, maxlen=1)
            # Stacks start below pytest's runner; the samples taken while
            # this wrapper itself runs (starting and stopping) are dropped.
            p._set_wrapper(self.anchor, ignore=(Profiling.pytest_runtest_protocol.__code__,
                                                Profiling._keep.__code__))
            p.start()
        except Exception as e:
            self.problem(f"profiler of {item.nodeid}", e)
            p = None
        try:
            return (yield)
        finally:
            if p is not None:
                self._keep(item.nodeid, p)

    def _keep(self, nodeid, p):
        try:
            p.stop()
            from ..profiler import CallTree, merge
            tree = merge(*(CallTree(t) for _, _, t in p._trees().threads))
            if tree.total:
                self.trees.append((nodeid, tree))
                self.samples += tree.total
            else:
                self.empty += 1
        except Exception as e:
            self.problem(f"profile of {nodeid}", e)

    def pytest_sessionfinish(self, session):
        from ..render import formats
        if not self.trees:
            self.lines.append(f"stackwatch: no test ran long enough for a sample "
                              f"(every {self.interval_ns / 1e6:g} ms); nothing written")
            try:
                os.unlink(self.path)
            except OSError:
                pass
            return
        try:
            trees = formats.Trees([(nodeid, i, t._t) for i, (nodeid, t) in enumerate(self.trees)],
                                  title=f"pytest ({len(self.trees)} tests)", interval_ns=self.interval_ns)
            formats.get("html", formats.TREES).write(self.path, trees)
        except Exception as e:
            self.problem(f"writing {self.path}", e)
            return
        self.lines.append(f"stackwatch: wrote {self.path} ({len(self.trees)} tests, {self.samples} samples"
                          + (f"; {self.empty} tests too short for a sample" if self.empty else "") + ")")
        top = sorted(self.trees, key=lambda nt: -nt[1].total)[:5]
        self.lines.append("slowest tests by samples:")
        for nodeid, t in top:
            self.lines.append(f"  {t.total:8d}  {nodeid}")
