"""The filters `stats` and `export` share: --thread, --start/--stop,
--include/--exclude, --max-depth (native/trace/filter.h says what a
filtered reading of a trace keeps). add_arguments() adds them to a parser;
trace_filter() turns them into a tracefile.Filter for one trace, with one
clear UsageError line for a bad value.
"""
import fnmatch

from ..common.units import parse_duration_ns
from ..tracer.tracefile import Filter
from .program import UsageError


def add_arguments(p, start_help):
    p.add_argument("--thread", action="append", default=None, metavar="THREAD",
                   help="only this thread: its name (a glob), native thread id or threading ident (repeatable)")
    p.add_argument("--start", default=None, help=start_help + " from this time on (e.g. 500ms, 2s)")
    p.add_argument("--stop", default=None, help=start_help + " up to this time (e.g. 3s)")
    p.add_argument("--include", action="append", default=None, metavar="GLOB",
                   help="only the frames of functions whose name, qualified name or file matches "
                   "(repeatable; a frame left out gives its time or samples to its caller)")
    p.add_argument("--exclude", action="append", default=None, metavar="GLOB",
                   help="leave out the frames of functions whose name, qualified name or file matches")
    p.add_argument("--max-depth", default=None, metavar="N",
                   help="only the frames at most N deep (deeper ones' time or samples go to their ancestor)")


def _depth(value):
    if value is None:
        return 0
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n <= 0:
        raise UsageError(f"--max-depth: {value!r} is not a positive whole number")
    return n


def _time(value, what):
    if value is None:
        return None
    try:
        return parse_duration_ns(value)
    except ValueError as e:
        raise UsageError(f"--{what}: {e}") from None


def thread_positions(wanted, threads):
    """Positions of the threads that `wanted` (names as globs, native tids,
    idents) names; UsageError naming the first that matches none."""
    if not wanted:
        return None
    out = set()
    for w in wanted:
        hit = {i for i, t in enumerate(threads)
               if fnmatch.fnmatchcase(t["name"] or "", w) or str(t.get("native_tid")) == w or
               str(t.get("ident")) == w}
        if not hit:
            known = ", ".join(f"{t['name'] or '?'} ({t['native_tid']})" for t in threads)
            raise UsageError(f"--thread {w!r}: no such thread (the threads: {known})")
        out |= hit
    return sorted(out)


def thread_wanted(wanted, label, tid):
    """Profiles: whether a thread (its label "name (ident)" and ident) is
    one of `wanted` (None: all)."""
    return not wanted or any(fnmatch.fnmatchcase(label, w) or fnmatch.fnmatchcase(label.rsplit(" (", 1)[0], w)
                             or str(tid) == w for w in wanted)


def _globs(args):
    for g in (args.include or []) + (args.exclude or []):
        if not g:
            raise UsageError("--include/--exclude: an empty pattern matches nothing")


def trace_filter(args, trace):
    """The Filter of the arguments for `trace` (times are offsets from the
    start of tracing), or None when nothing is filtered."""
    start, stop = _time(args.start, "start"), _time(args.stop, "stop")
    if start is not None and stop is not None and start > stop:
        raise UsageError("--start is after --stop")
    _globs(args)
    f = Filter(thread_positions(args.thread, trace.threads), start, stop, args.include, args.exclude,
               _depth(args.max_depth))
    return None if f.is_all() else f


def tree_filter(args):
    """Profiles: a function that applies --include/--exclude/--max-depth
    to a CallTree (CallTree.filtered), or None when they are not given."""
    _globs(args)
    depth = _depth(args.max_depth)
    if not (args.include or args.exclude or depth):
        return None
    return lambda tree: tree.filtered(args.include, args.exclude, depth)
