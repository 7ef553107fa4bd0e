"""CPython 3.13: cover the __init__ frames the frame-evaluation hook misses.

On 3.13 the specialised constructor call (CALL_ALLOC_AND_ENTER_INIT) pushes
a class's Python __init__ frame without the PEP 523 check, so the hook never
sees those calls. While tracing, stackwatch therefore asks sys.monitoring
(with a tool id of its own) for PY_START/PY_RETURN on every Python __init__
code object, and for PY_UNWIND; native/ext/init_gap.c records only the frames
the hook did not. __init__ functions created later are covered by a function
watcher (by name); an __init__ assigned later under another name, created
before tracing started on a class that is unreachable from object's
subclasses, is not (docs/architecture.md).
"""
import sys
import types

from . import _native

_state = None
TOOL_NAME = "stackwatch"


def needed():
    return bool(getattr(_native, "HAS_INIT_GAP", 0))


def _init_codes():
    codes, seen, stack = {}, set(), [object]
    while stack:
        t = stack.pop()
        try:
            subs = type.__subclasses__(t)
        except TypeError:
            continue
        for s in subs:
            if id(s) not in seen:
                seen.add(id(s))
                stack.append(s)
        init = t.__dict__.get("__init__") if isinstance(getattr(t, "__dict__", None), types.MappingProxyType) else None
        if isinstance(init, types.FunctionType):
            codes[id(init.__code__)] = init.__code__
    return list(codes.values())


def enable():
    """Returns None, or a reason why the gap could not be covered."""
    global _state
    if not needed() or _state is not None:
        return None
    mon = sys.monitoring
    for tid in (4, 3, 5, 2, 1, 0):
        if mon.get_tool(tid) is None:
            break
    else:
        return "no free sys.monitoring tool id: __init__ calls made through specialised constructors may be missing"
    ev = mon.events
    local = ev.PY_START | ev.PY_RETURN
    mon.use_tool_id(tid, TOOL_NAME)
    mon.register_callback(tid, ev.PY_START, _native._mon_start)
    mon.register_callback(tid, ev.PY_RETURN, _native._mon_return)
    mon.register_callback(tid, ev.PY_UNWIND, _native._mon_unwind)
    mon.set_events(tid, ev.PY_UNWIND)
    codes = _init_codes()
    for code in codes:
        mon.set_local_events(tid, code, local)
    _native._init_gap_begin(tid, mon.set_local_events, local)
    _state = (tid, codes)
    return None


def disable():
    global _state
    if _state is None:
        return
    tid, codes = _state
    _state = None
    mon = sys.monitoring
    _native._init_gap_end()
    try:
        mon.set_events(tid, 0)
        for code in codes:
            mon.set_local_events(tid, code, 0)
        for e in (mon.events.PY_START, mon.events.PY_RETURN, mon.events.PY_UNWIND):
            mon.register_callback(tid, e, None)
    finally:
        mon.free_tool_id(tid)
