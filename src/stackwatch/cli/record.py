"""`stackwatch record --pid PID`: samples a running process's Python stacks
from outside (its memory read by the in-process profiler's sampling thread
and frame walker, pointed at the target; nothing changes in the target)
and writes a profile in any format `stackwatch profile` writes (the one
format registry; -o's ending names it; default the HTML flame graph).
With --subprocesses the target's descendants are sampled too, each by a
sampler of its own (cli/record_children.py), and merged into the one
output, each process under a frame naming it (profiler/processes.py), as
`stackwatch profile` merges the processes it follows; with --format
stackwatch their profile files are written beside the output instead,
OUT.<pid>.swprof.

Without --duration it runs until Ctrl-C (SIGINT), SIGTERM, or the
target's exit, then writes what it sampled and exits 0. A summary line
gives the samples, the failed share and the rate achieved. --blocking stops
every thread of the target with ptrace for each round (as py-spy does by
default), so that no stack is read torn. Bad input (no
such process, not Python, a release it cannot read, permission, this very
process) is one line on stderr, exit 1.
"""
import os
import signal
import sys
import time

from .. import profiler
from ..common.units import parse_duration_ns
from ..profiler import processes
from ..render import formats
from ..tracer.follow_profile import command_name
from .profile import output_stem
from .record_children import Descendants
from .program import UsageError, check_writable
from .stats import samples_table

NAME = "record"
FORMATS = formats.names(formats.TREES, formats.PROFILES)
POLL_S = 0.05          # how often the target's life and the clock are checked
NAMES_EVERY_S = 0.5    # how often the names of new threads are read
CHILDREN_EVERY_S = 0.1  # how often --subprocesses looks for new processes


def add_parser(subparsers):
    """Adds the command to the CLI's subparsers; returns its parser."""
    p = subparsers.add_parser("record", help="sample a running Python process from outside and write a profile")
    p.add_argument("--pid", type=int, required=True, help="the process to sample")
    p.add_argument("--duration", help="how long (seconds, or e.g. 500ms); default: until Ctrl-C or the "
                   "process exits")
    p.add_argument("--rate", help="samples per second (default 1000; at most "
                   f"{1_000_000_000 // profiler.MIN_INTERVAL_OTHER_NS})")
    p.add_argument("--mode", choices=profiler.MODES, default="wall",
                   help="wall: samples weighted by wall time (default); cpu: weighted by the CPU time each "
                   "thread used, only threads on a CPU")
    p.add_argument("--idle", action="store_true", help="keep the samples of idle threads (asleep in a blocking "
                   "call); by default they are left out")
    p.add_argument("--gil", action="store_true", help="keep only the samples of the thread holding the GIL")
    p.add_argument("--native", action="store_true", help="merge native (C) frames in, named 'symbol [native]': "
                                                         "each thread is stopped with ptrace while sampled and "
                                                         "its C stack unwound from outside (blocking: it costs "
                                                         "the target a stop per sample; Linux x86-64)")
    p.add_argument("--blocking", action="store_true", help="stop every thread of the process with ptrace for "
                   "each sampling round and let them go after it: no stack is read torn (failed samples only "
                   "where the stop fails), at the cost of a stop per round to the process; Linux")
    p.add_argument("--subprocesses", action="store_true", help="sample the process's descendants too, as they "
                   "appear (each Python one; others are left out), each under a frame naming it in the output")
    p.add_argument("--lines", action="store_true", help="one node per line being run instead of per function")
    p.add_argument("--cycle", default="2s", help="profile files keep a call tree per cycle of this length "
                   "(default 2s; from 10ms to 1h)")
    p.add_argument("--format", choices=FORMATS, default=None, help="the output format (default: what -o's "
                   "ending names, else html)")
    p.add_argument("-o", "--output", help="output file (default stackwatch-PID.flamegraph.html, PID the "
                   "target's)")
    p.add_argument("-q", "--quiet", action="store_true", help="do not print the summary")
    return p


def duration_s(text):
    """Seconds from "2", "2.5" (seconds) or "500ms"; UsageError if not positive."""
    try:
        s = float(text)
    except ValueError:
        try:
            s = parse_duration_ns(text) / 1e9
        except ValueError as e:
            raise UsageError(f"--duration: {e}")
    if not s > 0:
        raise UsageError(f"--duration must be positive, not {text!r}")
    return s


def alive(pid):
    """1 while process pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def open_profiler(args, pid=None, **kw):
    """The Profiler of the target (or of process pid, one of its
    descendants, with the same options), started; raises UsageError for
    what the user asked wrong, OSError/ValueError/RuntimeError (one
    sentence) for a target that cannot be read."""
    try:
        ns = profiler.interval_ns(None, args.rate, profiler.MIN_INTERVAL_OTHER_NS)
    except ValueError as e:
        raise UsageError(str(e))
    try:
        prof = profiler.Profiler(interval=f"{ns}ns", pid=pid or args.pid, idle=args.idle, gil_only=args.gil,
                                 lines=args.lines, mode=args.mode, cycle=args.cycle, native=args.native,
                                 blocking=args.blocking, **kw)
    except ValueError as e:
        raise UsageError(str(e))
    return prof.start()


def summary(prof):
    """One line: samples, failed share, rate achieved."""
    st = prof.stats()
    dur = ((st["stop_ns"] or time.monotonic_ns()) - st["start_ns"]) / 1e9 if st["start_ns"] > 0 else 0.0
    tried = st["samples"] + st["failed"]   # (samples: those read whole)
    failed = 100.0 * st["failed"] / tried if tried else 0.0
    rate = st["ticks"] / dur if dur > 0 else 0.0
    left = f", {st['left_out']} left out (idle or without the GIL)" if st["left_out"] else ""
    if st.get("stalls"):
        # (many short stalls: rounds too slow for the rate; a few long
        # ones: the sampler kept off its CPU)
        left += (f", {st['missed']} ticks missed in {st['stalls']} stalls (longest "
                 f"{st['stall_max_ns'] / 1e6:.1f} ms; {st['missed_off_cpu']} of them off its CPU)")
    native = ""
    if st.get("native"):
        stops = st["native_samples"] + st["native_failed"]
        per = st["native_stopped_ns"] / stops / 1e3 if stops else 0.0
        native = f"; native frames in {st['native_samples']} of them ({st['native_failed']} without)"
        if not st.get("blocking"):
            native += f", each thread stopped {per:.0f} us per sample"
    if st.get("blocking"):
        rounds = st["blocked_rounds"]
        per = st["blocked_ns"] / rounds / 1e3 if rounds else 0.0
        native += f"; blocking: the process stopped {per:.0f} us per round"
        if st["block_failed"]:
            native += f", {st['block_failed']} rounds not read (the stop failed: {st['block_error']})"
    return (f"{st['stored']} samples of process {prof.pid} (Python {st['target_version']}) in {dur:.2f} s: "
            f"{failed:.2f}% failed ({st['failed']} of {tried}), {rate:.0f} rounds/s achieved of "
            f"{1e9 / prof.interval_ns:.0f} asked{left}{native}")


def run(args):
    output = os.path.abspath(args.output or formats.default_output(args.format or "html", args.pid))
    check_writable(output, "profile")
    try:
        fmt = args.format or (formats.of_output(args.output, formats.TREES, formats.PROFILES)
                              if args.output else "html")
    except ValueError as e:
        raise UsageError(str(e))
    limit = duration_s(args.duration) if args.duration is not None else None
    kw = {"maxlen": None} if fmt == "stackwatch" else {}
    stop = []
    old = {sig: signal.signal(sig, lambda *_: stop.append(1)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            prof = open_profiler(args, **kw)
        except (OSError, ValueError, RuntimeError) as e:
            print(f"stackwatch: error: {e}", file=sys.stderr)
            return 1
        if not args.quiet:
            # The first line: the target is being sampled from here on.
            print(f"stackwatch: recording process {args.pid} (Python {prof.stats()['target_version']}) at "
                  f"{1e9 / prof.interval_ns:.0f} Hz" + (f" for {limit:g} s" if limit is not None else
                                                        " until it exits; Ctrl-C stops"),
                  file=sys.stderr, flush=True)
        children = name = None
        if args.subprocesses:
            children = Descendants(args.pid, lambda pid: open_profiler(args, pid, **kw), alive)
            name = command_name(args.pid)       # while it runs: its command line goes with it
        t0 = time.monotonic()
        next_names = t0 + NAMES_EVERY_S
        next_children = t0
        ended = ""
        try:
            while not stop:
                now = time.monotonic()
                if limit is not None and now - t0 >= limit:
                    break
                if not alive(args.pid):
                    ended = " (the process exited)"
                    break
                if now >= next_names:
                    prof.refresh_names()
                    next_names = now + NAMES_EVERY_S
                if children is not None and now >= next_children:
                    children.poll()
                    next_children = now + CHILDREN_EVERY_S
                time.sleep(min(POLL_S, limit - (now - t0)) if limit is not None else POLL_S)
        finally:
            prof.stop()
            if children is not None:
                children.stop()
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
    more = children.sampled() if children else []
    try:
        procs = write(prof, more, output, fmt, args.pid, name)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"stackwatch: error: writing the profile to {output} failed: {e}", file=sys.stderr)
        return 1
    if not args.quiet:
        print_summary(prof, procs, children, output, ended)
    return 0


def write(prof, more, output, fmt, pid, name):
    """Writes the target's profile (pid, its name), merged with its
    descendants' (more: [(Profiler, name, parent pid)]; a profile file,
    --format stackwatch, holds one process: theirs go beside it,
    STEM.<pid>.swprof). Returns the processes.Process of each process,
    the target's first."""
    procs = [processes.Process(pid, name if more else "", prof._trees(), prof.threads())]
    procs += [processes.Process(p.pid, n, p._trees(), p.threads()) for p, n, _ in more]
    if not more:
        prof.write(output, fmt)
    elif fmt == "stackwatch":
        prof.save(output, process={"pid": pid, "process": procs[0].name})
        stem = output_stem(output, fmt)
        for p, n, parent in more:
            p.save(f"{stem}.{p.pid}.swprof", process={"pid": p.pid, "parent_pid": parent, "process": n})
    else:
        formats.FORMATS[fmt].write(output, processes.merged(procs))
    return procs


def print_summary(prof, procs, children, output, ended):
    """The top functions (of every process), the target's summary line,
    the processes merged or refused, and the "wrote" line."""
    root = profiler.merge(*(profiler.CallTree(t) for p in procs for _, _, t in p.trees.threads)).tree()
    if root["count"]:
        where = f"{len(procs)} processes" if len(procs) > 1 else "all threads"
        samples_table(sys.stderr, f"stackwatch: top functions ({where})", root, "own", 10)
    print(f"stackwatch: {summary(prof)}{ended}", file=sys.stderr)
    if children is not None:
        more = procs[1:]
        samples = sum(t.total for p in more for _, _, t in p.trees.threads)
        names = ", ".join(processes.frame_name(p.pid, p.name) for p in more)
        print(f"stackwatch: {len(more)} more process{'' if len(more) == 1 else 'es'} sampled ({samples} samples)"
              + (f": {names}" if names else ""), file=sys.stderr)
        for pid, name, why in children.refused:
            print(f"stackwatch: process {pid} ({name}) is not in the profile: {why}", file=sys.stderr)
    print(f"stackwatch: wrote {output}", file=sys.stderr)
