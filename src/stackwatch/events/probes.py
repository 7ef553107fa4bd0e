"""USDT probes (provider "stackwatch") for bpftrace, SystemTap and perf.

    stackwatch.probes.available   # True if compiled in (<sys/sdt.h> found at build time)
    stackwatch.probes.names       # the probe names
    stackwatch.probes.library     # the file to attach to (usdt:PATH:stackwatch:NAME)
    stackwatch.probes.watch()     # from now on, attaching a tool turns the matching hooks on

Each probe has a semaphore the kernel raises while a tool is attached. The
watcher thread polls the semaphores (every 100 ms by default) and turns on
exactly the hooks the attached probes need, through the dispatch layer;
with nothing attached, no hook is on. `stackwatch run --probes` starts it.
The switch happens in the main thread at its next bytecode boundary.
"""
import os

from .. import _native

available = bool(_native.PROBES_AVAILABLE)
names = tuple(_native.PROBE_NAMES)
library = os.path.abspath(_native.__file__)
ARGUMENTS = {
    "function__entry": "file, function, line", "function__return": "file, function, line",
    "line": "file, function, line", "gc__start": "generation", "gc__done": "collected",
    "instance__new__start": "class, file", "instance__new__done": "class, file",
    "instance__delete__start": "class, file", "instance__delete__done": "class, file",
    "c__call": "name", "c__return": "name", "exception__raise": "type, file, line",
    "thread__start": "name, native_id", "thread__exit": "name, native_id",
}


def watch(interval=0.1):
    """Starts the semaphore watcher (once). Returns False if it already runs."""
    if not available:
        raise RuntimeError("stackwatch was built without USDT probes (<sys/sdt.h> was not found; "
                           "on Debian: apt install systemtap-sdt-dev, then reinstall)")
    return _native._probes_watch(float(interval))


def unwatch():
    """Stops the watcher and turns off what the probes had turned on."""
    return _native._probes_unwatch()


def attached():
    """Reads the semaphores now and applies them; returns the names of the
    probes a tool is attached to."""
    _native._probes_poll()
    return [n for n in names if _native._probe_semaphore(n)]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_native._probes_forget)
