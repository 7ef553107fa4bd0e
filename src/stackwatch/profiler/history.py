"""Call trees over time: the history a profiler keeps (a new tree every
`cycle`), time windows of it, merging, and profile files.

    import stackwatch, time
    h = stackwatch.watch(interval="1ms", cycle="2s", maxlen=1000,
                         omit=("*/site-packages/*",))
    ...
    t0 = time.time()
    tree = stackwatch.get_profile(h, start=t0 - 10, stop=t0)   # the last 10 s
    tree.to_dict()                    # dask-like nested dicts
    both = stackwatch.merge(tree, stackwatch.load_profile("old.swprof").tree())
    both.write("out.html", "html")
    h.stop(); h.save("run.swprof")    # read back with stackwatch.load_profile

Times (start, stop, History.entries()) are wall-clock seconds since the
epoch, as time.time() gives them (as in dask's profiler). A window selects
whole entries: those that overlap it. Trees are built and merged in C; a
CallTree owns its function table, so trees of different processes or
files merge as well as trees of one.
"""
import math
import numbers
import os
import threading
from collections import namedtuple

from .. import _native
from ..common.units import parse_duration_ns
from ..render import formats
from ..render.flamegraph import thread_label
PROFILE_SUFFIX = ".swprof"
MIN_CYCLE_NS = 10_000_000              # 10 ms
MAX_CYCLE_NS = 3600 * 1_000_000_000    # 1 h
MAX_OMIT = 64
_FAR_PAST, _FAR_FUTURE = -(1 << 63), (1 << 63) - 1

Entry = namedtuple("Entry", "start stop samples thread_ids")
Entry.__doc__ = """One cycle of a history: its start and stop (wall-clock
seconds since the epoch, like time.time()), the samples in it and the
idents of the threads that had samples in it."""


# ---- checking arguments ----

def cycle_ns(cycle):
    """Nanoseconds of a cycle ("2s", "500ms"; a bare number is
    microseconds, as everywhere in stackwatch); ValueError unless from
    10ms to 1h."""
    try:
        ns = parse_duration_ns(cycle)
    except (TypeError, ValueError):
        raise ValueError(f"invalid cycle {cycle!r}: expected a duration such as '2s' or '500ms'") from None
    if not MIN_CYCLE_NS <= ns <= MAX_CYCLE_NS:
        raise ValueError(f"cycle must be from 10ms to 1h, not {cycle!r}")
    return ns


def check_maxlen(maxlen):
    """maxlen as the native layer takes it (0 for None: no bound)."""
    if maxlen is None:
        return 0
    if isinstance(maxlen, bool) or not isinstance(maxlen, int) or maxlen < 1:
        raise ValueError(f"maxlen must be a positive integer or None (no bound), not {maxlen!r}")
    return maxlen


def check_omit(omit):
    """A tuple of glob patterns from a str or an iterable of str."""
    if isinstance(omit, str):
        omit = (omit,)
    try:
        pats = tuple(omit)
    except TypeError:
        raise ValueError(f"omit must be a glob pattern or a sequence of them, not {omit!r}") from None
    for p in pats:
        if not isinstance(p, str) or not p or "\0" in p:
            raise ValueError(f"omit patterns must be non-empty strings (file name globs), not {p!r}")
    if len(pats) > MAX_OMIT:
        raise ValueError(f"at most {MAX_OMIT} omit patterns, not {len(pats)}")
    return pats


def _time_ns(t, default):
    if t is None:
        return default
    if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(t):
        raise ValueError(f"times are wall-clock seconds since the epoch (like time.time()), not {t!r}")
    return max(_FAR_PAST, min(_FAR_FUTURE, int(round(t * 1e9))))


def _window_ns(start, stop):
    a, b = _time_ns(start, _FAR_PAST), _time_ns(stop, _FAR_FUTURE)
    if a > b:
        raise ValueError(f"start ({start}) is after stop ({stop})")
    return a, b


# ---- trees ----

class CallTree:
    """A call tree of samples (built in C). count = samples through a node,
    self = samples ending in it; time_ns = the wall time (CPU time in CPU
    mode) the samples stand for."""

    __slots__ = ("_t",)

    def __init__(self, _tree=None):
        self._t = _native.CallTree() if _tree is None else _tree

    @property
    def total(self):
        """The number of samples."""
        return self._t.total

    def tree(self):
        """Nested dicts {"name", "filename", "line", "count", "self",
        "time_ns", "self_time_ns", "children": [...]}, as
        Profiler.tree() gives them; the root is "<root>"."""
        return self._t.tree()

    def to_dict(self, source=True):
        """The tree as dask's profiler shapes it: {"identifier",
        "description": {"filename", "name", "line_number", "line"},
        "count", "children": {identifier: {...}}}, plus "self", "time_ns"
        and "self_time_ns". The identifier is "name;filename;line";
        line_number is the function's first line and "line" its source
        text (read with linecache; "" with source=False or when it cannot
        be read). The root's identifier is "root"."""
        from ..render.flamegraph import source_line
        root = self._t.tree()
        out = {}
        stack = [(root, out, True)]
        while stack:      # without recursion: stacks can be thousands deep
            node, d, is_root = stack.pop()
            if is_root:
                ident, desc = "root", {"filename": "", "name": "", "line_number": 0, "line": ""}
            else:
                ident = f"{node['name']};{node['filename']};{node['line']}"
                desc = {"filename": node["filename"], "name": node["name"], "line_number": node["line"],
                        "line": source_line(node["filename"], node["line"]) if source else ""}
            d.update(identifier=ident, description=desc, count=node["count"], self=node["self"],
                     time_ns=node["time_ns"], self_time_ns=node["self_time_ns"], children={})
            for child in node["children"]:
                cd = {}
                d["children"][f"{child['name']};{child['filename']};{child['line']}"] = cd
                stack.append((child, cd, False))
        return out

    def merge(self, *others):
        """A new tree with the samples of this one and of `others`."""
        return merge(self, *others)

    def write(self, path, format="collapsed", title=None):
        """Writes the tree as collapsed stacks, speedscope JSON, an HTML
        flame graph or pprof (see Profiler.write)."""
        formats.get(format, formats.TREES).write(path, formats.Trees([(None, 0, self._t)], title))

    def __eq__(self, other):
        if not isinstance(other, CallTree):
            return NotImplemented
        intern = {}
        return _flat(self.tree(), intern) == _flat(other.tree(), intern)

    __hash__ = None

    def __repr__(self):
        return f"<CallTree {self.total} samples, {self._t.nodes - 1} nodes>"


def _flat(tree, intern):
    """A tree as {node id: (count, self, time_ns, self_time_ns)}, a node's
    id interned (in `intern`, shared by the trees compared) from its
    parent's id and its function: equal for equal trees whatever order
    their children were added in. Iterative: stacks can be deep."""
    out = {}
    stack = [(tree, 0)]
    while stack:
        n, parent = stack.pop()
        nid = intern.setdefault((parent, n["name"], n["filename"], n["line"]), len(intern) + 1)
        out[nid] = (n["count"], n["self"], n["time_ns"], n["self_time_ns"])
        stack.extend((c, nid) for c in n["children"])
    return out


def merge(*trees):
    """A new CallTree with every sample of the given CallTrees (or
    Histories: their whole history). Trees of different processes or files
    merge as well: functions are matched by name, file and first line."""
    out = _native.CallTree()
    for t in trees:
        if isinstance(t, History):
            t = t.tree()
        if not isinstance(t, CallTree):
            raise TypeError(f"merge() takes CallTree or History objects, not {type(t).__name__}")
        out.merge(t._t)
    return CallTree(out)


# ---- histories ----

class History:
    """Timestamped call trees, one entry per cycle, oldest first: of a
    profiler (live while it runs: new entries appear every cycle) or of a
    profile file. len(h) is the number of entries kept; entries() lists
    them; tree(start, stop) merges a time window."""

    def __init__(self, source, thread_id=None, _profiler=None, _path=None):
        self._src = source            # a _native.Sampler or _native.ProfileFile
        self._prof = _profiler
        self._path = _path
        self.thread_id = thread_id    # only this thread's trees, or all (None)
        self._poller = None
        self._stop_lock = threading.Lock()   # stop() and watch()'s poller may race

    # ---- what is in it ----

    def _history(self):
        return self._src.history()

    def __len__(self):
        return len(self._history()["entries"])

    def entries(self):
        """[Entry(start, stop, samples, thread_ids)], oldest first (the
        newest may still be filling while the profiler runs)."""
        return [Entry(e["start_ns"] / 1e9, e["end_ns"] / 1e9, e["samples"], tuple(e["threads"]))
                for e in self._history()["entries"]]

    def __iter__(self):
        """(start, stop, CallTree) per entry."""
        for e in self._history()["entries"]:
            t = self._src.window(e["start_ns"], e["start_ns"], self.thread_id)
            yield e["start_ns"] / 1e9, e["end_ns"] / 1e9, CallTree(t)

    def tree(self, start=None, stop=None, thread_id=None):
        """The merged tree of the entries overlapping [start, stop]
        (time.time() seconds; None: unbounded) of one thread (by ident;
        default: the history's thread, else all threads)."""
        a, b = _window_ns(start, stop)
        tid = self.thread_id if thread_id is None else thread_id
        return CallTree(self._src.window(a, b, tid))

    def threads(self):
        """[{"thread_id", "native_id", "name", "samples", ...}] of the
        whole run, in the order the profile first saw them."""
        ts = self._prof.threads() if self._prof is not None else self._src.threads()
        if self.thread_id is not None:
            ts = [t for t in ts if t["thread_id"] == self.thread_id]
        return ts

    def info(self):
        """mode, interval_ns, cycle_ns, maxlen, start_ns and stop_ns (wall
        clock; stop 0 while running), the sample totals (samples, dropped,
        cut, off_cpu, failed, missed) and what the history did not keep:
        evicted entries and evicted_samples (maxlen), history_dropped. For
        a file also "damage" ("" if intact) and "complete"."""
        if self._prof is None:
            return self._src.info()
        return self._prof._file_info(self._history())

    @property
    def evicted_samples(self):
        """Samples of entries dropped because the history was full."""
        return self._history()["evicted_samples"]

    # ---- running ----

    @property
    def running(self):
        return self._prof is not None and self._prof.running

    def stop(self):
        """Stops the profiler of a live history (watch()); the history
        keeps what it has."""
        if self._prof is None:
            raise RuntimeError("a history read from a file is not running")
        with self._stop_lock:
            if self._prof.running:
                self._prof.stop()
        return self

    # ---- output ----

    def thread_trees(self, start=None, stop=None):
        """[(label, thread_id, CallTree)] per thread with samples in the
        window, in the profile's thread order."""
        a, b = _window_ns(start, stop)
        out = []
        threads = self.threads()
        known = {t["thread_id"] for t in threads}
        for e in self._history()["entries"]:     # threads a damaged file lost the names of
            for tid in e["threads"]:
                if tid not in known and (self.thread_id is None or tid == self.thread_id):
                    known.add(tid)
                    threads.append({"thread_id": tid, "name": None})
        for t in threads:
            tree = CallTree(self._src.window(a, b, t["thread_id"]))
            if tree.total:
                out.append((thread_label(t), t["thread_id"], tree))
        return out

    def write(self, path, format="collapsed", start=None, stop=None, title=None):
        """Writes the window [start, stop] (default: everything) as
        collapsed stacks (all threads merged), speedscope (a profile per
        thread), html or pprof (a "thread" label per thread); or the whole
        history as a profile file with format "stackwatch" (live histories
        only, see save())."""
        fmt = formats.get(format, formats.TREES, formats.PROFILES)
        if fmt.takes == formats.PROFILES:
            if start is not None or stop is not None:
                raise ValueError("a profile file stores the whole history (no start/stop)")
            return fmt.write(path, self)
        info = self.info()
        window = _window_ns(start, stop)
        fmt.write(path, as_trees(self.thread_trees(start, stop), info, title, window))

    def save(self, path):
        """Writes the history as a profile file (read it back with
        load_profile)."""
        if self._prof is None:
            raise ValueError("save() writes a profiler's history; this one was read from a file")
        self._prof.save(path)


def as_trees(threads, info, title=None, window=None):
    """The formats.Trees of [(label, thread_id, CallTree)] of a history
    whose info() is `info`, clipped to the window (start_ns, stop_ns)."""
    start_ns, stop_ns = int(info.get("start_ns") or 0), int(info.get("stop_ns") or 0)
    if window is not None and start_ns:
        start_ns = max(start_ns, window[0])
        stop_ns = min(stop_ns, window[1]) if stop_ns else stop_ns
    duration = stop_ns - start_ns if start_ns and stop_ns > start_ns else 0
    keep = ("samples", "dropped", "cut", "failed", "missed", "off_cpu")
    return formats.Trees([(label, tid, t._t) for label, tid, t in threads], title, int(info.get("interval_ns") or 0),
                         start_ns if start_ns > 0 else 0, duration, {k: info[k] for k in keep if k in info})


# ---- entry points ----

def load_profile(path):
    """The History stored in a profile file. ValueError (with a one-line
    message) for a file that is empty, not a profile, or of an unknown
    version; a damaged file is read up to the damage, described in
    info()["damage"]."""
    return History(_native.read_profile(os.fspath(path)), _path=os.fspath(path))


def is_profile_file(path):
    """True if the file starts like a profile file."""
    with open(path, "rb") as f:
        return bool(_native.is_profile(f.read(16)))


def get_profile(history, start=None, stop=None):
    """The merged call tree of the history's entries that overlap [start,
    stop] (wall-clock seconds since the epoch, like time.time(); None:
    unbounded), as in dask's get_profile."""
    if not isinstance(history, History):
        raise TypeError(f"get_profile() takes a History (from watch() or load_profile()), "
                        f"not {type(history).__name__}")
    return history.tree(start, stop)


def watch(thread_id=None, interval="1ms", cycle="2s", maxlen=1000, omit=(), stop=None, *, mode="wall"):
    """Starts a profiler and returns its live History: a new tree every
    `cycle`, at most `maxlen` kept (None: no bound), frames of files
    matching the `omit` globs left out (their callees attach to their
    caller). thread_id: only that thread's trees (by threading.get_ident();
    all threads are sampled; default all threads, unlike dask which
    defaults to the calling thread). stop: a callable polled every cycle
    (on a helper thread); when it returns true the profiler stops.
    history.stop() stops it too."""
    from .session import Profiler
    if thread_id is not None and (isinstance(thread_id, bool) or not isinstance(thread_id, int) or thread_id < 0):
        raise ValueError(f"thread_id must be a thread ident (threading.get_ident()) or None, not {thread_id!r}")
    if stop is not None and not callable(stop):
        raise ValueError(f"stop must be a callable (polled every cycle) or None, not {stop!r}")
    prof = Profiler(interval, mode=mode, cycle=cycle, maxlen=maxlen, omit=omit)
    h = History(prof._s, thread_id, _profiler=prof)
    if stop is not None:
        done = threading.Event()
        period = prof.cycle_ns / 1e9

        def poll():
            while not done.wait(period):
                if not prof.running:
                    return
                try:
                    should = stop()
                except Exception:
                    should = True   # a broken stop condition must not keep it sampling forever
                if should:
                    h.stop()
                    return

        prof._ignore = prof._ignore + (poll.__code__,)
        t = threading.Thread(target=poll, name="stackwatch-watch", daemon=True)
        h._poller = (t, done)
    prof.start()
    if h._poller:
        h._poller[0].start()
    return h
