"""The target's side of `stackwatch attach PID --trace|--sample|--probes`
(cli/attach.py): run inside the attached process, by the pending calls the
attaching command queued there (native/procmem/pending.h). begin() starts
the exact tracer (--trace, its samples too with --sample), or the
in-process profiler (--sample alone: the Profiler of `stackwatch profile`),
and serves the USDT probes (--probes); stop_from_pending() (called by the
C function of the second pending call, _native.attach_stop_address())
stops them and writes the file.
Both hold the target's Python signal handlers while they run
(signal_hold.py: a Ctrl-C then raises its KeyboardInterrupt in the
target's code after them, not into them) and report into files of a
directory the attaching command made and watches; neither ever raises
into the target (a pending call that raised
would raise in the middle of the target's own code), and nothing is bound
in __main__. Being a file of the stackwatch package, this module's frames
are never recorded (session._OWN_FILES). A sample taken while the target's
thread runs the attach's pending calls is of the attach, not the program:
the bootstrap's `<string>` frames, begin(), stop_from_pending() and all
they call (importlib, os.path.join, a lock, the program's own audit hook)
are ignored code for the sampler (_ignored()): such a sample is cut whole,
counted, never stored, in the profile as in the trace.
"""
import atexit
import json
import os
import sys

from .. import _native
from . import session, signal_hold

STARTED = "started.json"
STOPPED = "stopped.json"
_status_dir = None
_profile = None     # (Profiler, path, format) while --sample alone runs
_probes = False     # True while --probes serves the probes
_pending = None     # the code of the bootstrap's pending call, held while attached (see _ignored)


def _report(name, doc):
    """Writes doc into the status directory, whole or not at all, and only
    where no report of that name is: the attaching command that gave up
    waiting claims the name first (an empty file; cli/attach.py _claim),
    or has removed the directory. Returns whether doc was written."""
    tmp = os.path.join(_status_dir, name + ".tmp")
    try:
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.link(tmp, os.path.join(_status_dir, name))   # (never replaces)
        return True
    except BaseException:
        return False
    finally:
        try:
            os.unlink(tmp)
        except BaseException:
            pass


def begin(added_path, status_dir, path, options, profile=None, probes=False, signals=None, pending=None):
    """Starts tracing into path (options: session.start's keywords), or,
    with profile ({"rate", "mode", "cycle", "format"}), the profiler
    writing path at stop instead, or neither (options None); probes: also
    serve the USDT probes. added_path: the directory the bootstrap appended
    to sys.path to import stackwatch, taken out again here. signals: the
    target's signal handlers the bootstrap holds (signal_hold.hold()),
    released at the end. pending: the code object of the pending call that
    runs the bootstrap (PyRun_SimpleString's `<string>`), the outermost
    frame of the attach's start-up."""
    try:
        _begin(added_path, status_dir, path, options, profile, probes, pending)
    finally:
        if signals is not None:
            _release(signals)


def _release(signals):
    """Has the target's held signal handlers put back and the signals that
    came meanwhile handled in its own code, once this pending call is done
    (signal_hold.py); put back now if that cannot be queued."""
    held, arrived, raised, note = signals
    try:
        _native.unrecorded(_native.attach_release_signals, dict(held), arrived, raised, note)
        held.clear()
    finally:
        signal_hold.put_back(held, note)


def _begin(added_path, status_dir, path, options, profile, probes, pending):
    global _status_dir, _probes, _pending
    _status_dir = status_dir
    try:
        if sys.path and sys.path[-1] == added_path:
            del sys.path[-1]
        if _native.is_tracing() or _profile is not None or _probes:
            _report(STARTED, {"error": "it is already tracing (a stackwatch session is running in it)"})
            return
        from ..profiler import session as profiler_session
        if profiler_session._running:
            _report(STARTED, {"error": "it is already profiling (a stackwatch profiler is running in it)"})
            return
        _pending = pending
        if probes:
            from ..events import probes as probes_mod
            probes_mod.watch()
            _probes = True
        try:
            if profile is not None:
                _start_profile(path, **profile)
            elif options is not None:
                session.start(path, _host="stackwatch attach", _ignore=_ignored(), **options)
        except BaseException:
            _stop_probes()
            raise
        # stackwatch's work, not the program's: never recorded
        if not _native.unrecorded(_report, STARTED, {"ok": True, "stop": _native.attach_stop_address(),
                                                     "pid": os.getpid()}):
            # The attaching command gave up waiting (or this report could
            # not be written): no one would stop what began here.
            _native.unrecorded(_stop, False)
    except BaseException as e:
        _report(STARTED, {"error": f"{type(e).__name__}: {e}"})


def _ignored():
    """The code objects inside which a sample is the attach's, not the
    program's (the sampler's ignore list: such a sample is cut whole, its
    callees too): the pending call of the start-up (held in _pending until
    the stop, so that its address is no other code's meanwhile) and begin()
    within it (for a stack too deep to be read to its root), the stop's
    pending call (stop_from_pending(), called by the C function
    attach_stop), and the profile's writing at the target's exit."""
    return tuple(c for c in (_pending, begin.__code__, stop_from_pending.__code__, _write_at_exit.__code__) if c)


def _start_profile(path, rate, mode, cycle, format):
    global _profile
    from ..profiler import Profiler
    # A profile file holds the whole attach (unbounded history), as
    # `stackwatch profile` writes it; the other formats use the whole-run
    # trees only.
    prof = Profiler(rate=rate, mode=mode, cycle=cycle, maxlen=None if format == "stackwatch" else 1000)
    prof._set_wrapper(None, ignore=_ignored())
    prof.start()
    _profile = (prof, path, format)
    atexit.register(_write_at_exit)


def _write_at_exit():
    """The target exits while attached: its profile is written then,
    silently (nothing printed into the target's output)."""
    try:
        _write_profile()
    except BaseException:
        pass


def _write_profile():
    """Stops the profiler and writes its file; returns the report."""
    global _profile
    prof, path, fmt = _profile
    _profile = None
    atexit.unregister(_write_at_exit)
    prof.stop()
    if fmt == "stackwatch":
        prof.save(path)
    else:
        prof.write(path, fmt)
    st = prof.stats()
    return {"ok": True, "path": path, "samples": st["stored"], "failed": st["failed"]}


def _stop_probes():
    global _probes
    if _probes:
        _probes = False
        from ..events import probes as probes_mod
        probes_mod.unwatch()


def stop_from_pending():
    """Stops what begin() started and writes its file, the target's
    signal handlers held meanwhile."""
    signals = signal_hold.hold()
    try:
        _stop()
    finally:
        _release(signals)


def _stop(report=True):
    """Stops what begin() started and writes its file; then the STOPPED
    report (report: False when no one waits for it)."""
    def done(doc):
        global _pending
        _pending = None   # (the sampler stopped: its ignore list is used no more)
        if report:
            _report(STOPPED, doc)
    try:
        if _profile is not None:
            doc = _write_profile()
        elif _native.is_tracing():
            s = session.end_session()
            doc = {"ok": True, "path": s.path, "events": s.events, "warning": s.error}
        elif _probes:
            doc = {"ok": True}
        else:
            done({"error": "it was not tracing any more"})
            return
        _stop_probes()
        done(doc)
    except BaseException as e:
        _stop_probes()
        done({"error": f"{type(e).__name__}: {e}"})
