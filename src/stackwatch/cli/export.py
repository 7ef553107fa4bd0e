"""`stackwatch export`: convert a trace to a timeline (Perfetto, Chrome
JSON) or, from its exact durations, to the formats of call trees
(collapsed stacks, speedscope, an HTML flame graph, pprof, pstats,
callgrind); or a profile file (several merged, their threads kept apart; a
time window of them) to the formats of call trees.

    stackwatch export FILE [PROFILE ...] -o OUT [--format FORMAT]
                      [--start 500ms] [--stop 2s] [--min-duration 10us]
    stackwatch export TRACE TRACE ... | DIRECTORY -o OUT   (one run's processes
                      on one timeline: cli/traces.py)

Without --format, the format is the one OUT's name ends with (x.html: the
flame graph; x.pftrace: Perfetto; x.speedscope.json: speedscope; a plain
x.json: Chrome JSON for a trace, speedscope for a profile file).

The sequence diagram (--format sequence, x.sequence.html) is written from
the trace's task events (`run --events tasks`; cli/tasks.py reads them).
A file's first bytes say which it is (files.kind_of); the formats and
their writers are the registry's (stackwatch.render.formats).
"""
import os
import sys

from ..common.units import parse_duration_ns
from ..profiler import history
from ..render import formats
from ..tracer.tracefile import Trace
from . import files, filters, progress, tasks, traces
from .program import UsageError, check_directory, check_writable, output_what, writing

NAME = "export"
TRACE_FORMATS = formats.names(formats.TRACES, written=True)
PROFILE_FORMATS = formats.names(formats.TREES)
TIMELINES = formats.names_taking(formats.TRACES)
TASK_VIEWS = formats.names_taking(formats.TASKS)   # the sequence diagram


def add_parser(subparsers):
    """Adds the command to the CLI's subparsers; returns its parser."""
    e = subparsers.add_parser("export", help=f"convert a trace to a timeline ({', '.join(TIMELINES)}), its "
                              f"task events to a sequence diagram ({', '.join(TASK_VIEWS)}) or it to a "
                              f"call-tree format, or a profile file to a call-tree format "
                              f"({', '.join(PROFILE_FORMATS)})")
    e.add_argument("file")
    e.add_argument("more", nargs="*", metavar="FILE", help="more profile files, merged with the first "
                   "(threads of each file kept apart); or more traces (or a directory of them): the "
                   "processes of one run on one timeline")
    e.add_argument("--format", default=None, help=f"{', '.join(TIMELINES + TASK_VIEWS)} (traces); "
                   f"{', '.join(PROFILE_FORMATS)} (traces and profiles); default: from the output's name")
    filters.add_arguments(e, "only what ran (traces: events; profiles: cycles), counted from the start,")
    e.add_argument("-o", "--output", required=True, metavar="OUT", help="the file to write; without "
                   "--format its ending names the format: " + _endings())
    e.add_argument("--min-duration", default=None, help="leave out slices shorter than this (e.g. 10us)")
    return e


def _endings():
    """Each format and the file endings that name it, from the registry:
    "collapsed (.collapsed.txt, .txt), speedscope (.speedscope.json, .json
    for a profile), ..., chrome (.json for a trace)"."""
    said = []
    for f in formats.FORMATS.values():
        if f.name not in TRACE_FORMATS:
            continue
        endings = []
        for x in f.suffixes:
            of = {kind: _names_format("x" + x, fits) for kind, fits in (("trace", formats.TRACES),
                                                                         ("profile", formats.TREES))}
            mine = [kind for kind in of if of[kind] == f.name]
            endings.append(x if None in of.values() or len(mine) == 2 else f"{x} for a {mine[0]}")
        said.append(f"{f.name} ({', '.join(endings)})")
    return ", ".join(said)


def _names_format(path, fits):
    try:
        return formats.of_output(path, fits)
    except ValueError:
        return None


def run(args):
    profile = not os.path.isdir(args.file) and files.kind_of(args.file) == "profile"
    if args.format is None:
        fits = (formats.TREES,) if profile else (formats.TRACES,)
        try:
            args.format = formats.of_output(args.output, *fits)
        except ValueError as e:
            raise UsageError(str(e)) from None
    if profile:
        return _export_profiles(args)
    return _export_trace(args)


def _export_trace(args):
    if args.format not in TRACE_FORMATS:
        raise UsageError(f"unknown format {args.format!r} (choose from: {', '.join(TRACE_FORMATS)})")
    try:
        min_ns = parse_duration_ns(args.min_duration) if args.min_duration else 0
    except ValueError as e:
        raise UsageError(str(e))
    timelines = formats.names_taking(formats.TRACES)
    if min_ns and args.format not in timelines:
        raise UsageError(f"--min-duration applies to the timeline formats ({', '.join(timelines)}), "
                         f"not to {args.format}")
    if formats.FORMATS[args.format].takes == formats.TASKS:
        return _export_tasks(args)
    if traces.several(args):
        return traces.export(args, min_ns)
    if formats.FORMATS[args.format].directory:
        check_directory(args.output, output_what(args.format))
    else:
        check_writable(args.output, output_what(args.format))
    t = Trace(args.file)
    flt = filters.trace_filter(args, t)
    kept = flt.threads if flt and flt.threads is not None else range(len(t.threads))
    events = sum(t.threads[i]["events"] for i in kept)
    warning = None if min_ns else progress.big_export_warning(args.format, events, flt is not None)
    if warning:
        print(f"stackwatch: {warning}", file=sys.stderr)
    passes = 2 if min_ns else 1   # the durations first, then the slices
    bar = progress.Progress(t.events_bytes() * passes, f"exporting to {args.format}")
    try:
        with writing(args.output):
            formats.write_trace(args.format, args.output, t, min_duration_ns=min_ns, filter=flt, progress=bar,
                                task_flows=tasks.flows_of(t, flt, args.format))
    except MemoryError as e:      # the call trees are too large: the message says what helps
        raise UsageError(str(e) or "out of memory") from None
    finally:
        bar.done()
    print(f"stackwatch: wrote {args.output}", file=sys.stderr)
    return files.trace_damaged(args.file, t)


def _export_tasks(args):
    """A format written from the trace's task events (the sequence
    diagram): one trace, no filters (the page filters its tasks)."""
    if traces.several(args):
        raise UsageError(f"{args.format} is written from one trace, not several")
    for name in ("thread", "start", "stop", "include", "exclude", "max_depth"):
        if getattr(args, name, None):
            raise UsageError(f"--{name.replace('_', '-')} does not apply to {args.format} (the page filters "
                             "its tasks by group and name)")
    check_writable(args.output, output_what(args.format))
    t, doc = tasks.load(args.file)
    with writing(args.output):
        formats.write_trace(args.format, args.output, t, tasks=doc)
    print(f"stackwatch: wrote {args.output}", file=sys.stderr)
    return files.trace_damaged(args.file, t)


def _offset(value, what, base_ns):
    """Wall-clock seconds of an offset from the profile's start."""
    if value is None:
        return None
    try:
        ns = parse_duration_ns(value)
    except ValueError as e:
        raise UsageError(f"--{what}: {e}") from None
    return (base_ns + ns) / 1e9


def _export_profiles(args):
    if args.format not in PROFILE_FORMATS:
        raise UsageError(f"unknown format {args.format!r} for a profile (choose from: "
                         f"{', '.join(PROFILE_FORMATS)})")
    if args.min_duration:
        raise UsageError("--min-duration applies to traces, not profiles")
    cut = filters.tree_filter(args)
    check_writable(args.output, output_what(args.format))
    paths = [args.file] + list(args.more)
    for p in paths[1:]:
        if files.kind_of(p) != "profile":
            raise UsageError(f"{p}: a trace cannot be merged with profiles")
    loaded = [(p, files.load_profile(p)) for p in paths]
    trees, info = [], None
    for path, h in loaded:
        base = h.info()["start_ns"]
        start = _offset(args.start, "start", base)
        stop = _offset(args.stop, "stop", base)
        if (start is not None or stop is not None) and not base:
            raise UsageError(f"{path}: the profile has no start time, so --start/--stop cannot be used")
        if start is not None and stop is not None and start > stop:
            raise UsageError("--start is after --stop")
        for label, tid, tree in h.thread_trees(start, stop):
            if not filters.thread_wanted(args.thread, label, tid):
                continue
            if cut:
                tree = cut(tree)
            # Threads of several files: named after their file too.
            trees.append((f"{os.path.basename(path)}: {label}" if len(paths) > 1 else label, tid, tree))
        if info is None:
            info = dict(h.info())
            if len(paths) > 1:
                info["start_ns"] = info["stop_ns"] = 0   # several runs: no one time span
            window = None if start is None and stop is None else history.window_ns(start, stop)
    if args.thread and not trees:
        raise UsageError(f"--thread {' '.join(args.thread)}: no such thread in the profile")
    with writing(args.output):
        formats.FORMATS[args.format].write(args.output, history.as_trees(trees, info, None, window))
    print(f"stackwatch: wrote {os.fspath(args.output)}", file=sys.stderr)
    status = 0
    for path, h in loaded:
        status = max(status, files.damaged(path, h))
    return status
