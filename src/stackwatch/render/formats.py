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

and what its writer is given (`takes`, one of those): a Trees for TREES
(call trees of any origin: the writer does not know where they came from),
a Profiler or a live History (their save()) for PROFILES, a Trace for
TRACES. Every writer is write(path, data, **options) and creates the file.

A new format is one entry in FORMATS and its writer. To render exact
traces to the tree formats, their entries add TRACES to `fits` and the
trace's trees (durations as weights) are given as a Trees; formats such as
pstats or callgrind are entries of their own that take a Trees.
"""
import gzip
import os
from collections import namedtuple

from .. import _native

TREES, PROFILES, TRACES = "trees", "profiles", "traces"


class Format(namedtuple("Format", "name suffixes binary fits takes write")):
    """name: what --format and write() call it. suffixes: endings of file
    names (lower case) that mean this format, the first one that of the
    default output name. binary: not text. fits: a frozenset of TREES,
    PROFILES, TRACES (what it can be written from); takes: which of them
    write(path, data, **options) is given. write is None for the format a
    tracing session writes itself (the trace)."""
    __slots__ = ()


class Trees(namedtuple("Trees", "threads title interval_ns time_ns duration_ns stats mode",
                       defaults=(None, 0, 0, 0, None, "wall"))):
    """What the tree formats are written from. threads: [(label or None,
    thread_id, tree)], each tree a stackwatch._native.CallTree: collapsed
    merges them in this order, speedscope and the HTML page show each as
    a profile of its own, pprof labels its samples thread=label. title:
    the profile's name (None: the output file's name). interval_ns: the
    sampling interval; time_ns, duration_ns: the start (ns since the epoch)
    and length of the time the trees cover (0: unknown); stats: counters
    the HTML page shows; mode: what the trees' times are, "wall" or "cpu"
    time (pprof names it)."""
    __slots__ = ()


def thread_label(t):
    """How outputs name a thread t ({"name", "thread_id"}, as
    Profiler.threads() gives it): "name (ident)", or "Thread ident" when it
    has no name."""
    return f"{t['name']} ({t['thread_id']})" if t.get("name") else f"Thread {t['thread_id']}"


def _title(path, trees):
    return os.path.basename(path) if trees.title is None else trees.title


def _rendered(name, path, trees):
    """The bytes of `trees` in format `name`, rendered in C
    (native/ext/sampler/render.c)."""
    return _native.render_trees(name, [(label, tree) for label, _, tree in trees.threads],
                                title=_title(path, trees), interval_ns=trees.interval_ns,
                                time_ns=trees.time_ns, duration_ns=trees.duration_ns, mode=trees.mode)


def _write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def _in_c(name):
    """The writer of a format that C renders whole."""
    def write(path, trees):
        path = os.fspath(path)
        _write_bytes(path, _rendered(name, path, trees))
    write.__qualname__ = write.__name__ = f"write_{name}"
    return write


def _write_pprof(path, trees):
    """pprof: the Profile message rendered in C, gzipped (zlib's default
    level: level 9 takes twice as long for 1% less; no time stamp, so the
    same trees give the same bytes)."""
    path = os.fspath(path)
    _write_bytes(path, gzip.compress(_rendered("pprof", path, trees), compresslevel=6, mtime=0))


def _write_html(path, trees):
    """The self-contained HTML flame graph (flamegraph.py); a tree without
    a label is "all threads"."""
    # Imported here: its template loader (importlib.resources) would cost
    # every `import stackwatch` several milliseconds.
    from . import flamegraph
    path = os.fspath(path)
    threads = [{"name": label or "all threads", "thread_id": tid, "tree": tree.tree()}
               for label, tid, tree in trees.threads]
    text = flamegraph.document(threads, _title(path, trees), trees.interval_ns, trees.stats)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def _write_profile_file(path, profiler):
    """The profile file (.swprof): the whole history of a profiler."""
    profiler.save(path)


def _exported(name):
    """The writer of a trace format: the trace reader's export (C)."""
    def write(path, trace, min_duration_ns=0):
        trace.export(name, os.fspath(path), min_duration_ns)
    write.__qualname__ = write.__name__ = f"export_{name}"
    return write


_T, _P, _X = frozenset({TREES}), frozenset({PROFILES}), frozenset({TRACES})

# In the order the command line lists them.
FORMATS = {f.name: f for f in (
    Format("collapsed", (".collapsed.txt", ".txt"), False, _T, TREES, _in_c("collapsed")),
    Format("speedscope", (".speedscope.json", ".json"), False, _T, TREES, _in_c("speedscope")),
    Format("html", (".flamegraph.html", ".html", ".htm"), False, _T, TREES, _write_html),
    Format("pprof", (".pb.gz", ".pprof"), True, _T, TREES, _write_pprof),
    Format("stackwatch", (".swprof",), True, _P, PROFILES, _write_profile_file),
    Format("swt", (".swt",), True, _X, TRACES, None),
    Format("perfetto", (".pftrace",), True, _X, TRACES, _exported("perfetto")),
    Format("chrome", (".json",), False, _X, TRACES, _exported("chrome")),
)}


def names(*fits, written=False):
    """The names of the formats that fit any of `fits`, in the registry's
    order; written=True: only those with a writer (not the trace)."""
    return tuple(f.name for f in FORMATS.values() if f.fits & set(fits) and (f.write or not written))


def get(name, *fits):
    """The Format called `name` if it fits one of `fits`; else ValueError
    ("unknown profile format ...", listing those that fit)."""
    f = FORMATS.get(name)
    if f is None or not f.fits & set(fits):
        raise ValueError(f"unknown profile format {name!r} (choose from: {', '.join(names(*fits))})")
    return f


def default_output(name, pid=None):
    """The output file's name when none is given: stackwatch-PID and the
    format's first suffix."""
    return f"stackwatch-{os.getpid() if pid is None else pid}{FORMATS[name].suffixes[0]}"


def guess(path, *fits, default):
    """The name of the first format fitting one of `fits` whose suffix ends
    `path` (in any case), else `default` (also for no path)."""
    low = os.fspath(path).lower() if path else ""
    for f in FORMATS.values():
        if f.fits & set(fits) and low.endswith(f.suffixes):
            return f.name
    return default
