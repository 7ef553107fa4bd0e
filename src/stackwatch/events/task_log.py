"""The readable lines of task events (`stackwatch run --events tasks
--log`): who was created by whom, who sent what to whom and received it,
each switch from one task to another with every known task's state then,
blocks, wakes and exits, with tasks named as the trace names them.

They are rendered in C (native/ext/dispatch/task_log.c, _native.TaskLog),
which keeps per thread the names of the tasks it has met (task ids are a
thread's: events/task_hooks.py, ext/tracer/tasks.c), the task running and
each task's state, and writes every line of the log (handlers.verbose
hands it the other kinds' lines): registered as the handler of the task
kinds, it is called with no Python per event.

    writer(out) -> the TaskLog writing to the stream out (None: sys.stderr)
"""
import threading

from .. import _native
from .task_hooks import OUTCOMES, REASONS, TASK_KINDS


def _thread_name(ident):
    """The name of the thread `ident`, or None when it is not listed (yet:
    a thread as it starts)."""
    t = threading._active.get(ident)
    return None if t is None else t.name


def _thread_of_native(native_id):
    """The live thread whose native id is native_id, or None. Live: listed
    as threading.enumerate() lists them, but read as _thread_name reads
    them, without enumerate()'s lock (task events wrap threading's locks:
    enumerate() cost ~15k instructions a line). The writer keeps the thread
    found and asks again only when it no longer answers to that id."""
    for t in list(threading._active.values()) + list(threading._limbo):
        if t.native_id == native_id:
            return t
    return None


def writer(out):
    return _native.TaskLog(out, _thread_name, _thread_of_native, TASK_KINDS, OUTCOMES, REASONS)
