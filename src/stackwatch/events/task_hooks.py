"""The task events only Python can see (`--events tasks`, issue 22):
asyncio tasks and threads as tasks, and the messages of asyncio's and
queue's queues. While task events are wanted (switch.apply), these methods
are wrapped (and put back after):

- asyncio.events.Handle._run and __init__, BaseEventLoop.create_task: by
  C wrappers (ext/tracer/task_wrappers.c: each step of a task runs as that
  task; its creation, its wake, its exit with its outcome, its block on
  what its await chain waits on, read here by _waits_on, and a name
  asyncio gives it later, by set_name or a create_task(name=...) of
  3.9-3.11);
  a done callback of a task (gather's, shield's: Handle._run, not a step)
  runs on behalf of that task, and a wake it makes is told by the woken
  task at its next step (TASK_WOKEN): which task awaits which, not the
  loop's own callbacks; BaseEventLoop.call_soon_threadsafe from another
  thread: its handle runs on behalf of that thread's task; asyncio's copy
  of a concurrent.futures Future's outcome (asyncio.futures._copy_future_state:
  run_in_executor's) on behalf of the task that set it (Future.set_result
  and set_exception, wrapped: an executor's worker ends the wait);
  BaseSelectorEventLoop._process_events: a task woken by a handle of an
  fd the selector found ready was woken by I/O, not by the loop's thread;
- asyncio.Queue._put / _get and queue.Queue._put / _get (their subclasses
  too): the message sent and received (C wrappers too);
- threading.Thread.start: who starts the thread, where; the new thread
  records its creation when it starts (Thread._set_native_id, which its
  bootstrap calls first: the creator named by its native id and task);
  Thread._bootstrap (the thread's whole run) its exit, with the exception
  threading.excepthook saw (wrapped) if any, and the wake of the threads
  in its join() (Thread.join: their block); a thread alive at the start
  (its _bootstrap began before ours) the same at Thread._delete, the end
  of its _bootstrap_inner (3.11+; 3.9 and 3.10's calls none, but enters
  threading._active_limbo_lock there: _LimboLock). These stay Python: on
  bench/workloads/tasks_threads.py (20,000 items, 8 threads, 3.12,
  callgrind) they cost 0.3-0.4 M instructions of the 112 M task events
  add (0.3%; about 36 K a thread started and joined), so C would not pay;
- threading.Condition.wait and notify (C wrappers: ext/tracer/task_conditions.c,
  no Python run while a queue's lock is held, but _cond_what once per
  Condition and caller): a thread's block (on a queue, an Event, a
  Semaphore, or the Condition, read from wait's caller) and its wake by
  the thread that notifies it (the first n in wait);
- multiprocessing's pipes: task_channels.py; trio and uvloop: task_runtimes.py;
- threading's Lock and RLock (C types): their acquire, release, __enter__
  and __exit__ are ext/tracer/task_locks.c's (hooks.lock_wrap): a block on
  a lock held, and who let the thread in (TASK_WOKEN).

Each wrapper calls the original, records through _native.hooks (task_id,
task_switch, task_event: ext/tracer/tasks.c) and never raises into the
program. The location of an event is its caller's frame outside asyncio,
threading, queue, concurrent.futures and stackwatch. Loops that do not run Handle (uvloop's:
task_runtimes.py) and the first step of an eager task are not seen here.
"""
import os
import sys
import time
import weakref

from .. import _native
from . import task_imports
from .task_imports import when_imported

_hooks = _native.hooks
# The dispatch kinds (ext/dispatch/kinds.h) by name.
_K = {name: _native.EVENT_KINDS.index(name)
      for name in ("task_create", "task_exit", "task_block", "task_wake", "task_send", "task_receive", "task_name",
                   "task_woken")}
# What a task waits on: TASK_BLOCK's reason by number (records.h).
REASONS = ("lock", "condition", "event", "queue", "future", "channel", "sleep", "io", "join")
# TASK_CREATE's kind and TASK_EXIT's outcome by number.
TASK_KINDS = (None, "greenlet", "asyncio", "thread", "trio")
OUTCOMES = ("result", "exception", "cancelled")
VALUE_MAX = 200
# A gather's join names this many of its tasks, then counts the others (a
# gather of 10,000 tasks named them all: 200 kB in each of its block's and
# wake's records, and in every line of the --log that lists its state).
JOIN_NAMED = 8

_saved = []          # (owner, attribute, original, wrapper) of what is wrapped now
_blocked = weakref.WeakKeyDictionary()   # trio task -> (its task id, what it waits on), while it waits (asyncio's: C's)
_failed = weakref.WeakKeyDictionary()    # thread -> repr of the exception its run raised
_starts = weakref.WeakKeyDictionary()    # thread started -> (creating task, creating thread's native id, where)
# id of a thread -> native ids of the threads in its join(), in order. By
# id: an entry lives only while a thread waits, which holds the thread
# alive (no weak reference to make).
_joiners = {}
# thread whose run ended -> (its native id, its task, time.monotonic_ns()):
# who ended a join that no end woke (the thread ended before its joiner
# was listed, while it still looked alive).
_ended = weakref.WeakKeyDictionary()
# Threads whose _bootstrap is ours (started while task events were
# recorded; kept across sessions: such a thread's run still ends in it).
_ours = weakref.WeakSet()
threading_get_native_id = threading_current = threading_file = None
_names = weakref.WeakKeyDictionary()     # obj -> (name, group) given by stackwatch.name()
_skip = ()           # folders and files whose frames are no event's location


def _reason(name):
    return REASONS.index(name)


def switch(on, more=()):
    """Wraps (on) or puts back (off) the methods; called by switch.apply.
    more: modules that wrap more (task_channels, task_runtimes): each has
    install(wrap), given _wrap, and forget(), called when task events stop."""
    if on and not _saved:
        try:
            _install()
            for m in more:
                m.install(_wrap)
        except Exception as e:   # never into the program
            print(f"stackwatch: warning: cannot record asyncio and thread task events: {e}", file=sys.stderr)
    elif not on and _saved:
        _hooks.lock_wrap(_lock_types(), False, None, None)
        task_imports.forget()
        for m in more:
            m.forget()
        for table in (_blocked, _failed, _starts, _joiners, _woken_by, _ended, _set_by, _asyncio_names):   # (a next session gives new ids)
            table.clear()
        _hooks.asyncio_reset()
        while _saved:
            owner, name, orig, ours = _saved.pop()
            if owner.__dict__.get(name) is ours:   # (a program's own replacement stays)
                if orig is _INHERITED:
                    delattr(owner, name)
                else:
                    setattr(owner, name, orig)


_INHERITED = object()   # _saved's original of a method wrapped where it was inherited: removed after


def _wrap(owner, name, make, inherited=False):
    """owner.name = make(its own), put back when task events stop; with
    inherited, owner's whatever class it comes from (deleted after)."""
    orig = getattr(owner, name, None) if inherited else owner.__dict__.get(name)
    if orig is not None:
        own = name in owner.__dict__
        ours = make(orig)
        setattr(owner, name, ours)
        _saved.append((owner, name, orig if own else _INHERITED, ours))


def _install():
    """threading's wrappers now; asyncio's and queue's now or when the
    program imports them (task_imports.py: a program with no asyncio
    does not import it for this)."""
    global _skip, threading_get_native_id, threading_current, threading_file
    import threading
    lib = os.path.dirname(threading.__file__) + os.sep
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    _skip = (lib + "asyncio" + os.sep, threading.__file__, lib + "queue.py", lib + "concurrent" + os.sep, here)
    _hooks.asyncio_setup((), _task_name, _names.data, _waits_on, tuple(_skip))   # (no task types until asyncio)
    threading_get_native_id, threading_current = threading.get_native_id, threading.current_thread
    threading_file = threading.__file__
    _wrap(threading.Thread, "start", _thread_start)
    _wrap(threading.Thread, "_set_native_id", _thread_set_native_id)
    _wrap(threading.Thread, "_bootstrap", _thread_bootstrap)
    _wrap(threading.Thread, "_delete", _thread_delete)
    if sys.version_info < (3, 11):   # (their _bootstrap_inner ends in `with _active_limbo_lock:`, no _delete)
        _wrap(threading, "_active_limbo_lock", _LimboLock)
    _wrap(threading, "excepthook", _excepthook)
    _hooks.cond_setup(_cond_what, threading.__file__, frozenset(_COND_OWN))
    _wrap(threading.Condition, "wait", lambda orig: _hooks.cond_wrap("wait", orig))
    _wrap(threading.Condition, "notify", lambda orig: _hooks.cond_wrap("notify", orig))
    _wrap(threading.Thread, "join", _thread_join)
    _hooks.lock_wrap(_lock_types(), True, threading.__file__, channel_name)
    when_imported("queue", _install_queue)
    when_imported("asyncio", _install_asyncio)


def _install_queue(queue):
    _wrap(queue.Queue, "_put", lambda orig: _hooks.asyncio_wrap("put", orig))
    _wrap(queue.Queue, "_get", lambda orig: _hooks.asyncio_wrap("get", orig))


def _install_asyncio(asyncio):
    """asyncio's wrappers, and its tasks alive now (those of this thread's
    loops) defined."""
    import asyncio.base_events
    import asyncio.selector_events
    task_types = tuple({asyncio.Task, getattr(asyncio.tasks, "_PyTask", asyncio.Task)})
    _hooks.asyncio_setup(task_types, _task_name, _names.data, _waits_on, tuple(_skip))
    _wrap(asyncio.events.Handle, "_run", lambda orig: _hooks.asyncio_wrap("run", orig))
    _wrap(asyncio.events.Handle, "__init__", lambda orig: _hooks.asyncio_wrap("init", orig))
    _wrap(asyncio.base_events.BaseEventLoop, "create_task", lambda orig: _hooks.asyncio_wrap("create_task", orig))
    _wrap(asyncio.base_events.BaseEventLoop, "call_soon_threadsafe",
          lambda orig: _hooks.asyncio_wrap("call_soon_threadsafe", orig))
    _wrap(asyncio.selector_events.BaseSelectorEventLoop, "_process_events",
          lambda orig: _hooks.asyncio_wrap("process_events", orig))
    import concurrent.futures   # (asyncio imports it)
    for name in ("set_result", "set_exception"):
        _wrap(concurrent.futures.Future, name, _future_set)
    _wrap(asyncio.futures, "_copy_future_state", _copy_future_state)
    _wrap(asyncio.Queue, "_put", lambda orig: _hooks.asyncio_wrap("put", orig))
    _wrap(asyncio.Queue, "_get", lambda orig: _hooks.asyncio_wrap("get", orig))
    _live_at_start()


def _lock_types():
    """threading's lock types: Lock's and RLock's (C)."""
    import _thread
    return tuple({type(_thread.allocate_lock()), getattr(_thread, "RLock", type(_thread.allocate_lock()))})


def _where(f):
    """The first frame from f outwards that is the program's own."""
    while f is not None and f.f_code.co_filename.startswith(_skip):
        f = f.f_back
    return f


def _repr(value):
    try:
        r = repr(value)
    except Exception as e:
        r = f"<repr failed: {type(e).__name__}>"
    return r if len(r) <= VALUE_MAX else r[:VALUE_MAX - 3] + "..."


def channel_name(obj):
    """A channel's name: stackwatch.name()'s, else its class and address."""
    given = _names.get(obj) if _names and _is_weakable(obj) else None
    return given[0] if given else f"{type(obj).__name__} {id(obj):#x}"


def _is_weakable(obj):
    return type(obj).__weakrefoffset__ != 0


def _task_name(task, coro=None):
    """stackwatch.name()'s, else "Task-N coroutine". (_coro, not get_coro():
    a finished eager task has none, and 3.12.1's get_coro() crashes then.)"""
    given = _names.get(task) if _names else None
    if given:
        return given[0]
    coro = coro or getattr(task, "_coro", None)
    return f"{task.get_name()} {getattr(coro, '__qualname__', type(coro).__name__)}"


def _event(kind, a=0, b=0, c=0, s1=None, s2=None, frame=None):
    _hooks.task_event(_K[kind], a, b, c, s1, s2, frame)


def live_asyncio_tasks():
    """The asyncio tasks not done, of every loop, by name."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return []
    tasks = set()
    for attr in ("_all_tasks", "_scheduled_tasks", "_eager_tasks"):   # 3.9-3.11; 3.12+
        tasks.update(t for t in list(getattr(asyncio.tasks, attr, ()) or ()) if isinstance(t, asyncio.Future))
    return [t for t in sorted(tasks, key=lambda t: t.get_name()) if not t.done()]


def _live_at_start(of_loop=None):
    """The asyncio tasks alive as task events start, of the loops of this
    thread (running here, or not running): each is defined as a task, and
    one that waits blocks (on what it awaits) as the recording starts.
    Those of a loop running in another thread (an attach, 3.12+, starts on
    whichever thread runs then) are listed on that thread, by a callback
    given to its loop (of_loop: that loop's tasks alone), so that their
    records are that thread's: by then a task may have stepped (recorded
    by our wrappers: one blocked since is not listed again, C's
    asyncio_at_start) or been woken (what it awaits is done: not blocked)."""
    import asyncio
    here, others = asyncio._get_running_loop(), {}
    for task in live_asyncio_tasks():
        loop = task.get_loop()
        if of_loop is None and loop is not here and loop.is_running():   # (another thread's)
            others[id(loop)] = loop
            continue
        if of_loop is not None and loop is not of_loop:
            continue
        waiter = getattr(task, "_fut_waiter", None)
        waits = _waits_on(task) if waiter is not None and not waiter.done() else (-1, None, None)
        _hooks.asyncio_at_start(task, *waits)
        if waits[0] >= 0 and not isinstance(loop, asyncio.BaseEventLoop):   # (uvloop's: its wake is Python's)
            _blocked[task] = (_task_id(task), waits[1])
    for loop in others.values():
        _list_on_its_thread(loop)


def _list_on_its_thread(loop):
    """_live_at_start(loop) on loop's thread, quiet (its calls are
    stackwatch's, its task events the program's; Handle._run's too: C's).
    A loop that waits in its selector is woken for it: its thread is quiet
    from the wake until it waits again, if the pass the wake makes runs the
    listing alone (C's: ext/tracer/task_wrappers.c asyncio_wake_quiet)."""
    select = getattr(type(getattr(loop, "_selector", None)), "select", None)
    ident = getattr(loop, "_thread_id", None)
    armed = bool(ident and hasattr(select, "__code__") and _hooks.asyncio_wake_quiet(ident, select.__code__))
    try:
        loop.call_soon_threadsafe(_native.quiet, _live_at_start, loop)
        armed = False
    except RuntimeError:   # (closed since)
        pass
    finally:
        if armed:   # (no wake comes)
            _hooks.asyncio_wake_quiet(0, None)


# ---- asyncio ----
# The steps, wakes, creations and done callbacks of asyncio's own loops are
# C's (ext/tracer/task_wrappers.c); these Python ones serve the loops that
# run no Handle (uvloop) and trio (task_runtimes.py).

def _task_id(task):
    return _hooks.task_id(task, _task_name)   # (named only when first met)


def _create_task(orig):
    def create_task(self, *args, **kwargs):
        task = orig(self, *args, **kwargs)
        try:
            coro = args[0] if args else kwargs.get("coro")
            name = _task_name(task, coro)
            tid = _hooks.task_id(task, name)
            if tid:
                _asyncio_names[id(task)] = task.get_name()
                _event("task_create", tid, 2, 0, name, None, _where(sys._getframe(1)))
                if task.done():   # an eager task (3.12+) that ended in its first step, run inside create_task
                    _exited(task, tid)
        except Exception:
            pass
        return task
    return create_task


# id of an asyncio task of _create_task's (uvloop's) not ended -> its
# asyncio name when last seen (by id: a plain dict, no Python run at each
# step; an entry goes at the task's exit, and is replaced by a new task of
# the same id)
_asyncio_names = {}


def renamed(task, ended=False):
    """A task of _create_task's about to run (ended: that ended): a name
    asyncio gave it since it was last seen (set_name, 3.12's
    asyncio.create_task(name=), which names the task after its loop's
    create_task returns) is its name now (TASK_NAME), unless
    stackwatch.name() named it."""
    try:
        was = _asyncio_names.pop(id(task), None) if ended else _asyncio_names.get(id(task))
        if was is not None and task.get_name() != was:
            if not ended:
                _asyncio_names[id(task)] = task.get_name()
            if task not in _names:
                name = _task_name(task)
                _event("task_name", _hooks.task_id(task, name, True), 0, 0, name, None)
    except Exception:
        pass


def _on_behalf_of(done, call, *args):
    """call(*args): a done callback of task `done` (gather's, shield's),
    which runs as the loop's own: a task it wakes was woken by `done`,
    told by the woken task at its next step (TASK_WOKEN)."""
    try:
        by = (_task_id(done), 0)
    except Exception:
        by = None
    return on_behalf_of_thread(by, call, *args)


def on_behalf_of_thread(by, call, *args):
    """call(*args) on behalf of by, (task id, native id of its thread; 0:
    this one) (None: none): a task it wakes was woken by that task of that
    thread, told by the woken task at its next step (TASK_WOKEN)."""
    global _behalf
    outer = _behalf
    _behalf = by if by and (by[0] or by[1]) else None
    try:
        return call(*args)
    finally:
        _behalf = outer


# (task id, native id of its thread; 0: the thread it runs on) on whose
# behalf a callback runs now (a done callback's task, a thread's
# call_soon_threadsafe), or None
_behalf = None
# asyncio or trio task -> (waker's id, channel, monotonic ns, waker's native id; 0: the woken task's thread)
# to tell at its next step
_woken_by = weakref.WeakKeyDictionary()


def _run_as(task, step, *args):
    """step(*args) (a step of asyncio task `task`) run as the task, then
    its exit or block recorded."""
    prev = None
    try:
        tid = _task_id(task)
        if tid:
            prev = _hooks.task_switch(tid)
            if _woken_by:
                _told(task)
    except Exception:
        pass
    try:
        return step(*args)
    finally:
        if prev is not None:
            try:
                _after_step(task, tid)
            finally:
                _hooks.task_switch(prev)


def _told(task):
    """The task runs: a wake by a task's done callback is told now."""
    by = _woken_by.pop(task, None)
    if by is not None:
        waker, channel, t, thread = by
        _event("task_woken", waker, t, thread or threading_get_native_id(), channel)   # (t: made `ago` in C)


def _after_step(task, tid):
    try:
        if task.done():
            renamed(task, True)   # (a name given in its last step)
            _exited(task, tid)
            return
        if task._fut_waiter is None:   # a bare yield (sleep(0)): stepped again at once, not blocked
            return
        reason, channel, frame = _waits_on(task)
        _blocked[task] = (tid, channel)
        _event("task_block", reason, 0, 0, channel, None, frame)
    except Exception:
        pass


def _exited(task, tid):
    if task.cancelled():
        _event("task_exit", tid, 2)
    elif task._exception is not None:   # read, not retrieved: its "never retrieved" log stays
        _event("task_exit", tid, 1, 0, _repr(task._exception))
    else:
        _event("task_exit", tid, 0, 0, _repr(task._result))


# The asyncio functions a task waits in: (file's base name, function) ->
# reason; the channel is their `self` (a queue, a lock, ...).
_WAITS = {("task_runtimes.py", "sock_op"): "io",   # (uvloop's socket calls, wrapped)
          ("queues.py", "get"): "queue", ("queues.py", "put"): "queue", ("locks.py", "acquire"): "lock",
          ("locks.py", "wait"): "event", ("tasks.py", "sleep"): "sleep", ("streams.py", "_wait_for_data"): "io",
          ("streams.py", "drain"): "io", ("locks.py", "wait_for"): "condition",
          **{("selector_events.py", "sock_" + op): "io"   # (the loop's socket calls: the socket is the channel)
             for op in ("recv", "recv_into", "recvfrom", "recvfrom_into", "sendall", "sendto", "connect", "accept")}}


def await_frames(task, coro=None):
    """The frames of an asyncio task's await chain (or coro's), outermost first."""
    frames, aw = [], coro if coro is not None else getattr(task, "_coro", None)
    while aw is not None:
        f = getattr(aw, "cr_frame", None) or getattr(aw, "gi_frame", None)
        if f is None:
            break
        frames.append(f)
        aw = getattr(aw, "cr_await", None) or getattr(aw, "gi_yieldfrom", None)
    return frames


def _waits_on(task):
    """(reason number, channel name or None, frame where it waits) of a
    task that awaits: its await chain, innermost frame first."""
    import asyncio
    frames = await_frames(task)
    where = next((f for f in reversed(frames) if not f.f_code.co_filename.startswith(_skip)), None)
    for f in reversed(frames):
        what = _WAITS.get((os.path.basename(f.f_code.co_filename), f.f_code.co_name))
        if what and f.f_code.co_filename.startswith(_skip):
            this = f.f_locals.get("sock" if f.f_code.co_name.startswith("sock_") else "self")
            if what == "event" and type(this).__name__ == "Condition":
                what = "condition"
            return _reason(what), channel_name(this) if this is not None else None, where
    waiter = getattr(task, "_fut_waiter", None)
    if isinstance(waiter, asyncio.Task):   # it awaits that task: named by it
        return _reason("join"), _task_name(waiter), where
    if type(waiter).__name__ == "_GatheringFuture":   # the tasks gather awaits, named (the first JOIN_NAMED)
        children = [c for c in getattr(waiter, "_children", ()) if isinstance(c, asyncio.Task)]
        names = ", ".join(_task_name(c) for c in children[:JOIN_NAMED])
        more = f", and {len(children) - JOIN_NAMED} more" if len(children) > JOIN_NAMED else ""
        return _reason("join"), names + more or None, where
    return _reason("future"), channel_name(waiter) if waiter is not None else None, where


_set_by = weakref.WeakKeyDictionary()   # concurrent.futures Future -> (task id, native id) of the task that set it


def _future_set(orig):
    """concurrent.futures.Future.set_result or set_exception: who sets it."""
    def set_(self, value):
        try:
            _set_by[self] = (_hooks.task_running(), threading_get_native_id())
        except Exception:
            pass
        return orig(self, value)
    return set_


def _copy_future_state(orig):
    """asyncio.futures._copy_future_state(source, dest): a concurrent
    Future's outcome copied to an asyncio one, on behalf of its setter."""
    def copy(source, dest):
        try:
            by = _set_by.get(source) if _set_by else None
        except Exception:   # (a source that cannot be weakly referenced)
            by = None
        if by is None:
            return orig(source, dest)
        # (C's behalf: asyncio's loops; Python's: uvloop's)
        return on_behalf_of_thread(by, _hooks.asyncio_on_behalf, by[0], by[1], orig, source, dest)
    return copy


def _woken(task, f, by_io=False):
    """The step of `task` is scheduled, from frame f: the wake of a blocked
    task (by the task on whose behalf a callback runs: told later; by_io:
    by I/O readiness, TASK_WAKE's cause io, else by the running task).
    by_io: a function called only for a wake not on a task's behalf."""
    tid, channel = _blocked.pop(task, (0, None))
    if tid and _behalf:
        _woken_by[task] = (_behalf[0], channel, time.monotonic_ns(), _behalf[1])
    elif tid:
        _event("task_wake", tid, _CAUSE_IO if by_io and by_io() else 0, 0, channel, None, _where(f))


_CAUSE_IO = REASONS.index("io") + 1   # TASK_WAKE's cause: by I/O readiness (records.h)


# ---- threads ----

def _thread_start(orig):
    def start(self):
        try:   # who starts it, where: the new thread records its creation when it starts
            f = _where(sys._getframe(1))
            _starts[self] = (_hooks.task_running(), threading_get_native_id(),
                             (f.f_code, f.f_lineno or 0) if f is not None else None)
        except Exception:
            pass
        r = orig(self)
        try:   # (started: its native id known) a trace without calls records the stack that started it
            _hooks.task_stack(self.native_id or 0, sys._getframe(1))
        except Exception:
            pass
        return r
    return start


def _thread_set_native_id(orig):
    def _set_native_id(self):
        orig(self)
        try:
            start = _starts.pop(self, None)
            if start is not None:
                creator, native_id, where = start
                given = _names.get(self) if _names else None   # (stackwatch.name() before it started)
                _event("task_create", creator, 3, native_id, given[0] if given else self.name, None, where)
                if given and given[1]:
                    _event("task_name", 0, 0, self.native_id, given[0], given[1])
        except Exception:
            pass
    return _set_native_id


def _thread_bootstrap(orig):
    def _bootstrap(self):
        _ours.add(self)
        try:
            return orig(self)
        finally:
            _thread_ended(self)
    return _bootstrap


def _thread_delete(orig):
    """Thread._delete (3.11+), the last Python a thread runs (its
    _bootstrap_inner's finally): the exit of a thread whose _bootstrap is
    not ours (it began before task events: alive at the start)."""
    def _delete(self):
        if self not in _ours:
            _thread_ended(self)
        return orig(self)
    return _delete


class _LimboLock:
    """threading._active_limbo_lock on 3.9 and 3.10 while task events are
    recorded: the lock it replaces, whose `with` from the end of a
    Thread._bootstrap_inner is the exit of a thread whose _bootstrap is
    not ours (alive at the start; 3.11+: Thread._delete)."""
    __slots__ = ("_lock",)

    def __init__(self, lock):
        self._lock = lock

    def __enter__(self):
        f = sys._getframe(1)
        if f.f_code.co_name == "_bootstrap_inner" and f.f_code.co_filename == threading_file:
            thread = f.f_locals.get("self")
            if thread is not None and thread not in _ours:
                _thread_ended(thread)
        return self._lock.__enter__()

    def __exit__(self, *exc):
        return self._lock.__exit__(*exc)

    def __getattr__(self, name):   # (acquire, release, _at_fork_reinit, ...)
        return getattr(self._lock, name)


def _thread_ended(thread):
    """The running thread's run ended: its exit (with the exception
    threading.excepthook saw, if any), and the wake of the threads in its
    join()."""
    try:
        failed = _failed.pop(thread, None)
        _event("task_exit", 0, 0 if failed is None else 1, 0, failed)
        _ended[thread] = (threading_get_native_id(), _hooks.task_running(), time.monotonic_ns())
        for native_id in _joiners.pop(id(thread), ()):   # its end ends their join()
            _event("task_wake", 0, 0, native_id, f"thread {thread.name}")
    except Exception:
        pass


def _thread_join(orig):
    def join(self, timeout=None):
        what = None
        try:
            if self.is_alive() and self is not threading_current():
                what = (_reason("join"), f"thread {self.name}", _where(sys._getframe(1)))
        except Exception:
            pass
        return _blocked_in(_joiners, self, what, orig, self, timeout)
    return join


def _blocked_in(table, key, what, call, *args):
    """call(*args), this thread blocked in it on what (reason, channel,
    where; None: not blocked) and listed in table[id(key)] meanwhile. A
    wait that no wake ended (still listed when the call returns) ends with
    a TASK_WOKEN of the thread's own: by key's end if key is a thread that
    ended (before this thread was listed, or that started before task
    events did: its end at the return, then), else by itself (it gave up: a
    timeout), so that every block has its wake."""
    me = t_block = None
    try:
        if what is not None:
            me = threading_get_native_id()
            table.setdefault(id(key), []).append(me)
            _event("task_block", what[0], 0, 0, what[1], None, what[2])
            t_block = time.monotonic_ns()
    except Exception:
        pass
    try:
        return call(*args)
    finally:
        # (no block recorded, no wake of its own)
        if me is not None and _forget(table, id(key), me) and t_block is not None:
            try:
                native_id, task, t = _ended.get(key) or (
                    (key.native_id, 0, 0) if key.native_id and not key.is_alive() else (me, _hooks.task_running(), 0))
                # (a wake at the block's time at the earliest, ago 0 for a timeout)
                _event("task_woken", task, t and max(t, t_block), native_id, what[1], None, what[2])
            except Exception:
                pass


def _forget(table, k, me):
    """me no longer waits; True if it was still listed (no wake took it
    off)."""
    ids = table.get(k)
    listed = ids is not None and me in ids
    if listed:
        ids.remove(me)
    if ids is not None and not ids:
        table.pop(k, None)
    return listed


# A Condition's wait and notify (C: ext/tracer/task_conditions.c): what
# the program waits on is read from the caller: a queue's get or put, an
# Event's wait or set, a Semaphore, else the Condition itself.
_COND_CALLERS = {("queue.py", "get"): "queue", ("queue.py", "put"): "queue", ("queue.py", "join"): "queue",
                 ("queue.py", "task_done"): "queue", ("threading.py", "wait"): "event",
                 ("threading.py", "set"): "event", ("threading.py", "acquire"): "lock",
                 ("threading.py", "release"): "lock", ("threading.py", "_wait"): "condition",
                 **{("_base.py", name): "future"   # (concurrent.futures' Future)
                    for name in ("result", "exception", "set_result", "set_exception", "cancel")}}
_COND_OWN = ("notify_all", "notifyAll", "wait_for")   # threading's callers of wait and notify for the program


def _cond_what(cond, f):
    """(reason number, channel name) of a Condition's wait or notify called
    from frame f (threading's own callers skipped; None: none). C keeps it
    by Condition and caller's code (a queue waits and notifies with its
    lock held, and the frame's locals cost)."""
    what = f and _COND_CALLERS.get((os.path.basename(f.f_code.co_filename), f.f_code.co_name))
    this = f.f_locals.get("self") if what and f.f_code.co_filename.startswith(_skip) else None
    return ((_reason(what), channel_name(this)) if this is not None and this is not cond
            else (_reason("condition"), channel_name(cond)))


def _excepthook(orig):
    def excepthook(args):
        try:
            if args.thread is not None:
                _failed[args.thread] = _repr(args.exc_value)
        except Exception:
            pass
        return orig(args)
    return excepthook
