"""`stackwatch attach PID --trace|--sample|--probes [--duration S] [-o FILE]`:
starts the exact tracer (--trace), the in-process sampling profiler
(--sample; with --trace its samples go into the trace, as `run --sample`)
or the USDT probes' watcher (--probes) inside a running Python process and
stops it again, leaving the process running. The way in is the
interpreter's own pending-calls queue, written from outside while every
thread is frozen (native/procmem/pending.h): the target runs the call at
its next safe point, between two bytecodes. The first call (PyRun_SimpleString of a
short bootstrap) imports stackwatch there and runs tracer/attached.py's
begin(); the second (a C function of stackwatch's extension in the
target) stops what it started and writes the file. docs/architecture.md
("Attaching") says exactly how and what the target must have."""
import json
import os
import shutil
import signal
import sys
import tempfile
import time

from .. import _native
from ..events import kinds
from ..events import probes as probes_mod
from ..profiler import MODES, history, interval_ns
from ..render import formats
from ..tracer import attached

NAME = "attach"
POLL_S = 0.002
BOOT = "boot.py"   # the bootstrap, in the status directory
FORMATS = formats.names(formats.TREES, formats.PROFILES)   # of --sample alone, as `stackwatch profile`
DEFAULT_RATE = 1000


def add_parser(subparsers):
    """Adds the command to the CLI's subparsers; returns its parser."""
    p = subparsers.add_parser("attach", help="trace, sample or serve the probes of a running Python process "
                                   "for a while, from outside")
    p.add_argument("pid", type=int, help="the process to attach to")
    p.add_argument("--trace", action="store_true", help="record every call and return (the exact tracer)")
    p.add_argument("--sample", action="store_true", help="sample every thread's stack (the profiler of `stackwatch "
                   "profile`) and write a profile; with --trace the samples go into the trace")
    p.add_argument("--probes", action="store_true", help="serve the USDT probes while attached: attaching "
                   "bpftrace/SystemTap/perf to them turns on the hooks they need (see `stackwatch probes`)")
    p.add_argument("--events", action="append", default=None, help="also record these events (comma-separated "
                   "names or groups, as `stackwatch run --events`; with tasks, the asyncio tasks alive at the attach "
                   "are listed with their state then; needs --trace)")
    p.add_argument("--rate", default=None, metavar="HZ", help=f"samples per second (default {DEFAULT_RATE}; "
                   "needs --sample)")
    p.add_argument("--mode", choices=MODES, default=None, help="wall (default) or cpu time (--sample without "
                   "--trace)")
    p.add_argument("--cycle", default=None, help="a profile file keeps a call tree per cycle of this length "
                   "(default 2s; --sample without --trace)")
    p.add_argument("--format", choices=FORMATS, default=None, help="the profile's format (--sample without "
                   "--trace; default: what -o's ending names, else the profile file .swprof)")
    p.add_argument("--duration", type=float, default=None, metavar="S",
                   help="stop after S seconds (default: on Ctrl-C or when the process exits)")
    p.add_argument("-o", "--output", default=None, metavar="FILE",
                   help="the trace, or with --sample alone the profile (default stackwatch-PID.swt or "
                   ".swprof; relative to this command's directory)")
    p.add_argument("--timeout", type=float, default=5.0, metavar="S",
                   help="how long the target may take to reach a safe point, and again to report the "
                   "start, or the stop (plus the time attached); default 5")
    p.add_argument("--audit-hooks-ok", action="store_true",
                   help="attach to a process that has audit hooks (sys.addaudithook) all the same: the attach "
                   "compiles and runs its start-up code there, and a hook that refused that would fail the "
                   "program's own code then (SystemError); refused without this")
    return p


def _fail(msg):
    print(f"stackwatch: error: {msg}", file=sys.stderr)
    return 1


def _alive(pid):
    return os.path.exists(f"/proc/{pid}")


def _wait_for(path, pid, timeout):
    """The JSON document at path once it exists, or None after timeout (or
    when the process is gone)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(path) as f:
                return json.load(f)
        except FileNotFoundError:
            if not _alive(pid):
                return None
        time.sleep(POLL_S)
    return None


def _claim(path):
    """Claims the report at path for the attaching command once it stops
    waiting for it: True if the target had not written it (then it never
    will: attached._report writes only where no report is), False if it
    just has."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        return True
    except FileExistsError:
        return False


def _wait_or_claim(path, pid, timeout):
    """The report at path within timeout; else None, the report claimed
    (one the target writes later is not written)."""
    doc = _wait_for(path, pid, timeout)
    if doc is None and _alive(pid) and not _claim(path):
        doc = _wait_for(path, pid, timeout)   # written just now (whole: linked once written)
    return doc


def _status_dir(pid):
    """A directory the target may write its reports into."""
    d = tempfile.mkdtemp(prefix="sw-")   # short: its name goes into the queue's free slots
    st = os.stat(f"/proc/{pid}")
    if os.geteuid() == 0 and st.st_uid != 0:
        os.chown(d, st.st_uid, st.st_gid)
    return d


def _bootstrap(pkg_parent, status_dir, out, what):
    """The code PyRun_SimpleString runs in the target (in __main__'s
    namespace): it binds no name there and never raises (a pending call
    that fails would raise into the target's code). It is short, to fit
    the free slots of the pending-calls queue: it runs the file BOOT of
    status_dir, which imports stackwatch (from pkg_parent, appended to
    sys.path for that import) and starts what the attach asked for
    (what: begin()'s arguments after the path: options, profile, probes).
    The file is read inside a `with`, in an exec of its own namespace: an
    unclosed file would warn (ResourceWarning) from `<string>`, a frame
    of __main__'s globals, which gains a __warningregistry__ then (and
    the warning is printed under -W default). begin() is given the code
    of the pending call's own `<string>` frame, two out from BOOT's
    (PyRun_SimpleString's, around run_boot's exec, around BOOT's): the
    samples taken inside it are the attach's (tracer/attached.py)."""
    boot = os.path.join(status_dir, BOOT)
    hold_py = os.path.join(pkg_parent, "stackwatch", "tracer", "signal_hold.py")
    with open(boot, "w") as f:
        # First the target's signal handlers are held (tracer/signal_hold.py,
        # run from its source: stackwatch is not importable yet); begin()
        # releases them, else they are put back at the end.
        f.write(f"signal_hold = {{}}\n"
                f"with open({hold_py!r}) as f:\n"
                f"    exec(compile(f.read(), {hold_py!r}, 'exec'), signal_hold)\n"
                f"signals = signal_hold['hold']()\n"
                f"try:\n"
                f"    __import__('sys').path.append({pkg_parent!r})\n"
                f"    __import__('stackwatch.tracer.attached').tracer.attached.begin({pkg_parent!r}, "
                f"{status_dir!r}, {out!r}, *{what!r}, signals=signals, "
                f"pending=__import__('sys')._getframe(2).f_code)\n"
                f"finally:\n"
                f"    signal_hold['put_back'](signals[0], signals[3])\n")
    os.chmod(boot, 0o644)
    run_boot = f"with open({boot!r}) as f:exec(f.read(),{{}})"
    return f"try:exec({run_boot!r},{{}})\nexcept BaseException:pass\n"


def _no_safe_point(pid, timeout, version):
    main_only = tuple(int(x) for x in version.split(".")[:2]) < (3, 12)
    why = (" (before 3.12 only the main thread runs pending calls: is it blocked in a C call?)" if main_only
           else " (is every thread blocked in a C call?)")
    return f"process {pid} reached no safe point within {timeout:.3g} s{why}"


def _what(args, pid):
    """(output path or None, begin()'s arguments after the path) for the
    options given; ValueError (one line) for a bad combination."""
    if not (args.trace or args.sample or args.probes):
        raise ValueError("attach needs --trace, --sample or --probes (what to start in the process)")
    if args.duration is not None and args.duration <= 0:
        raise ValueError(f"--duration must be positive, not {args.duration:g}")
    if args.rate is not None and not args.sample:
        raise ValueError("--rate needs --sample")
    try:
        events = kinds.names_of_options(args.events)
    except ValueError as e:
        raise ValueError(f"--events: {e}")
    if events and not args.trace:
        raise ValueError("--events needs --trace (the events go into the trace)")
    alone = args.sample and not args.trace
    for name in ("mode", "cycle", "format"):
        if getattr(args, name) is not None and not alone:
            raise ValueError(f"--{name} is for --sample without --trace (the profile it writes)" if args.sample
                             else f"--{name} needs --sample")
    if args.output is not None and not (args.trace or args.sample):
        raise ValueError("-o needs --trace or --sample: --probes alone writes no file")
    if args.probes and not probes_mod.available:
        raise ValueError("stackwatch was built without USDT probes (<sys/sdt.h> was not found; on Debian: apt "
                         "install systemtap-sdt-dev, then reinstall)")
    rate = float(DEFAULT_RATE) if args.rate is None else args.rate
    if args.sample:
        interval_ns(rate=rate)
    if not (args.trace or args.sample):
        return None, (None, None, True)
    if args.trace:
        options = ({"sample": f"{float(rate):g}hz"} if args.sample else {}) | ({"events": events} if events else {})
        return os.path.abspath(args.output or f"stackwatch-{pid}.swt"), (options, None, args.probes)
    fmt = args.format or (formats.of_output(args.output, formats.TREES, formats.PROFILES) if args.output
                          else "stackwatch")
    history.cycle_ns(args.cycle or "2s")
    out = os.path.abspath(args.output or formats.default_output(fmt, pid))
    profile = {"rate": float(rate), "mode": args.mode or "wall", "cycle": args.cycle or "2s", "format": fmt}
    return out, (None, profile, args.probes)


def run(args):
    pid = args.pid
    try:
        out, what = _what(args, pid)
    except ValueError as e:
        return _fail(str(e))
    try:
        version = _native.dump_process(pid, max_depth=1)["version"]
    except (OSError, ValueError, RuntimeError) as e:
        return _fail(str(e))
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if version.rsplit(".", 1)[0] != mine and not version.startswith(mine + "."):
        return _fail(f"process {pid} runs Python {version}, this stackwatch runs on {mine}: attach with a "
                     f"stackwatch installed for Python {'.'.join(version.split('.')[:2])}")
    pkg_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(attached.__file__))))
    status = _status_dir(pid)
    try:
        return _attach(args, pid, version, out, what, pkg_parent, status)
    finally:
        shutil.rmtree(status, ignore_errors=True)


def _doing(args, pid, out):
    """What the attach does, for its first line."""
    if args.trace:
        return f"tracing process {pid} into {out}" + (" with its samples" if args.sample else "")
    if args.sample:
        return f"sampling process {pid} into {out}"
    return f"serving the USDT probes of process {pid} (bpftrace -p {pid} 'usdt:{probes_mod.library}:stackwatch:*')"


def _attach(args, pid, version, out, what, pkg_parent, status):
    started = os.path.join(status, attached.STARTED)
    try:
        c = _native.pending_call(pid, "PyRun_SimpleString", text=_bootstrap(pkg_parent, status, out, what),
                                 timeout=args.timeout, audit_hooks_ok=args.audit_hooks_ok)
        doc = _wait_for(started, pid, args.timeout)
        if doc is None and _alive(pid):
            if _native.pending_take_back(pid, c["func"], c["arg"]):
                return _fail(f"{_no_safe_point(pid, args.timeout, version)}; the call was taken back, nothing "
                             f"changed")
            doc = _wait_or_claim(started, pid, args.timeout)   # taken meanwhile: it runs now
    except (OSError, ValueError, RuntimeError) as e:
        return _fail(str(e))
    if doc is None:
        return _fail(f"process {pid} exited before the attach started" if not _alive(pid) else
                     f"process {pid} ran the attach call but did not report its start within {2 * args.timeout:g} s "
                     f"(can it import stackwatch from {pkg_parent} and write into {status}?); if it starts later, it "
                     f"stops again at once (stackwatch stays imported there)")
    if "error" in doc:
        return _fail(f"process {pid}: {doc['error']}")
    print(f"stackwatch: {_doing(args, pid, out)}" +
          (f" for {args.duration:g} s" if args.duration else "; Ctrl-C stops"), file=sys.stderr)
    t_started = time.monotonic()
    end = t_started + args.duration if args.duration else None
    # SIGTERM and SIGHUP end the attach as Ctrl-C does: the target never
    # stays tracing because the attaching command was told to stop.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    try:
        while (end is None or time.monotonic() < end) and _alive(pid):
            time.sleep(min(0.05, max(0.0, end - time.monotonic())) if end else 0.05)
    except KeyboardInterrupt:
        pass
    if not _alive(pid):
        print(f"stackwatch: process {pid} exited" + (f"; its {'trace' if args.trace else 'profile'} was written at "
              f"its exit: {out}" if out else ""), file=sys.stderr)
        return 0
    doc = _stop(args, pid, version, out, doc["stop"], os.path.join(status, attached.STOPPED),
                2 * args.timeout + (time.monotonic() - t_started))
    if isinstance(doc, int):
        return doc
    if "error" in doc:
        return _fail(f"process {pid}: {doc['error']}")
    if "events" in doc:
        print(f"stackwatch: wrote {doc['path']} ({doc['events']} events)" +
              (f"; {doc['warning']}" if doc.get("warning") else ""), file=sys.stderr)
    elif "samples" in doc:
        print(f"stackwatch: wrote {doc['path']} ({doc['samples']} samples" +
              (f", {doc['failed']} failed reads of a stack" if doc["failed"] else "") + ")", file=sys.stderr)
    else:
        print(f"stackwatch: stopped serving the USDT probes of process {pid}", file=sys.stderr)
    return 0


def _stop(args, pid, version, out, stop, stopped, bound):
    """Queues the stop call (stop: its address in the target) and returns
    its report, or the exit status after one line saying what did not
    answer within bound seconds (the time attached plus twice --timeout: a
    longer attach has more to write at its end) and in what state the
    target is."""
    doing = "tracing" if args.trace else "sampling" if args.sample else "serving the USDT probes"
    then = f"it stops {doing}" + (f" and writes {out}" if out else "")
    try:
        c = _native.pending_call(pid, stop, timeout=args.timeout)
        try:
            doc = _wait_or_claim(stopped, pid, bound)
        except KeyboardInterrupt:   # (Ctrl-C, SIGTERM or SIGHUP again)
            return _fail(f"interrupted while process {pid} stops: {then} once its stop call has run")
        if doc is not None or not _alive(pid):
            return doc or _fail(f"process {pid} exited while stopping")
        if not _native.pending_take_back(pid, c["func"], c["arg"]):
            return _fail(f"process {pid} ran the stop call but did not report its end within {bound:.3g} s: "
                         f"it is still in that call, or its report was lost; either way {then} when that call returns")
        # Never run: queued again, for the target's next safe point.
        _native.pending_call(pid, stop, timeout=args.timeout)
    except (OSError, ValueError, RuntimeError) as e:
        return _fail(f"{e}; process {pid} may still be {doing} (until it exits)")
    return _fail(f"{_no_safe_point(pid, bound, version)}; it is still {doing}: the stop call stays queued, "
                 f"{then} at its next safe point")
