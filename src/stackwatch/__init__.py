"""stackwatch: a full-stack tracer and profiler for Python with a C core.

Exact tracing of every Python call and return, on every thread, into a
compact binary trace (``.swt``), exported to Perfetto and Chrome JSON.

    import stackwatch
    with stackwatch.trace("out.swt"):
        work()

    stackwatch.start("out.swt"); work(); stackwatch.stop()

    @stackwatch.traced("out.swt")
    def main(): ...
"""
import os as _os

from . import _native
from ._native import TraceError
from .events import handlers, probes
from .events.handlers import EVENTS, Event, add_handler
from .profiler import CallTree, History, Profiler, get_profile, load_profile, merge, watch
from .tracer.session import TraceSummary, is_tracing, start, stop, trace, traced
from .tracer.tracefile import Trace

_native._set_own_prefix(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), ""))

__all__ = ["EVENTS", "CallTree", "Event", "History", "Profiler", "Trace", "TraceError", "TraceSummary",
           "add_handler", "get_profile", "handlers", "is_tracing", "load_profile", "merge", "probes", "start",
           "stop", "trace", "traced", "watch"]
__version__ = "0.1.0"
