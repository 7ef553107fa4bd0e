"""stackwatch's use of sys.monitoring (3.12+), under one tool id of its own.

sync() turns on exactly the events the dispatch layer needs, and frees the
tool id when none are needed:

- CPython 3.13, while Python call events are wanted: the specialised
  constructor call (CALL_ALLOC_AND_ENTER_INIT) pushes a class's Python
  __init__ frame without the PEP 523 check, so the frame-evaluation hook never
  sees those calls. stackwatch asks for PY_START/PY_RETURN as local events on
  every Python __init__ code object, and PY_UNWIND globally;
  native/ext/init_gap.c records only the frames the hook did not. __init__
  functions created later are covered by a function watcher (by name). Not
  covered: a class whose __init__ is a function with another name, assigned
  after tracing started.
- C calls (CALL, C_RETURN, C_RAISE), line, instruction, exception raised
  (RAISE) and handled (EXCEPTION_HANDLED) events, globally, handled by
  native/ext/ccalls.c and events.c. Line and instruction callbacks return
  DISABLE for locations no consumer wants. (On 3.9-3.11 these come from the
  C profile and trace hooks instead.)
"""
import dis
import sys

from . import _native

TOOL_NAME = "stackwatch"
_state = None   # (tool id, init-gap codes or None, global events) while the tool id is held

# Dispatch-layer event bits (native/ext/dispatch.h) -> sys.monitoring events.
_K = {name: i for i, name in enumerate(_native.EVENT_KINDS)}


def _global_events(mask):
    ev = sys.monitoring.events
    out = 0
    if mask & (1 << _K["c_call"] | 1 << _K["c_return"] | 1 << _K["c_raise"]):
        out |= ev.CALL | ev.C_RETURN | ev.C_RAISE
    if mask & (1 << _K["line"]):
        out |= ev.LINE
    if mask & (1 << _K["instruction"]):
        out |= ev.INSTRUCTION
    if mask & (1 << _K["raise"]):
        out |= ev.RAISE
    if mask & (1 << _K["handled"]):
        out |= ev.EXCEPTION_HANDLED
    return out


def sync(py_calls, mask):
    """Makes the tool's events match: py_calls (some consumer wants Python
    call events: the 3.13 __init__ gap needs covering) and mask (the
    dispatch layer's union of wanted events). Returns None, or a reason why
    something could not be turned on."""
    global _state
    if sys.version_info < (3, 12):
        return None
    mon = sys.monitoring
    ev = mon.events
    init_gap = bool(py_calls and getattr(_native, "HAS_INIT_GAP", 0))
    events = _global_events(mask)
    if init_gap:
        events |= ev.PY_UNWIND
    if _state is None and not events:
        return None
    if _state is None:
        for tid in (4, 3, 5, 2, 1, 0):
            if mon.get_tool(tid) is None:
                break
        else:
            return "no free sys.monitoring tool id: " + (
                "__init__ calls made through specialised constructor calls may be missing"
                if init_gap else "C-call, line and exception events are not reported")
        mon.use_tool_id(tid, TOOL_NAME)
        _native._events_refs(mon.DISABLE, _opnames())
        _state = (tid, None, 0)
    tid, codes, old = _state
    callbacks = (
        (ev.CALL, _native._mon_call), (ev.C_RETURN, _native._mon_c_return),
        (ev.C_RAISE, _native._mon_c_raise), (ev.LINE, _native._mon_line),
        (ev.INSTRUCTION, _native._mon_instruction), (ev.RAISE, _native._mon_raise),
        (ev.EXCEPTION_HANDLED, _native._mon_handled),
    )
    for e, cb in callbacks:
        if (events & e) and not (old & e):
            mon.register_callback(tid, e, cb)
    if init_gap and codes is None:
        local = ev.PY_START | ev.PY_RETURN
        mon.register_callback(tid, ev.PY_START, _native._mon_start)
        mon.register_callback(tid, ev.PY_RETURN, _native._mon_return)
        mon.register_callback(tid, ev.PY_UNWIND, _native._mon_unwind)
        codes = _native._init_gap_begin(tid, mon.set_local_events, local)
    elif not init_gap and codes is not None:
        _native._init_gap_end()
        for code in codes:
            mon.set_local_events(tid, code, 0)
        codes = None
    mon.set_events(tid, events)
    if (events & (ev.LINE | ev.INSTRUCTION)) and not (old & (ev.LINE | ev.INSTRUCTION)):
        mon.restart_events()   # locations DISABLEd for an earlier consumer
    for e, cb in callbacks:
        if (old & e) and not (events & e):
            mon.register_callback(tid, e, None)
    _state = (tid, codes, events)
    if not events and codes is None:
        for e in (ev.PY_START, ev.PY_RETURN, ev.PY_UNWIND):
            mon.register_callback(tid, e, None)
        mon.free_tool_id(tid)
        _state = None
    return None


def _opnames():
    return list(dis.opname)
