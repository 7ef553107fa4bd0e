"""`stackwatch profile`: run a program under the statistical profiler and
write its call tree as collapsed stacks, speedscope JSON, an interactive
HTML flame graph, pprof, or a profile file (".swprof": the history of
trees per cycle, for `stackwatch stats` and `stackwatch export`).

    stackwatch profile [--rate HZ | --interval 1ms] [--mode wall|cpu] [--lines] [--native] [-o out]
                       [--cycle 2s] [--format collapsed|speedscope|html|pprof|stackwatch]
                       (script.py | -m module) [args ...]

The program runs as `stackwatch run` runs it (same sys.argv, sys.path,
__main__, exit status). The profile is written at exit, after the
program's non-daemon threads have finished. Every error a user can cause
is one line on stderr ("stackwatch: error: ..."). The formats, their
default output names and the format an output name implies come from the
registry (stackwatch.render.formats).
"""
import argparse
import functools
import os
import sys
import threading

from .. import profiler
from ..profiler import history
from ..render import formats
from ..tracer import session as tracing
from .program import Finisher, Program, UsageError, check_writable, resolve

NAME = "profile"
RUNS_PROGRAM = True
FORMATS = formats.names(formats.TREES, formats.PROFILES)

USAGE = ("stackwatch profile [--rate HZ | --interval DURATION] [--mode wall|cpu] [--lines] [--native] [-o OUT] "
         "[--format collapsed|speedscope|html|pprof|stackwatch] (script.py | -m module) [args ...]")


def add_parser(subparsers):
    """Adds the command to the CLI's subparsers; returns its parser."""
    p = subparsers.add_parser("profile", help="sample a program's stacks and write a flame graph profile",
                              usage=USAGE)
    when = p.add_mutually_exclusive_group()
    when.add_argument("--rate", help="samples per second (e.g. 1000); default 1000")
    when.add_argument("--interval", help="time between samples (e.g. 1ms, 200us); at least 20us")
    p.add_argument("--mode", choices=profiler.MODES, default="wall",
                   help="wall: every thread all the time, weighted by wall time (default); cpu: only "
                   "threads on a CPU, weighted by CPU time (idle threads and threads waiting for "
                   "the GIL are left out)")
    p.add_argument("-o", "--output", help="output file (default stackwatch-PID.collapsed.txt, or "
                   "stackwatch-PID.speedscope.json with --format speedscope, "
                   "stackwatch-PID.flamegraph.html with --format html, stackwatch-PID.pb.gz "
                   "with --format pprof, stackwatch-PID.swprof with --format stackwatch)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="collapsed (flamegraph.pl input), speedscope (JSON), html (interactive "
                   "flame graph), pprof (gzipped profile.proto, for go tool pprof) or stackwatch (a "
                   "profile file with a tree per cycle, for 'stackwatch stats' and 'stackwatch "
                   "export'); default: speedscope if the output ends in .json, html if it ends in "
                   ".html, pprof if it ends in .pb.gz or .pprof, stackwatch if it ends in .swprof, "
                   "else collapsed")
    p.add_argument("--cycle", default="2s", help="profile files keep a call tree per cycle of this "
                   "length (default 2s; from 10ms to 1h)")
    p.add_argument("--lines", action="store_true",
                   help="one node per line being run (function, file, line) instead of per function")
    p.add_argument("--native", action="store_true",
                   help="merge native (C) frames into the stacks, named 'symbol [native]' (Linux x86-64)")
    p.add_argument("-m", dest="module", help="run a library module as a script")
    p.add_argument("--max-depth", type=int, default=profiler.DEFAULT_MAX_DEPTH,
                   help=f"frames kept per stack (default {profiler.DEFAULT_MAX_DEPTH})")
    p.add_argument("-q", "--quiet", action="store_true", help="do not print the summary line")
    p.add_argument("argv", nargs=argparse.REMAINDER, help="the script and its arguments")
    return p


def _options(args):
    """(format, output, interval_ns) from the parsed arguments, or UsageError."""
    fmt = args.format or formats.guess(args.output, formats.TREES, formats.PROFILES, default="collapsed")
    output = args.output or formats.default_output(fmt)
    try:
        ns = profiler.interval_ns(args.interval, args.rate)
        if not 1 <= args.max_depth <= 16384:
            raise ValueError(f"--max-depth must be from 1 to 16384, not {args.max_depth}")
        history.cycle_ns(args.cycle)
    except ValueError as e:
        raise UsageError(str(e))
    output = os.path.abspath(output)
    check_writable(output, "profile")
    return fmt, output, ns


def _finish(prof, fmt, output, quiet):
    """At the end (once: see Finisher; also on Ctrl-C, os._exit or
    os.exec*): stops the profiler and writes the profile."""
    if prof.running:
        prof.stop()
    try:
        prof.write(output, fmt)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"stackwatch: error: writing the profile to {output} failed: {e}", file=sys.stderr)
        return
    st = prof.stats()
    if not st["stored"] and not quiet:
        print(f"stackwatch: warning: the profile is empty: no sample was taken (the program ran for less "
              f"than the interval of {prof.interval_ns / 1e6:g} ms, or --mode cpu found it never on a CPU)",
              file=sys.stderr)
    if not quiet:
        failed = f", {st['failed']} failed reads of a stack" if st["failed"] else ""
        off = f", {st['off_cpu']} samples of idle threads left out" if st["mode"] == "cpu" else ""
        n = len(prof.threads())
        print(f"stackwatch: wrote {output} ({st['mode']} mode, {st['stored']} samples of {n} "
              f"thread{'' if n == 1 else 's'}{off}{failed})", file=sys.stderr)


def run(args):
    """Runs the program under the profiler. Returns the exit status; raises
    UsageError for bad input."""
    script, module, script_args = resolve(args.argv, args.module)
    fmt, output, ns = _options(args)
    program = Program(script, module, script_args)
    if not program.prepare():
        return 1
    import runpy
    try:
        # A profile file holds the whole run (unbounded history); the other
        # formats use only the whole-run trees (the default bound).
        kw = {"maxlen": None} if fmt == "stackwatch" else {}
        prof = profiler.Profiler(interval=f"{ns}ns", mode=args.mode, max_depth=args.max_depth,
                                 cycle=args.cycle, lines=args.lines, native=args.native, **kw)
    except ValueError as e:
        raise UsageError(str(e))
    finisher = Finisher(functools.partial(_finish, prof, fmt, output, args.quiet))
    # The program's stacks start at its own code, not in this wrapper: the
    # frames from the root through Program.run (and runpy's, for -m) are
    # left out of every stack.
    follow = [getattr(runpy, n, None) for n in ("run_module", "_run_module_code", "_run_code")]
    # After the program: the CLI's own frames on the way out (this
    # function's and its caller's, the dispatcher cli.main), down to
    # runpy's frame of `python -m stackwatch` once stackwatch's __main__ has
    # returned (the samples of threads still running are kept).
    ignore = [Finisher.__call__.__code__, sys._getframe(1).f_code, run.__code__]
    main_runner = getattr(runpy, "_run_module_as_main", None)
    if main_runner is not None:
        ignore.append(main_runner.__code__)
    # The interpreter's exit, where the main thread joins the program's
    # threads (their own samples are kept): the main thread is out of the
    # program by then, and its stack would be the interpreter's.
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None and hasattr(shutdown, "__code__"):
        ignore.append(shutdown.__code__)
    prof._set_wrapper(Program.run.__code__, [f.__code__ for f in follow if f is not None],
                      ignore=ignore)
    try:
        prof.start()
    except RuntimeError as e:
        raise UsageError(str(e))
    # atexit runs after the interpreter has joined non-daemon threads, so
    # their samples are in the profile too.
    finisher.arm()
    real_exit = os._exit

    def exit_after_writing(status):
        try:
            finisher()
        finally:
            real_exit(status)

    os._exit = exit_after_writing
    # A program that replaces itself (every os.exec* ends in one of these):
    # the profile up to the exec is written first (a failed exec ends it
    # there too).
    os.execv, os.execve = tracing.exec_wrappers(lambda path: finisher())
    return program.run(finisher)
