"""Several traces read as one run: a program and the processes it started,
each traced into a file of its own (follow.py names them `out.swt`,
`out.<pid>.swt`, ...). TraceSet opens them, in the order the processes
started (CLOCK_MONOTONIC, which the traces of one host share), and writes
them as one Perfetto or Chrome file (a process per trace on the host's
clock, a flow from the call that started each child to the child's first
slice: native/trace/merge.c) or as call trees (each process's threads
apart). It is what the format registry's writers take for a Trace."""
import os

from .. import _native
from ..render import formats
from .tracefile import Trace

TRACE_MAGIC = b"\x89SWT\r\n\x1a\n"


def is_trace_file(path):
    """True if the file starts with a trace's magic number."""
    try:
        with open(path, "rb") as f:
            return f.read(len(TRACE_MAGIC)) == TRACE_MAGIC
    except OSError:
        return False


def expand(paths):
    """The trace files named: files as given, and for a directory the
    traces in it (files that start with a trace's magic number), by name.
    Each file once, in the order given."""
    out = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            out += sorted(os.path.join(p, e) for e in os.listdir(p)
                          if os.path.isfile(os.path.join(p, e)) and is_trace_file(os.path.join(p, e)))
        else:
            out.append(p)
    seen = set()
    return [p for p in out if not (os.path.abspath(p) in seen or seen.add(os.path.abspath(p)))]


class TraceSet:
    """The traces of several processes, ordered by their start. ``traces``
    is the list of Trace; raises TraceError (a ValueError) for a file that
    is not a readable trace."""

    def __init__(self, paths):
        traces = [Trace(p) for p in paths]
        self.traces = sorted(traces, key=lambda t: t.meta.get("mono0_ns", 0))

    def __len__(self):
        return len(self.traces)

    def hosts(self):
        """The hosts the traces were written on (their clocks line up only
        when that is one)."""
        return sorted({t.meta.get("hostname", "?") for t in self.traces})

    def export(self, fmt, path, min_duration_ns=0, filter=None, progress=None):
        """One file of the format ("perfetto" or "chrome") for all the
        traces, as Trace.export writes one's (filters apply to one trace:
        ValueError; progress is not reported)."""
        if filter is not None:
            raise ValueError("filters apply to one trace, not to several merged")
        _native.export_merged([t._t for t in self.traces], fmt, os.fspath(path), min_duration_ns)

    def trees(self, filter=None, progress=None):
        """The call trees of every process's threads, each labelled with its
        process (a formats.Trees, as Trace.trees gives one trace's)."""
        if filter is not None:
            raise ValueError("filters apply to one trace, not to several merged")
        threads, stats, pids = [], {"events": 0, "dropped": 0}, []
        for t in self.traces:
            one = t.trees()
            pid = t.meta.get("pid", "?")
            threads += [(f"pid {pid}: {label}", tid, tree) for label, tid, tree in one.threads]
            pids += [int(pid) if str(pid).isdigit() else 0] * len(one.threads)
            for k in stats:
                stats[k] += one.stats.get(k, 0)
        start = min((int(t.meta.get("real0_ns", 0)) for t in self.traces), default=0)
        return formats.Trees(threads, None, 0, start, 0, stats, exact=True, pids=pids)
