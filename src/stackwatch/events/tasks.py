"""Tasks by name, and the live tasks (issue 22):

    stackwatch.name(obj, name, group=None)   a task (thread, asyncio task,
                                             greenlet) or a channel (a queue,
                                             a lock, ...) named, weakly held
    stackwatch.tasks()                       every live task: its state, what
                                             it waits on, its stack

A name given to a task while task events are recorded is a TASK_NAME
record (and renames the task's track); a channel's name is used by the
sends, receives and blocks recorded after it.
"""
import os
import sys
import threading

from .. import _native
from . import task_hooks

_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep   # stackwatch's own files


def name(obj, name, group=None):
    """Names obj (a thread, an asyncio task, a greenlet, or a channel: a
    queue, a lock, ...) `name`, in `group` (None: none), for as long as it
    lives. Raises TypeError for a name that is not a str or an object that
    cannot be weakly referenced."""
    if not isinstance(name, str) or not (group is None or isinstance(group, str)):
        raise TypeError("stackwatch.name(obj, name, group=None): name and group must be str")
    try:
        task_hooks._names[obj] = (name, group)
        _native.hooks.task_names_changed()   # (the channel names C keeps are stale)
    except TypeError:
        raise TypeError(f"stackwatch.name: a {type(obj).__name__} cannot be named "
                        "(it cannot be weakly referenced)") from None
    try:
        _record(obj, name, group)
    except Exception:   # recording never fails the program
        pass


def _record(obj, name, group):
    hooks = _native.hooks
    if isinstance(obj, threading.Thread):
        if obj.native_id:
            task_hooks._event("task_name", 0, 0, obj.native_id, name, group or None)
        return
    kind = _kind(obj)
    if kind in ("asyncio", "greenlet") and not (kind == "greenlet" and obj.parent is None):
        tid = hooks.task_id(obj, name, True)
        if tid:
            task_hooks._event("task_name", tid, 0, 0, name, group or None)


def _kind(obj):
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None and isinstance(obj, asyncio.Task):
        return "asyncio"
    greenlet = sys.modules.get("greenlet")
    if greenlet is not None and isinstance(obj, greenlet.greenlet):
        return "greenlet"
    return None


def _frame(f):
    return {"function": getattr(f.f_code, "co_qualname", f.f_code.co_name), "file": f.f_code.co_filename,
            "line": f.f_lineno}


def _stack(frame):
    """frame and its callers, innermost first (stackwatch's own left out)."""
    out = []
    while frame is not None:
        if not frame.f_code.co_filename.startswith(_OWN):
            out.append(_frame(frame))
        frame = frame.f_back
    return out


def _given(obj, default):
    given = task_hooks._names.get(obj)
    return (given[0], given[1]) if given else (default, None)


# The functions a thread waits in: (file's base name, function) -> reason.
_THREAD_WAITS = {("threading.py", "wait"): "condition", ("threading.py", "join"): "join",
                 ("threading.py", "_wait_for_tstate_lock"): "join", ("queue.py", "get"): "queue",
                 ("queue.py", "put"): "queue", ("threading.py", "acquire"): "lock", ("_base.py", "result"): "future",
                 ("_base.py", "exception"): "future"}
_FUTURES = os.path.join("concurrent", "futures", "_base.py")   # (concurrent.futures' Future, whose waits are a Condition's)


def _thread_waits(f, state):
    """(state, waits_on) of a thread whose innermost frame is f: blocked in
    the outermost of the waits of threading, queue and concurrent.futures
    it is in (a queue's get, in a Condition's wait: the queue)."""
    waits = None
    while f is not None and (os.path.basename(f.f_code.co_filename) in ("threading.py", "queue.py")
                             or f.f_code.co_filename.endswith(_FUTURES) or f.f_code.co_filename.startswith(_OWN)):
        reason = _THREAD_WAITS.get((os.path.basename(f.f_code.co_filename), f.f_code.co_name))
        if reason:
            this = f.f_locals.get("self")
            if reason == "condition" and type(this).__name__ == "Event":
                reason = "event"
            state, waits = "blocked", reason if this is None else f"{reason} {task_hooks.channel_name(this)}"
        f = f.f_back
    return state, waits


def tasks():
    """Every live task, as a list of dicts: name, group, kind ("thread",
    "asyncio", "greenlet"), thread (native id), state ("running": the
    caller's; "blocked": it waits, on `waits_on`; "runnable": ready to run;
    "suspended": a greenlet switched away from), waits_on (a reason and
    the channel's name, e.g. "queue Queue 0x7f..", or None) and stack (its
    frames, innermost first: function, file, line)."""
    out = list(_threads(sys._getframe(1)))
    out.extend(_asyncio_tasks())
    out.extend(_greenlets())
    return out


def _threads(here_frame, stacks=True):
    """The live threads as tasks() lists them (the caller's innermost frame
    here_frame; with stacks, each one's)."""
    here = threading.current_thread()
    frames = sys._current_frames()
    for t in threading.enumerate():
        f = frames.get(t.ident) if t is not here else here_frame
        state, waits = ("running", None) if t is here else _thread_waits(f, "runnable")
        n, group = _given(t, t.name)
        yield {"name": n, "group": group, "kind": "thread", "thread": t.native_id, "state": state,
               "waits_on": waits, **({"stack": _stack(f)} if stacks else {})}


def threads_at_start():
    """The live threads as task events start (the trace's META
    `tasks_at_start`): [{"thread" (native id), "name", "state", "waits_on"}]."""
    return [{k: t[k] for k in ("thread", "name", "state", "waits_on")} for t in _threads(sys._getframe(1), False)]


def _asyncio_tasks():
    asyncio = sys.modules.get("asyncio")
    out = []
    for task in task_hooks.live_asyncio_tasks():
        loop = task.get_loop()
        try:
            running = asyncio.current_task(loop) is task
        except RuntimeError:
            running = False
        waits = None
        if running:
            state = "running"
        elif getattr(task, "_fut_waiter", None) is not None:
            reason, channel, _ = task_hooks._waits_on(task)
            state, waits = "blocked", task_hooks.REASONS[reason] + (f" {channel}" if channel else "")
        else:
            state = "runnable"
        n, group = _given(task, task_hooks._task_name(task))
        stack = [_frame(f) for f in reversed(task_hooks.await_frames(task))]
        thread = getattr(loop, "_thread_id", None)
        native = next((t.native_id for t in threading.enumerate() if t.ident == thread), None)
        out.append({"name": n, "group": group, "kind": "asyncio", "thread": native, "state": state,
                    "waits_on": waits, "stack": stack})
    return out


def _gevent_run_name(g):
    """The qualified name of the function a gevent Greenlet g runs (its
    _run; its run is gevent's own Greenlet.run), as the trace names it
    (tasks.c gevent_run_name); None for another greenlet."""
    if not any(str(getattr(c, "__module__", "")).startswith("gevent.") for c in type(g).__mro__):
        return None
    qn = getattr(getattr(g, "_run", None), "__qualname__", None)
    return qn if isinstance(qn, str) else None


def _greenlets():
    greenlet = sys.modules.get("greenlet")
    if greenlet is None:
        return []
    import gc
    here = greenlet.getcurrent()
    out = []
    for g in gc.get_objects():
        if not isinstance(g, greenlet.greenlet) or g.parent is None or g.dead or not g:
            continue
        f = g.gr_frame if g is not here else sys._getframe(1)
        stack = _stack(f)
        run = _gevent_run_name(g) or (stack[-1]["function"] if stack else None)
        default = "greenlet " + run if run else "greenlet"
        n, group = _given(g, default)
        out.append({"name": n, "group": group, "kind": "greenlet", "thread": threading.get_native_id()
                    if g is here else None, "state": "running" if g is here else "suspended",
                    "waits_on": None, "stack": stack})
    return out
