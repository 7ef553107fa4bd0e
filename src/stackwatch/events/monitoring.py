"""stackwatch's use of sys.monitoring (3.12+), under one tool id of its own.

sync() turns on exactly the events the dispatch layer needs, and frees the
tool id when none are needed:

- CPython 3.13, while Python call events are wanted: the specialised
  constructor call (CALL_ALLOC_AND_ENTER_INIT) pushes a class's Python
  __init__ frame without the PEP 523 check, so the frame-evaluation hook never
  sees those calls. stackwatch asks for PY_START/PY_RETURN as local events on
  every Python __init__ code object, and PY_UNWIND globally;
  native/ext/tracer/init_gap.c records only the frames the hook did not. __init__
  functions created later are covered by a function watcher (by name). Not
  covered: a class whose __init__ is a function with another name, assigned
  after tracing started.
- C calls (CALL, C_RETURN, C_RAISE), line, instruction, exception raised
  (RAISE) and handled (EXCEPTION_HANDLED) events, globally, handled by
  native/ext/tracer/ccalls.c and events.c. Line and instruction callbacks return
  DISABLE for locations no consumer wants. (On 3.9-3.11 these come from the
  C profile and trace hooks instead.)
- Except: when every line/instruction consumer is limited to some files
  (handlers' `where`, the file tracer's line filter), LINE / INSTRUCTION are
  *local* events of the matching code objects only (_local_lines(); code
  objects created later get them from the code watcher in
  native/ext/tracer/lines_local.c). Other files then run at full speed: on 3.12
  global LINE events that return DISABLE leave code ~1.3x slower for good.
"""
import dis
import gc
import sys
import weakref

from .. import _native

TOOL_NAME = "stackwatch"
_state = None   # (tool id, init-gap codes or None, events with callbacks) while the tool id is held
_local = None   # (local line/instruction bits, WeakSet of the codes that have them, _lines_key()) or None

# Dispatch-layer event bits (native/ext/dispatch/dispatch.h) -> sys.monitoring events.
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
    local = events & (ev.LINE | ev.INSTRUCTION)
    if local and _native._lines_restricted():
        events &= ~local
    else:
        local = 0
    if init_gap:
        events |= ev.PY_UNWIND
    if _state is None and not events and not local:
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
    wanted = events | local
    for e, cb in callbacks:
        if (wanted & e) and not (old & e):
            mon.register_callback(tid, e, cb)
    if init_gap and codes is None:
        gap = ev.PY_START | ev.PY_RETURN
        mon.register_callback(tid, ev.PY_START, _native._mon_start)
        mon.register_callback(tid, ev.PY_RETURN, _native._mon_return)
        mon.register_callback(tid, ev.PY_UNWIND, _native._mon_unwind)
        codes = _native._init_gap_begin(tid, mon.set_local_events, gap)
    elif not init_gap and codes is not None:
        _native._init_gap_end()
        gap = ev.PY_START | ev.PY_RETURN
        for code in codes:
            mon.set_local_events(tid, code, mon.get_local_events(tid, code) & ~gap)
        codes = None
    _local_lines(tid, local)
    mon.set_events(tid, events)
    if (wanted & (ev.LINE | ev.INSTRUCTION)) and not (old & (ev.LINE | ev.INSTRUCTION)):
        # Locations DISABLEd for an earlier consumer; also needed on 3.12
        # for frames already running to see new local events at once.
        mon.restart_events()
    for e, cb in callbacks:
        if (old & e) and not (wanted & e):
            mon.register_callback(tid, e, None)
    _state = (tid, codes, wanted)
    if not wanted and codes is None:
        for e in (ev.PY_START, ev.PY_RETURN, ev.PY_UNWIND):
            mon.register_callback(tid, e, None)
        mon.free_tool_id(tid)
        _state = None
    return None


def _local_lines(tid, bits):
    """Makes LINE / INSTRUCTION (bits) local events of exactly the code
    objects some consumer wants them in (none when bits is 0), now and for
    code objects created later. Redone when the consumers' filters may have
    changed."""
    global _local
    mon = sys.monitoring
    ev = mon.events
    key = _native._lines_key()
    if _local is not None and bits and _local[0] == bits and _local[2] == key:
        return
    if _local is not None:
        old_bits, old_codes, _ = _local
        _native._lines_local_end()
        for code in list(old_codes):
            mon.set_local_events(tid, code, mon.get_local_events(tid, code) & ~old_bits)
        _local = None
    if not bits:
        return
    # The watcher first: a code object created while the existing ones are
    # walked is not missed.
    _native._lines_local_begin(tid, bits, ev.LINE, ev.INSTRUCTION,
                               mon.get_local_events, mon.set_local_events)
    done = weakref.WeakSet()
    objs = gc.get_objects()
    for f in sys._current_frames().values():
        while f is not None:
            objs.append(f.f_code)
            if f.f_code.co_flags & 1:   # CO_OPTIMIZED: a function's own variables
                try:
                    objs.extend(f.f_locals.values())
                except Exception:
                    pass
            f = f.f_back
    # Code objects reachable from what gc knows (functions, generators,
    # containers), from the frames on every thread's stack, and nested in
    # their constants (nested functions, lambdas, comprehensions, class bodies).
    for code, w in _native._lines_codes(objs, bits, ev.LINE, ev.INSTRUCTION):
        mon.set_local_events(tid, code, mon.get_local_events(tid, code) | w)
        done.add(code)
    _local = (bits, done, key)


def _opnames():
    return list(dis.opname)
