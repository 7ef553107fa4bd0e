"""The statistical profiler: a native thread samples the Python stack of
every thread of this process at a fixed interval, without the GIL, and
counts the stacks into call trees.

    from stackwatch.profiler import Profiler
    with Profiler(interval="1ms") as p:
        work()
    p.tree()                          # nested dicts, all threads merged
    p.write("out.txt", "collapsed")   # flamegraph.pl input
    p.write("out.json", "speedscope")
    p.write("out.html", "html")       # interactive flame graph, one file
    p.write("out.pb.gz", "pprof")     # go tool pprof input
    p.save("out.swprof")              # a profile file: stackwatch stats/export read it
    p.history()                       # a tree per cycle (history.py)

A Profiler runs once (start, then stop). Its results can be read while it
runs as well as after.
"""
import atexit
import os
import threading
import time
import weakref

from .. import _native
from ..common.units import parse_duration_ns
from ..render import formats
from . import history as history_mod, profile_file

FORMATS = formats.names(formats.TREES, formats.PROFILES)
MODES = ("wall", "cpu")
MIN_INTERVAL_NS = 20_000           # sampling this process
MIN_INTERVAL_OTHER_NS = 5_000      # sampling another process from outside (pid=)
MAX_INTERVAL_NS = 60_000_000_000
DEFAULT_MAX_DEPTH = 1024
DEFAULT_MAX_THREADS = 256


def interval_ns(interval=None, rate=None, min_ns=MIN_INTERVAL_NS):
    """The sampling interval in nanoseconds from either an interval
    ("1ms", "50us"; a bare number is microseconds, as everywhere in
    stackwatch) or a rate in Hz. Raises ValueError for anything out of
    range (the shortest interval is min_ns: 20us, i.e. 50 kHz, for this
    process; MIN_INTERVAL_OTHER_NS, 200 kHz, for another one)."""
    if rate is not None and interval is not None:
        raise ValueError("give either a sampling interval or a rate, not both")
    if rate is not None:
        if isinstance(rate, bool) or not isinstance(rate, (int, float, str)):
            raise ValueError(f"invalid sampling rate {rate!r}: expected a number of Hz")
        try:
            hz = float(rate)
        except ValueError:
            raise ValueError(f"invalid sampling rate {rate!r}: expected a number of Hz") from None
        if not hz > 0:
            raise ValueError(f"sampling rate must be positive, not {rate!r}")
        ns = 1e9 / hz
        if ns < min_ns:
            raise ValueError(f"sampling rate {rate!r} Hz is above the maximum of "
                             f"{1e9 / min_ns:.0f} Hz")
        if ns > MAX_INTERVAL_NS:
            raise ValueError(f"sampling rate {rate!r} Hz is too low (at least one sample per "
                             f"{MAX_INTERVAL_NS // 1_000_000_000} s)")
        return int(round(ns))
    ns = parse_duration_ns("1ms" if interval is None else interval)
    if ns < min_ns:
        raise ValueError(f"sampling interval {interval!r} is below the minimum of {min_ns // 1000}us")
    if ns > MAX_INTERVAL_NS:
        raise ValueError(f"sampling interval {interval!r} is above the maximum of 60s")
    return ns


# ---- thread names ----
# The sampler knows threads by ident only; names are looked up in Python.
# Threads alive at start or stop are found with threading.enumerate(); to
# name the ones that start and end in between, Thread.start is wrapped while
# any profiler runs (its frame is elided from the samples).

_names_lock = threading.Lock()
_started_names = {}      # ident -> (name, native_id), for threads started while a profiler ran
_wrap_users = 0
_real_thread_start = None


def _naming_start(self, *args, **kwargs):
    _real_thread_start(self, *args, **kwargs)
    _started_names[self.ident] = (self.name, getattr(self, "native_id", None))


def _wrap_thread_start():
    global _wrap_users, _real_thread_start
    with _names_lock:
        _wrap_users += 1
        if _wrap_users == 1:
            _real_thread_start = threading.Thread.start
            threading.Thread.start = _naming_start


def _unwrap_thread_start():
    global _wrap_users
    with _names_lock:
        _wrap_users -= 1
        if _wrap_users == 0:
            if threading.Thread.start is _naming_start:   # unless someone wrapped it since
                threading.Thread.start = _real_thread_start
            _started_names.clear()


# stackwatch's own frames (the wrappers of the spawning functions that
# follow child processes, a followed child's start after its fork, the
# exit handlers) are never in a profile of this process: omitted as the
# files of `omit` are, their callers and callees kept, whatever the user
# omits besides (the C side takes one glob more than MAX_OMIT for it).
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OMIT_OWN = (os.path.join(_PACKAGE, "*"),)


# Profilers still running when the interpreter exits are stopped first, so
# that no sampling thread reads an interpreter being torn down.
_running = weakref.WeakSet()


@atexit.register
def _stop_at_exit():
    for prof in list(_running):
        try:
            if prof.running and prof._pid == os.getpid():
                prof.stop()
        except Exception:
            pass


def thread_comm(pid, tid):
    """The kernel's name of thread tid of process pid (its comm), or None."""
    try:
        with open(f"/proc/{pid}/task/{tid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().rstrip("\n")
    except OSError:
        return None


def check_mode(mode):
    """The mode if it is "wall" or "cpu", else ValueError."""
    if mode not in MODES:
        raise ValueError(f"mode must be 'wall' or 'cpu', not {mode!r}")
    return mode


WAITING_SHARE = 0.01    # a thread running in at most this share of its samples only waited


def only_waited(thread):
    """True for a thread (an entry of Profiler.threads()) that was idle in
    a blocking call in nearly every sample taken of it: running (or
    waiting for the GIL, or in a state unknown) in at most 1% of them, as
    a pool thread waiting for work or IPython's history thread (which may
    be caught running once, starting or waking up)."""
    st = thread.get("states") or {}
    total = sum(st.values())
    return total > 0 and total - st.get("idle", 0) <= WAITING_SHARE * total


def waiting_threads(threads, main_ident=None):
    """The threads (Profiler.threads() entries) that only waited, which
    summaries leave out: never the main thread (main_ident: its ident;
    default this process's), and none if no other thread did more."""
    if main_ident is None:
        main_ident = threading.main_thread().ident
    waited = [t for t in threads if t["thread_id"] != main_ident and only_waited(t)]
    return waited if len(waited) < len(threads) else []


def waiting_note(waited, limit=4):
    """The line a summary prints about the threads it left out, "" for
    none: "3 threads that only waited left out: name, name, ..."."""
    if not waited:
        return ""
    names = [formats.thread_label(t) for t in waited]
    more = f", and {len(names) - limit} more" if len(names) > limit else ""
    one = len(names) == 1
    return (f"{len(names)} thread{'' if one else 's'} that only waited (idle in 99% of {'its' if one else 'their'} "
            f"samples or more) left out: {', '.join(names[:limit])}{more}")


class Profiler:
    """Samples every thread's Python stack every `interval` (default 1ms,
    or `rate` Hz). Stacks deeper than `max_depth` keep their leaf-most
    frames under a "<truncated>" root; at most `max_threads` threads are
    read per sample.

    Each sample also records what its thread was doing: "running" (on a
    CPU or runnable: Python code, or C code with or without the GIL),
    "gil_wait" (asleep waiting to take the GIL) or "idle" (asleep in any
    other blocking call), as the kernel reports it, and whether the thread
    held the GIL. mode="wall" (the default) keeps every sample, weighted by
    the wall time it stands for; mode="cpu" keeps only samples of running
    threads, weighted by the CPU time the thread used since its previous
    sample; the others are counted in stats()["off_cpu"] and per thread.

    Every `cycle` (default 2s) the samples also start a new tree in a
    history of at most `maxlen` trees (None: no bound), see history().
    Frames of files matching the `omit` globs (fnmatch-style, '*' also
    matches '/') are left out of every stack: their callees attach to
    their caller. So are stackwatch's own frames in this process.

    lines=True makes each node a (function, file, line being run) instead
    of a function: "line" is then the line the frame was running (the call
    site for callers), read from the frame's current instruction and the
    code object's line table.

    native=True (Linux x86-64) merges each thread's native (C) frames into
    its stack: each run of the interpreter's C function is replaced by the
    Python frames it runs. Native nodes are named "symbol [native]", with
    the shared object as "filename", line 0 and "native": True (with pid=,
    a function of a library with DWARF line tables: its source file and
    first line instead).

    pid=PID samples another process instead, read from outside through
    its memory (nothing changes in it; its Python release, 3.9-3.13, need
    not be this one's); threads are then named by the kernel (their comm).
    The interval may be as short as 10us there. idle=False leaves out the
    samples of idle threads (asleep in a blocking call), gil_only=True
    those of threads not holding the GIL (both counted in
    stats()["left_out"]). native=True there stops each thread with ptrace
    while it is read (blocking: a consistent native stack, at a cost per
    sample, stats()["native_stopped_ns"]) and unwinds its C stack from
    outside with the CFI of the process's files (procmem/unwind.h).
    blocking=True (with pid= only) stops every thread of the process with
    ptrace for each sampling round and lets them go after it, so no stack
    is read torn (stats()["blocked_rounds"], "block_failed": rounds whose
    stop failed, "blocked_ns": time stopped in all); start() raises
    RuntimeError if the process cannot be stopped."""

    def __init__(self, interval=None, *, rate=None, mode="wall", max_depth=DEFAULT_MAX_DEPTH,
                 max_threads=DEFAULT_MAX_THREADS, cycle="2s", maxlen=1000, omit=(), lines=False, native=False,
                 pid=None, idle=True, gil_only=False, blocking=False):
        if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0):
            raise ValueError(f"pid must be a positive integer, not {pid!r}")
        if blocking and pid is None:
            raise ValueError("blocking=True samples another process: it needs pid=")
        self.blocking = bool(blocking)
        self.pid = pid
        self.idle, self.gil_only = bool(idle), bool(gil_only)
        self.interval_ns = interval_ns(interval, rate, MIN_INTERVAL_NS if self.pid is None else MIN_INTERVAL_OTHER_NS)
        self.mode = check_mode(mode)
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or not 1 <= max_depth <= 16384:
            raise ValueError(f"max_depth must be an integer from 1 to 16384, not {max_depth!r}")
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or not 1 <= max_threads <= 65536:
            raise ValueError(f"max_threads must be an integer from 1 to 65536, not {max_threads!r}")
        self.cycle_ns = history_mod.cycle_ns(cycle)
        self.maxlen = history_mod.check_maxlen(maxlen) or None
        self.omit = history_mod.check_omit(omit)
        self.lines, self.native = bool(lines), bool(native)
        self.max_depth = max_depth
        self._s = _native.Sampler(self.interval_ns, max_depth, max_threads, mode, lines=self.lines,
                                  native=self.native, blocking=self.blocking)
        self._s.set_history(self.cycle_ns, self.maxlen or 0, self.omit + (_OMIT_OWN if pid is None else ()))
        self._names = {}
        self._anchor, self._follow, self._ignore = None, (), ()
        self._state = "new"
        self._pid = os.getpid()

    # ---- running ----

    def start(self):
        """Starts sampling. Raises RuntimeError if this profiler already
        ran or this process cannot be sampled."""
        if self._state != "new":
            raise RuntimeError("this profiler has already been started (a profiler runs once)")
        if self.pid is not None:
            # Another process: none of this process's frames are there to
            # keep out, and its threads are named by the kernel.
            self._s.start(self.pid, skip_idle=not self.idle, gil_only=self.gil_only)
            self._state = "running"
            self.refresh_names()
            return self
        self._remember_names()
        # The profiler's own start/stop are never in the profile.
        self._s.set_filters(self._anchor, self._follow,
                            ignore=(Profiler.start.__code__, Profiler.stop.__code__) + self._ignore,
                            elide=(_naming_start.__code__,))
        _wrap_thread_start()
        try:
            self._s.start(skip_idle=not self.idle, gil_only=self.gil_only)
        except BaseException:
            _unwrap_thread_start()
            raise
        self._state = "running"
        _running.add(self)
        return self

    def stop(self):
        """Stops sampling and waits for the sampling thread."""
        if self._state != "running":
            raise RuntimeError("this profiler is not running")
        if self.pid is not None:
            self.refresh_names()
            try:
                self._s.stop()
            finally:
                self._state = "stopped"
            return self
        try:
            self._s.stop()
        finally:
            _running.discard(self)
            self._state = "stopped"
            self._remember_names()
            _unwrap_thread_start()
        return self

    def refresh_names(self):
        """Notes the names of the threads sampled so far (with pid=, read
        from the kernel while they exist: call it now and then so that
        threads that end, or a target that exits, keep theirs)."""
        if self.pid is None:
            self._remember_names()
            return
        for t in self._s.threads():
            if t["native_id"] and t["thread_id"] not in self._names:
                name = thread_comm(self.pid, t["native_id"])
                if name is not None:
                    self._names[t["thread_id"]] = (name, t["native_id"])

    @property
    def running(self):
        return self._state == "running"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self._state == "running" and os.getpid() == self._pid:
            self.stop()
        return False

    def _remember_names(self):
        with _names_lock:
            self._names.update(_started_names)
        for t in threading.enumerate():
            if t.ident is not None:
                self._names[t.ident] = (t.name, getattr(t, "native_id", None))

    def _set_wrapper(self, anchor, follow=(), ignore=()):
        """Before start(): leave the frames of a wrapper (the CLI) out of
        every stack: from the root through the first frame running code
        object `anchor`, and the frames right after it running any code
        object in `follow`; samples in a frame running a code object in
        `ignore` are dropped. Such samples are counted in stats()["cut"]."""
        if self._state != "new":
            raise RuntimeError("_set_wrapper() must be called before start()")
        self._anchor, self._follow, self._ignore = anchor, tuple(follow), tuple(ignore)

    def _wrapper(self):
        """The (anchor, follow, ignore) given to _set_wrapper(), or None."""
        return None if self._anchor is None else (self._anchor, self._follow, self._ignore)

    # ---- results ----

    def _check_ran(self):
        if self._state == "new":
            raise RuntimeError("this profiler has not been started")

    def stats(self):
        """Counters of the sampler: ticks, samples, failed, empty, missed,
        stalls (the times it was late by more than the ticks it makes up,
        1 ms of them, or over 10 kHz 20 ms after a stall off its CPU:
        missed ticks come from these) and stall_max_ns (the
        longest), missed_off_cpu (of missed, those in stalls over 2 ms late:
        the sampler kept off its CPU, not rounds too slow), busy_ns (time spent reading stacks), reads, ...; "mode"; "states":
        the samples per thread state {"running", "gil_wait", "idle",
        "unknown"} (over the stored samples and, in CPU mode, those left
        out); "gil_held": samples whose thread held the GIL; "off_cpu":
        samples left out in CPU mode (idle or waiting for the GIL)."""
        return self._s.stats()

    def threads(self):
        """The threads sampled: [{"thread_id", "native_id", "name",
        "samples", "first_ns", "last_ns", "states", "gil_held", "off_cpu",
        "cpu_ns"}] ("name" is None for a thread that was not alive when the
        profiler started or stopped). "samples" are the stored ones;
        "states" counts what the thread was doing in those and (CPU mode)
        in the ones left out ("off_cpu"); "cpu_ns" is the CPU time they
        stand for. In CPU mode a thread that was only ever idle is listed
        with 0 samples."""
        self._check_ran()
        out = self._s.threads()
        for t in out:
            name, native_id = self._names.get(t["thread_id"], (None, None))
            t["name"] = name
            if not t["native_id"] and native_id:   # before 3.11 the sampler cannot see it
                t["native_id"] = native_id
        return out

    def tree(self, thread_id=None):
        """The call tree as nested dicts {"name", "filename", "line",
        "count", "self", "time_ns", "self_time_ns", "children": [...]},
        for one thread (by threading.get_ident()) or all threads merged
        (thread_id=None). The root is named "<root>"; its count is the
        number of samples. `count` includes the samples of the children,
        `self` does not. Each sample also stands for the wall time since
        the sampler's previous round (one interval, more when the sampler
        ran late), summed into `time_ns` and `self_time_ns`: on a busy
        machine these estimate shares of time better than the counts. In
        CPU mode `time_ns` is the CPU time the thread used instead."""
        self._check_ran()
        return self._s.tree(thread_id)

    def history(self, thread_id=None):
        """The history of call trees, one per cycle (live while the
        profiler runs): a stackwatch.History, of every thread or of one
        (by ident)."""
        return history_mod.History(self._s, thread_id, _profiler=self)

    def save(self, path, process=None):
        """Writes the profile file (".swprof", see docs/format.md): the
        history with the threads, their names and the totals; `process`
        ({"pid", "parent_pid", "process": its name}) says which process of
        a run of several it is."""
        self._check_ran()
        if self._state == "running":
            self.refresh_names()
        info = self._file_info(self._s.history())
        info.update(process or {})
        profile_file.save(path, self._s, info, self.threads())

    def _file_info(self, hist):
        """History.info() of this profiler (hist: its Sampler.history())."""
        st = self._s.stats()
        offset = time.time_ns() - time.monotonic_ns()    # CLOCK_MONOTONIC, as the sampler's times
        return {"mode": self.mode, "interval_ns": self.interval_ns, "cycle_ns": self.cycle_ns,
                "maxlen": self.maxlen or 0, "start_ns": st["start_ns"] + offset if st["start_ns"] > 0 else 0,
                "stop_ns": st["stop_ns"] + offset if st["stop_ns"] > 0 else 0, "samples": st["stored"],
                "dropped": st["dropped"], "cut": st["cut"], "off_cpu": st["off_cpu"], "failed": st["failed"],
                "missed": st["missed"], "evicted": hist["evicted"], "evicted_samples": hist["evicted_samples"],
                "history_dropped": hist["dropped"]}

    def write(self, path, format="collapsed"):
        """Writes the profile: "collapsed" (flamegraph.pl input, all
        threads merged, sample counts), "speedscope" (JSON, one profile
        per thread, weights in nanoseconds of wall time), "html" (an
        interactive flame graph in one self-contained file, see
        stackwatch.render.flamegraph) or "pprof" (gzipped profile.proto for
        `go tool pprof`: sample types samples/count and wall/nanoseconds, a
        "thread" label per sample) or "stackwatch" (the profile file, as
        save()). The formats are those of stackwatch.render.formats."""
        fmt = formats.get(format, formats.TREES, formats.PROFILES)
        self._check_ran()
        fmt.write(path, self if fmt.takes == formats.PROFILES else self._trees())

    def _trees(self):
        """A snapshot of the whole-run tree of every thread, as the tree
        formats take it (formats.Trees): labelled "name (ident)", the time
        covered so far, and the sampler's counters for the HTML page."""
        if self._state == "running":
            self.refresh_names()
        st = self._s.stats()
        threads = [(formats.thread_label({"name": self._names.get(tid, (None, None))[0], "thread_id": tid}), tid, tree)
                   for tid, tree in self._s.thread_trees()]
        time_ns = duration_ns = 0
        if st["start_ns"] > 0:    # CLOCK_MONOTONIC; the start in ns since the epoch
            now = time.monotonic_ns()
            time_ns = st["start_ns"] + time.time_ns() - now
            duration_ns = (st["stop_ns"] if st["stop_ns"] > 0 else now) - st["start_ns"]
        keep = ("samples", "stored", "failed", "empty", "missed", "truncated", "dropped", "cut", "ticks", "left_out")
        return formats.Trees(threads, None, self.interval_ns, time_ns, duration_ns,
                             {k: st[k] for k in keep if k in st}, mode=self.mode)
