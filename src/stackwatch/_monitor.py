"""stackwatch's use of sys.monitoring (3.12+), under one tool id of its own.

Two jobs, each only when needed:

- CPython 3.13: the specialised constructor call (CALL_ALLOC_AND_ENTER_INIT)
  pushes a class's Python __init__ frame without the PEP 523 check, so the
  frame-evaluation hook never sees those calls. stackwatch asks for
  PY_START/PY_RETURN as local events on every Python __init__ code object,
  and PY_UNWIND globally; native/ext/init_gap.c records only the frames the
  hook did not. __init__ functions created later are covered by a function
  watcher (by name). Not covered: a class whose __init__ is a function with
  another name, assigned after tracing started.
- --c-calls on 3.12+: CALL, C_RETURN and C_RAISE globally, handled by
  native/ext/ccalls.c. (On 3.9-3.11 C calls come from the C profile hook.)
"""
import sys
import types

from . import _native

TOOL_NAME = "stackwatch"
_state = None


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
        d = getattr(t, "__dict__", None)
        init = d.get("__init__") if isinstance(d, types.MappingProxyType) else None
        if isinstance(init, types.FunctionType):
            codes[id(init.__code__)] = init.__code__
    return list(codes.values())


def enable(c_calls=False):
    """Enables what this Python version needs. Returns None, or a reason why
    it could not (then tracing runs without it)."""
    global _state
    init_gap = bool(getattr(_native, "HAS_INIT_GAP", 0))
    c_calls = c_calls and sys.version_info >= (3, 12)
    if _state is not None or not (init_gap or c_calls):
        return None
    mon = sys.monitoring
    for tid in (4, 3, 5, 2, 1, 0):
        if mon.get_tool(tid) is None:
            break
    else:
        return "no free sys.monitoring tool id: " + (
            "__init__ calls made through specialised constructor calls may be missing"
            if init_gap else "C calls are not recorded")
    ev = mon.events
    mon.use_tool_id(tid, TOOL_NAME)
    global_events = 0
    codes = []
    local = ev.PY_START | ev.PY_RETURN
    if init_gap:
        mon.register_callback(tid, ev.PY_START, _native._mon_start)
        mon.register_callback(tid, ev.PY_RETURN, _native._mon_return)
        mon.register_callback(tid, ev.PY_UNWIND, _native._mon_unwind)
        global_events |= ev.PY_UNWIND
    if c_calls:
        mon.register_callback(tid, ev.CALL, _native._mon_call)
        mon.register_callback(tid, ev.C_RETURN, _native._mon_c_return)
        mon.register_callback(tid, ev.C_RAISE, _native._mon_c_return)
        global_events |= ev.CALL | ev.C_RETURN | ev.C_RAISE
    mon.set_events(tid, global_events)
    if init_gap:
        codes = _init_codes()
        for code in codes:
            mon.set_local_events(tid, code, local)
        _native._init_gap_begin(tid, mon.set_local_events, local)
    _state = (tid, codes, init_gap)
    return None


def disable():
    global _state
    if _state is None:
        return
    tid, codes, init_gap = _state
    _state = None
    mon = sys.monitoring
    try:
        if init_gap:
            _native._init_gap_end()
        mon.set_events(tid, 0)
        for code in codes:
            mon.set_local_events(tid, code, 0)
        for e in (mon.events.PY_START, mon.events.PY_RETURN, mon.events.PY_UNWIND,
                  mon.events.CALL, mon.events.C_RETURN, mon.events.C_RAISE):
            mon.register_callback(tid, e, None)
    finally:
        mon.free_tool_id(tid)
