"""The statistical profiler: a profiling session (session.py: Profiler, a C
sampler thread reading every thread's stack) and call trees over time
(history.py: CallTree, History, merging, time windows, profile files).

    from stackwatch.profiler import Profiler
"""
from .session import DEFAULT_MAX_DEPTH, FORMATS, MODES, Profiler, check_mode, interval_ns

__all__ = ["DEFAULT_MAX_DEPTH", "FORMATS", "MODES", "Profiler", "check_mode", "interval_ns"]
