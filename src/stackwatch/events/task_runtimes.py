"""Other runtimes' tasks as task events (issue 22): trio (through its
Instrument API) and uvloop (its loop's call_soon and create_task), when
they are installed. Neither is imported for it: each is hooked when the
program imports it or at once when it already has (task_imports.py).

trio: trio.run and trio.lowlevel.start_guest_run (trio's run loop driven
by another event loop) get one more instrument. A trio task is a task (TASK_CREATE
kind 4, named "trio " and its name): spawned (by the task running, where
the program's code spawned it), each step run as it (TASK_SWITCH in and
out), blocked after a step that left it waiting (on a memory channel, an
Event, a Lock, a sleep, I/O or its nursery's children: read from its
await chain; each step is the coroutine's send or throw the run loop
calls, wrapped when the task is scheduled), woken when rescheduled (by the task running then, the run
loop's own wakes of timeouts are the thread's; asyncio's loops' answers:
by I/O, TASK_WAKE's cause io, when its I/O manager's process_events
reschedules it; a callback of EntryQueue.run_sync_soon, trio's
call_soon_threadsafe that to_thread's workers and TrioToken use, runs on
behalf of the calling thread's running task, told by the woken task at
its next step), exited (its
outcome: Runner.task_exited, where trio has it; cancelled for
trio.Cancelled; a task its end wakes, its nursery's parent, names it). Values sent through trio's memory channels are messages
(MemorySendChannel.send / send_nowait, as they start: once handed over the
receiver may run first; MemoryReceiveChannel.receive / receive_nowait, as
they return), on a channel named by stackwatch.name() of the end or
"MemoryChannel 0x..." (its shared state's address: both ends' name).

uvloop: its loop runs no asyncio Handle: the callbacks it is given that
step an asyncio task (call_soon) run as that task, as task_hooks does for
asyncio's own loops, a task's done callback (gather's, shield's) runs on
behalf of that task, and its create_task is a creation. Its answers for
who woke a task are asyncio's loops': a call_soon_threadsafe from another
thread runs on behalf of that thread's running task; the other callbacks
given to it (call_soon's, call_later's, call_at's, a signal's) run as the
loop's (its thread the waker); a wake made where none of these runs is
made by uvloop's compiled I/O callbacks (its sock_* calls, a transport's
protocol): by I/O (TASK_WAKE's cause io). Its sock_* calls are wrapped
in a coroutine of ours that holds the socket, what a task waits on.
"""
import functools
import os
import sys

from .. import _native
from . import task_hooks
from .task_imports import when_imported

_hooks = _native.hooks
TRIO_KIND = 4   # TASK_CREATE's kind for a trio task (task_hooks.TASK_KINDS)


def install(wrap):
    """Hooks trio and uvloop now or when imported; wrap is task_hooks' (it
    puts back what it wraps when task events stop)."""
    when_imported("trio", lambda m: _install_trio(m, wrap))
    when_imported("uvloop", lambda m: _install_uvloop(m, wrap))


def forget():
    """Task events stop (task_imports forgets the hooks not run)."""


# ---- trio ----

# Where a trio task waits: (file's base name, function) -> reason.
_TRIO_WAITS = {("_channel.py", "receive"): "channel", ("_channel.py", "send"): "channel",
               ("_timeouts.py", "sleep_forever"): "sleep", ("_timeouts.py", "sleep_until"): "sleep",
               ("_timeouts.py", "sleep"): "sleep", ("_sync.py", "wait"): "event", ("_sync.py", "acquire"): "lock",
               ("_sync.py", "park"): "lock", ("_run.py", "_nested_child_finished"): "join",
               ("_run.py", "__aexit__"): "join",
               ("_io_epoll.py", "wait_readable"): "io", ("_io_epoll.py", "wait_writable"): "io"}


def _install_trio(trio, wrap):
    trio_dir = os.path.dirname(trio.__file__) + os.sep
    task_hooks._skip = tuple(task_hooks._skip) + (trio_dir,)

    class Recorder(trio.abc.Instrument):
        def task_spawned(self, task):
            try:
                name = _trio_name(task)
                tid = _hooks.task_id(task, name)
                if tid:
                    task_hooks._event("task_create", tid, TRIO_KIND, 0, name, None,
                                      task_hooks._where(sys._getframe(1)))
            except Exception:
                pass

        def task_scheduled(self, task):
            try:
                f = sys._getframe(1)
                task_hooks._woken(task, f, lambda: _trio_by_io(f, trio_dir))
                task._next_send_fn = _trio_step(task, task._next_send_fn)
            except Exception:
                pass

    recorder = Recorder()

    def run_wrap(orig):
        def run(*args, instruments=(), **kwargs):
            if task_hooks._saved:   # (task events still wanted)
                instruments = (*instruments, recorder)
            return orig(*args, instruments=instruments, **kwargs)
        return run
    wrap(trio, "run", run_wrap)
    lowlevel = getattr(trio, "lowlevel", None)   # (trio's guest mode: its run loop driven by another loop's)
    if lowlevel is not None and hasattr(lowlevel, "start_guest_run"):
        wrap(lowlevel, "start_guest_run", run_wrap)
    runner = getattr(getattr(getattr(trio, "_core", None), "_run", None), "Runner", None)
    if runner is not None and "task_exited" in runner.__dict__:
        wrap(runner, "task_exited", lambda orig: _trio_exited(orig, trio))
    queue = getattr(getattr(getattr(trio, "_core", None), "_entry_queue", None), "EntryQueue", None)
    if queue is not None and "run_sync_soon" in queue.__dict__:
        wrap(queue, "run_sync_soon", _trio_run_sync_soon)
    channels = getattr(trio, "_channel", None)
    if channels is not None:
        send, recv = channels.MemorySendChannel, channels.MemoryReceiveChannel
        own_send, own_receive = send.__dict__["send"].__code__, recv.__dict__["receive"].__code__
        wrap(send, "send", _trio_send)
        wrap(send, "send_nowait", lambda orig: _trio_nowait(orig, own_send, "task_send"))
        wrap(recv, "receive", _trio_receive)
        wrap(recv, "receive_nowait", lambda orig: _trio_nowait(orig, own_receive, "task_receive"))


def _trio_step(task, send):
    """send (the task's coroutine's send or throw, which the run loop calls
    for its next step), run as the task (so that no frame of the loop's
    opens or closes on the task's track), its block recorded when it
    yields to wait for a reschedule."""
    def step(value):
        tid = _trio_id(task)
        prev = _hooks.task_switch(tid) if tid else None
        if prev is not None and task_hooks._woken_by:
            task_hooks._told(task)
        try:
            msg = send(value)
            if prev is not None and type(msg).__name__ == "WaitTaskRescheduled":
                try:
                    reason, channel, where = _trio_waits_on(task)
                    task_hooks._blocked[task] = (tid, channel)
                    task_hooks._event("task_block", task_hooks._reason(reason), 0, 0, channel, None, where)
                except Exception:
                    pass
            return msg
        finally:
            if prev is not None:
                _hooks.task_switch(prev)
    return step


def _trio_by_io(f, trio_dir):
    """A task rescheduled from frame f (trio's) by its I/O manager's
    process_events (what its epoll found ready): by I/O readiness, as
    asyncio's loops tell from _process_events."""
    while f is not None and f.f_code.co_filename.startswith(trio_dir):
        if f.f_code.co_name == "process_events" and os.path.basename(f.f_code.co_filename).startswith("_io_"):
            return True
        f = f.f_back
    return False


def _trio_run_sync_soon(orig):
    """EntryQueue.run_sync_soon (TrioToken's, to_thread's, from_thread's:
    trio's call_soon_threadsafe): the callback runs (in the run loop's
    system task) on behalf of the calling thread's running task, or of the
    run's own thread when called from it (as asyncio's loops:
    task_wrappers.c). An idempotent call is left as it is (keyed by its
    callback)."""
    from trio._core._run import GLOBAL_RUN_CONTEXT

    def run_sync_soon(self, sync_fn, *args, idempotent=False):
        if not idempotent:
            try:
                runner = getattr(GLOBAL_RUN_CONTEXT, "runner", None)
                own = runner is not None and getattr(runner, "entry_queue", None) is self
                by = (0 if own else _hooks.task_running(), task_hooks.threading_get_native_id())
                sync_fn = functools.partial(task_hooks.on_behalf_of_thread, by, sync_fn)
            except Exception:
                pass
        return orig(self, sync_fn, *args, idempotent=idempotent)
    return run_sync_soon


def _trio_name(task):
    given = task_hooks._names.get(task) if task_hooks._names else None
    return given[0] if given else f"trio {task.name}"


def _trio_id(task):
    return _hooks.task_id(task, _trio_name)


def _trio_waits_on(task):
    """(reason, channel name or None, the program's frame where it waits)."""
    frames = task_hooks.await_frames(None, task.coro)
    where = next((f for f in reversed(frames) if not f.f_code.co_filename.startswith(task_hooks._skip)), None)
    for f in reversed(frames):
        what = _TRIO_WAITS.get((os.path.basename(f.f_code.co_filename), f.f_code.co_name))
        if what and f.f_code.co_filename.startswith(task_hooks._skip):
            this = f.f_locals.get("fd" if what == "io" else "self")   # (I/O: the socket or fd waited on)
            if what == "event" and type(this).__name__ == "Condition":
                what = "condition"
            if isinstance(this, int):
                return what, f"fd {this}", where
            return what, (_trio_channel(this) if what == "channel" else
                          task_hooks.channel_name(this) if this is not None and what != "join" else None), where
    return "future", None, where


def _trio_exited(orig, trio):
    def task_exited(self, task, outcome):
        """(the run loop's, out of the task's steps: a task it wakes, its
        nursery's parent, was woken by this task, told at its next step)"""
        try:
            tid = _trio_id(task)
            error = getattr(outcome, "error", None)
            if error is None:
                task_hooks._event("task_exit", tid, 0, 0, task_hooks._repr(getattr(outcome, "value", None)))
            elif isinstance(error, trio.Cancelled):
                task_hooks._event("task_exit", tid, 2)
            else:
                task_hooks._event("task_exit", tid, 1, 0, task_hooks._repr(error))
        except Exception:
            pass
        return task_hooks._on_behalf_of(task, orig, self, task, outcome)
    return task_exited


def _trio_channel(end):
    """A memory channel's name: stackwatch.name()'s of this end, else
    "MemoryChannel 0x..." (its state's address, both ends' name)."""
    given = task_hooks._names.get(end) if task_hooks._names and end is not None else None
    if given:
        return given[0]
    state = getattr(end, "_state", end)
    return f"MemoryChannel {id(state):#x}"


def _trio_message(kind, end, value, depth):
    try:
        task_hooks._event(kind, 0, 0, 0, _trio_channel(end), task_hooks._repr(value),
                          task_hooks._where(sys._getframe(depth + 1)))
    except Exception:
        pass


def _trio_send(orig):
    async def send(self, value):
        _trio_message("task_send", self, value, 1)
        return await orig(self, value)
    return send


def _trio_receive(orig):
    async def receive(self):
        value = await orig(self)
        _trio_message("task_receive", self, value, 1)
        return value
    return receive


def _trio_nowait(orig, own, kind):
    """send_nowait / receive_nowait: a message, unless called by send /
    receive (whose `own` code records it)."""
    def nowait(self, *args):
        r = orig(self, *args)   # (raises WouldBlock when it would wait: then nothing passes)
        if sys._getframe(1).f_code is not own:
            _trio_message(kind, self, args[0] if args else r, 1)
        return r
    nowait.__name__ = orig.__name__
    return nowait


# ---- uvloop ----

def _install_uvloop(uvloop, wrap):
    import asyncio
    loop = getattr(uvloop, "Loop", None)
    if loop is None:
        return
    task_types = tuple({asyncio.Task, getattr(asyncio.tasks, "_PyTask", asyncio.Task)})
    wrap(loop, "call_soon", lambda orig: _uvloop_call_soon(orig, task_types, asyncio._get_running_loop),
         inherited=True)
    wrap(loop, "call_soon_threadsafe", lambda orig: _uvloop_threadsafe(orig, asyncio._get_running_loop),
         inherited=True)
    for name in ("call_later", "call_at", "add_signal_handler"):   # (the callback is the last positional before *args)
        wrap(loop, name, _uvloop_timed, inherited=True)
    for name in _SOCK_OPS:
        if hasattr(loop, name):
            wrap(loop, name, _uvloop_sock, inherited=True)
    wrap(loop, "create_task", task_hooks._create_task, inherited=True)


# The loop's socket calls (asyncio's are selector_events.py's, in
# task_hooks._WAITS; uvloop's are compiled, with no frame to read).
_SOCK_OPS = tuple("sock_" + op for op in ("recv", "recv_into", "recvfrom", "recvfrom_into", "sendall", "sendto",
                                          "connect", "accept"))


def _uvloop_call_soon(orig, task_types, running_loop):
    def call_soon(self, callback, *args, **kwargs):
        task = getattr(callback, "__self__", None)
        if task is not None and isinstance(task, task_types):
            try:
                task_hooks._woken(task, sys._getframe(1), lambda: _uvloop_by_io(self, running_loop))
                callback = _stepping(task, callback)
            except Exception:
                pass
        elif args and isinstance(args[0], task_types):   # a task's done callback: run on its behalf
            callback = functools.partial(task_hooks._on_behalf_of, args[0], callback)
        else:
            callback = functools.partial(_as_loop, callback)
        return orig(self, callback, *args, **kwargs)
    return call_soon


def _as_loop(call, *args):
    """call(*args): a callback of uvloop's loop that is no task's step (a
    call_soon's, a timer's, a signal's): a task it wakes was woken by the
    loop's thread, as on asyncio's loops. (Its code marks the stack:
    _uvloop_by_io.)"""
    return call(*args)


_AS_LOOP = _as_loop.__code__


def _uvloop_by_io(loop, running_loop):
    """A wake made on uvloop's loop `loop` where no task runs, outside the
    callbacks given to the loop (_as_loop) and not on a task's behalf: made
    by uvloop's own I/O callbacks (a socket call's, a transport's
    protocol), so by I/O readiness, as asyncio's loops tell from
    _process_events. False while the loop does not run here (the
    program's code around it)."""
    if _hooks.task_running() or running_loop() is not loop:
        return False
    f = sys._getframe(2)
    while f is not None:
        if f.f_code is _AS_LOOP:
            return False
        f = f.f_back
    return True


def _uvloop_threadsafe(orig, running_loop):
    """call_soon_threadsafe from another thread: its callback runs on
    behalf of that thread's running task (as task_wrappers.c's on
    asyncio's loops); from the loop's own thread, as the loop's."""
    def call_soon_threadsafe(self, callback, *args, **kwargs):
        try:
            if running_loop() is self:
                callback = functools.partial(_as_loop, callback)
            else:
                by = (_hooks.task_running(), task_hooks.threading_get_native_id())
                callback = functools.partial(task_hooks.on_behalf_of_thread, by, callback)
        except Exception:
            pass
        return orig(self, callback, *args, **kwargs)
    return call_soon_threadsafe


def _uvloop_timed(orig):
    """call_later(delay, callback, *args), call_at(when, ...),
    add_signal_handler(sig, ...): the callback runs as the loop's."""
    def timed(self, at, callback, *args, **kwargs):
        return orig(self, at, functools.partial(_as_loop, callback), *args, **kwargs)
    timed.__name__ = orig.__name__
    return timed


def _uvloop_sock(orig):
    """A socket call of uvloop's loop: a Python frame with the socket
    (`sock`), read by task_hooks._waits_on (what a task waits on: I/O)."""
    async def sock_op(self, sock, *args):
        return await orig(self, sock, *args)
    sock_op.__name__ = orig.__name__
    return sock_op


def _stepping(task, step):
    """step (a task's step or wakeup), run as that task (and a name asyncio
    gave it since it was last seen told first)."""
    def run_as_task(*args):
        task_hooks.renamed(task)
        return task_hooks._run_as(task, step, *args)
    return run_as_task
