"""Python handlers of stackwatch's events.

    import stackwatch
    def on_event(ev):            # ev: stackwatch.Event
        print(ev.kind, ev.function, ev.lineno)
    h = stackwatch.add_handler(on_event, events=["call", "line"], where="*/myapp/*")
    ...
    h.remove()

Events (stackwatch.EVENTS): call, return, yield, resume, unwind, c_call,
c_return, c_raise, line, instruction, raise, handled, gc_start, gc_done,
new_start, new_done, delete_start, delete_done, thread_start, thread_exit,
task_switch, task_create, task_exit, task_block, task_wake, task_send,
task_receive, task_name, task_woken; and the groups calls, c_calls, exceptions, gc,
objects, threads, tasks, all.

A handler runs in the thread where the event happened, with the GIL; its
own calls are not events. An exception raised by a handler is reported once
on stderr and the handler is removed; the traced program never sees it.
`where` (a glob or a list of globs matched against the code's file name)
limits the events that have a code location; events without one (GC, objects,
threads) are always delivered. stackwatch's own code is never an event.
Several handlers, the file tracer and the USDT probes can listen at once:
the interpreter is asked only for the events someone wants.
"""
import os
import sys
import threading

from .. import _native
from . import kinds

EVENTS = kinds.KINDS
Event = _native.Event
_lock = threading.Lock()


class Handle:
    """Returned by add_handler(); remove() stops the deliveries (it is
    also a context manager that removes the handler at exit)."""

    def __init__(self, hid, fn):
        self._id, self.fn = hid, fn

    def remove(self):
        """Removes the handler; False if it was already removed (by
        remove() or because it raised)."""
        with _lock:
            return _native.remove_handler(self._id)

    @property
    def active(self):
        return self._id in _native._handler_ids()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def add_handler(fn, events="calls", where=None):
    """Calls fn(event) for every event of the given kinds (see EVENTS),
    optionally only where the code's file matches a glob. Returns a Handle.
    Raises TypeError / ValueError for a bad argument."""
    if not callable(fn):
        raise TypeError(f"a handler must be callable, not {type(fn).__name__}")
    mask = kinds.mask_of(events)
    if isinstance(where, str):
        where = [where]
    if where is not None:
        where = list(where)
        if not where or not all(isinstance(w, str) and w for w in where):
            raise ValueError("where must be a non-empty glob or list of globs")
    with _lock:
        hid = _native.add_handler(fn, mask, where)
    return Handle(hid, fn)


class verbose:
    """A readable text handler: one line per event with time, thread,
    location and details, to stderr or a file.

        h = stackwatch.add_handler(stackwatch.handlers.verbose(), events="all")
    """

    def __init__(self, out=None):
        self._own = isinstance(out, (str, bytes, os.PathLike))
        self.out = open(out, "a", encoding="utf-8") if self._own else out
        self._t0 = None
        self._names = {}
        self._tasks = None   # task_log.TaskLog, at the first task event

    def _thread(self, ident):
        name = self._names.get(ident)
        if name is None:
            t = threading._active.get(ident)
            if t is None:   # (not listed yet: a thread as it starts)
                return str(ident)
            name = self._names[ident] = t.name
        return name

    def _thread_named(self, ident, name):
        self._names[ident] = name

    def __call__(self, ev):
        if self._t0 is None:
            self._t0 = ev.time_ns
        where = ""
        if ev.filename is not None:
            where = f" {ev.function} ({os.path.basename(ev.filename)}:{ev.lineno if ev.lineno is not None else '?'})"
        detail = ""
        if ev.kind.startswith("task_"):   # named tasks, and their states at each switch
            if self._tasks is None:
                from .task_log import TaskLog
                self._tasks = TaskLog(self._thread, self._thread_named)
            detail, where = " " + self._tasks.describe(ev), f"  at{where}" if where else ""
        else:
            if ev.name is not None:
                detail += f" {ev.name}"
            if ev.data:
                detail += " " + " ".join(f"{k}={v}" for k, v in ev.data.items())
        if ev.kind.startswith("thread_"):
            self._names.pop(ev.thread_id, None)
        body = detail + where if ev.kind.startswith("task_") else where + detail
        line = f"{(ev.time_ns - self._t0) / 1e6:12.3f} ms  [{self._thread(ev.thread_id)}] {ev.kind:<12}{body}\n"
        (self.out or sys.stderr).write(line)

    def close(self):
        if self._own and self.out:
            self.out.close()
