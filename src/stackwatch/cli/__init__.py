"""The stackwatch command line: run, stats, export.

Every error a user can cause (missing script, bad option, unwritable or
unreadable file) is one line on stderr starting with "stackwatch: error:"
and a non-zero exit status; never a traceback from stackwatch itself.
"""
import argparse
import atexit
import functools
import os
import sys
import tempfile

from .. import _native
from ..common.units import parse_duration_ns, parse_size
from ..events import handlers, kinds, probes
from ..tracer import session as tracing, stats_events, stats_samples
from . import profile as cli_profile, profile_file as cli_profile_file
from .program import Program, UsageError, check_writable, resolve

EXPORT_FORMATS = ("perfetto", "chrome")


def _error(msg, status=2):
    print(f"stackwatch: error: {msg}", file=sys.stderr)
    return status


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser():
    p = _Parser(prog="stackwatch", description="Trace and profile Python programs.")
    p.add_argument("--version", action="version", version="stackwatch 0.1.0")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    r = sub.add_parser("run", help="run a program and trace every Python call",
                       usage="stackwatch run [options] (script.py | -m module) [args ...]")
    r.add_argument("-o", "--output", help="trace file (default stackwatch-PID.swt, or .pftrace/.json "
                   "with --format)")
    r.add_argument("--format", choices=("swt",) + EXPORT_FORMATS, default="swt",
                   help="write this format directly (default: the stackwatch trace)")
    r.add_argument("-m", dest="module", help="run a library module as a script")
    r.add_argument("--buffer-size", default="256K", help="per-thread buffer (default 256K)")
    r.add_argument("--ring", default=None, help="keep only the most recent SIZE of events per thread")
    r.add_argument("--max-depth", type=int, default=0, help="record frames only up to this depth")
    r.add_argument("--include", action="append", help="record only code in files/modules matching "
                   "this glob (repeatable)")
    r.add_argument("--exclude", action="append", help="do not record code in files/modules matching "
                   "this glob (repeatable)")
    r.add_argument("--min-duration", default=None, help="with --format perfetto/chrome: leave out "
                   "slices shorter than this (e.g. 10us)")
    r.add_argument("--no-follow-fork", action="store_true", help="forked children stop tracing "
                   "(default: each traces into its own file)")
    r.add_argument("--c-calls", action="store_true", help="also record calls of builtin and "
                   "extension functions")
    r.add_argument("--flush-interval", default=None, help="background flush of slowly recording "
                   "threads, e.g. 250ms (default 250ms; off on 3.13+, see docs; 0 = off)")
    r.add_argument("--no-tsc", action="store_true", help="timestamps from CLOCK_MONOTONIC, not the TSC")
    r.add_argument("--events", action="append", help="also record these events (comma-separated names "
                   "or groups: line, instruction, exceptions, gc, objects, threads, ...; see "
                   "'stackwatch probes --events')")
    r.add_argument("--lines", action="append", metavar="GLOB", help="record line events in files "
                   "matching GLOB (implies --events line); repeatable")
    r.add_argument("--log", nargs="?", const="-", default=None, metavar="FILE",
                   help="print every recorded kind of event as a readable line to stderr (or FILE)")
    r.add_argument("--probes", action="store_true", help="serve the USDT probes: attaching bpftrace, "
                   "SystemTap or perf turns on the matching hooks")
    r.add_argument("--sample", nargs="?", const="1ms", default=None, metavar="RATE",
                   help="also sample every thread's stack into the trace (default every 1ms; RATE "
                   "is an interval such as 200us or a rate such as 1000hz): time in long C calls "
                   "shows up beside the exact call slices")
    r.add_argument("--native", action="store_true", help="with --sample: the samples' stacks also hold "
                   "the native (C) frames, named 'symbol [native]' (Linux x86-64)")
    r.add_argument("--sample-lines", action="store_true", help="with --sample: each sample records the "
                   "line every Python frame was running")
    r.add_argument("--no-trace", action="store_true", help="write no trace file (with --probes or --log)")
    r.add_argument("-q", "--quiet", action="store_true", help="do not print the summary line")
    r.add_argument("argv", nargs=argparse.REMAINDER, help="the script and its arguments")

    p.program_parsers = {"run": r, "profile": cli_profile.add_parser(sub)}

    pr = sub.add_parser("probes", help="list the USDT probes and the file to attach to")
    pr.add_argument("--events", action="store_true", help="list the event names handlers and --events accept")

    s = sub.add_parser("stats", help="top functions of a trace (calls, total and own time) or of a "
                       "profile file (own and total samples)")
    s.add_argument("file")
    s.add_argument("--sort", choices=("own", "total", "calls"), default="own")
    s.add_argument("-n", "--limit", type=int, default=20, help="rows per table (default 20)")
    s.add_argument("--threads", action="store_true", help="also one table per thread")

    e = sub.add_parser("export", help="convert a trace to Perfetto or Chrome JSON, or a profile file to "
                       "collapsed stacks, speedscope, an HTML flame graph or pprof")
    e.add_argument("file")
    e.add_argument("more", nargs="*", metavar="PROFILE", help="profiles: more profile files, merged with "
                   "the first (threads of each file kept apart)")
    e.add_argument("--format", required=True, help="perfetto or chrome (traces); collapsed, speedscope, "
                   "html or pprof (profiles)")
    e.add_argument("--start", default=None, help="profiles: only the cycles from this time after the "
                   "profile's start on (e.g. 500ms, 2s)")
    e.add_argument("--stop", default=None, help="profiles: only the cycles up to this time after the "
                   "profile's start (e.g. 3s)")
    e.add_argument("-o", "--output", required=True)
    e.add_argument("--min-duration", default=None, help="leave out slices shorter than this (e.g. 10us)")
    return p


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    try:
        split = None
        if argv and argv[0] in parser.program_parsers:
            split = split_at_module(parser.program_parsers[argv[0]], argv[1:])
        if split is None:
            args = parser.parse_args(argv)
        else:
            args = parser.parse_args(argv[:1] + split[0])
            args.argv = split[1]
    except UsageError as e:
        return _exit(_error(str(e)))
    if args.command is None:
        parser.print_help(sys.stderr)
        return _exit(2)
    if args.command == "run":
        # "--sample=X" names a rate even when X is no number; "--sample X" may
        # be followed by the program instead.
        opts = argv[:len(argv) - len(args.argv or [])]
        args.sample_given_with_equals = any(a.startswith("--sample=") for a in opts)
    try:
        if args.command == "run":
            return _exit(cmd_run(args))
        if args.command == "profile":
            return _exit(cli_profile.cmd_profile(args))
        if args.command == "stats":
            return _exit(cmd_stats(args))
        if args.command == "probes":
            return _exit(cmd_probes(args))
        if args.command == "export":
            return _exit(cmd_export(args))
    except UsageError as e:
        return _exit(_error(str(e)))
    except _native.TraceError as e:
        return _exit(_error(str(e)))
    except BrokenPipeError:
        return _exit(0)
    except OSError as e:
        return _exit(_error(_os_error_text(e)))
    return _exit(2)


def split_at_module(sub, args):
    """Like python, everything after '-m MODULE' belongs to the module, even
    words that look like stackwatch's options ('run -m pytest -q -x').
    Returns (stackwatch's arguments up to the module name, the module's
    arguments), or None when a script, '--' or nothing comes before any -m."""
    options = sub._option_string_actions
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--" or word == "-" or not word.startswith("-"):
            return None
        if word == "-m":
            return (args[:i + 2], args[i + 2:]) if i + 1 < len(args) else None
        if word.startswith("-m") and not word.startswith("--"):
            return args[:i + 1], args[i + 1:]
        name = word.split("=", 1)[0]
        action = options.get(name)
        if action is None and name.startswith("--"):
            matches = {options[o] for o in options if o.startswith(name)}
            action = matches.pop() if len(matches) == 1 else None
        value_attached = "=" in word or (not word.startswith("--") and len(word) > 2)
        if action is not None and not value_attached and i + 1 < len(args):
            following = args[i + 1]
            if action.nargs is None:
                i += 1
            elif action.nargs == "?" and not following.startswith("-"):
                # "--sample script.py": cmd_run takes a word that is no rate
                # for the program.
                if action.dest != "sample" or following[:1].isdigit() or following[:1] == ".":
                    i += 1
        i += 1
    return None


def _exit(status):
    sys.exit(status)


def _os_error_text(e):
    if e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return str(e)


# ---- run ----

def _default_output(fmt):
    pid = os.getpid()
    return {"swt": f"stackwatch-{pid}.swt", "perfetto": f"stackwatch-{pid}.pftrace",
            "chrome": f"stackwatch-{pid}.json"}[fmt]


def cmd_run(args):
    if (args.sample is not None and not getattr(args, "sample_given_with_equals", False)
            and not args.sample[:1].isdigit() and args.sample[:1] != "."):
        # "--sample script.py": the option took the program as its RATE.
        args.argv = [args.sample] + list(args.argv)
        args.sample = "1ms"
    script, module, script_args = resolve(args.argv, args.module)
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
    events = [e.strip() for arg in (args.events or []) for e in arg.split(",") if e.strip()]
    if args.lines and "line" not in events:
        events.append("line")
    try:
        if events:
            kinds.mask_of(events)
    except ValueError as e:
        raise UsageError(f"--events: {e}")
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
    if args.no_trace and not (args.probes or args.log is not None):
        raise UsageError("--no-trace needs --probes or --log (otherwise nothing would be recorded)")
    if args.min_duration and args.format == "swt":
        raise UsageError("--min-duration applies to --format perfetto/chrome (or to 'stackwatch export')")
    # Absolute, so that a program that changes directory does not move it.
    output = os.path.abspath(args.output or _default_output(args.format))
    if not args.no_trace:
        check_writable(output, "trace")
    if args.format == "swt":
        trace_path = output
    else:
        fd, trace_path = tempfile.mkstemp(prefix="stackwatch-", suffix=".swt")
        os.close(fd)

    program = Program(script, module, script_args)
    if not program.prepare():
        return 1

    finisher = _Finisher(args, trace_path, output, min_ns)
    log = None
    if args.log is not None:
        log = handlers.verbose(None if args.log == "-" else args.log)
        names = ["calls"] + (["c_calls"] if args.c_calls else []) + list(events)
        handlers.add_handler(log, events=names)
    if args.probes:
        try:
            probes.watch()
        except RuntimeError as e:
            raise UsageError(str(e))
    if not args.no_trace:
        try:
            tracing.start(trace_path, buffer_size=chunk, ring=ring, max_depth=args.max_depth,
                      include=args.include, exclude=args.exclude, follow_fork=not args.no_follow_fork,
                      allow_tsc=not args.no_tsc, c_calls=args.c_calls, flush_interval=flush_s,
                      events=events or None, lines=args.lines, sample=args.sample,
                      sample_native=args.native, sample_lines=args.sample_lines)
        except (ValueError, RuntimeError) as e:
            raise UsageError(str(e))
        if not args.quiet:
            tracing._exec_notice = functools.partial(_say_exec, os.getpid(), trace_path, args.format)
    # atexit runs after the interpreter has joined non-daemon threads, so
    # their events are in the trace too.
    atexit.register(finisher)
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


class _Finisher:
    """Stops tracing once (at exit), converts if asked, prints the summary."""

    def __init__(self, args, trace_path, output, min_ns):
        self.args, self.trace_path, self.output, self.min_ns = args, trace_path, output, min_ns
        self.done = False
        self.pid = os.getpid()

    def __call__(self):
        if self.done or os.getpid() != self.pid:
            return
        self.done = True
        if self.args.probes:
            probes.unwatch()
        if not _native.is_tracing():
            return
        summary = tracing.stop()
        if summary.error:
            print(f"stackwatch: warning: {summary.error}", file=sys.stderr)
        if self.args.format != "swt":
            try:
                from ..tracer.tracefile import Trace
                Trace(self.trace_path).export(self.args.format, self.output, self.min_ns)
            except (OSError, ValueError) as e:
                print(f"stackwatch: error: export to {self.output} failed: {e}", file=sys.stderr)
                return
            finally:
                try:
                    os.unlink(self.trace_path)
                except OSError:
                    pass
        if not self.args.quiet:
            dropped = f", {summary.dropped} dropped" if summary.dropped else ""
            samples = f", {summary.samples} samples" if self.args.sample is not None else ""
            n = summary.threads
            print(f"stackwatch: wrote {self.output} ({summary.events} events, {n} "
                  f"thread{'' if n == 1 else 's'}{samples}{dropped})", file=sys.stderr)


# ---- probes ----

def cmd_probes(args):
    if args.events:
        for name in kinds.KINDS:
            print(name)
        print("groups: " + ", ".join(kinds.GROUPS))
        return 0
    if not probes.available:
        print("stackwatch: USDT probes were not compiled in (<sys/sdt.h> not found at build time; "
              "on Debian: apt install systemtap-sdt-dev, then reinstall stackwatch)", file=sys.stderr)
        return 1
    print(f"library: {probes.library}")
    print("probes (provider stackwatch; attach as usdt:LIBRARY:stackwatch:NAME):")
    for name in probes.names:
        print(f"  {name}({probes.ARGUMENTS.get(name, '')})")
    print("They fire in programs run with 'stackwatch run --probes' (or that call "
          "stackwatch.probes.watch()).")
    return 0


# ---- stats ----

def _fmt_ns(ns):
    if ns >= 1e9:
        return f"{ns / 1e9:.3f}s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f}ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f}us"
    return f"{ns}ns"


def cmd_stats(args):
    from ..tracer.tracefile import Trace
    if cli_profile_file.kind_of(args.file) == "profile":
        return cli_profile_file.cmd_stats(args)
    if args.limit <= 0:
        raise UsageError("--limit must be positive")
    t = Trace(args.file)
    out = sys.stdout
    if t.damage:
        print(f"warning: {args.file}: {t.damage}; showing the intact part", file=sys.stderr)
    rows = t.stats()
    key = {"own": lambda r: r[4], "total": lambda r: r[3], "calls": lambda r: r[2]}[args.sort]
    overall = {}
    for r in rows:
        o = overall.setdefault(r.code, [0, 0, 0])
        o[0] += r.calls
        o[1] += r.total_ns
        o[2] += r.own_ns
    n = len(t.threads)
    print(f"{args.file}: {t.event_count()} events, {n} thread{'' if n == 1 else 's'}, "
          f"{t.dropped()} dropped{'' if t.complete else ', incomplete (tracing did not stop normally)'}",
          file=out)
    _table(out, "all threads", t, [(c, *v) for c, v in overall.items()], key, args.limit)
    if args.threads:
        for i, th in enumerate(t.threads):
            mine = [(r.code, r.calls, r.total_ns, r.own_ns) for r in rows if r.thread == i]
            title = f"thread {th['name'] or '?'} (tid {th['native_tid']}, {th['events']} events, {th['dropped']} dropped)"
            _table(out, title, t, mine, key, args.limit)
    stats_events.print_event_tables(out, t, args.limit)
    stats_samples.print_sample_tables(out, t, args.limit)
    return 0


def _table(out, title, t, rows, key, limit):
    rows = sorted(rows, key=lambda r: key((None, r[0], r[1], r[2], r[3])), reverse=True)[:limit]
    print(f"\n{title}", file=out)
    print(f"{'calls':>10} {'total':>11} {'own':>11}  function", file=out)
    for code, calls, total, own in rows:
        c = t.codes.get(code)
        where = f"{c.qualname}  ({c.filename}:{c.firstlineno})" if c else f"<code {code}>"
        print(f"{calls:>10} {_fmt_ns(total):>11} {_fmt_ns(own):>11}  {where}", file=out)


# ---- export ----

def cmd_export(args):
    from ..tracer.tracefile import Trace
    if cli_profile_file.kind_of(args.file) == "profile":
        return cli_profile_file.cmd_export(args)
    if args.start is not None or args.stop is not None:
        raise UsageError("--start/--stop apply to profile files")
    if args.more:
        raise UsageError("export converts one trace (several files can be given for profiles only)")
    if args.format not in EXPORT_FORMATS:
        raise UsageError(f"unknown format {args.format!r} (choose from: {', '.join(EXPORT_FORMATS)})")
    try:
        min_ns = parse_duration_ns(args.min_duration) if args.min_duration else 0
    except ValueError as e:
        raise UsageError(str(e))
    check_writable(args.output, "trace")
    t = Trace(args.file)
    if t.damage:
        print(f"warning: {args.file}: {t.damage}; exporting the intact part", file=sys.stderr)
    t.export(args.format, args.output, min_ns)
    print(f"stackwatch: wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    main()
