"""Per-function tables of call trees, and the two formats written from them:
pstats (the marshalled dict that Python's pstats.Stats, snakeviz and
gprof2dot load) and callgrind (KCachegrind, QCachegrind,
callgrind_annotate).

A tree node counts its calls (`self`: the calls of its path in an exact
trace's tree; samples in a profile's) and its own and total nanoseconds
(`self_time_ns`, `time_ns`). Summed per function over every thread's tree:

    calls      the self counts of its nodes (cProfile's ncalls)
    prim       those of its nodes with no frame of the function above them
               (cProfile's primitive calls)
    own_ns     the own time of its nodes (tottime)
    total_ns   the total time of its outermost nodes (cumtime: recursion
               counted once)

and per (caller, callee) the same over the callee's nodes whose parent is
the caller's (the caller None for a thread's outermost frames), plus
inclusive_ns, the total time of all of them, nested ones too (callgrind's
inclusive cost of the calls).
"""
import marshal
import os
from collections import namedtuple

Row = namedtuple("Row", "calls prim own_ns total_ns inclusive_ns")


def _add(table, key, calls, prim, own, total, inclusive):
    r = table.get(key)
    table[key] = Row(calls, prim, own, total, inclusive) if r is None else \
        Row(r.calls + calls, r.prim + prim, r.own_ns + own, r.total_ns + total, r.inclusive_ns + inclusive)


def tables(trees):
    """({function: Row}, {(caller or None, callee): Row}) of a list of call
    trees (stackwatch._native.CallTree); a function is (filename, line,
    name). Each tree's nodes come from C one at a time
    (CallTree.function_walk(), each node's children last first), so only
    the tables and the current path are held, never the tree as Python
    objects."""
    funcs, edges = {}, {}
    for tree in trees:
        on_path, path = {}, []
        for leaves, filename, line, name, calls, own, total in tree.function_walk():
            for _ in range(leaves):       # the nodes closed since the last one
                on_path[path.pop()] -= 1
            fn = (filename, line, name)
            caller = path[-1] if path else None
            outer = not on_path.get(fn)
            _add(funcs, fn, calls, calls if outer else 0, own, total if outer else 0, total)
            _add(edges, (caller, fn), calls, calls if outer else 0, own, total if outer else 0, total)
            on_path[fn] = on_path.get(fn, 0) + 1
            path.append(fn)
    return funcs, edges


def _of(trees):
    return tables([tree for _, _, tree in trees.threads])


def write_pstats(path, trees):
    """The marshalled stats dict of pstats: {(file, line, name): (cc, nc,
    tt, ct, {caller: (cc, nc, tt, ct)})}, times in seconds. The outermost
    frames have no caller entry (as in cProfile)."""
    funcs, edges = _of(trees)
    with open(os.fspath(path), "wb") as f:
        dump_pstats(f, funcs, edges)


def dump_pstats(f, funcs, edges):
    """Writes the stats dict of the tables (funcs, edges) of tables() to the
    binary file f. marshal marks the objects that are referred to more than
    once, so its bytes depend on what is alive while it writes: the tables
    (the caller's) and the callers' dicts here, as they always were."""
    callers = {fn: {} for fn in funcs}
    for (caller, callee), r in edges.items():
        if caller is not None:
            callers[callee][caller] = (r.prim, r.calls, r.own_ns / 1e9, r.total_ns / 1e9)
    stats = {fn: (r.prim, r.calls, r.own_ns / 1e9, r.total_ns / 1e9, callers[fn]) for fn, r in funcs.items()}
    marshal.dump(stats, f)


def _callgrind_name(s):
    return s.replace("\n", " ")


def write_callgrind(path, trees):
    """A callgrind profile (valgrind.org/docs/manual/cl-format.html): one
    event, the wall time in nanoseconds; per function its own cost at its
    first line and a `calls=` line per callee with the inclusive cost of
    those calls."""
    funcs, edges = _of(trees)
    callees = {}
    for (caller, callee), r in edges.items():
        if caller is not None:
            callees.setdefault(caller, []).append((callee, r))
    what = "calls" if trees.exact else "samples"
    lines = ["# callgrind format", "version: 1", "creator: stackwatch", f"cmd: {_callgrind_name(str(trees.title or ''))}",
             "positions: line", "events: ns", f"summary: {sum(r.own_ns for r in funcs.values())}",
             f"# calls= counts are {what}", ""]
    for fn in sorted(funcs, key=lambda k: (k[0], k[1], k[2])):
        filename, line, name = fn
        r = funcs[fn]
        lines += [f"fl={_callgrind_name(filename)}", f"fn={_callgrind_name(name)}", f"{max(line, 0)} {r.own_ns}"]
        for (cfile, cline, cname), e in sorted(callees.get(fn, ()), key=lambda x: x[0]):
            lines += [f"cfl={_callgrind_name(cfile)}", f"cfn={_callgrind_name(cname)}",
                      f"calls={e.calls} {max(cline, 0)}", f"{max(line, 0)} {e.inclusive_ns}"]
        lines.append("")
    with open(os.fspath(path), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines))
