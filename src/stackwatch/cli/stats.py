"""`stackwatch stats`: the top functions of a trace (calls, total and own
time; with its EXT events and sampler samples, their tables too) or of a
profile file (own and total samples), overall and per thread.

    stackwatch stats FILE [--sort own|total|calls] [-n 20] [--threads]
                     [--callers F] [--callees F] [--json | --csv]
                     [--thread T] [--start 1s] [--stop 2s] [--include G]
                     [--exclude G] [--max-depth N]
    stackwatch stats TRACE TRACE ... | DIRECTORY    (the processes of one run)

--callers/--callees F list the functions that called F (qualified name, a
glob) and those F called, as pstats' print_callers/print_callees; --json
and --csv print the function table (and those) as data instead of text.

A file's first bytes say which it is (files.kind_of). Every table is
printed by _table(); times by _fmt_ns().
"""
import csv
import fnmatch
import json
import os
import sys
import time
import types
from collections import Counter

from ..common.units import format_ns as _fmt_ns
from ..profiler import calltree
from ..tracer.tracefile import Trace
from . import files, filters, progress, traces
from .program import UsageError

NAME = "stats"


def add_parser(subparsers):
    """Adds the command to the CLI's subparsers; returns its parser."""
    s = subparsers.add_parser("stats", help="top functions of a trace (calls, total and own time) or of a "
                              "profile file (own and total samples)")
    s.add_argument("file")
    s.add_argument("more", nargs="*", metavar="TRACE", help="more traces (or a directory of them): the "
                   "processes of one run, each process's tables and the top functions of all together")
    s.add_argument("--sort", choices=("own", "total", "calls"), default="own")
    s.add_argument("-n", "--limit", type=int, default=20, help="rows per table (default 20)")
    s.add_argument("--threads", action="store_true", help="also one table per thread")
    s.add_argument("--callers", metavar="F",
                   help="the functions that called F (a glob of its qualified name; a profile's: its name)")
    s.add_argument("--callees", metavar="F", help="the functions F called (the same)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="the tables as JSON")
    g.add_argument("--csv", action="store_true", help="the function table as CSV")
    filters.add_arguments(s, "traces: only the events; profiles: only the cycles,")
    return s


def run(args):
    if traces.several(args):
        return _several_traces(args)
    if files.kind_of(args.file) == "profile":
        return _profile_stats(args)
    return _trace_stats(args)


# ---- printing ----

def _line(columns, cells):
    """One line of a table. columns: [(header, width)]: width > 0 is a
    right-aligned column (a number) of that width, < 0 a left-aligned one
    of -width, 0 the last column, as long as it is. The right-aligned
    columns come first, one space apart; two spaces, then the others, one
    space apart."""
    right = [f"{c!s:>{w}}" for (_, w), c in zip(columns, cells) if w > 0]
    left = [f"{c!s:<{-w}}" if w else str(c) for (_, w), c in zip(columns, cells) if w <= 0]
    return " ".join(right) + "  " + " ".join(left)


def _table(out, title, columns, rows):
    """A blank line, the title, the columns' headers and one line per row."""
    print(f"\n{title}", file=out)
    print(_line(columns, [h for h, _ in columns]), file=out)
    for cells in rows:
        print(_line(columns, cells), file=out)


# ---- traces ----

def _trace_stats(args, t=None):
    """One trace's statistics (t: the trace, opened and warned about; else
    args.file)."""
    if args.limit <= 0:
        raise UsageError("--limit must be positive")
    if t is None:
        t = Trace(args.file)   # (damage: said after the output, files.trace_damaged)
    out = sys.stdout
    flt = filters.trace_filter(args, t)
    if not t.calls and (args.callers or args.callees):
        raise t.no_calls_error("it has no callers or callees")
    for pattern in (args.callers, args.callees):
        if pattern is not None and not _matching(t, pattern):
            raise UsageError(f"no function of the trace is called {pattern!r}")
    bar = progress.Progress(t.events_bytes(), "reading the trace")
    try:
        if args.callers or args.callees or args.json:
            rows, edges = t.stats_edges(flt, progress=bar)
        else:
            rows, edges = t.stats(flt, progress=bar), []
    finally:
        bar.done()
    overall = {}
    for r in rows:
        o = overall.setdefault(r.code, [0, 0, 0])
        o[0] += r.calls
        o[1] += r.total_ns
        o[2] += r.own_ns
    if args.json or args.csv:
        _trace_data(out, args, t, rows, edges, flt)
        out.flush()
        return files.trace_damaged(args.file, t)
    n = len(t.threads)
    print(f"{t.path}: {t.event_count()} events, {n} thread{'' if n == 1 else 's'}, "
          f"{t.dropped()} dropped{'' if t.complete else ', incomplete (tracing did not stop normally)'}",
          file=out)
    if not t.calls:
        print("\nno calls: recorded without them (run --no-trace), the events alone", file=out)
    else:
        _calls_table(out, "all threads", t, [(c, *v) for c, v in overall.items()], args.sort, args.limit)
    if args.threads and t.calls:
        for i, th in enumerate(t.threads):
            mine = [(r.code, r.calls, r.total_ns, r.own_ns) for r in rows if r.thread == i]
            title = f"thread {th['name'] or '?'} (tid {th['native_tid']}, {th['events']} events, {th['dropped']} dropped)"
            _calls_table(out, title, t, mine, args.sort, args.limit)
    for pattern, caller_side in ((args.callers, True), (args.callees, False)):
        if pattern is not None:
            _edge_tables(out, t, edges, pattern, caller_side, args.sort, args.limit)
    _event_tables(out, t, args.limit, flt)
    _sample_tables(out, t, args.limit)
    out.flush()
    return files.trace_damaged(args.file, t)


def _matching(t, pattern):
    """Code ids whose qualified name (or name) matches the glob."""
    return {i for i, c in t.codes.items() if fnmatch.fnmatchcase(c.qualname, pattern) or
            fnmatch.fnmatchcase(c.name, pattern)}


def _where(t, code):
    if code is None:
        return "<thread start>"
    c = t.codes.get(code)
    return f"{c.qualname}  ({c.filename}:{c.firstlineno})" if c else f"<code {code}>"


def _edge_tables(out, t, edges, pattern, caller_side, sort, limit):
    """--callers / --callees: per function matching, the calls from each
    caller (or to each callee), all threads summed."""
    for code in sorted(_matching(t, pattern)):
        pairs = {}
        for e in edges:
            if (e.callee if caller_side else e.caller) != code:
                continue
            other = e.caller if caller_side else e.callee
            p = pairs.setdefault(other, [0, 0, 0])
            p[0] += e.calls
            p[1] += e.total_ns
            p[2] += e.own_ns
        key = {"own": 2, "total": 1, "calls": 0}[sort]
        rows = sorted(pairs.items(), key=lambda kv: kv[1][key], reverse=True)[:limit]
        title = f"{'callers of' if caller_side else 'called by'} {_where(t, code)}"
        _table(out, title, [("calls", 10), ("total", 11), ("own", 11), ("caller" if caller_side else "callee", 0)],
               [(c, _fmt_ns(tot), _fmt_ns(own), _where(t, other)) for other, (c, tot, own) in rows])


def _function(t, code):
    c = t.codes.get(code)
    return {"qualname": c.qualname if c else None, "name": c.name if c else None,
            "file": c.filename if c else None, "line": c.firstlineno if c else None}


def _trace_data(out, args, t, rows, edges, flt=None):
    """--json / --csv: every (thread, function) row; with --json also the
    functions summed over threads, the caller/callee pairs and the kernel's
    figures of `run --kernel` ("kernel", through the filter flt)."""
    threads = t.threads
    if args.csv:
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["thread", "tid", "calls", "primitive_calls", "total_ns", "own_ns", "function", "file", "line"])
        for r in sorted(rows, key=lambda r: (r.thread, -r.own_ns)):
            f = _function(t, r.code)
            w.writerow([threads[r.thread]["name"], threads[r.thread]["native_tid"], r.calls, r.prim, r.total_ns,
                        r.own_ns, f["qualname"], f["file"], f["line"]])
        return 0
    summed = {}
    for r in rows:
        s = summed.setdefault(r.code, [0, 0, 0, 0])
        s[0] += r.calls
        s[1] += r.prim
        s[2] += r.total_ns
        s[3] += r.own_ns
    pairs = {}
    for e in edges:
        s = pairs.setdefault((e.caller, e.callee), [0, 0, 0, 0])
        s[0] += e.calls
        s[1] += e.prim
        s[2] += e.total_ns
        s[3] += e.own_ns
    doc = {"file": args.file, "events": t.event_count(), "dropped": t.dropped(), "complete": t.complete,
           "threads": [{"name": th["name"], "tid": th["native_tid"], "events": th["events"]} for th in threads],
           "functions": [dict(_function(t, c), calls=v[0], primitive_calls=v[1], total_ns=v[2], own_ns=v[3])
                         for c, v in sorted(summed.items(), key=lambda kv: -kv[1][3])],
           "per_thread": [dict(_function(t, r.code), thread=r.thread, calls=r.calls, primitive_calls=r.prim,
                               total_ns=r.total_ns, own_ns=r.own_ns) for r in rows],
           "calls": [{"caller": None if a is None else _function(t, a)["qualname"],
                      "callee": _function(t, b)["qualname"], "calls": v[0], "primitive_calls": v[1],
                      "total_ns": v[2], "own_ns": v[3]} for (a, b), v in pairs.items()]}
    kernel = _kernel_data(t, flt)
    if kernel:
        doc["kernel"] = kernel
    json.dump(doc, out, indent=1)
    out.write("\n")
    return 0


def _kernel_data(t, flt):
    """`run --kernel`'s figures for --json (None when the trace has no
    kernel event): system calls by name, time off CPU, page faults, records
    lost, and per (thread, function) where they began."""
    s = t.ext_summary(flt)
    if not any(k in t.meta for k in ("kernel.syscalls", "kernel.off_cpu", "kernel.faults")) and not (
            s["syscalls"] or s["off_cpu_intervals"] or s["page_faults"]):
        return None
    threads = t.threads
    return {"syscalls": [{"name": name, "calls": calls, "errors": errors, "total_ns": total}
                         for name, calls, errors, total in sorted(s["syscalls"], key=lambda r: (-r[3], r[0]))],
            "off_cpu_intervals": s["off_cpu_intervals"], "off_cpu_ns": s["off_cpu_ns"],
            "page_faults": s["page_faults"], "wakeups": s["counts"].get("wakeup", 0),
            "lost": max(s["kernel_lost"], t.meta.get("kernel.lost", 0) or 0),
            "by_function": [dict(_function(t, r.code), thread=r.thread, tid=threads[r.thread]["native_tid"],
                                 syscalls=r.syscalls, syscall_ns=r.syscall_ns, off_cpu=r.off_cpu,
                                 off_cpu_ns=r.off_cpu_ns, page_faults=r.faults)
                            for r in t.kernel_by_function(flt)]}


def _calls_table(out, title, t, rows, sort, limit):
    """rows: (code, calls, total_ns, own_ns)."""
    key = {"own": 3, "total": 2, "calls": 1}[sort]
    rows = sorted(rows, key=lambda r: r[key], reverse=True)[:limit]
    cells = []
    for code, calls, total, own in rows:
        c = t.codes.get(code)
        where = f"{c.qualname}  ({c.filename}:{c.firstlineno})" if c else f"<code {code}>"
        cells.append((calls, _fmt_ns(total), _fmt_ns(own), where))
    _table(out, title, [("calls", 10), ("total", 11), ("own", 11), ("function", 0)], cells)


def _event_tables(out, t, limit, flt=None):
    """The EXT events recorded with `stackwatch run --events ...`: counts
    per kind, GC time, exceptions per type and location (nothing if the
    trace has none)."""
    s = t.ext_summary(flt)
    if not s["counts"]:
        return
    rows = [(n, kind) for kind, n in sorted(s["counts"].items(), key=lambda kv: (-kv[1], kv[0]))]
    if s["malformed"]:
        rows.append((s["malformed"], "(malformed: payload could not be decoded)"))
    _table(out, "events", [("count", 10), ("kind", 0)], rows)
    if s["syscalls"]:
        _table(out, "system calls (run --kernel)", [("calls", 10), ("errors", 8), ("total", 11), ("syscall", 0)],
               [(calls, errors, _fmt_ns(total), name)
                for name, calls, errors, total in sorted(s["syscalls"], key=lambda r: (-r[3], r[0]))[:limit]])
    by_fn = t.kernel_by_function(flt) if s["syscalls"] or s["off_cpu_intervals"] or s["page_faults"] else []
    if s["syscalls"]:
        _kernel_fn_table(out, t, "time in system calls by function", by_fn, "syscalls", "syscall_ns", limit)
    if s["off_cpu_intervals"]:
        _kernel_fn_table(out, t, "time off CPU by function (run --kernel=sched; where each interval began)", by_fn,
                         "off_cpu", "off_cpu_ns", limit)
        print(f"\noff CPU: {s['off_cpu_intervals']} intervals, {_fmt_ns(s['off_cpu_ns'])} in total", file=out)
    if s["page_faults"]:
        _kernel_fn_table(out, t, "page faults by function (run --kernel=faults)", by_fn, "faults", None, limit)
    lost = max(s["kernel_lost"], t.meta.get("kernel.lost", 0) or 0)
    if lost or "kernel.syscalls" in t.meta:
        print(f"\nkernel: {t.meta.get('kernel.syscalls', sum(r[1] for r in s['syscalls']))} system calls read, "
              f"{lost} kernel records lost" + (" (the perf rings were full: some calls are missing)" if lost else ""),
              file=out)
    if s["counts"].get("gc_start") or s["counts"].get("gc_done"):
        print(f"\nGC: {s['gc_collections']} collections, {_fmt_ns(s['gc_ns'])} in total, "
              f"{s['gc_collected']} objects collected, {s['gc_uncollectable']} uncollectable", file=out)
    for kind in ("raise", "handled"):
        if not s["counts"].get(kind):
            continue
        where = Counter()
        for e in t.ext_events(kinds=[kind]):
            if "type" not in e.data:
                continue
            c = t.codes.get(e.code)
            line = e.line or "?"   # 0: the instruction has no line (a handler's start)
            loc = f"{c.qualname}  ({c.filename}:{line})" if c else f"<code {e.code}>:{line}"
            where[(e.data["type"], loc)] += 1
        title = "exceptions raised" if kind == "raise" else "exceptions handled"
        _table(out, f"{title} (by type and location)", [("count", 10), ("type", -24), ("where", 0)],
               [(n, typ, loc) for (typ, loc), n in sorted(where.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]])


def _kernel_fn_table(out, t, title, by_fn, count_field, ns_field, limit):
    """One figure of the kernel's events per function (all threads summed),
    the largest first."""
    per_fn = {}
    for r in by_fn:
        v = per_fn.setdefault(r.code, [0, 0])
        v[0] += getattr(r, count_field)
        v[1] += getattr(r, ns_field) if ns_field else 0
    rows = sorted(((c, v) for c, v in per_fn.items() if v[0]), key=lambda cv: (-cv[1][1], -cv[1][0]))[:limit]
    cells = []
    for code, (n, ns) in rows:
        c = t.codes.get(code)
        where = ("(no Python frame)" if code is None else
                 f"{c.qualname}  ({c.filename}:{c.firstlineno})" if c else f"<code {code}>")
        cells.append((n, _fmt_ns(ns), where) if ns_field else (n, where))
    cols = [("count" if not ns_field else "calls" if count_field == "syscalls" else "intervals", 10)]
    _table(out, title, cols + ([("total", 11)] if ns_field else []) + [("function", 0)], cells)


def _sample_tables(out, t, limit):
    """The samples recorded with `stackwatch run --sample`: how many per
    thread, and the top functions by samples (own: the innermost frame;
    total: anywhere on the stack, once per sample); with --sample-lines the
    top lines (nothing if the trace has no samples)."""
    n = t.sample_count()
    if not n:
        return
    samples = t.samples()
    states = Counter(s.state for s in samples)
    print(f"\nsamples: {n} ({', '.join(f'{k} {v}' for k, v in sorted(states.items()))})", file=out)
    for th in t.threads:
        if th["samples"]:
            print(_line([("", 10), ("", 0)], (th["samples"], f"thread {th['name'] or '?'} (tid {th['native_tid']})")),
                  file=out)
    own, total = Counter(), Counter()
    for s in samples:
        if s.stack:
            own[s.stack[-1]] += 1
        for f in set(s.stack):
            total[f] += 1
    top = sorted(total.items(), key=lambda kv: (-own[kv[0]], -kv[1], kv[0].name))[:limit]
    _table(out, "top functions by samples", [("own", 10), ("total", 10), ("function", 0)],
           [(own[f], c, f"{f.name}  ({f.filename if f.native else f'{f.filename}:{f.line}'})") for f, c in top])
    # With --sample-lines: the lines the samples were running (own: the
    # innermost Python frame's line, whatever native frames ran under it).
    lines = Counter()
    for s in samples:
        if s.lines:
            k = next((k for k in range(len(s.stack) - 1, -1, -1) if not s.stack[k].native), None)
            if k is not None and s.lines[k]:
                lines[(s.stack[k].filename, s.lines[k], s.stack[k].name)] += 1
    if lines:
        _table(out, "top lines by samples", [("own", 10), ("line", 0)],
               [(c, f"{filename}:{line}  ({name})")
                for (filename, line, name), c in sorted(lines.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]])


# ---- several traces (the processes of one run) ----

def _several_traces(args):
    """`stackwatch stats A.swt B.swt ... | DIR`: the processes, the top
    functions of all of them together (a function is its name, file and
    first line; its calls, total and own time summed over the processes),
    then each process's own statistics as `stackwatch stats` prints them."""
    if args.limit <= 0:
        raise UsageError("--limit must be positive")
    traces.refuse_one_trace_options(args, ("callers", "callees", "json", "csv"))
    s = traces.opened(traces.gather(args))
    out = sys.stdout
    print(f"{traces.processes(len(s))}:", file=out)
    merged, codes = {}, {}
    for t in s.traces:
        m = t.meta
        parent = f", started by {m['parent_pid']} ({m.get('spawn', '?')})" if "parent_pid" in m else ""
        print(f"  pid {m.get('pid', '?')}  {os.path.basename(t.path)}  {m.get('command', '?')}  "
              f"({t.event_count()} events{parent})", file=out)
        for r in t.stats():
            c = t.codes.get(r.code)
            key = (c.qualname, c.filename, c.firstlineno) if c else ("?", "?", 0)
            if key not in codes:
                codes[key] = types.SimpleNamespace(qualname=key[0], filename=key[1], firstlineno=key[2])
            row = merged.setdefault(key, [0, 0, 0])
            row[0] += r.calls
            row[1] += r.total_ns
            row[2] += r.own_ns
    _calls_table(out, "all processes (each function's calls and times summed over them)",
                 types.SimpleNamespace(codes=codes), [(k, *v) for k, v in merged.items()], args.sort, args.limit)
    status = 0
    for t in s.traces:
        print(f"\n== process {t.meta.get('pid', '?')}: {t.path} ==", file=out)
        status = max(status, _trace_stats(args, t) or 0)
    return status


# ---- profile files ----

def _profile_stats(args):
    if args.limit <= 0:
        raise UsageError("--limit must be positive")
    if args.sort == "calls":
        raise UsageError("--sort calls applies to traces; a profile has samples (use own or total)")
    cut = filters.tree_filter(args)
    for name in ("thread", "start", "stop"):
        if getattr(args, name):
            raise UsageError(f"--{name} applies to traces (for a profile: stackwatch export --format pstats)")
    h = files.load_profile(args.file)
    info = h.info()
    out = sys.stdout
    threads = h.thread_trees()
    if cut:
        threads = [(label, tid, cut(tree)) for label, tid, tree in threads]
    whole = calltree.merge(*[t for _, _, t in threads])
    if args.json or args.csv:
        _profile_data(out, args, info, threads, whole)
        out.flush()
        return files.damaged(args.file, h)
    entries = h.entries()
    span = (f", {len(entries)} cycles of {info['cycle_ns'] / 1e9:g}s from {_clock(info['start_ns'])} "
            f"to {_clock(info['stop_ns'])}" if info["start_ns"] and info["stop_ns"] else "")
    lost = [f"{info[k]} {k.replace('_', ' ')}" for k in ("dropped", "failed", "missed") if info[k]]
    print(f"{args.file}: {info['mode']} mode, {info['interval_ns'] / 1000:g}us interval, {whole.total} samples "
          f"of {len(threads)} thread{'' if len(threads) == 1 else 's'}{span}"
          f"{''.join(', ' + x for x in lost)}", file=out)
    root = whole.tree()   # (nested dicts made in C: once)
    samples_table(out, "all threads", root, args.sort, args.limit)
    if args.threads:
        for label, _, tree in threads:
            samples_table(out, f"thread {label} ({tree.total} samples)", tree.tree(), args.sort, args.limit)
    edges = _sample_edges(root) if args.callers or args.callees else {}
    for pattern, caller_side in ((args.callers, True), (args.callees, False)):
        if pattern is not None:
            _sample_edge_tables(out, edges, pattern, caller_side, args.limit)
    out.flush()
    return files.damaged(args.file, h)


def _key(node):
    return (node["name"], node["filename"], node["line"])


def _sample_edges(root):
    """{(caller key or None, callee key): samples} of a call tree: the
    samples in which the caller called the callee (None: the stack's
    outermost frame)."""
    edges = {}
    stack = [(root, None)]
    while stack:
        node, key = stack.pop()
        for child in node["children"]:
            pair = (key, _key(child))
            edges[pair] = edges.get(pair, 0) + child["count"]
            stack.append((child, _key(child)))
    return edges


def _sample_edge_tables(out, edges, pattern, caller_side, limit):
    """--callers / --callees of a profile (edges: _sample_edges): for each
    function whose name matches, the samples in which each caller called it
    (or it called each callee)."""
    functions = sorted({k for pair in edges for k in pair if k is not None and fnmatch.fnmatchcase(k[0], pattern)})
    if not functions:
        raise UsageError(f"no function of the profile is called {pattern!r}")
    where = lambda k: "<stack start>" if k is None else f"{k[0]}  ({k[1]}:{k[2]})"
    for f in functions:
        rows = sorted(((n, other) for (a, b), n in edges.items()
                       for other in [a if caller_side else b] if (b if caller_side else a) == f),
                      key=lambda r: -r[0])[:limit]
        _table(out, f"{'callers of' if caller_side else 'called by'} {where(f)}",
               [("samples", 9), ("caller" if caller_side else "callee", 0)], [(n, where(o)) for n, o in rows])


def _profile_data(out, args, info, threads, whole):
    """--json / --csv of a profile: every (thread, function) row of own and
    total samples; with --json also the functions of all threads and the
    caller -> callee sample counts."""
    if args.csv:
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["thread", "tid", "own", "total", "function", "file", "line"])
        for label, tid, tree in threads:
            rows = function_table(tree.tree())
            for (name, filename, line), (own, tot) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
                w.writerow([label, tid, own, tot, name, filename, line])
        return
    fn = lambda k: {"name": k[0], "file": k[1], "line": k[2]}
    root = whole.tree()
    rows = function_table(root)
    doc = {"file": args.file, "mode": info["mode"], "interval_ns": info["interval_ns"], "samples": whole.total,
           "threads": [{"name": label, "tid": tid, "samples": tree.total} for label, tid, tree in threads],
           "functions": [dict(fn(k), own=own, total=tot)
                         for k, (own, tot) in sorted(rows.items(), key=lambda kv: -kv[1][0])],
           "calls": [{"caller": None if a is None else fn(a), "callee": fn(b), "samples": n}
                     for (a, b), n in _sample_edges(root).items()]}
    json.dump(doc, out, indent=1)
    out.write("\n")


def _clock(ns):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ns / 1e9)) + f".{ns // 1_000_000 % 1000:03d}"


def function_table(root):
    """{(name, filename, line): [own, total]} of a call tree (its root, as
    CallTree.tree() gives it). total counts each sample once per function
    even where the function recurses (only its outermost frame on a stack
    counts)."""
    out = {}
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


def samples_table(out, title, root, sort, limit):
    """The top functions of a call tree (its root, as CallTree.tree() or
    Profiler.tree() give it) by own or total samples, with their shares;
    also `stackwatch profile`'s summary."""
    rows = function_table(root)
    total = root["count"] or 1
    index = 0 if sort == "own" else 1
    ordered = sorted(rows.items(), key=lambda kv: (-kv[1][index], -kv[1][1 - index], kv[0]))[:limit]
    _table(out, title, [("own", 9), ("own%", 6), ("total", 9), ("total%", 6), ("function", 0)],
           [(own, f"{100 * own / total:.1f}%", tot, f"{100 * tot / total:.1f}%", f"{name}  ({filename}:{line})")
            for (name, filename, line), (own, tot) in ordered])
