"""Ending by a signal while stackwatch records: what was recorded is
written, then the process ends exactly as it would have without
stackwatch.

SIGTERM, SIGINT, SIGHUP and SIGQUIT kill a process whose disposition for
them is the default (SIG_DFL), before any exit handler can run: a trace's
last events and a profile would be lost. While something is registered
here (add(): a tracing session, the command line's finisher), a Python
handler of stackwatch's stands in for the default action of each of these
signals that has it. Like every Python signal handler it runs in the main
thread at the interpreter's next safe point, never inside the C signal
handler, so it may write files and take locks: it calls the registered
functions, then restores the default action and sends the signal again to
its own thread, so the process dies of it (same signal, same status, a
core dump for SIGQUIT where one would be made).

The program's own handling comes first and is unchanged:

- signal.signal and signal.getsignal are wrapped while something is
  registered: a handler the program installs, also later, is installed as
  it is and runs instead (if it then ends the process by other means, the
  exit paths write everything; if it restores SIG_DFL and sends the signal
  again, stackwatch's handler stands in for that default again), SIG_IGN
  is installed as it is, and getsignal() and signal.signal's return value
  say SIG_DFL where stackwatch's handler stands in.
- Python's own SIGINT handler (KeyboardInterrupt) is left alone: the
  exception ends the program through its normal exit paths.
- A signal the process ignores or blocks never reaches the handler.

A signal that arrives while stackwatch is writing (deferred()) waits until
the writing is done. A main thread that enters a blocking call just after
the signal came (before the handler could run) is sent the signal again
every 20 ms until the handler runs (_native's sigkick: the call returns
with EINTR), as the default action would not have waited either. Around
fork() the forking thread blocks these signals, so that one sent to a new
child before its after-fork hooks ran (CPython forgets those) waits for
them. Limits: a C call that retries on EINTR without checking for Python
signals delays the end until it returns; a program that called the real
signal.signal (one it kept before stackwatch started) to restore SIG_DFL
bypasses the wrapper.
"""
import os
import signal
import threading

import _signal as _csignal   # the C functions: signal.py's wrappers would be traced around fork()

from .. import _native

FATAL = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT") if hasattr(signal, n))

_real_signal = signal.signal
_real_getsignal = signal.getsignal
_real_os_exit = os._exit
_callbacks = []       # [(late, fn)]: called before the process dies of a signal
_installed = False    # the wrappers and handlers are in place
_busy = 0             # > 0 while stackwatch writes (deferred())
_pending = None       # a signal that arrived meanwhile
_fork_hooks = False   # _block_for_fork and _unblock_after_fork registered
_fork_masks = {}      # thread ident -> its signal mask before it forked


def add(fn, late=False):
    """Calls fn() before the process dies of one of the FATAL signals (in
    every process that inherits the registration by fork: fn decides for
    itself). Functions added with late=True run after the others (the
    session's stop runs after the command line's finisher, which prints what
    it wrote). The handlers are installed by the first add() made in the
    main thread."""
    if not any(f is fn for _, f in _callbacks):
        _callbacks.append((late, fn))
    _install()


def remove(fn):
    """Undoes add(fn); with nothing registered, the default actions and the
    real signal.signal / getsignal are back (where that can be done: in the
    main thread)."""
    for i, (_, f) in enumerate(_callbacks):
        if f is fn:
            del _callbacks[i]
            break
    if not _callbacks:
        _uninstall()


class _Deferred:
    """deferred()'s block (a class, not a contextlib generator: stackwatch's
    own code is never traced, the standard library's would be)."""

    def __enter__(self):
        global _busy
        _busy += 1

    def __exit__(self, *exc):
        global _busy
        _busy -= 1
        if not _busy and _pending is not None:
            die_of(_pending)
        return False


def deferred():
    """While stackwatch writes: a fatal signal arriving meanwhile ends the
    process only once the block is done."""
    return _Deferred()


def die_of(sig):
    """Calls the registered functions (once), then ends the process by the
    signal's default action."""
    global _busy, _pending
    if _busy:
        _pending = sig          # deferred(): after the writing
        return
    _busy += 1                  # a second signal now waits for this one
    _native._sigkick_disarm()   # this handler runs: no more nudges
    callbacks = [f for late, f in _callbacks if not late][::-1] + [f for late, f in _callbacks if late][::-1]
    del _callbacks[:]
    for fn in callbacks:
        try:
            fn()
        except Exception:
            pass
    try:
        _csignal.signal(sig, _csignal.SIG_DFL)
        if hasattr(signal, "pthread_sigmask"):
            _csignal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        # To this thread: the default action runs before the call returns.
        signal.pthread_kill(threading.get_ident(), sig)
    except (OSError, ValueError, AttributeError):
        os.kill(os.getpid(), sig)
    _real_os_exit(128 + sig)


def _handler(sig, frame):
    die_of(sig)


def _stands_in(handler):
    return handler is _handler


def _stand_in(sig):
    """Installs stackwatch's handler for `sig`, with the nudge of a main
    thread that blocked before the handler ran (_native's sigkick). The C
    functions, not signal.py's (a --log handler would see those)."""
    previous = _csignal.signal(sig, _handler)
    _native._sigkick_arm(sig)
    return previous


def _signal(signalnum, handler):
    """signal.signal while stackwatch stands in for default actions."""
    if signalnum in FATAL and handler == signal.SIG_DFL and _callbacks:
        previous = _stand_in(signalnum)
        if not _stands_in(previous):
            previous = signal.Handlers(previous) if previous in (0, 1) else previous  # as signal.py
    else:
        previous = _real_signal(signalnum, handler)   # as the program called it
    return signal.SIG_DFL if _stands_in(previous) else previous


def _getsignal(signalnum):
    handler = _real_getsignal(signalnum)
    return signal.SIG_DFL if _stands_in(handler) else handler


_signal.__doc__ = _real_signal.__doc__
_getsignal.__doc__ = _real_getsignal.__doc__


def _block_for_fork():
    """Before fork(): the forking thread blocks the FATAL signals. CPython
    forgets every signal that reaches a child before its after-fork hooks
    (it clears the pending flags), which the default action never did: a
    multiprocessing pool terminating a worker that had not run yet left it
    running for ever. Blocked, the signal waits in the kernel until the
    child's hooks are done (its tracing session restarted)."""
    if _installed and hasattr(signal, "pthread_sigmask"):
        _fork_masks[threading.get_ident()] = _csignal.pthread_sigmask(signal.SIG_BLOCK, FATAL)


def _unblock_after_fork():
    mask = _fork_masks.pop(threading.get_ident(), None)
    if mask is not None:
        _csignal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _unblock_in_child():
    if _installed:
        _native._sigkick_after_fork()   # timers are not inherited
    _unblock_after_fork()


def _install():
    global _installed, _fork_hooks
    if _installed:
        return
    if not _fork_hooks and hasattr(os, "register_at_fork"):
        # Registered after the tracing session's hooks (it imports this
        # module first): the child's unblocking comes after its restart.
        os.register_at_fork(before=_block_for_fork, after_in_parent=_unblock_after_fork,
                            after_in_child=_unblock_in_child)
        _fork_hooks = True
    try:
        for sig in FATAL:
            if _csignal.getsignal(sig) == signal.SIG_DFL:
                _stand_in(sig)
    except (OSError, ValueError):   # not the main thread: nothing was installed
        return
    signal.signal, signal.getsignal = _signal, _getsignal
    _installed = True


def _uninstall():
    global _installed
    if not _installed:
        return
    _native._sigkick_disarm()
    try:
        for sig in FATAL:
            if _stands_in(_csignal.getsignal(sig)):
                _csignal.signal(sig, _csignal.SIG_DFL)
    except (OSError, ValueError):   # not the main thread: left for the main thread's turn
        return
    if signal.signal is _signal:
        signal.signal = _real_signal
    if signal.getsignal is _getsignal:
        signal.getsignal = _real_getsignal
    _installed = False
