"""The target's side of `stackwatch attach PID --trace` (cli/attach.py):
run inside the attached process, by the pending calls the attaching
command queued there (native/procmem/pending.h). begin() starts the exact
tracer, stop_from_pending() (called by the C function of the second
pending call, _native.attach_stop_address()) stops it and writes the file.
Both report into files of a directory the attaching command made and
watches; neither ever raises into the target (a pending call that raised
would raise in the middle of the target's own code), and nothing is bound
in __main__. Being a file of the stackwatch package, this module's frames
are never recorded (session._OWN_FILES).
"""
import json
import os
import sys

from .. import _native
from . import session

STARTED = "started.json"
STOPPED = "stopped.json"
_status_dir = None


def _report(name, doc):
    """Writes doc into the status directory, whole or not at all."""
    try:
        tmp = os.path.join(_status_dir, name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, os.path.join(_status_dir, name))
    except BaseException:
        pass


def begin(added_path, status_dir, trace_path, options):
    """Starts tracing into trace_path (options: session.start's keywords).
    added_path: the directory the bootstrap appended to sys.path to import
    stackwatch, taken out again here."""
    global _status_dir
    _status_dir = status_dir
    try:
        if sys.path and sys.path[-1] == added_path:
            del sys.path[-1]
        if _native.is_tracing():
            _report(STARTED, {"error": "it is already tracing (a stackwatch session is running in it)"})
            return
        session.start(trace_path, **options)
        # stackwatch's work, not the program's: never recorded
        _native.unrecorded(_report, STARTED, {"ok": True, "stop": _native.attach_stop_address(), "pid": os.getpid()})
    except BaseException as e:
        _report(STARTED, {"error": f"{type(e).__name__}: {e}"})


def stop_from_pending():
    """Stops the session begin() started and writes its file."""
    try:
        if not _native.is_tracing():
            _report(STOPPED, {"error": "it was not tracing any more"})
            return
        s = session.stop()
        _report(STOPPED, {"ok": True, "path": s.path, "events": s.events, "warning": s.error})
    except BaseException as e:
        _report(STOPPED, {"error": f"{type(e).__name__}: {e}"})
