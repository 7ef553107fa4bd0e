"""The tracing API: start/stop, the trace() context manager and @traced.

One session per process at a time. The C extension records; this module
chooses the file, writes the header's descriptive fields, keeps the trace
readable when the program leaves by os._exit() or replaces itself by
os.exec*() (everything recorded so far is written first), and decides what a forked
child does (it never writes into its parent's file: with follow_fork=True,
the default, it traces into a file of its own named after its pid, else it
stops tracing). Following children, forked or not, is follow.py's.
"""
import atexit
import functools
import json
import os
import sys
import threading   # (also for its side effect: thread names are read from it)
import time

from .. import _native
from . import signals
from ..common.units import parse_size
from ..common.version import VERSION
from ..events import kinds
from . import follow as _follow

_session = None          # options of the running session, for fork children
_sampler = None          # the sampler writing into the running session's file (sample=...)
# The program's own start()s that joined a session it did not start (one
# `stackwatch run`, `attach` or following started): (path, thread ident,
# whether its region was recorded), innermost last. See _join().
_joined = []
_real_os_exit = os._exit
_real_execv, _real_execve = os.execv, os.execve
# Called with the program's path just before it execs (the CLI says where
# the trace is: its exit handler will not run).
_exec_notice = None
MIN_CHUNK = 4096         # the smallest per-thread buffer (native/trace/writer.c)
DEFAULT_FLUSH_INTERVAL = 0.25 if sys.version_info < (3, 13) else 0.0
# stackwatch's own Python frames (start/stop, the CLI's exit handler) are
# never recorded.
_OWN_FILES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "*")  # the package
# The frames that started the program (python -m's runpy, a console
# script's <module>; the CLI adds its own script by launched_by()) are not
# the program's: left out like stackwatch's own, so that the exit's
# SystemExit passing through them is not one of the program's exceptions.
_LAUNCHER_FILES = ["*/runpy.py", "<frozen runpy>"]


def launched_by(path):
    """The command line's script (a console script): its frames are never
    recorded."""
    path = os.path.abspath(path)
    if path not in _LAUNCHER_FILES:
        _LAUNCHER_FILES.append(path)


class TraceSummary:
    """What a finished session wrote: path, events, dropped, bytes, threads,
    codes (functions defined), syscalls and kernel_lost (run --kernel, else
    None), and error (None, or the first problem met
    while tracing, e.g. a failed write)."""

    def __init__(self, d):
        self.path = d["path"]
        self.events = d["events"]
        self.dropped = d["dropped"]
        self.bytes = d["bytes"]
        self.threads = d["threads"]
        self.codes = d["codes"]
        self.error = d["error"]
        self.samples = d.get("samples", 0)
        # kernel=...: system calls written and kernel records lost (None without it)
        self.syscalls = d.get("syscalls")
        self.kernel_lost = d.get("kernel_lost")

    def __repr__(self):
        return (f"TraceSummary(path={self.path!r}, events={self.events}, dropped={self.dropped}, "
                f"bytes={self.bytes}, threads={self.threads}, samples={self.samples}, error={self.error!r})")


def default_path(pid=None):
    return f"stackwatch-{pid or os.getpid()}.swt"


# Without the platform module: it parses sys.version with regular
# expressions, compiled on first use, which cost more instructions at the
# first start() than tracing a short program.
_v = sys.version_info
_PYTHON_VERSION = f"{_v.major}.{_v.minor}.{_v.micro}" + (
    "" if _v.releaselevel == "final" else f"{_v.releaselevel[0]}{_v.serial}".replace("c", "rc", 1))
_IMPLEMENTATION = {"cpython": "CPython", "pypy": "PyPy"}.get(sys.implementation.name, sys.implementation.name)


@functools.lru_cache(maxsize=None)
def _boot_id():
    """This boot's id (Linux), "" elsewhere: the uuid LTTng's tracers give
    their clocks, which the CTF export's clock takes too (Trace Compass's
    host id)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _meta(extra, followed=None):
    meta = {
        "python_version": _PYTHON_VERSION,
        "python_implementation": _IMPLEMENTATION,
        "argv": json.dumps(sys.argv),
        "command": os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python",
        "hostname": os.uname().nodename,   # (socket.gethostname(), without importing socket into the program)
        "start_time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "stackwatch_version": VERSION,
    }
    if _boot_id():
        meta["boot_id"] = _boot_id()
    meta.update(extra or {})
    meta.update(_follow.meta(followed))
    return meta


def is_tracing():
    """True while a session records in this process."""
    return _native.is_tracing()


def sample_interval_ns(sample):
    """The sampling interval in ns of a ``sample=`` option: True (1 ms), an
    interval with its unit ("1ms", "200us") or a rate ("1000hz", "5khz").
    Raises ValueError for anything else or out of range (20us .. 60s)."""
    from ..profiler import interval_ns
    if sample is True:
        return interval_ns("1ms")
    text = sample.strip().lower() if isinstance(sample, str) else None
    if not text or not text[0].isdigit() and text[0] != ".":
        raise ValueError(f"invalid sampling rate {sample!r}: give an interval (1ms, 200us) or a rate "
                         "(1000hz)")
    if text.endswith("khz"):
        return interval_ns(rate=_number(text[:-3], sample) * 1000)
    if text.endswith("hz"):
        return interval_ns(rate=_number(text[:-2], sample))
    if text[-1].isdigit():
        raise ValueError(f"invalid sampling rate {sample!r}: give a unit, as in 1ms, 200us or 1000hz")
    return interval_ns(text)


def _number(text, original):
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"invalid sampling rate {original!r}: give an interval (1ms, 200us) or a rate "
                         "(1000hz)") from None


# The kernel events `start(kernel=...)` / `run --kernel=...` can record.
KERNEL_EVENTS = ("syscalls", "sched", "faults")


def kernel_option(kernel):
    """The kernel events a ``kernel=`` option names (None: none); raises
    ValueError for an unknown name."""
    if kernel in (None, False, "", ()):
        return None
    if kernel is True:
        return "syscalls"
    names = [k.strip() for k in (kernel.split(",") if isinstance(kernel, str) else kernel)]
    for k in names:
        if k not in KERNEL_EVENTS:
            raise ValueError(f"unknown kernel events {k!r} (known: {', '.join(KERNEL_EVENTS)})")
    return ",".join(dict.fromkeys(names))


def say_kernel(said):
    """One line on stderr from the kernel reader's start: a note, or what
    is missing for it (the rest of the trace is recorded either way)."""
    if said.startswith("note: "):
        print(f"stackwatch: --kernel: {said[6:]}", file=sys.stderr)
    else:
        print(f"stackwatch: --kernel: {said}; no kernel event is recorded, the rest of the trace is",
              file=sys.stderr)


def start(path=None, *, buffer_size="256K", ring=0, max_depth=0, include=None, exclude=None,
          follow_fork=True, follow=False, meta=None, allow_tsc=True, c_calls=False, cython=False, flush_interval=None,
          events=None, lines=None, sample=None, sample_native=False, sample_lines=False, kernel=None,
          native_include=None, native_exclude=None, cpu=False, calls=True, _followed=None, _host=None, _ignore=()):
    """Start tracing every thread into ``path`` (default stackwatch-PID.swt).

    buffer_size: per-thread buffer (bytes or "256K"); ring: if nonzero, keep
    only the most recent events of each thread, at most ``ring`` bytes of
    the file per thread (at least 16K; between 3/4 of it and all of it once
    a thread recorded that much), and write them at stop (flight recorder;
    the buffer is cut to ring/4 when larger); max_depth: record frames only up to this depth;
    include/exclude: globs matched against file names and module names
    ("mypkg" also matches "mypkg.sub"); c_calls: also record calls of
    builtin and extension functions (C_CALL/C_RETURN events); cython:
    also record the functions of Cython modules compiled with
    profile=True, as frames named after them with their .pyx file and
    line (through the C profile function on 3.9-3.12, which then runs at
    every Python call too; sys.monitoring on 3.13);
    cpu: record the CPU each Python event ran on (a "cpu" record when a
    thread's events move to another CPU; rdtscp with the TSC clock, about
    12 ns more per event: docs/performance.md);
    native_include/native_exclude: globs of the native functions
    (extensions compiled with `stackwatch config --cflags --ldflags`,
    recorded whenever a trace runs) to record or leave out, matched
    against the symbol, its object's file name and path;
    events: more events to record beside calls (names or groups, see
    stackwatch.EVENTS: e.g. ["line", "exceptions", "gc", "objects",
    "threads"]); lines: globs of the files whose line / instruction events
    are recorded (default: every traced file);
    sample: also run the statistical sampler beside the tracer and write
    its samples (every thread's Python stack, on the trace's clock) into
    the same file: True (every 1 ms), an interval ("1ms", "200us") or a
    rate ("1000hz"); time inside long C calls, invisible to the exact
    trace, shows up in the samples; sample_native: the samples' stacks
    also hold the native (C) frames, named "symbol [native]" and merged
    with the Python frames (Linux x86-64); sample_lines: the samples record
    the line each Python frame was running (both need ``sample``);
    kernel: also record the kernel's events of this process's threads on
    the trace's clock: True or "syscalls" (every system call, with its
    number, name, return value and duration), "sched" (off-CPU intervals
    with their reason and CPU ids, wakeups), "faults" (page faults), or a
    comma-separated list of them (Linux, needs root or CAP_PERFMON:
    without them a line on stderr says what is missing and the rest is
    recorded);
    calls: False records no call records, only the events asked (events=
    ..., e.g. ["tasks"]): no frame hook runs for the file, its META says
    calls 0, and each task's creation stack is written with its creation
    (a TASK_STACK record, docs/format.md); it cannot go with c_calls,
    cython, cpu, max_depth or sample, which describe calls;
    follow_fork: a forked child traces into a file of its own,
    ``<stem>.<pid>.swt`` beside ``path``; follow: so does every Python
    program this one starts, however (subprocess, multiprocessing's spawn
    and forkserver, os.system, a shell that runs python, os.exec*), and
    the programs those start (tracer/follow.py);
    flush_interval: seconds between background flushes of threads that
    record slowly (a process killed by a signal loses at most this much;
    0 = write only when a buffer fills). Default: 0.25 s, except on 3.13+
    where it is off: there os.fork() counts OS threads before any fork hook
    can pause the flusher, and would warn that the process is
    multi-threaded.

    Under a session the program did not start itself (`stackwatch run`,
    `stackwatch attach`, a followed process), start() joins that session
    instead: the options are ignored, nothing is written to ``path``, the
    calls from here to the matching stop() are a region of the running
    trace, and one line on stderr says so; that trace keeps every thread
    and event it records.

    Raises RuntimeError if already tracing (a session the program started),
    OSError if the file cannot be created, ValueError for a bad option.
    """
    global _session, _sampler
    path = os.fspath(path) if path is not None else default_path()
    if _session is not None and _session["_host"]:
        return _join(path)
    chunk = given_chunk = parse_size(buffer_size)
    ring_bytes = given_ring = parse_size(ring) if ring else 0
    if ring_bytes:
        # At most `ring` bytes of events per thread in the file: the ring
        # keeps the newest chunks that fit it, each (with its headers) at
        # most a quarter of it, so a thread that recorded enough keeps
        # between 3/4 of it and all of it.
        if ring_bytes < 4 * MIN_CHUNK:
            raise ValueError(f"ring must be at least {4 * MIN_CHUNK // 1024}K (four chunks of "
                             f"{MIN_CHUNK // 1024}K), not {given_ring} bytes")
        chunk = min(chunk, ring_bytes // 4)
    if not isinstance(max_depth, int) or max_depth < 0:
        raise ValueError(f"max_depth must be a non-negative integer, not {max_depth!r}")
    include = _globs(include, "include")
    exclude = _globs(exclude, "exclude")
    exclude_own = (exclude or []) + [_OWN_FILES] + _LAUNCHER_FILES
    if flush_interval is None:
        flush_interval = DEFAULT_FLUSH_INTERVAL
    file_mask = kinds.mask_of(events) if events else 0
    if c_calls:
        file_mask |= kinds.mask_of("c_calls")
    lines = _globs(lines, "lines")
    sample_ns = sample_interval_ns(sample) if sample not in (None, False) else 0
    if (sample_native or sample_lines) and not sample_ns:
        raise ValueError("sample_native and sample_lines need sample (they describe the samples)")
    if sample_ns and not _native.SAMPLER_SUPPORTED:
        raise RuntimeError("the sampler supports CPython 3.9 to 3.13 (with the GIL)")
    kernel_events = kernel_option(kernel)
    if not calls and not file_mask:
        raise ValueError("calls=False records only the events asked: give events=...")
    if not calls and sample_ns:
        raise ValueError("sample writes stacks of calls: it cannot go with calls=False")
    at_start = {} if calls else {"calls": 0}
    if file_mask & kinds.mask_of("tasks"):   # the threads alive now, with their state (asyncio's: task events')
        from ..events.tasks import threads_at_start
        at_start["tasks_at_start"] = json.dumps(threads_at_start())
    # Killed by SIGTERM, SIGINT, SIGHUP or SIGQUIT: the file is closed first
    # (after the command line's finisher, which stops the session itself).
    # Before the start: installing calls the standard library's signal module.
    signals.add(_stop_on_signal, late=True)
    try:
        kernel_said = _native.start(path, chunk_bytes=chunk, ring_bytes=ring_bytes, max_depth=max_depth,
                      allow_tsc=allow_tsc, meta=_meta({**(meta or {}), **at_start}, _followed), include=include, exclude=exclude_own,
                      c_calls=bool(c_calls), cython=bool(cython), native_include=_globs(native_include, "native_include"),
                      native_exclude=_globs(native_exclude, "native_exclude"), flush_interval=float(flush_interval), events=file_mask,
                      lines=lines, kernel=kernel_events, cpu=bool(cpu), calls=bool(calls))
    except BaseException:
        signals.remove(_stop_on_signal)
        raise
    if kernel_said:
        say_kernel(kernel_said)
    sampler = None
    if sample_ns:
        try:
            sampler = _native.Sampler(sample_ns, trace=True, skip_prefix=_OWN_FILES[:-1],
                                      native=bool(sample_native), lines=bool(sample_lines))
            # _ignore (attach's): code objects a sample taken inside of is
            # cut whole, whatever they call (the pending call's frames).
            sampler.set_filters(ignore=tuple(_ignore))
        except Exception as e:
            _native.stop()
            signals.remove(_stop_on_signal)
            raise RuntimeError(f"cannot start the sampler: {e}") from e
    _session = dict(path=path, buffer_size=given_chunk, ring=given_ring, max_depth=max_depth,
                    include=include, exclude=exclude, follow_fork=follow_fork, follow=follow, meta=meta,
                    allow_tsc=allow_tsc, c_calls=c_calls, cython=cython, native_include=native_include,
                    native_exclude=native_exclude, flush_interval=flush_interval,
                    events=events, lines=lines, sample=sample, sample_native=sample_native,
                    sample_lines=sample_lines, kernel=kernel, cpu=cpu, calls=calls, _followed=_followed,
                    _host=(_host if _host is not None else "the parent process's stackwatch" if _followed
                           else None) or None)
    os._exit = _exit_after_stop
    os.execv, os.execve = _execv_after_flush, _execve_after_flush
    _native.unrecorded(_follow.started, _session, _followed)   # stackwatch's work, not the program's
    # The sampler starts last: a sample of stackwatch's own start (the
    # follow wrappers import subprocess's C module) holds the standard
    # library's frames under stackwatch's, which would read as the program's.
    if sampler is not None:
        try:
            sampler.start()
        except Exception as e:
            _stop()
            raise RuntimeError(f"cannot start the sampler: {e}") from e
        _sampler = sampler


def _join(path):
    """The program's start(path) under a session its host started: a region
    of that session's trace, named after the call, on the calling thread."""
    recorded = _native.region_begin(f"stackwatch.start({os.path.basename(path)})")
    _joined.append((path, threading.get_ident(), recorded))
    _native.unrecorded(_say, f"the program's stackwatch.start({path!r}) joins the session {_session['_host']} "
                       f"started: its events are recorded in {_session['path']} ({os.path.basename(path)} is "
                       "not written)")


def _say(warning):
    print(f"stackwatch: warning: {warning}", file=sys.stderr)


def _leave():
    """The program's stop() of a session it joined (or, with none joined,
    of its host's, which goes on): ends the innermost joined start's region.
    The summary names the running trace, with counts 0 (it is not closed)."""
    if _joined:
        path, ident, recorded = _joined.pop()
        if recorded and ident == threading.get_ident():
            _native.region_end()
    else:
        _native.unrecorded(_say, f"the program's stackwatch.stop() leaves the session {_session['_host']} "
                           f"started running ({_session['path']})")
    return TraceSummary(dict(path=_session["path"], events=0, dropped=0, bytes=0, threads=0, codes=0,
                             error=None))


def _stop_on_signal():
    if _native.is_tracing():
        end_session()


def _globs(value, what):
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    value = list(value)
    for v in value:
        if not isinstance(v, str) or not v:
            raise ValueError(f"{what} patterns must be non-empty strings, not {v!r}")
    return value or None


# The sampler's counts written into the END of a `run --sample` trace.
_SAMPLER_END_KEYS = ("ticks", "missed", "samples", "stored", "dropped", "failed", "cut", "native_samples",
                     "native_failed", "torn", "unfit", "half_made", "parked", "park_failed", "after_park",
                     "parked_ahead", "relisted", "muted_failed", "returned", "read_by_thread", "read_short")


def stop():
    """Stop tracing, flush every thread and close the file. Returns a
    TraceSummary. Raises RuntimeError if not tracing. Under a session the
    program did not start (see start()), it only ends the region of the
    program's start() and the session goes on."""
    if _session is not None and _session["_host"]:
        return _leave()
    return end_session()


def end_session():
    """stop() for whoever started the session: `stackwatch run`'s and
    attach's finish and the exit and signal handlers stop it even when the
    program joined it."""
    return _native.unrecorded(_stop_deferred)   # (stackwatch's work, not the program's)


def _stop_deferred():
    with signals.deferred():    # a fatal signal meanwhile waits for the file
        return _stop()


def _stop():
    global _session, _sampler
    sampler, _sampler = _sampler, None
    _joined.clear()
    sample_error = samples = None
    if sampler is not None:
        # Stopped first: its last samples go into the file before it closes.
        try:
            sampler.stop()
        except Exception as e:
            sample_error = f"samples: {e}"
        samples = sampler.stats()
    # The sampler's counts go into END (docs/format.md): a reader can tell a
    # sample whose native frames could not be captured from one that has none.
    end = None if samples is None else {"sampler." + k: samples[k] for k in _SAMPLER_END_KEYS
                                        if isinstance(samples.get(k), int) and samples[k] >= 0}
    try:
        d = _native.stop(end)   # also switches off what only the session needed
    finally:
        _session = None
        _follow.stopped()
        _restore_exits()
        signals.remove(_stop_on_signal)
    if samples is not None:
        d = dict(d, samples=samples["stored"])
        if samples["dropped"] and not sample_error:
            sample_error = f"{samples['dropped']} samples lost"
        if sample_error and not d["error"]:
            d["error"] = sample_error
    return TraceSummary(d)


def _restore_exits():
    if os._exit is _exit_after_stop:
        os._exit = _real_os_exit
    if os.execv is _execv_after_flush:
        os.execv = _real_execv
    if os.execve is _execve_after_flush:
        os.execve = _real_execve


def _flush_before_exec(path):
    """The process is about to be replaced: every event recorded so far goes
    into the file, which then reads like that of a killed process with
    nothing lost. If the exec fails, tracing goes on (samples excepted: the
    sampler is stopped to write its own)."""
    global _sampler
    if not _native.is_tracing():
        return
    sampler, _sampler = _sampler, None
    if sampler is not None:
        try:
            sampler.stop()
        except Exception:
            pass
    try:
        _native._flush_all()
        if _exec_notice is not None:
            _exec_notice(path)
    except Exception:
        pass


def exec_wrappers(before):
    """os.execv and os.execve (every os.exec* ends in one of them) as they
    are now, each calling before(path) first."""
    real_execv, real_execve = os.execv, os.execve

    def execv(path, argv):
        before(path)
        return real_execv(path, argv)

    def execve(path, argv, env):
        before(path)
        return real_execve(path, argv, env)

    return execv, execve


_execv_after_flush, _execve_after_flush = exec_wrappers(_flush_before_exec)


def _exit_after_stop(status):
    """os._exit while tracing: close the trace first so it stays readable."""
    if _native.is_tracing():
        try:
            end_session()
        except Exception:
            pass
    _real_os_exit(status)


def _after_fork_in_child():
    session = _session
    # The C side left the parent's session inside fork() itself (nothing
    # since has been recorded); here it forgets the rest.
    if not _native._after_fork_child() or session is None:
        return
    globals()["_session"] = None
    globals()["_sampler"] = None   # its thread is the parent's: never touched here
    _joined.clear()
    _follow.forget_in_child()
    _restore_exits()
    if session["follow_fork"] or session["follow"]:
        stem, ext = session["_root"]
        opts = {k: v for k, v in session.items() if k in _follow.OPTIONS}
        opts["_host"] = session["_host"] or ""   # the parent program's own session goes on as the child's
        _follow.forked_child(stem, ext, opts, start)   # the child runs on, traced or not


if hasattr(os, "register_at_fork"):
    # Before-fork hooks run in the reverse order of their registration: this
    # one, registered before the program's, notes the time of the fork for
    # the child's META after the program's hooks have run.
    os.register_at_fork(before=_follow.note_fork)
    # The background flusher thread is stopped around fork(): CPython 3.12+
    # warns when a multi-threaded process forks, which would change the
    # traced program's output.
    os.register_at_fork(before=_native._before_fork, after_in_parent=_native._after_fork_parent,
                        after_in_child=_after_fork_in_child)


@atexit.register
def _stop_at_exit():
    if _native.is_tracing():
        try:
            end_session()
        except Exception:
            pass


class trace:
    """Context manager: ``with stackwatch.trace("out.swt") as t: ...``; after
    the block, ``t.summary`` holds the TraceSummary."""

    def __init__(self, path=None, **options):
        self.path = path
        self.options = options
        self.summary = None

    def __enter__(self):
        start(self.path, **self.options)
        return self

    def __exit__(self, *exc):
        self.summary = stop()
        return False


def traced(path=None, **options):
    """Decorator: trace every call of the function into ``path``.

    ``@traced`` and ``@traced("out.swt", ...)`` both work. If tracing is
    already running, the call is simply recorded in the current session.
    """
    if callable(path):
        return traced()(path)

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if _native.is_tracing():
                return fn(*args, **kwargs)
            start(path, **options)
            try:
                return fn(*args, **kwargs)
            finally:
                wrapper.summary = stop()
        wrapper.summary = None
        return wrapper
    return deco

