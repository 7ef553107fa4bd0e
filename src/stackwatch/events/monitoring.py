"""stackwatch's use of sys.monitoring (3.12+), under one tool id of its own.

sync() makes the tool's events what the switching owner (C,
native/ext/tracer/switch.c, through switch.apply()) asks for, and frees the
tool id when none are needed. The owner decides which events (from the
kinds' table, native/ext/dispatch/kinds.h); this module only sets them, with
the callbacks of _native.hooks.monitoring_callbacks:

- C calls (CALL, C_RETURN, C_RAISE), line, instruction, exception raised
  (RAISE) and handled (EXCEPTION_HANDLED) events, globally, handled by
  native/ext/tracer/ccalls.c and events.c. Line and instruction callbacks
  return DISABLE for locations no consumer wants. (On 3.9-3.11 these come
  from the C profile and trace hooks instead.)
- Except: when every line/instruction consumer is limited to some files
  (handlers' `where`, the file tracer's line filter), LINE / INSTRUCTION are
  *local* events of the matching code objects only (_local_lines(); code
  objects created later get them from the code watcher in
  native/ext/tracer/lines_local.c). Other files then run at full speed: on
  3.12 global LINE events that return DISABLE leave code ~1.3x slower for
  good.
- CPython 3.13, while Python call events are wanted: the specialised
  constructor call (CALL_ALLOC_AND_ENTER_INIT) pushes a class's Python
  __init__ frame without the PEP 523 check, so the frame-evaluation hook
  never sees those calls. The owner asks for PY_START/PY_RETURN as local
  events on every Python __init__ code object (set in C by
  hooks.init_gap_begin, which also watches for new ones) and PY_UNWIND
  globally; native/ext/tracer/init_gap.c records only the frames the hook
  did not.
- CPython 3.13 with `run --cython`: a Cython module compiled with
  profile=True reports its functions' starts and ends to the *global*
  PY_START / PY_RESUME / PY_RETURN / PY_YIELD / PY_UNWIND events of every
  tool. They are set under a second tool id ("stackwatch-cython",
  sync_cython()), so that their callbacks (native/ext/tracer/
  cython_frames.c) are not the __init__ gap's: those return DISABLE for
  Python functions' code, which then costs nothing more.
"""
import gc
import sys
import weakref

from .. import _native

TOOL_NAME = "stackwatch"
_hooks = _native.hooks
_state = None   # (tool id, init-gap codes or None, their local events, events with callbacks) while the tool id is held
_local = None   # (local line/instruction bits, WeakSet of the codes that have them, lines key) or None
_cython_tool = None   # the second tool id while Cython's functions are recorded (3.13)


def sync(events, local, gap, lines_key):
    """Makes the tool's events match: events (global), local (LINE /
    INSTRUCTION bits as local events of the code objects consumers want),
    gap (the __init__ gap's local events, 0: off), lines_key (changes when
    which code objects want line events may have). Returns None, or a
    reason why something could not be turned on."""
    global _state
    if sys.version_info < (3, 12):
        return None
    mon = sys.monitoring
    if _state is None and not (events or local or gap):
        return None
    if _state is None:
        for tid in (4, 3, 5, 2, 1, 0):
            if mon.get_tool(tid) is None:
                break
        else:
            return "no free sys.monitoring tool id: " + (
                "__init__ calls made through specialised constructor calls may be missing"
                if gap else "C-call, line and exception events are not reported")
        mon.use_tool_id(tid, TOOL_NAME)
        _state = (tid, None, 0, 0)
    tid, codes, codes_gap, old = _state
    callbacks = _hooks.monitoring_callbacks
    wanted = events | local | gap
    for e, cb in callbacks.items():
        if (wanted & e) and not (old & e):
            mon.register_callback(tid, e, cb)
    if gap and codes is None:
        codes, codes_gap = _hooks.init_gap_begin(tid), gap
    elif not gap and codes is not None:
        _hooks.init_gap_end()
        for code in codes:
            mon.set_local_events(tid, code, mon.get_local_events(tid, code) & ~codes_gap)
        codes, codes_gap = None, 0
    _local_lines(tid, local, lines_key)
    mon.set_events(tid, events)
    lines = mon.events.LINE | mon.events.INSTRUCTION
    if (wanted & lines) and not (old & lines):
        # Locations DISABLEd for an earlier consumer; also needed on 3.12
        # for frames already running to see new local events at once.
        mon.restart_events()
    for e, cb in callbacks.items():
        if (old & e) and not (wanted & e):
            mon.register_callback(tid, e, None)
    _state = (tid, codes, codes_gap, wanted)
    if not wanted and codes is None:
        mon.free_tool_id(tid)
        _state = None
    return None


def _local_lines(tid, bits, key):
    """Makes LINE / INSTRUCTION (bits) local events of exactly the code
    objects some consumer wants them in (none when bits is 0), now and for
    code objects created later. Redone when the consumers' filters may have
    changed (key)."""
    global _local
    mon = sys.monitoring
    if _local is not None and bits and _local[0] == bits and _local[2] == key:
        return
    if _local is not None:
        old_bits, old_codes, _ = _local
        _hooks.lines_local_end()
        for code in list(old_codes):
            mon.set_local_events(tid, code, mon.get_local_events(tid, code) & ~old_bits)
        _local = None
    if not bits:
        return
    # The watcher first: a code object created while the existing ones are
    # walked is not missed.
    _hooks.lines_local_begin(tid, bits)
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
    for code, w in _hooks.lines_codes(objs, bits):
        mon.set_local_events(tid, code, mon.get_local_events(tid, code) | w)
        done.add(code)
    _local = (bits, done, key)


def sync_cython(on):
    """Holds a second tool id with global PY_START / PY_RESUME / PY_RETURN /
    PY_YIELD / PY_UNWIND events while `on` (3.13: `run --cython`), else frees it. Returns None,
    or a reason why it could not."""
    global _cython_tool
    if sys.version_info < (3, 13) or bool(on) == (_cython_tool is not None):
        return None
    mon = sys.monitoring
    callbacks = _hooks.cython_callbacks
    if on:
        held = _state[0] if _state is not None else None
        for tid in (3, 4, 5, 2, 1, 0):
            if tid != held and mon.get_tool(tid) is None:
                break
        else:
            return "no free sys.monitoring tool id: Cython's functions are not recorded"
        mon.use_tool_id(tid, TOOL_NAME + "-cython")
        for e, cb in callbacks.items():
            mon.register_callback(tid, e, cb)
        mon.set_events(tid, sum(callbacks))
        _cython_tool = tid
    else:
        tid, _cython_tool = _cython_tool, None
        mon.set_events(tid, 0)
        for e in callbacks:
            mon.register_callback(tid, e, None)
        mon.free_tool_id(tid)
    return None
