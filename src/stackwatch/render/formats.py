"""The output formats of stackwatch, in one registry: each format's name,
the endings of file names that mean it, whether it is binary, what it can
be written from and its writer. Whatever writes an output or names one
looks here: the profiler (Profiler.write), call trees and histories
(CallTree.write, History.write), profile files exported, and the command
line (its --format choices, default output names, the format an -o name
implies).

    fmt = formats.get("pprof", formats.TREES)     # ValueError if it does not fit
    fmt.write("out.pb.gz", formats.Trees([("main", ident, tree)], interval_ns=1_000_000))

What a format can be written from (`fits`, a set):

    TREES     call trees: a CallTree; a profiler's, a history's or profile
              files' trees per thread (of a time window)
    PROFILES  a profiler's whole history, with its threads and totals
    TRACES    an exact trace (.swt)

and what its writer is given (`takes`, one of those, or TASKS): a Trees for
TREES (call trees of any origin: the writer does not know where they came
from), a Profiler or a live History (their save()) for PROFILES, a Trace
for TRACES, and for TASKS (the sequence diagram, written from a trace) the
trace's task events: the document of read_task_events
(stackwatch.tracer.task_events, above this room: write_trace's caller
reads it). Every writer is write(path, data, **options) and creates the
file.

A new format is one entry in FORMATS and its writer; a new timeline
format of traces is one row of the C exporters' table
(native/trace/exporters.h), which FORMATS reads. The tree formats
also fit TRACES: an exact trace is written in them from its call trees
(Trace.trees(): calls as counts, own nanoseconds as weights, exact=True),
given as a Trees like any other.
"""
import gzip
import os
import struct
import zlib
from collections import namedtuple

from .. import _native
from . import functions

TREES, PROFILES, TRACES, TASKS = "trees", "profiles", "traces", "tasks"


class Format(namedtuple("Format", "name suffixes binary fits takes write directory", defaults=(False,))):
    """name: what --format and write() call it. suffixes: endings of file
    names (lower case) that mean this format, the first one that of the
    default output name. binary: not text. fits: a frozenset of TREES,
    PROFILES, TRACES (what it can be written from); takes: which of them
    write(path, data, **options) is given. write is None for the format a
    tracing session writes itself (the trace). directory: the output is a
    directory (made, or an empty one), not a file (CTF)."""
    __slots__ = ()


class Trees(namedtuple("Trees", "threads title interval_ns time_ns duration_ns stats exact mode pids",
                       defaults=(None, 0, 0, 0, None, False, "wall", None))):
    """What the tree formats are written from. threads: [(label or None,
    thread_id, tree)], each tree a stackwatch._native.CallTree: collapsed
    merges them in this order, speedscope and the HTML page show each as
    a profile of its own, pprof labels its samples thread=label. title:
    the profile's name (None: the output file's name). interval_ns: the
    sampling interval; time_ns, duration_ns: the start (ns since the epoch)
    and length of the time the trees cover (0: unknown); stats: counters
    the HTML page shows. exact: the trees of an exact trace (a node's
    count is its calls, its weight its own nanoseconds: collapsed writes
    nanoseconds, pprof's first sample type is "calls", the page says
    calls). mode: what the trees' times are, "wall" or "cpu" time (pprof
    names it). pids: None, or the pid of each thread's process (the trees
    of several processes, profiler/processes.py): pprof labels its samples
    pid=N too."""
    __slots__ = ()


def thread_label(t):
    """How outputs name a thread t ({"name", "thread_id"}, as
    Profiler.threads() gives it): "name (ident)", or "Thread ident" when it
    has no name."""
    return f"{t['name']} ({t['thread_id']})" if t.get("name") else f"Thread {t['thread_id']}"


def _title(path, trees):
    return os.path.basename(path) if trees.title is None else trees.title


def _render(name, path, trees, write):
    """`trees` in format `name`, rendered in C (native/ext/profile/render.c)
    and given to write(bytes) a piece at a time as it is written."""
    pids = trees.pids or [0] * len(trees.threads)
    _native.render_trees(name, [(label, tree, pid) for (label, _, tree), pid in zip(trees.threads, pids)],
                         title=_title(path, trees), interval_ns=trees.interval_ns,
                         time_ns=trees.time_ns, duration_ns=trees.duration_ns, exact=trees.exact,
                         mode=trees.mode, write=write)


def _in_c(name):
    """The writer of a format that C renders."""
    def write(path, trees):
        path = os.fspath(path)
        with open(path, "wb") as f:
            _render(name, path, trees, f.write)
    write.__qualname__ = write.__name__ = f"write_{name}"
    return write


class _Gzip:
    """A gzip member written a piece at a time, byte for byte what
    gzip.compress(data, compresslevel=6, mtime=0) gives for all of it (its
    header is that of this Python's gzip.compress; a deflate stream does not
    depend on how its input is cut)."""

    def __init__(self, f):
        self.f, self.crc, self.size = f, 0, 0
        self.z = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        f.write(gzip.compress(b"", compresslevel=6, mtime=0)[:10])

    def write(self, data):
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        self.f.write(self.z.compress(data))

    def close(self):
        self.f.write(self.z.flush() + struct.pack("<II", self.crc, self.size & 0xFFFFFFFF))


def _write_pprof(path, trees):
    """pprof: the Profile message rendered in C, gzipped as it is written
    (zlib's default level: level 9 takes twice as long for 1% less; no time
    stamp, so the same trees give the same bytes)."""
    path = os.fspath(path)
    with open(path, "wb") as f:
        z = _Gzip(f)
        _render("pprof", path, trees, z.write)
        z.close()


def _html_threads(trees):
    return [{"name": label or "all threads", "thread_id": tid, "tree": tree} for label, tid, tree in trees.threads]


def html_document(trees, title):
    """The self-contained HTML flame graph page (flamegraph.py) of a Trees,
    as a str; a tree without a label is "all threads"."""
    # Imported here: its template loader (importlib.resources) would cost
    # every `import stackwatch` several milliseconds.
    from . import flamegraph
    return flamegraph.document(_html_threads(trees), title, trees.interval_ns, trees.stats,
                               "calls" if trees.exact else "samples")


def _write_html(path, trees):
    """The HTML flame graph (html_document) written to path as it is
    made, a piece at a time."""
    from . import flamegraph
    path = os.fspath(path)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        flamegraph.write(f.write, _html_threads(trees), _title(path, trees), trees.interval_ns, trees.stats,
                         "calls" if trees.exact else "samples")


def _write_sequence(path, tasks):
    """The HTML sequence diagram of a trace's task events (sequence.py;
    imported here, as the flame graph is: its loader costs every import)."""
    from . import sequence
    sequence.write_file(path, tasks)


def _write_profile_file(path, profiler):
    """The profile file (.swprof): the whole history of a profiler."""
    profiler.save(path)


def _exported(name):
    """The writer of a trace format: the trace reader's export (C);
    task_flows: the flows between tasks it draws (Trace.export)."""
    def write(path, trace, min_duration_ns=0, filter=None, progress=None, task_flows=None):
        if task_flows:
            trace.export(name, os.fspath(path), min_duration_ns, filter=filter, progress=progress,
                         task_flows=task_flows)
        else:   # (a TraceSet's export has no flows between tasks)
            trace.export(name, os.fspath(path), min_duration_ns, filter=filter, progress=progress)
    write.__qualname__ = write.__name__ = f"export_{name}"
    return write


_T, _P, _X = frozenset({TREES}), frozenset({PROFILES}), frozenset({TRACES})
_TX = frozenset({TREES, TRACES})

# In the order the command line lists them.
FORMATS = {f.name: f for f in (
    Format("collapsed", (".collapsed.txt", ".txt"), False, _TX, TREES, _in_c("collapsed")),
    Format("speedscope", (".speedscope.json", ".json"), False, _TX, TREES, _in_c("speedscope")),
    Format("html", (".flamegraph.html", ".html", ".htm"), False, _TX, TREES, _write_html),
    Format("pprof", (".pb.gz", ".pprof"), True, _TX, TREES, _write_pprof),
    Format("pstats", (".pstats", ".prof"), True, _TX, TREES, functions.write_pstats),
    Format("callgrind", (".callgrind", ".callgrind.out"), False, _TX, TREES, functions.write_callgrind),
    Format("stackwatch", (".swprof",), True, _P, PROFILES, _write_profile_file),
    Format("swt", (".swt",), True, _X, TRACES, None),
    # The timeline formats: one per row of the C exporters' table
    # (native/trace/exporters.h), written by Trace.export.
    *(Format(name, (suffix,), binary, _X, TRACES, _exported(name), directory)
      for name, suffix, binary, directory in _native.TRACE_EXPORTERS),
    # Written from the trace's task events (render/sequence.py), not by C.
    Format("sequence", (".sequence.html",), False, _X, TASKS, _write_sequence),
)}


def write_trace(name, path, trace, min_duration_ns=0, filter=None, progress=None, tasks=None, task_flows=None):
    """Writes an exact trace (a stackwatch.Trace) in format `name`: the
    trace formats by its own export (with the flows between tasks
    `task_flows`, stackwatch.taskviews.flows), the tree formats from its
    call trees (trace.trees()), the sequence diagram from `tasks` (the
    trace's task events: read_task_events(trace); ValueError without
    them). filter: a tracefile.Filter or None; progress: called with the
    bytes of the trace read so far. min_duration_ns applies to the trace
    formats only (ValueError for the others)."""
    f = get(name, TRACES)
    if f.takes == TASKS:
        if tasks is None:
            raise ValueError(f"{name} is written from the trace's task events: give "
                             "tasks=read_task_events(trace) (stackwatch.tracer.task_events)")
        if min_duration_ns or filter is not None:
            raise ValueError(f"--min-duration and the filters do not apply to {name} (its page filters tasks)")
        return f.write(path, tasks)
    if f.takes == TRACES:
        return f.write(path, trace, min_duration_ns=min_duration_ns, filter=filter, progress=progress,
                       task_flows=task_flows)
    if min_duration_ns:
        raise ValueError(f"--min-duration applies to the timeline formats ({', '.join(names_taking(TRACES))}), "
                         f"not to {name}")
    return f.write(path, trace.trees(filter=filter, progress=progress))


def names_taking(takes):
    """The formats written from `takes` itself (TRACES: the timelines)."""
    return tuple(f.name for f in FORMATS.values() if f.takes == takes and f.write)


def names(*fits, written=False):
    """The names of the formats that fit any of `fits`, in the registry's
    order; written=True: only those with a writer (not the trace)."""
    return tuple(f.name for f in FORMATS.values() if f.fits & set(fits) and (f.write or not written))


def get(name, *fits):
    """The Format called `name` if it fits one of `fits`; else ValueError
    ("unknown profile format ...", listing those that fit)."""
    f = FORMATS.get(name)
    if f is None or not f.fits & set(fits):
        what = "trace" if set(fits) == {TRACES} else "profile"
        raise ValueError(f"unknown {what} format {name!r} (choose from: {', '.join(names(*fits, written=True))})")
    return f


def default_output(name, pid=None):
    """The output file's name when none is given: stackwatch-PID and the
    format's first suffix."""
    return f"stackwatch-{os.getpid() if pid is None else pid}{FORMATS[name].suffixes[0]}"


def of_output(path, *fits):
    """The name of the format fitting one of `fits` whose suffix ends `path`
    (in any case); ValueError when none does, listing the endings that name
    one (a name is never a silent guess). The longest suffix wins
    (x.speedscope.json is speedscope), then the format made for fewer
    inputs (a trace's x.json is the Chrome timeline, a profile's speedscope)."""
    low = os.fspath(path).lower()
    best = None
    for f in FORMATS.values():
        if not f.fits & set(fits):
            continue
        for suffix in f.suffixes:
            if low.endswith(suffix):
                rank = (-len(suffix), len(f.fits))
                if best is None or rank < best[0]:
                    best = (rank, f.name)
    if best:
        return best[1]
    known = ", ".join(f"{x} ({f.name})" for f in FORMATS.values() if f.fits & set(fits) for x in f.suffixes)
    raise ValueError(f"{os.fspath(path)!r}: its ending names no known format (known: {known}; or give "
                     "--format)")
