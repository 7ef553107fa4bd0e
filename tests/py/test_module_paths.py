"""Every module path users could import before the house move (0.1.0 put
the modules into rooms) still imports, with the names it had: each row is
an old path, the module it is now and the public names it held then (read
from `git show 04091eb^:src/stackwatch/<name>.py`). Left out: the old
cli_profile_file, stats_events and stats_samples, the command line's
private helpers, whose functions were rewritten into cli/stats.py and
cli/export.py."""
import importlib
import subprocess
import sys

import pytest

OLD = {
    "stackwatch.api": ("stackwatch.tracer.session", "TraceSummary default_path is_tracing sample_interval_ns "
                       "start stop exec_wrappers trace traced"),
    "stackwatch.reader": ("stackwatch.tracer.tracefile", "Trace"),
    "stackwatch.handlers": ("stackwatch.events.handlers", "EVENTS Handle add_handler verbose"),
    "stackwatch.probes": ("stackwatch.events.probes", "ARGUMENTS watch unwatch attached"),
    "stackwatch.units": ("stackwatch.common.units", "parse_size parse_duration_ns"),
    "stackwatch.flamegraph": ("stackwatch.render.flamegraph", "source_line data embed_json template document"),
    "stackwatch.program": ("stackwatch.cli.program", "UsageError resolve Program print_user_exception "
                           "check_writable"),
    "stackwatch.cli_profile": ("stackwatch.cli.profile", "USAGE add_parser"),
    "stackwatch.cli": ("stackwatch.cli", "build_parser main split_at_module"),
    "stackwatch.profiler": ("stackwatch.profiler", "FORMATS MODES DEFAULT_MAX_DEPTH interval_ns check_mode "
                            "Profiler"),
    "stackwatch.history": (None, "TREE_FORMATS PROFILE_SUFFIX MIN_CYCLE_NS MAX_CYCLE_NS MAX_OMIT cycle_ns "
                           "check_maxlen check_omit CallTree merge History load_profile is_profile_file "
                           "get_profile watch"),
}


@pytest.mark.parametrize("old", sorted(OLD))
def test_old_module_path_imports(old):
    new, names = OLD[old]
    module = importlib.import_module(old)
    if new is not None:
        assert module is importlib.import_module(new)   # one module, one state
    missing = [n for n in names.split() if not hasattr(module, n)]
    assert not missing, (old, missing)


def test_old_paths_import_in_a_fresh_process():
    """`import stackwatch.probes` as the first import of a program (the
    package imports nothing on its own), and the package's attribute is
    the same module."""
    code = "; ".join(f"import {old}" for old in sorted(OLD)) + (
        "; import stackwatch; import stackwatch.events.probes as p; assert stackwatch.probes is p")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
