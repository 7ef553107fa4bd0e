"""stackwatch.history: the name before the house move of the module that
is now stackwatch.profiler's history.py, calltree.py, profile_file.py and
watch.py (see _moved.py); its names are given here from there."""
from .profiler.calltree import CallTree, merge
from .profiler.history import MAX_CYCLE_NS, MAX_OMIT, MIN_CYCLE_NS, History, check_maxlen, check_omit, cycle_ns, get_profile
from .profiler.profile_file import PROFILE_SUFFIX, is_profile_file, load_profile
from .profiler.watch import watch
from .render import formats

TREE_FORMATS = formats.names(formats.TREES)

__all__ = ["MAX_CYCLE_NS", "MAX_OMIT", "MIN_CYCLE_NS", "PROFILE_SUFFIX", "TREE_FORMATS", "CallTree", "History",
           "check_maxlen", "check_omit", "cycle_ns", "get_profile", "is_profile_file", "load_profile", "merge",
           "watch"]
