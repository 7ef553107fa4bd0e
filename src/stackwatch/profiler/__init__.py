"""The statistical profiler: a profiling session (session.py: Profiler, a C
sampler thread reading every thread's stack), call trees (calltree.py:
CallTree, merge), call trees over time (history.py: History, time windows,
get_profile), profile files (profile_file.py: save, load_profile) and a
profiler watched in the background (watch.py: watch). Its outputs are
written through the registry of formats (stackwatch.render.formats).

    from stackwatch.profiler import Profiler
"""
from .calltree import CallTree, merge
from .history import History, get_profile
from .profile_file import is_profile_file, load_profile
from .session import (DEFAULT_MAX_DEPTH, FORMATS, MIN_INTERVAL_OTHER_NS, MODES, Profiler, check_mode, interval_ns,
                      only_waited, waiting_note, waiting_threads)
from .watch import watch

__all__ = ["DEFAULT_MAX_DEPTH", "FORMATS", "MIN_INTERVAL_OTHER_NS", "MODES", "CallTree", "History", "Profiler",
           "check_mode", "get_profile", "interval_ns", "is_profile_file", "load_profile", "merge", "watch"]
