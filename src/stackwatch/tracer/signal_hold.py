"""Holding a process's Python signal handlers while `stackwatch attach`
runs its own code in the target's main thread (tracer/attached.py: the
start-up, the stop). A Python handler runs in the main thread between two
bytecodes, so one run then would raise into the attach's code, which drops
every exception (a pending call must not raise into the target): a
Ctrl-C's KeyboardInterrupt would be lost. hold() puts in its place one that
only notes the signal; _native.attach_release_signals puts the target's
back afterwards and runs the noted signals' handlers in the target's own
code (native/ext/sampler/pending_call.c).

The attach's bootstrap runs this file as source before stackwatch can be
imported (cli/attach.py): it imports nothing but _signal, and its frames
are in the package's files (never recorded)."""
import _signal

# Not held: the handlers with which a tracing session stands in for the
# default action of fatal signals (tracer/signals.py). They end the process,
# raise nothing, and the session's end puts SIG_DFL back in their place.
STAND_INS = "stackwatch.tracer.signals"


def hold():
    """In the main thread, replaces each signal handler that is a Python
    callable (but STAND_INS) by one that notes the signal. Returns (held, arrived, raised,
    note): {signum: the replaced handler}, the list of the signals noted
    since, an exception that a handler run by signal() itself raised
    (signal() first runs the handlers of signals already arrived) or None,
    and the noting handler (a handler that is no longer it when they are
    put back was installed meanwhile, and stays). In another thread (3.12+
    runs pending calls in any) nothing is held: the main thread runs the
    handlers itself."""
    held, arrived, raised = {}, [], None

    def note(signum, frame):
        arrived.append(signum)

    try:
        for n in _signal.valid_signals():
            h = _signal.getsignal(n)
            for _ in range(3):
                try:
                    if callable(h) and getattr(h, "__module__", None) != STAND_INS:
                        _signal.signal(n, note)
                        held[n] = h
                    break
                except ValueError:   # not the main thread
                    raise
                except BaseException as e:
                    raised = e
    except ValueError:
        pass
    return held, arrived, raised, note


def put_back(held, note):
    """Puts the handlers still held back now (when their release could not
    be queued: the signals noted are not handled)."""
    for n, h in held.items():
        if _signal.getsignal(n) is note:
            _signal.signal(n, h)
    held.clear()
