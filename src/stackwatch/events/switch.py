"""The Python half of the dispatch layer (native/ext/dispatch/dispatch.h): when the
set of consumers changes (a handler added or removed, a probe attached, a
trace started or stopped), the C side calls _refresh(), which turns on
exactly the mechanisms the union of their event masks needs and turns off
the rest:

- Python calls: the frame-evaluation hook (switched in C), plus on 3.13 the
  sys.monitoring events of the __init__ gap (monitoring.py);
- C calls, line, instruction and exception events: sys.monitoring on 3.12+
  (monitoring.py), the C profile / trace hooks on 3.9-3.11 (switched in C);
- GC: an entry in gc.callbacks;
- thread start / exit: a wrapper of threading.Thread._bootstrap_inner;
- object lifetime (new/delete): the allocation, finalizer and free slots of
  every Python class, and type's tp_new for classes made later
  (native/ext/tracer/objects.c).

Runs with the GIL held; never raises into the program (a problem is
printed once as a warning).
"""
import gc
import sys
import threading

from .. import _native
from . import monitoring

KINDS = tuple(_native.EVENT_KINDS)
BIT = {name: 1 << i for i, name in enumerate(KINDS)}
PY_MASK = sum(BIT[k] for k in ("call", "return", "yield", "resume", "unwind"))
GC_MASK = BIT["gc_start"] | BIT["gc_done"]
THREAD_MASK = BIT["thread_start"] | BIT["thread_exit"]
TRACE_MASK = BIT["line"] | BIT["instruction"] | BIT["raise"]   # the C trace hook on 3.9-3.11
OBJECT_MASK = sum(BIT[k] for k in ("new_start", "new_done", "delete_start", "delete_done"))

_warned = set()
_real_bootstrap_inner = None
_objects_on = False
_real_settrace = None


def mask_of(events):
    """Event names (or a group name: "calls", "c_calls", "gc", "objects",
    "threads", "exceptions", "all") -> bit mask. Raises ValueError for an
    unknown name."""
    if isinstance(events, str):
        events = [events]
    groups = {
        "calls": PY_MASK, "c_calls": BIT["c_call"] | BIT["c_return"] | BIT["c_raise"],
        "gc": GC_MASK, "objects": OBJECT_MASK, "threads": THREAD_MASK,
        "exceptions": BIT["raise"] | BIT["handled"], "all": (1 << len(KINDS)) - 1,
    }
    m = 0
    for e in events:
        if e in BIT:
            m |= BIT[e]
        elif e in groups:
            m |= groups[e]
        else:
            raise ValueError(f"unknown event {e!r} (known: {', '.join(KINDS + tuple(groups))})")
    if not m:
        raise ValueError("no events given")
    return m


def _warn(msg):
    if msg and msg not in _warned:
        _warned.add(msg)
        print(f"stackwatch: warning: {msg}", file=sys.stderr)


def _bootstrap_inner(self):
    native_id = _get_native_id()
    _native._emit_thread(True, self.name, native_id)
    try:
        _real_bootstrap_inner(self)
    finally:
        _native._emit_thread(False, self.name, native_id)


def _get_native_id():
    get = getattr(threading, "get_native_id", None)
    return get() if get else 0


def _all_classes():
    """Every class reachable from object through __subclasses__."""
    out, seen, stack = [], set(), [object]
    while stack:
        t = stack.pop()
        out.append(t)
        try:
            subs = type.__subclasses__(t)
        except TypeError:
            continue
        for s in subs:
            if id(s) not in seen:
                seen.add(id(s))
                stack.append(s)
    return out


def check_trace_hooks():
    """3.9-3.11, while line/instruction/exception events are on: puts
    stackwatch's trace function back on threads whose trace slot is free
    again, and reports (a warning, and the session's error) threads where
    another tool's trace function displaced it."""
    check = getattr(_native, "_events_check", None)
    if check is not None:
        check()


def _refresh():
    global _real_bootstrap_inner, _objects_on, _real_settrace
    m = _native.dispatch_masks()
    mask = m["all"]
    tracing = _native.is_tracing()
    try:
        _warn(monitoring.sync(tracing or bool(m["slow"] & PY_MASK), mask))
    except Exception as e:
        _warn(f"cannot switch sys.monitoring events: {e}")
    cb = _native._gc_callback
    if mask & GC_MASK:
        if cb not in gc.callbacks:
            gc.callbacks.append(cb)
    elif cb in gc.callbacks:
        gc.callbacks.remove(cb)
    if sys.version_info < (3, 12):
        check_trace_hooks()
        # sys.settrace is replaced by a C function that calls it and then
        # checks the hooks (a tool that sets a trace function displaces
        # stackwatch's, reported; when it removes it, stackwatch's is back).
        if mask & TRACE_MASK and _real_settrace is None:
            _real_settrace = sys.settrace
            _native._events_set_real_settrace(_real_settrace)
            sys.settrace = _native._events_settrace
        elif not mask & TRACE_MASK and _real_settrace is not None:
            if sys.settrace is _native._events_settrace:
                sys.settrace = _real_settrace
            _real_settrace = None
    if bool(mask & OBJECT_MASK) != _objects_on:
        _objects_on = bool(mask & OBJECT_MASK)
        (_native._objects_on if _objects_on else _native._objects_off)(_all_classes())
    T = threading.Thread
    if mask & THREAD_MASK:
        if _real_bootstrap_inner is None and hasattr(T, "_bootstrap_inner"):
            _real_bootstrap_inner = T._bootstrap_inner
            T._bootstrap_inner = _bootstrap_inner
    elif _real_bootstrap_inner is not None:
        if T._bootstrap_inner is _bootstrap_inner:
            T._bootstrap_inner = _real_bootstrap_inner
        _real_bootstrap_inner = None
