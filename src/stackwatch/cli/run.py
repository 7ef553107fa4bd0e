"""`stackwatch run`: run a program and trace every Python call into a
trace file (.swt), or into Perfetto or Chrome JSON directly.

    stackwatch run [options] (script.py | -m module | -c code | - | command) [args ...]

The program runs as `python script.py` (or `python -m`, `python -c`,
`python -`, or a console script found on PATH) would (program.py); its own
arguments are every word after the script, the command or -m MODULE / -c
CODE (cli/__init__.py splits them off: RUNS_PROGRAM). Tracing stops at exit, after the program's
non-daemon threads have finished, and one line says where the trace is.
"""
import argparse
import functools
import os
import sys

from .. import _native
from ..common.units import parse_duration_ns, parse_size
from ..events import handlers, kinds, probes
from ..render import formats
from ..tracer import follow
from ..tracer import session as tracing
from . import traces
from .program import Finisher, UsageError, check_directory, check_writable, error_text, output_what, resolve

NAME = "run"
RUNS_PROGRAM = True


def add_parser(subparsers):
    """Adds the command to the CLI's subparsers; returns its parser."""
    r = subparsers.add_parser("run", help="run a program and trace every Python call into a trace (.swt), "
                              "or with --format into " + ", ".join(formats.names(formats.TRACES, written=True)),
                              usage="stackwatch run [options] (script.py | -m module | -c code | - | command) [args ...]")
    r.add_argument("-o", "--output", metavar="OUT", help="the file to write (default stackwatch-PID.swt; "
                   "with --format, stackwatch-PID and the format's ending, e.g. .pftrace)")
    r.add_argument("--format", choices=formats.names(formats.TRACES), default="swt",
                   help="write this format directly (default: the stackwatch trace)")
    r.add_argument("-m", dest="module", help="run a library module as a script")
    r.add_argument("-c", dest="code", metavar="CODE", help="run the program passed in as a string "
                   "(sys.argv[0] is '-c', as with python -c)")
    r.add_argument("--buffer-size", default="256K", help="per-thread buffer (default 256K)")
    r.add_argument("--ring", default=None, help="flight recorder: keep only each thread's most recent events, at most SIZE bytes of the "
                   "trace per thread (e.g. 1M; at least 16K)")
    r.add_argument("--max-depth", type=int, default=0, help="record frames only up to this depth")
    r.add_argument("--include", action="append", help="record only code in files/modules matching "
                   "this glob (repeatable)")
    r.add_argument("--exclude", action="append", help="do not record code in files/modules matching "
                   "this glob (repeatable)")
    r.add_argument("--min-duration", default=None, help="with --format perfetto/chrome: leave out "
                   "slices shorter than this (e.g. 10us)")
    r.add_argument("--no-follow", "--no-follow-fork", dest="no_follow", action="store_true",
                   help="trace this process only (default: every Python process it starts, forked or "
                   "not, traces into a file of its own, OUT.<pid>.swt)")
    r.add_argument("--c-calls", action="store_true", help="also record calls of builtin and "
                   "extension functions")
    r.add_argument("--cython", action="store_true", help="also record the functions of Cython modules "
                   "compiled with profile=True, as frames with their .pyx file and line (costs more on "
                   "3.9-3.12: see docs/performance.md)")
    r.add_argument("--cpu", action="store_true", help="also record the CPU each Python event ran on "
                   "(a 'cpu' record when a thread moves to another CPU; about 12 ns more per event)")
    r.add_argument("--native-include", action="append", metavar="GLOB", help="record only the native "
                   "functions (of extensions built with 'stackwatch config --cflags --ldflags') whose "
                   "symbol (C++ ones demangled, as shown: 'ns::*'), object file name or path matches GLOB; "
                   "repeatable")
    r.add_argument("--native-exclude", action="append", metavar="GLOB", help="leave out those native "
                   "functions ('*': all); repeatable")
    r.add_argument("--flush-interval", default=None, help="background flush of slowly recording "
                   "threads, e.g. 250ms (default 250ms; off on 3.13+, see docs; 0 = off)")
    r.add_argument("--no-tsc", action="store_true", help="timestamps from CLOCK_MONOTONIC, not the TSC")
    r.add_argument("--events", action="append", help="also record these events (comma-separated names "
                   "or groups: line, instruction, exceptions, gc, objects, threads, tasks, ...; see "
                   "'stackwatch probes --events')")
    r.add_argument("--lines", action="append", metavar="GLOB", help="record line events in files "
                   "matching GLOB (implies --events line); repeatable")
    r.add_argument("--log", nargs="?", const="-", default=None, metavar="FILE",
                   help="print every recorded kind of event as a readable line to stderr (or FILE)")
    r.add_argument("--probes", action="store_true", help="serve the USDT probes: attaching bpftrace, "
                   "SystemTap or perf turns on the matching hooks")
    r.add_argument("--lttng", action="store_true", help="also emit every Python call and return, native "
                   "function, (with --events tasks) task event and (with --kernel) kernel event the trace records "
                   "to the LTTng-UST tracepoints stackwatch:function_entry / function_exit, native_entry / "
                   "native_exit, task_* and syscall_entry / syscall_exit, off_cpu, on_cpu, wakeup, page_fault "
                   "(these with their thread, tid, and their own time, ts: LTTng dates them when stackwatch's "
                   "reader emits them, milliseconds later), recorded by an LTTng session that enabled them "
                   "(lttng enable-event -u 'stackwatch:*')")
    r.add_argument("--sample", nargs="?", const="1ms", default=None, metavar="RATE",
                   help="also sample every thread's stack into the trace (default every 1ms; RATE "
                   "is an interval such as 200us or a rate such as 1000hz): time in long C calls "
                   "shows up beside the exact call slices")
    r.add_argument("--native", action="store_true", help="with --sample: the samples' stacks also hold "
                   "the native (C) frames, named 'symbol [native]' (Linux x86-64)")
    r.add_argument("--sample-lines", action="store_true", help="with --sample: each sample records the "
                   "line every Python frame was running")
    r.add_argument("--kernel", nargs="?", const="syscalls", default=None, metavar="EVENTS",
                   help="also record the kernel's events of the program's threads on the trace's clock: "
                        "a comma-separated list of syscalls (the default: each system call a slice inside the "
                        "Python call that made it), sched (off-CPU intervals with their reason and CPU ids, "
                        "wakeups), faults (page faults). Linux; needs root or CAP_PERFMON, else the rest is "
                        "recorded")
    r.add_argument("--no-trace", action="store_true", help="record no calls. With --events and without "
                   "--log, --probes and --lttng, or with -o: the trace file holds only those events (e.g. "
                   "--events tasks, for 'stackwatch tasks' and the sequence diagram); with --log, --probes "
                   "or --lttng and no -o: no file is written")
    r.add_argument("-q", "--quiet", action="store_true", help="do not print the summary line")
    r.add_argument("argv", nargs=argparse.REMAINDER, help="the script and its arguments")
    return r


def run(args):
    """Runs the program under the tracer. Returns its exit status; raises
    UsageError for bad input."""
    # "--sample=X" names a rate even when X is no number; "--sample X" may
    # be followed by the program instead.
    given_with_equals = any(a.startswith("--sample=") for a in args.words)
    if (args.sample is not None and not given_with_equals
            and not args.sample[:1].isdigit() and args.sample[:1] != "."):
        # "--sample script.py": the option took the program as its RATE.
        args.argv = [args.sample] + list(args.argv)
        args.sample = "1ms"
    # "--kernel script.py": the option took the program as its EVENTS.
    if (args.kernel is not None and not any(a.startswith("--kernel=") for a in args.words)
            and args.kernel.split(",")[0] not in tracing.KERNEL_EVENTS):
        args.argv = [args.kernel] + list(args.argv)
        args.kernel = "syscalls"
    program = resolve(args.argv, args.module, args.code)
    try:
        chunk = parse_size(args.buffer_size)
        ring = parse_size(args.ring) if args.ring else 0
        min_ns = parse_duration_ns(args.min_duration) if args.min_duration else 0
        flush_s = (None if args.flush_interval is None else
                   parse_duration_ns(args.flush_interval) / 1e9 if args.flush_interval != "0" else 0.0)
    except ValueError as e:
        raise UsageError(str(e))
    if args.max_depth < 0:
        raise UsageError("--max-depth must not be negative")
    try:
        events = kinds.names_of_options(args.events)
    except ValueError as e:
        raise UsageError(f"--events: {e}")
    if args.lines and "line" not in events:
        events.append("line")
    if args.sample is not None:
        try:
            tracing.sample_interval_ns(args.sample)
        except ValueError as e:
            raise UsageError(f"--sample: {e}")
        if args.no_trace:
            raise UsageError("--sample writes its samples into the trace: it cannot go with --no-trace")
    elif args.native or args.sample_lines:
        raise UsageError(f"{'--native' if args.native else '--sample-lines'} describes the samples: "
                         "it needs --sample")
    if args.kernel is not None:
        try:
            tracing.kernel_option(args.kernel)
        except ValueError as e:
            raise UsageError(f"--kernel: {e}")
        if args.no_trace:
            raise UsageError("--kernel writes its events into the trace: it cannot go with --no-trace")
    # --no-trace: the events asked into a file without calls (-o, or no other consumer), else no file.
    events_only = args.no_trace and (args.output is not None or not (args.probes or args.lttng or args.log is not None))
    if events_only and not events:
        raise UsageError("--no-trace records no calls: it needs --events (written to the file), or --probes, "
                         "--lttng or --log (otherwise nothing would be recorded)")
    if events_only:
        for given, name in ((args.c_calls, "--c-calls"), (args.cython, "--cython"), (args.cpu, "--cpu"),
                            (args.max_depth, "--max-depth")):
            if given:
                raise UsageError(f"{name} describes the call records: it cannot go with --no-trace")
        if formats.FORMATS[args.format].takes == formats.TREES:
            raise UsageError(f"--format {args.format} is drawn from the call records: with --no-trace, "
                             "choose swt, sequence or a timeline format")
    if formats.FORMATS[args.format].takes == formats.TASKS and not (events and kinds.mask_of(events) &
                                                                    kinds.mask_of(["tasks"])):
        raise UsageError(f"--format {args.format} draws the task events: record them with --events tasks")
    if args.min_duration and args.format not in formats.names_taking(formats.TRACES):
        raise UsageError("--min-duration applies to --format perfetto/chrome (or to 'stackwatch export')")
    # Absolute, so that a program that changes directory does not move it.
    output = os.path.abspath(args.output or formats.default_output(args.format))
    if not args.no_trace or events_only:
        check = check_directory if formats.FORMATS[args.format].directory else check_writable
        check(output, output_what(args.format))
    if args.format == "swt":
        trace_path = output
    else:
        trace_path = traces.run_trace_path()

    if not program.prepare():
        if trace_path != output:
            traces.discard_run_trace(trace_path)
        return 1

    log = None
    if args.log is not None:
        log = handlers.verbose(None if args.log == "-" else args.log)
        names = ["calls"] + (["c_calls"] if args.c_calls else []) + list(events)
        log = (log, log.handle(names))
    finisher = Finisher(functools.partial(_finish, args, trace_path, output, min_ns, log))
    if args.lttng:
        try:
            _native.lttng_load()
            _native.lttng_kernel(True)   # (the kernel reader's events, from its start to its stop)
        except RuntimeError as e:
            raise UsageError(str(e))
    if args.probes:
        try:
            probes.watch()
        except RuntimeError as e:
            raise UsageError(str(e))
    if not args.no_trace or events_only:
        try:
            tracing.start(trace_path, buffer_size=chunk, ring=ring, max_depth=args.max_depth,
                      include=args.include, exclude=args.exclude, follow_fork=not args.no_follow,
                      follow=not args.no_follow,
                      allow_tsc=not args.no_tsc, c_calls=args.c_calls, cython=args.cython,
                      native_include=args.native_include, native_exclude=args.native_exclude, flush_interval=flush_s,
                      events=events or None, lines=args.lines, sample=args.sample,
                      sample_native=args.native, sample_lines=args.sample_lines, kernel=args.kernel, cpu=args.cpu,
                      calls=not events_only, _host="stackwatch run")
        except (ValueError, RuntimeError) as e:
            if trace_path != output:
                traces.discard_run_trace(trace_path)
            raise UsageError(str(e))
        if not args.quiet:
            tracing._exec_notice = functools.partial(_say_exec, os.getpid(), trace_path, args.format)
    if args.lttng:   # (after start: the program's events only, as the trace's)
        _native.lttng_enable()
    # atexit runs after the interpreter has joined non-daemon threads, so
    # their events are in the trace too.
    finisher.arm()
    return program.run(finisher)


def _say_exec(pid, trace_path, fmt, program):
    """The program replaces itself (os.exec*): the exit handler will not
    run, so say here where the trace is (as that handler, only in the
    process stackwatch started, not in its forked children)."""
    if os.getpid() != pid:
        return
    later = "" if fmt == "swt" else f" (not converted: stackwatch export {trace_path} --format {fmt})"
    print(f"stackwatch: the program execs {os.fsdecode(program)}; its trace so far is in "
          f"{trace_path}{later}", file=sys.stderr)


def _finish(args, trace_path, output, min_ns, log):
    """At the end (once: see Finisher): closes the --log file (flushing its
    tail), stops tracing, converts the trace if asked, prints the summary."""
    if args.lttng:
        _native.lttng_disable()
    if log is not None:
        log[1].remove()
        log[0].close()
    if args.probes:
        probes.unwatch()
    if not _native.is_tracing():
        return
    summary = tracing.end_session()
    if args.lttng:
        _native.lttng_kernel(False)
    if summary.error:
        print(f"stackwatch: warning: {summary.error}", file=sys.stderr)
    children = follow.child_traces(trace_path)
    events, n = summary.events, summary.threads
    if args.format != "swt":
        try:
            children, events, n = traces.convert(args.format, output, trace_path, min_ns)
        except (OSError, ValueError, MemoryError) as e:   # MemoryError: call trees too large (one line)
            print(f"stackwatch: error: the {args.format} export of the run failed: {error_text(e)}",
                  file=sys.stderr)
            return
    if not args.quiet:
        dropped = f", {summary.dropped} dropped" if summary.dropped else ""
        samples = f", {summary.samples} samples" if args.sample is not None else ""
        if summary.syscalls is not None:
            if "syscalls" in (args.kernel or "syscalls").split(","):   # (sched, faults: counted in END)
                samples += f", {summary.syscalls} system calls"
            if summary.kernel_lost:
                samples += f" ({summary.kernel_lost} kernel records lost)"
        print(f"stackwatch: wrote {output} ({events} events, {n} "
              f"thread{'' if n == 1 else 's'}{samples}{dropped})"
              f"{traces.children_text(children, merged=args.format != 'swt')}",
              file=sys.stderr)
