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
from ._native import TraceError
from .api import TraceSummary, is_tracing, start, stop, trace, traced
from .reader import Trace

__all__ = ["Trace", "TraceError", "TraceSummary", "is_tracing", "start", "stop", "trace", "traced"]
__version__ = "0.1.0"
