"""`stackwatch profile`: run a program under the statistical profiler and
write its call tree as an interactive HTML flame graph (the default),
collapsed stacks, speedscope JSON, pprof, pstats, callgrind, or a profile file (".swprof":
the history of trees per cycle, for `stackwatch stats` and `stackwatch
export`); at the end, the top functions (own and total share) are printed
to stderr above the "wrote" line.

    stackwatch profile [--rate HZ | --interval 1ms] [--mode wall|cpu] [--lines] [--native] [-o out]
                       [--cycle 2s] [--format collapsed|speedscope|html|pprof|pstats|callgrind|stackwatch]
                       (script.py | -m module | -c code | - | command) [args ...]

The program runs as `stackwatch run` runs it (same sys.argv, sys.path,
__main__, exit status). The profile is written at exit, after the
program's non-daemon threads have finished. The Python processes the
program starts profile themselves (unless --no-follow) into profile
files beside the output, OUT.<pid>.swprof, which are merged into the
output at the end, each process's stacks under a frame naming it
(tracer/follow_profile.py, profiler/processes.py); with --format
stackwatch they are kept beside it instead. The summary's table leaves
out the threads that only waited, and says so. Every error a user can cause
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
from ..profiler import history, processes
from ..render import formats
from ..tracer import follow_profile
from ..tracer import session as tracing
from .program import Finisher, Program, UsageError, check_writable, resolve
from .stats import samples_table

NAME = "profile"
RUNS_PROGRAM = True
FORMATS = formats.names(formats.TREES, formats.PROFILES)
SUMMARY_ROWS = 10      # the top functions printed at the end

USAGE = ("stackwatch profile [--rate HZ | --interval DURATION] [--mode wall|cpu] [--lines] [--native] [-o OUT] "
         f"[--format {'|'.join(FORMATS)}] (script.py | -m module | -c code | - | command) [args ...]")


def add_parser(subparsers):
    """Adds the command to the CLI's subparsers; returns its parser."""
    p = subparsers.add_parser("profile", help=f"sample a program's stacks and write a profile ({', '.join(FORMATS)}; "
                              "default: html, a flame graph)",
                              usage=USAGE)
    when = p.add_mutually_exclusive_group()
    when.add_argument("--rate", help="samples per second (e.g. 1000); default 1000")
    when.add_argument("--interval", help="time between samples (e.g. 1ms, 200us); at least 20us")
    p.add_argument("--mode", choices=profiler.MODES, default="wall",
                   help="wall: every thread all the time, weighted by wall time (default); cpu: only "
                   "threads on a CPU, weighted by CPU time (idle threads and threads waiting for "
                   "the GIL are left out)")
    p.add_argument("-o", "--output", help="output file (default stackwatch-PID.flamegraph.html, or "
                   "stackwatch-PID and the format's ending with --format); its ending names the "
                   "format: " + ", ".join(f"{f.suffixes[0]} ({f.name})" for f in formats.FORMATS.values()
                                          if f.name in FORMATS))
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="html (interactive flame graph, the default), collapsed (flamegraph.pl "
                   "input), speedscope (JSON), pprof (gzipped profile.proto, for go tool pprof), "
                   "pstats (Python's pstats, snakeviz), callgrind (KCachegrind) or stackwatch (a "
                   "profile file with a tree per cycle, for 'stackwatch stats' and 'stackwatch "
                   "export'); default: the one -o's ending names (an ending that names "
                   "none is an error)")
    p.add_argument("--cycle", default="2s", help="profile files keep a call tree per cycle of this "
                   "length (default 2s; from 10ms to 1h)")
    p.add_argument("--lines", action="store_true",
                   help="one node per line being run (function, file, line) instead of per function")
    p.add_argument("--native", action="store_true",
                   help="merge native (C) frames into the stacks, named 'symbol [native]' (Linux x86-64)")
    p.add_argument("-m", dest="module", help="run a library module as a script")
    p.add_argument("-c", dest="code", metavar="CODE", help="run the program passed in as a string "
                   "(sys.argv[0] is '-c', as with python -c)")
    p.add_argument("--max-depth", type=int, default=profiler.DEFAULT_MAX_DEPTH,
                   help=f"frames kept per stack (default {profiler.DEFAULT_MAX_DEPTH})")
    p.add_argument("--no-follow", action="store_true",
                   help="profile this process only (default: every Python process it starts profiles "
                   "itself too, merged into the output)")
    p.add_argument("-q", "--quiet", action="store_true", help="do not print the summary line")
    p.add_argument("argv", nargs=argparse.REMAINDER, help="the script and its arguments")
    return p


def _options(args):
    """(format, output, interval_ns) from the parsed arguments, or UsageError."""
    # Checked first: a directory given is that, not a format to tell.
    output = os.path.abspath(args.output or formats.default_output(args.format or "html"))
    check_writable(output, "profile")
    try:
        # What a person looks at by default: the HTML flame graph.
        fmt = args.format or (formats.of_output(args.output, formats.TREES, formats.PROFILES)
                              if args.output else "html")
        ns = profiler.interval_ns(args.interval, args.rate)
        if not 1 <= args.max_depth <= 16384:
            raise ValueError(f"--max-depth must be from 1 to 16384, not {args.max_depth}")
        history.cycle_ns(args.cycle)
    except ValueError as e:
        raise UsageError(str(e))
    return fmt, output, ns


def output_stem(output, fmt):
    """The output's name without its format's ending: the followed
    processes' profile files are STEM.<pid>.swprof."""
    low = output.lower()
    for suffix in sorted(formats.FORMATS[fmt].suffixes, key=len, reverse=True):
        if low.endswith(suffix):
            return output[:-len(suffix)]
    return os.path.splitext(output)[0]


def _finish(prof, fmt, output, quiet, follows):
    """At the end (once: see Finisher; also on Ctrl-C, os._exit or
    os.exec*): stops the profiler and writes the profile, merged with the
    followed processes' (follows: (stem, this process's name) or None)."""
    if follows:
        follow_profile.end()
    if prof.running:
        prof.stop()
    read = unread = ()
    if follows:
        read, unread = follow_profile.collect(follows[0])
    procs = [processes.Process(os.getpid(), follows[1] if follows else "", prof._trees(), prof.threads())]
    try:
        if fmt == "stackwatch":     # the files of the others stay beside it
            prof.save(output, process=follows and {"pid": os.getpid(), "process": follows[1]})
        elif read:
            procs += [p for _, p in read]
            formats.FORMATS[fmt].write(output, processes.merged(procs))
            for path, _ in read:
                os.unlink(path)
        else:
            prof.write(output, fmt)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"stackwatch: error: writing the profile to {output} failed: {e}", file=sys.stderr)
        return
    if not quiet:
        _summary(prof, procs, output, [p for p, _ in read] if fmt == "stackwatch" else None, unread)


def _summary(prof, procs, output, kept, unread):
    """The top functions of the threads that did more than wait (of every
    process merged), what was left out, and the "wrote" line."""
    st = prof.stats()
    if not st["stored"]:
        print(f"stackwatch: warning: the profile is empty: no sample was taken (the program ran for less "
              f"than the interval of {prof.interval_ns / 1e6:g} ms, or --mode cpu found it never on a CPU)",
              file=sys.stderr)
    threads = prof.threads()
    shown, waited = [], []
    for i, p in enumerate(procs):
        # A followed process's main thread: the one named so (its file
        # does not say which it is).
        main = None if i == 0 else next((t["thread_id"] for t in p.threads or () if t["name"] == "MainThread"), 0)
        out = profiler.waiting_threads(p.threads or [], main)
        skip = {t["thread_id"] for t in out}
        shown += [t for _, tid, t in p.trees.threads if tid not in skip]
        named = processes.frame_name(p.pid, p.name) + ": " if len(procs) > 1 else ""
        waited += [dict(t, name=named + (t["name"] or f"Thread {t['thread_id']}")) for t in out]
    root = profiler.merge(*(profiler.CallTree(t) for t in shown)).tree()
    where = "all threads" if len(procs) == 1 else f"{len(procs)} processes"
    if root["count"]:
        samples_table(sys.stderr, f"stackwatch: top functions ({st['mode']} time, {where})", root, "own",
                      SUMMARY_ROWS)
    note = profiler.waiting_note(waited)
    if note and root["count"]:
        print(f"stackwatch: {note}", file=sys.stderr)
    for pid, path, why in unread:
        print(f"stackwatch: process {pid} is not in the profile: {why}", file=sys.stderr)
    failed = f", {st['failed']} failed reads of a stack" if st["failed"] else ""
    off = f", {st['off_cpu']} samples of idle threads left out" if st["mode"] == "cpu" else ""
    n = len(threads)
    more = ""
    if kept:
        more = f"; {len(kept)} more process{'' if len(kept) == 1 else 'es'}: " + ", ".join(
            os.path.basename(p) for p in kept)
    elif len(procs) > 1:
        samples = sum(t.total for p in procs[1:] for _, _, t in p.trees.threads)
        more = f"; {len(procs) - 1} more process{'' if len(procs) == 2 else 'es'} merged ({samples} samples)"
    print(f"stackwatch: wrote {output} ({st['mode']} mode, {st['stored']} samples of {n} "
          f"thread{'' if n == 1 else 's'}{off}{failed}){more}", file=sys.stderr)


def run(args):
    """Runs the program under the profiler. Returns the exit status; raises
    UsageError for bad input."""
    program = resolve(args.argv, args.module, args.code)
    fmt, output, ns = _options(args)
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
    follows = None if args.no_follow else (output_stem(output, fmt), follow_profile.process_name(sys.argv))
    finisher = Finisher(functools.partial(_finish, prof, fmt, output, args.quiet, follows))
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
    if follows:
        follow_profile.begin(follows[0], prof)
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
