"""The module names of stackwatch before the house move (0.1.0 put the
modules into rooms: tracer/, profiler/, events/, ...) stay importable:
the file of each old name calls forward(), which puts the module of its
new name in its place, so that `import stackwatch.probes` gives the very
module `stackwatch.events.probes` (one module, one state).
tests/py/test_module_paths.py imports every old name."""
import importlib
import sys


def forward(old, new):
    """Makes the module being imported as `old` the module `new`."""
    sys.modules[old] = importlib.import_module(new)
