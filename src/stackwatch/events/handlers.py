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
import threading

from .. import _native
from . import kinds, task_log

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

    Every line goes through one writer in C (task_log.writer): the task
    events' lines are rendered there, with the tasks' names and, at each
    switch, every task's state. handle(events) registers it for events with
    the task kinds delivered to that writer directly (no Python per task
    event), as `stackwatch run --log` does.
    """

    def __init__(self, out=None):
        self._own = isinstance(out, (str, bytes, os.PathLike))
        self.out = open(out, "ab") if self._own else out   # (its own file: the writer's UTF-8 as it is)
        self._log = task_log.writer(self.out)

    def __call__(self, ev):
        if ev.kind.startswith("task_"):   # named tasks, and their states at each switch
            self._log(ev)
            return
        where = ""
        if ev.filename is not None:
            where = f" {ev.function} ({os.path.basename(ev.filename)}:{ev.lineno if ev.lineno is not None else '?'})"
        detail = ""
        if ev.name is not None:
            detail += f" {ev.name}"
        if ev.data:
            detail += " " + " ".join(f"{k}={v}" for k, v in ev.data.items())
        # (a thread event: the thread's name is read again)
        self._log.line(ev.time_ns, ev.thread_id, ev.kind, where + detail, ev.kind.startswith("thread_"))

    def handle(self, events, where=None):
        """add_handler(self, events, where), the task kinds among events
        handed to the C writer directly. Returns a Handle of them all."""
        mask = kinds.mask_of(events)
        tasks = mask & kinds.GROUPS["tasks"]
        parts = []
        if mask & ~tasks:
            parts.append(add_handler(self, [k for k, bit in kinds.BIT.items() if mask & ~tasks & bit], where))
        if tasks:
            parts.append(add_handler(self._log, [k for k, bit in kinds.BIT.items() if tasks & bit], where))
        return _Handles(parts)

    def close(self):
        self._log.flush()
        if self._own and self.out:
            self.out.close()


class _Handles(Handle):
    """Several handlers as one Handle (verbose.handle)."""

    def __init__(self, parts):
        self._parts = parts
        self.fn = parts[0].fn if parts else None

    def remove(self):
        return any([h.remove() for h in self._parts])

    @property
    def active(self):
        return any(h.active for h in self._parts)
