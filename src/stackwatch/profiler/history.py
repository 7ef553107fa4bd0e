"""Call trees over time: the history a profiler keeps (a new tree every
`cycle`), the entries of a profiler's or a profile file's history, and
time windows of it merged into one tree.

    import stackwatch, time
    h = stackwatch.watch(interval="1ms", cycle="2s", maxlen=1000,
                         omit=("*/site-packages/*",))
    ...
    t0 = time.time()
    tree = stackwatch.get_profile(h, start=t0 - 10, stop=t0)   # the last 10 s
    h.write("last.pb.gz", "pprof", start=t0 - 10)
    h.stop(); h.save("run.swprof")    # read back with stackwatch.load_profile

Times (start, stop, History.entries()) are wall-clock seconds since the
epoch, as time.time() gives them (as in dask's profiler). A window selects
whole entries: those that overlap it. A History reads its trees from a
running profiler's sampler or from a profile file (profile_file.py).
"""
import math
import numbers
import threading
from collections import namedtuple

from ..common.units import parse_duration_ns
from ..render import formats
from .calltree import CallTree

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


def window_ns(start, stop):
    """(start, stop) in ns from time.time() seconds (None: unbounded);
    ValueError for anything else or start after stop."""
    a, b = _time_ns(start, _FAR_PAST), _time_ns(stop, _FAR_FUTURE)
    if a > b:
        raise ValueError(f"start ({start}) is after stop ({stop})")
    return a, b


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
        a, b = window_ns(start, stop)
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

    def _calltree(self):
        """The whole history as one CallTree (what merge() takes of it)."""
        return self.tree()

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
        a, b = window_ns(start, stop)
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
                out.append((formats.thread_label(t), t["thread_id"], tree))
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
        window = window_ns(start, stop)
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
                         start_ns if start_ns > 0 else 0, duration, {k: info[k] for k in keep if k in info},
                         mode=info.get("mode") or "wall")


def get_profile(history, start=None, stop=None):
    """The merged call tree of the history's entries that overlap [start,
    stop] (wall-clock seconds since the epoch, like time.time(); None:
    unbounded), as in dask's get_profile."""
    if not isinstance(history, History):
        raise TypeError(f"get_profile() takes a History (from watch() or load_profile()), "
                        f"not {type(history).__name__}")
    return history.tree(start, stop)
