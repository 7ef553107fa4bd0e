"""The Python half of switching mechanisms on and off. The owner of the
switching is C (native/ext/tracer/switch.c): whenever a consumer of the
dispatch layer changes (a handler added or removed, a probe attached, a
trace started or stopped) it recomputes the event masks, switches the
mechanisms it reaches itself (the frame-evaluation hook, the C trace and
profile hooks of 3.9-3.11, the slots of Python classes) and calls apply()
with what the mechanisms reachable only from Python must be:

- sys.monitoring events under stackwatch's tool id, 3.12+ (monitoring.py):
  C calls, lines, instructions, exceptions, and on 3.13 the __init__ gap
  and (under a second tool id) Cython's profiled functions (`run --cython`);
- gc.callbacks: one entry while GC events are wanted;
- threading.Thread._bootstrap_inner wrapped while thread events are wanted;
- greenlet.settrace(hooks.greenlet_trace) while task events are wanted
  (once the program imports greenlet; the callback it replaces is chained), and
  greenlet's switch() replaced by hooks.greenlet_switch_wrap's, which marks
  the value a switch passes as its message;
- sys.settrace replaced while the C trace hook is on (3.9-3.11), so that a
  tool installing or removing a trace function is noticed.

Nothing else turns a mechanism on or off. Everything it hands to CPython
comes from _native.hooks. Runs with the GIL held; never raises into the
program (a problem is printed once as a warning).
"""
import gc
import sys
import threading

from .. import _native
from . import monitoring
from . import task_channels, task_runtimes
from . import task_hooks as task_hooks_mod
from .task_imports import when_imported

_hooks = _native.hooks
_warned = set()
_real_bootstrap_inner = None
_real_settrace = None
_settrace = None   # the replacement of sys.settrace while it is in place


def apply(monitoring_events, local_lines, init_gap, lines_key, gc_callback, thread_wrapper, settrace,
          task_hooks=False, cython=False):
    """Called by the C owner only. monitoring_events: the global sys.monitoring
    events stackwatch's tool must have; local_lines: LINE / INSTRUCTION
    bits to set as local events of the code objects consumers want;
    init_gap: the 3.13 __init__ gap's local events (0: off); lines_key:
    changes when which code objects want line events may have; the rest
    say whether each mechanism must be on."""
    try:
        _warn(monitoring.sync(monitoring_events, local_lines, init_gap, lines_key))
    except Exception as e:
        _warn(f"cannot switch sys.monitoring events: {e}")
    try:
        _warn(monitoring.sync_cython(cython))
    except Exception as e:
        _warn(f"cannot switch the sys.monitoring events of Cython's functions: {e}")
    cb = _hooks.gc_callback
    if gc_callback:
        if cb not in gc.callbacks:
            gc.callbacks.append(cb)
    elif cb in gc.callbacks:
        gc.callbacks.remove(cb)
    _switch_settrace(settrace)
    _switch_thread_wrapper(thread_wrapper)
    _switch_greenlet_trace(task_hooks)
    task_hooks_mod.switch(task_hooks, (task_channels, task_runtimes))



def _warn(msg):
    if msg and msg not in _warned:
        _warned.add(msg)
        print(f"stackwatch: warning: {msg}", file=sys.stderr)


def _switch_settrace(on):
    """sys.settrace is replaced by a C function that calls it and then
    checks the threads' trace hooks (a tool that sets a trace function
    displaces stackwatch's, which is reported; when it removes it,
    stackwatch's is back)."""
    global _real_settrace, _settrace
    if on and _real_settrace is None:
        _real_settrace = sys.settrace
        _settrace = _hooks.wrap_settrace(_real_settrace)
        sys.settrace = _settrace
    elif not on and _real_settrace is not None:
        if sys.settrace is _settrace:
            sys.settrace = _real_settrace
        _real_settrace = _settrace = None


def _switch_greenlet_trace(on):
    """greenlet.settrace is the thread's: the callback goes on the thread
    that switches task events on (the one that starts tracing), or, when
    greenlet is not imported yet, on the one that imports it (task_imports:
    greenlet is not imported for this); any other thread gets it at its
    first switch() (tasks.c, the switch wrapper). The callback it replaces
    on a thread is called by ours there after each switch. Off, ours is
    removed from this thread only (settrace reaches no other): elsewhere it
    records nothing and calls what it chained."""
    if on and not _hooks.greenlet_trace_on():
        when_imported("greenlet", _greenlet_imported)
    elif not on and _hooks.greenlet_trace_on():
        import greenlet
        prev = _hooks.greenlet_trace_off()
        if greenlet.gettrace() is _hooks.greenlet_trace:
            greenlet.settrace(prev)
        _hooks.greenlet_switch_wrap(greenlet.greenlet, False)


def _greenlet_imported(greenlet):
    if _hooks.greenlet_trace_on():
        return
    _hooks.greenlet_trace_chain(greenlet.settrace(_hooks.greenlet_trace))
    try:
        _hooks.greenlet_switch_wrap(greenlet.greenlet, True)
    except Exception as e:
        _warn(f"cannot record the values greenlet switches pass: {e}")


def _bootstrap_inner(self):
    native_id = _get_native_id()
    _hooks.thread_event(True, self.name, native_id)
    try:
        _real_bootstrap_inner(self)
    finally:
        _hooks.thread_event(False, self.name, native_id)


def _get_native_id():
    get = getattr(threading, "get_native_id", None)
    return get() if get else 0


def _switch_thread_wrapper(on):
    global _real_bootstrap_inner
    T = threading.Thread
    if on:
        if _real_bootstrap_inner is None and hasattr(T, "_bootstrap_inner"):
            _real_bootstrap_inner = T._bootstrap_inner
            T._bootstrap_inner = _bootstrap_inner
    elif _real_bootstrap_inner is not None:
        if T._bootstrap_inner is _bootstrap_inner:
            T._bootstrap_inner = _real_bootstrap_inner
        _real_bootstrap_inner = None
