"""`stackwatch stats` and `stackwatch export` of profile files (".swprof",
written by `stackwatch profile --format stackwatch` or Profiler.save()).

cli/__init__.py looks at a file's first bytes with kind_of() and hands profile
files to cmd_stats() and cmd_export() here; traces stay with cli/__init__.py.
Every error a user can cause is a UsageError (one line on stderr).
"""
import os
import sys
import time

from .. import _native
from ..common.units import parse_duration_ns
from ..profiler import calltree, history, profile_file
from ..render import formats
from .program import UsageError, check_writable

EXPORT_FORMATS = formats.names(formats.TREES)
TRACE_MAGIC = b"\x89SWT\r\n\x1a\n"


def kind_of(path):
    """"trace" or "profile" from the file's first bytes; UsageError for an
    empty file or one that is neither (OSError if it cannot be read)."""
    with open(path, "rb") as f:
        head = f.read(16)
    if not head:
        raise UsageError(f"{path}: empty file (not a stackwatch trace or profile)")
    if _native.is_profile(head):
        return "profile"
    if head.startswith(TRACE_MAGIC):
        return "trace"
    raise UsageError(f"{path}: not a stackwatch trace (.swt) or profile (.swprof)")


def load(path):
    """The History of a profile file; UsageError if it cannot be read at
    all. A damaged file's intact part is returned (see damaged())."""
    try:
        h = profile_file.load_profile(path)
    except ValueError as e:
        raise UsageError(str(e)) from None
    info = h.info()
    if info["evicted"]:
        print(f"warning: {path}: the first {info['evicted']} cycles ({info['evicted_samples']} samples) "
              f"were not kept (the history's maxlen)", file=sys.stderr)
    return h


def damaged(path, h):
    """After the output of a damaged file's intact part (stats printed,
    export written): one line "stackwatch: error: ..." naming the damage,
    and exit status 1 (0 for an intact file)."""
    damage = h.info()["damage"]
    if not damage:
        return 0
    print(f"stackwatch: error: {path} is damaged ({damage}); the output above is its intact part "
          f"({len(h)} cycles)", file=sys.stderr)
    return 1


def _clock(ns):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ns / 1e9)) + f".{ns // 1_000_000 % 1000:03d}"


def function_table(tree):
    """{(name, filename, line): [own, total]} of a CallTree. total counts
    each sample once per function even where the function recurses (only
    its outermost frame on a stack counts)."""
    out = {}
    root = tree.tree()
    stack = [(root, None)]
    on_path = {}
    while stack:
        node, key = stack.pop()
        if node is None:            # leaving `key`'s node
            on_path[key] -= 1
            continue
        if key is not None:
            row = out.setdefault(key, [0, 0])
            row[0] += node["self"]
            if not on_path.get(key):
                row[1] += node["count"]
            on_path[key] = on_path.get(key, 0) + 1
            stack.append((None, key))
        for child in node["children"]:
            stack.append((child, (child["name"], child["filename"], child["line"])))
    return out


def _table(out, title, tree, sort, limit):
    rows = function_table(tree)
    total = tree.total or 1
    index = 0 if sort == "own" else 1
    ordered = sorted(rows.items(), key=lambda kv: (-kv[1][index], -kv[1][1 - index], kv[0]))[:limit]
    print(f"\n{title}", file=out)
    print(f"{'own':>9} {'own%':>6} {'total':>9} {'total%':>6}  function", file=out)
    for (name, filename, line), (own, tot) in ordered:
        print(f"{own:>9} {100 * own / total:>5.1f}% {tot:>9} {100 * tot / total:>5.1f}%  {name}  "
              f"({filename}:{line})", file=out)


def cmd_stats(args):
    if args.limit <= 0:
        raise UsageError("--limit must be positive")
    if args.sort == "calls":
        raise UsageError("--sort calls applies to traces; a profile has samples (use own or total)")
    h = load(args.file)
    info = h.info()
    out = sys.stdout
    threads = h.thread_trees()
    whole = calltree.merge(*[t for _, _, t in threads])
    entries = h.entries()
    span = (f", {len(entries)} cycles of {info['cycle_ns'] / 1e9:g}s from {_clock(info['start_ns'])} "
            f"to {_clock(info['stop_ns'])}" if info["start_ns"] and info["stop_ns"] else "")
    lost = [f"{info[k]} {k.replace('_', ' ')}" for k in ("dropped", "failed", "missed") if info[k]]
    print(f"{args.file}: {info['mode']} mode, {info['interval_ns'] / 1000:g}us interval, {whole.total} samples "
          f"of {len(threads)} thread{'' if len(threads) == 1 else 's'}{span}"
          f"{''.join(', ' + x for x in lost)}", file=out)
    _table(out, "all threads", whole, args.sort, args.limit)
    if len(threads) > 1 or args.threads:
        for label, _, tree in threads:
            _table(out, f"thread {label} ({tree.total} samples)", tree, args.sort, args.limit)
    out.flush()
    return damaged(args.file, h)


def _offset(value, what, base_ns):
    """Wall-clock seconds of an offset from the profile's start."""
    if value is None:
        return None
    try:
        ns = parse_duration_ns(value)
    except ValueError as e:
        raise UsageError(f"--{what}: {e}") from None
    return (base_ns + ns) / 1e9


def cmd_export(args):
    if args.format not in EXPORT_FORMATS:
        raise UsageError(f"unknown format {args.format!r} for a profile (choose from: "
                         f"{', '.join(EXPORT_FORMATS)})")
    if getattr(args, "min_duration", None):
        raise UsageError("--min-duration applies to traces, not profiles")
    check_writable(args.output, "profile")
    paths = [args.file] + list(getattr(args, "more", None) or [])
    for p in paths[1:]:
        if kind_of(p) != "profile":
            raise UsageError(f"{p}: a trace cannot be merged with profiles")
    loaded = [(p, load(p)) for p in paths]
    trees, info = [], None
    for path, h in loaded:
        base = h.info()["start_ns"]
        start = _offset(getattr(args, "start", None), "start", base)
        stop = _offset(getattr(args, "stop", None), "stop", base)
        if (start is not None or stop is not None) and not base:
            raise UsageError(f"{path}: the profile has no start time, so --start/--stop cannot be used")
        if start is not None and stop is not None and start > stop:
            raise UsageError("--start is after --stop")
        for label, tid, tree in h.thread_trees(start, stop):
            # Threads of several files: named after their file too.
            trees.append((f"{os.path.basename(path)}: {label}" if len(paths) > 1 else label, tid, tree))
        if info is None:
            info = dict(h.info())
            if len(paths) > 1:
                info["start_ns"] = info["stop_ns"] = 0   # several runs: no one time span
            window = None if start is None and stop is None else (
                history.window_ns(start, stop))
    formats.get(args.format, formats.TREES).write(args.output, history.as_trees(trees, info, None, window))
    print(f"stackwatch: wrote {os.fspath(args.output)}", file=sys.stderr)
    status = 0
    for path, h in loaded:
        status = max(status, damaged(path, h))
    return status
