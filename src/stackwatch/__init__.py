"""stackwatch: a full-stack tracer and profiler for Python with a C core.

Exact tracing of every Python call and return, on every thread, into a
compact binary trace (``.swt``), exported to Perfetto and Chrome JSON.

    import stackwatch
    with stackwatch.trace("out.swt"):
        work()

    stackwatch.start("out.swt"); work(); stackwatch.stop()

    @stackwatch.traced("out.swt")
    def main(): ...

Importing the package loads nothing else: each name below is imported
from its room on first use, so that the pytest plugin (registered for
every pytest run, stackwatch.integrations.pytest_plugin) and the IPython
extension cost nothing, and load no native code, until they are used.

PYTEST_DONT_REWRITE: pytest marks the packages of its entry-point plugins
for assertion rewriting, and warns when one was imported first, as under
`stackwatch run -m pytest`; this package's code has nothing to rewrite.
"""
import importlib as _importlib
import sys as _sys

# name -> (module, attribute or None for the module itself)
_LAZY = {
    "_native": ("stackwatch._native", None),
    "TraceError": ("stackwatch._native", "TraceError"),
    "handlers": ("stackwatch.events.handlers", None),
    "probes": ("stackwatch.events.probes", None),
    "EVENTS": ("stackwatch.events.handlers", "EVENTS"),
    "Event": ("stackwatch.events.handlers", "Event"),
    "add_handler": ("stackwatch.events.handlers", "add_handler"),
    "CallTree": ("stackwatch.profiler", "CallTree"),
    "History": ("stackwatch.profiler", "History"),
    "Profiler": ("stackwatch.profiler", "Profiler"),
    "get_profile": ("stackwatch.profiler", "get_profile"),
    "load_profile": ("stackwatch.profiler", "load_profile"),
    "merge": ("stackwatch.profiler", "merge"),
    "watch": ("stackwatch.profiler", "watch"),
    "TraceSummary": ("stackwatch.tracer.session", "TraceSummary"),
    "is_tracing": ("stackwatch.tracer.session", "is_tracing"),
    "start": ("stackwatch.tracer.session", "start"),
    "stop": ("stackwatch.tracer.session", "stop"),
    "trace": ("stackwatch.tracer.session", "trace"),
    "traced": ("stackwatch.tracer.session", "traced"),
    "region": ("stackwatch.tracer.regions", "region"),
    "name": ("stackwatch.events.tasks", "name"),
    "tasks": ("stackwatch.events.tasks", "tasks"),
    "sent": ("stackwatch.events.task_channels", "sent"),
    "received": ("stackwatch.events.task_channels", "received"),
    "Trace": ("stackwatch.tracer.tracefile", "Trace"),
    "__version__": ("stackwatch.common.version", "VERSION"),   # written by the build from meson.build
}

__all__ = ["EVENTS", "CallTree", "Event", "History", "Profiler", "Trace", "TraceError", "TraceSummary",
           "add_handler", "get_profile", "handlers", "is_tracing", "load_profile", "merge", "name", "probes",
           "received", "region", "sent", "start", "stop", "tasks", "trace", "traced", "watch"]


def __getattr__(name):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'stackwatch' has no attribute {name!r}")
    # A module loaded already (not being loaded: its import's lock is
    # import_module's to wait for) is taken as it is: a name first used
    # while tracing, stackwatch.stop, makes no call the trace would record.
    module = _sys.modules.get(where[0])
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        module = _importlib.import_module(where[0])
    value = module if where[1] is None else getattr(module, where[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def load_ipython_extension(ipython):
    """`%load_ext stackwatch`: the %stackwatch and %%stackwatch magics
    (stackwatch.integrations.ipython)."""
    from .integrations import ipython as _ipython
    _ipython.load(ipython)
