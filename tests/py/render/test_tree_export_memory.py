"""The call-tree formats of a trace (collapsed, pstats, callgrind, html,
speedscope, pprof) are written as the tree is walked: a trace with 2^17
distinct call paths is exported in each within the memory of its tree
(its nodes times what a node costs), never holding the text, whose size
grows with the paths' depths. Peak memory is the child's own ru_maxrss
(wait4), measured against the same export's floor: the Perfetto timeline
of the same trace, which streams."""
import gzip
import io
import os
import subprocess
import sys

import pytest

from conftest import run

pytestmark = pytest.mark.versions("3.10")   # the exports of a tree: the same on every version
from stackwatch import _native
from stackwatch.render import flamegraph, formats, functions
from stackwatch.tracer.tracefile import Trace

DEPTH = 16
# a(n) and b(n) each call a(n - 1) and b(n - 1): 2^DEPTH distinct leaf
# paths, 2^(DEPTH+1) - 2 call-tree nodes under the module's.
PROGRAM = """
import sys
def a(n):
    if n:
        a(n - 1)
        b(n - 1)
def b(n):
    if n:
        a(n - 1)
        b(n - 1)
a(int(sys.argv[1]))
"""
TREE_FORMATS = ("collapsed", "pstats", "callgrind", "html", "speedscope", "pprof")


@pytest.fixture(scope="module")
def many_paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("paths")
    script = d / "paths.py"
    script.write_text(PROGRAM)
    trace = d / "paths.swt"
    r = run(["run", "-q", "-o", str(trace), str(script), str(DEPTH)])
    assert r.returncode == 0, r.stderr
    return d, trace


def peak_mb(args):
    """The peak resident memory (MB) of `python -m stackwatch ARGS` alone."""
    p = subprocess.Popen([sys.executable, "-m", "stackwatch"] + args, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    assert os.waitstatus_to_exitcode(status) == 0, err
    return usage.ru_maxrss / 1024


def test_every_tree_format_stays_within_the_tree(many_paths):
    d, trace = many_paths
    nodes = sum(tree.nodes for _, _, tree in Trace(str(trace)).trees().threads)
    assert nodes >= 2 ** (DEPTH + 1)
    floor = peak_mb(["export", str(trace), "--format", "perfetto", "-o", str(d / "t.pftrace")])
    # The tree once, and as much again for what a writer keeps per node
    # (the page's pre-order indexes, a walk's stack), plus 8 MB for the
    # writers' buffers and the page's template.
    tree_mb = nodes * _native.CALLTREE_NODE_BYTES / 2 ** 20
    bound = floor + 2 * tree_mb + 8
    for fmt in TREE_FORMATS:
        out = d / f"t.{fmt}"
        mb = peak_mb(["export", str(trace), "--format", fmt, "-o", str(out)])
        assert mb < bound, f"{fmt}: {mb:.0f} MB, over {bound:.0f} MB ({nodes} nodes, floor {floor:.0f} MB)"
    # The bound means something: the collapsed text alone is larger than
    # what it allows over the floor.
    assert os.path.getsize(d / "t.collapsed") / 2 ** 20 > bound - floor


def test_trees_over_the_limit_say_what_makes_them_smaller(many_paths):
    _, trace = many_paths
    with pytest.raises(MemoryError, match=r"over 1000 nodes.*--max-depth N, --thread, --include/--exclude"):
        Trace(str(trace)).trees(max_nodes=1000)
    from stackwatch.tracer.tracefile import Filter
    assert sum(t.nodes for _, _, t in Trace(str(trace)).trees(Filter(max_depth=3), max_nodes=1000).threads) < 1000


def test_export_of_trees_over_the_limit_is_one_line(many_paths, monkeypatch, capsys):
    """The command line prints that message as one line, exit status 2, and
    writes no file (the limit lowered to 1000 nodes: the machine's half
    of memory is not reached by a test)."""
    import functools
    from stackwatch import cli
    from stackwatch.tracer import tracefile
    d, trace = many_paths
    monkeypatch.setattr(tracefile.Trace, "trees", functools.partialmethod(tracefile.Trace.trees, max_nodes=1000))
    out = d / "over.collapsed.txt"
    with pytest.raises(SystemExit) as e:
        cli.main(["export", str(trace), "-o", str(out)])
    assert e.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "too large" in err[0] and "--max-depth N" in err[0], err
    assert not out.exists()


@pytest.fixture(scope="module")
def small(many_paths):
    d, _ = many_paths
    trace = d / "small.swt"
    r = run(["run", "-q", "-o", str(trace), str(d / "paths.py"), "7"])
    assert r.returncode == 0, r.stderr
    return d, trace


def tables_of_dicts(trees):
    """The per-function tables as they were computed before the nodes came
    from C: a walk of the nested dicts of CallTree.tree()."""
    funcs, edges = {}, {}
    for tree in trees:
        on_path = {}
        stack = [(c, None) for c in tree["children"]]
        while stack:
            node, caller = stack.pop()
            if node is None:
                on_path[caller] -= 1
                continue
            fn = (node["filename"], node["line"], node["name"])
            outer = not on_path.get(fn)
            calls, own, total = node["self"], node["self_time_ns"], node["time_ns"]
            functions._add(funcs, fn, calls, calls if outer else 0, own, total if outer else 0, total)
            functions._add(edges, (caller, fn), calls, calls if outer else 0, own, total if outer else 0, total)
            on_path[fn] = on_path.get(fn, 0) + 1
            stack.append((None, fn))
            stack.extend((c, fn) for c in node["children"])
    return funcs, edges


def test_streamed_outputs_are_those_of_whole_texts(small):
    """Byte for byte: pstats as the walk of nested dicts gave it (marshal's
    bytes depend on which objects are shared), pprof as gzip.compress of
    the whole message, the HTML page as the nested dicts make it."""
    d, path = small
    trace = Trace(str(path))
    trees = trace.trees()
    for fmt in ("pstats", "pprof", "html"):
        formats.write_trace(fmt, d / f"s.{fmt}", trace)
    funcs, edges = tables_of_dicts([t.tree() for _, _, t in trees.threads])
    expected = io.BytesIO()
    functions.dump_pstats(expected, funcs, edges)
    assert (d / "s.pstats").read_bytes() == expected.getvalue()
    message = _native.render_trees("pprof", [(label, t) for label, _, t in trees.threads], title="s.pprof",
                                   time_ns=trees.time_ns, duration_ns=trees.duration_ns, exact=True)
    assert (d / "s.pprof").read_bytes() == gzip.compress(message, compresslevel=6, mtime=0)
    threads = [{"name": label, "thread_id": tid, "tree": t.tree()} for label, tid, t in trees.threads]
    page = flamegraph.document(threads, "s.html", 0, trees.stats, "calls")
    assert (d / "s.html").read_text(encoding="utf-8") == page


def test_a_tree_being_written_cannot_change(small):
    _, path = small
    tree = Trace(str(path)).trees().threads[0][2]
    other = _native.CallTree()

    def write(data):
        tree.merge(other)

    for render in (lambda: _native.render_trees("collapsed", [(None, tree)], write=write),
                   lambda: _native.render_flat(tree, [0] * 64, write)):
        with pytest.raises(RuntimeError, match="being written"):
            render()
    tree.merge(other)    # written: it may change again
