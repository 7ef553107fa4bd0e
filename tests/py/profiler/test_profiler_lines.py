"""The profiler's lines mode (Profiler(lines=True), `stackwatch profile
--lines`): nodes are (function, file, line being run).

- The line-table decoder (native/procmem/linetable.c) against the
  interpreter's own answer for every instruction of every code object of
  the standard library's top-level modules: code.co_lines() (3.10+) or
  dis.findlinestarts() (3.9), on whichever Python runs the tests.
- A function whose three one-line loops take 60/30/10 percent of its CPU
  time: each line's share of the samples' CPU time is that, within the
  bound stats_bounds.time_shares derives from the run, and the caller's
  node is its call site.
- Without lines, nodes keep the function's first line.
- The CLI's collapsed output and the HTML flame graph's source text name
  the line being run.
"""
import dis
import glob
import json
import os
import sys
import threading
import time
import types

import pytest

import lines_workload
from conftest import SAMPLER, needs_sampler, run, tree_nodes, write
from stackwatch import _native
from stats_bounds import CYCLE, Blocks, time_shares


if SAMPLER:
    from stackwatch.profiler import Profiler


# ---- the decoder, differentially ----

def all_codes(co):
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from all_codes(c)


def expected_lines(co):
    """The line of each code unit (byte offsets 0, 2, ...), -1 for none, as
    the interpreter itself says."""
    n = len(co.co_code)
    out = [-1] * (n // 2)
    if sys.version_info >= (3, 10):
        for start, end, line in co.co_lines():
            for off in range(start, min(end, n), 2):
                out[off // 2] = -1 if line is None else line
        return out
    starts = list(dis.findlinestarts(co))
    j = -1
    for k in range(n // 2):
        while j + 1 < len(starts) and starts[j + 1][0] <= 2 * k:
            j += 1
        out[k] = starts[j][1] if j >= 0 else co.co_firstlineno
    return out


def table_of(co):
    return co.co_lnotab if sys.version_info < (3, 10) else co.co_linetable


def test_decoder_matches_the_interpreter_on_the_stdlib():
    stdlib = os.path.dirname(os.__file__)
    files = sorted(glob.glob(os.path.join(stdlib, "*.py")))
    assert len(files) > 100
    checked = units = 0
    mismatches = []
    for fn in files:
        with open(fn, "rb") as f:
            src = f.read()
        try:
            top = compile(src, fn, "exec")
        except (SyntaxError, ValueError):
            continue
        for co in all_codes(top):
            got = _native._linetable_lines(_native.LINETABLE_KIND, table_of(co), co.co_firstlineno,
                                           len(co.co_code))
            exp = expected_lines(co)
            checked += 1
            units += len(exp)
            if got != exp:
                mismatches.append((fn, co.co_name, [(2 * i, g, e) for i, (g, e) in enumerate(zip(got, exp))
                                                    if g != e][:3]))
    assert checked > 5000 and units > 300_000
    assert not mismatches, (len(mismatches), mismatches[:5])


def test_decoder_on_odd_tables():
    """Line deltas beyond one byte, lines going back, no-line ranges, and
    damaged or truncated tables (which must not crash, only decode to
    something or be refused)."""
    src = "def f(x):\n    y = x\n" + "\n" * 300 + "    z = (y +\n\n 1)\n    return [\n  z,\n    y]\n"
    ns = {}
    exec(compile(src, "odd.py", "exec"), ns)
    co = ns["f"].__code__
    got = _native._linetable_lines(_native.LINETABLE_KIND, table_of(co), co.co_firstlineno, len(co.co_code))
    assert got == expected_lines(co)
    assert max(got) > 300
    tab = table_of(co)
    for cut in range(len(tab)):
        try:
            _native._linetable_lines(_native.LINETABLE_KIND, tab[:cut], co.co_firstlineno, len(co.co_code))
        except ValueError:
            pass
    for junk in (b"\xff" * 64, bytes(range(256)), b"\x80\x7f" * 40):
        for kind in (1, 2, 3):
            try:
                _native._linetable_lines(kind, junk, 1, 512)
            except ValueError:
                pass
    with pytest.raises(ValueError):
        _native._linetable_lines(9, tab, 1, 16)


# ---- sampled lines ----

def line_times(tree, func, key="time_ns"):
    """{line: summed key} over the nodes of function `func`, outermost only."""
    out = {}
    stack = [tree]
    while stack:
        n = stack.pop()
        if n["name"] == func:
            out[n["line"]] = out.get(n["line"], 0) + n[key]
        else:
            stack.extend(n["children"])
    return out


@needs_sampler
@pytest.mark.timing
@pytest.mark.slow
@pytest.mark.versions("3.9", "3.10", "3.12")   # one of each line-table format
def test_60_30_10_lines():
    """Each line's share of the CPU time is the CPU time it used, within the
    bound stats_bounds.time_shares derives from the run (1 false failure in
    10,000). Catches a line table decoded wrong or a frame's instruction
    read at the wrong offset (time charged to the wrong line)."""
    marks = lines_workload.loop_lines()
    spent = {"LOOP60": 0.0, "LOOP30": 0.0, "LOOP10": 0.0}
    blocks = Blocks()
    holder = {}

    def until():
        p = holder["p"]
        return time.thread_time() - holder["t0"] >= 1.5 and p.stats()["stored"] >= 1200 or \
            time.perf_counter() > holder["deadline"]

    with Profiler(interval="1ms", mode="cpu", lines=True, cycle=CYCLE, maxlen=None) as p:
        holder.update(p=p, t0=time.thread_time(), deadline=time.perf_counter() + 60)
        lines_workload.run_rounds(spent, until, blocks)
    assert p.lines
    tree = p.tree(threading.get_ident())
    times = line_times(tree, "three_loops")
    loops = {m: times.get(marks[m], 0) for m in spent}
    total = sum(loops.values())
    assert total >= 0.9 * sum(times.values()), (times, marks)

    def measure(cycle_tree):
        at = line_times(cycle_tree, "three_loops")
        return {m: at.get(marks[m], 0) for m in spent}
    bad, report = time_shares(p, blocks, measure, threading.get_ident())
    assert not bad, (bad, report, times, marks, p.stats())
    # The caller's node is (run_rounds, its call site).
    callers = line_times(tree, "run_rounds", "count")
    assert max(callers, key=callers.get) == marks["CALL"], (callers, marks)
    # Every line node of three_loops sits under that call site.
    call = [n for n in tree_nodes(tree) if n["name"] == "run_rounds" and n["line"] == marks["CALL"]]
    assert call and sum(c["count"] for n in call for c in n["children"] if c["name"] == "three_loops") >= \
        0.95 * sum(line_times(tree, "three_loops", "count").values())


@needs_sampler
def test_without_lines_nodes_keep_the_first_line():
    spent = {"LOOP60": 0.0, "LOOP30": 0.0, "LOOP10": 0.0}
    end = time.perf_counter() + 0.3
    with Profiler(interval="1ms") as p:
        lines_workload.run_rounds(spent, lambda: time.perf_counter() > end)
    assert not p.lines
    first = lines_workload.three_loops.__code__.co_firstlineno
    assert set(line_times(p.tree(), "three_loops")) == {first}


@needs_sampler
@pytest.mark.timing
def test_lines_in_generators_and_threads():
    """Frames of generators (which live outside the thread's frame stack on
    3.11+) and of other threads get their lines too."""
    def gen():
        for _ in range(10 ** 9):
            t = time.thread_time() + 0.001
            while time.thread_time() < t: pass  # GENLOOP
            yield 1

    genloop = gen.__code__.co_firstlineno + 3

    def worker(stop):
        g = gen()
        while not stop.is_set():
            next(g)

    stop = threading.Event()
    th = threading.Thread(target=worker, args=(stop,))
    with Profiler(interval="1ms", lines=True) as p:
        th.start()
        time.sleep(0.4)
        give_up = time.perf_counter() + 30
        while p.stats()["stored"] < 300 and time.perf_counter() < give_up:   # (samples, not time)
            time.sleep(0.01)
        stop.set()
        th.join()
    times = line_times(p.tree(th.ident), "test_lines_in_generators_and_threads.<locals>.gen"
                       if sys.version_info >= (3, 11) else "gen", "count")
    assert times and max(times, key=times.get) == genloop, (times, genloop)


@needs_sampler
@pytest.mark.timing
def test_cli_lines_collapsed_and_html(tmp_path):
    script = write(tmp_path / "prog.py", (
        "import time\n"
        "def work():\n"
        "    c = time.thread_time\n"
        "    e = c() + 0.25\n"
        "    while c() < e: pass  # HOT\n"
        "work()\n"))
    out = tmp_path / "out.txt"
    r = run(["profile", "--lines", "-q", "-o", str(out), script])
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    hot = sum(int(l.rsplit(" ", 1)[1]) for l in text.splitlines() if f"work ({script}:5)" in l)
    total = sum(int(l.rsplit(" ", 1)[1]) for l in text.splitlines())
    assert hot >= 0.8 * total, text
    assert f"<module> ({script}:6)" in text      # the call site, not line 1
    html_out = tmp_path / "out.html"
    r = run(["profile", "--lines", "-q", "-o", str(html_out), script])
    assert r.returncode == 0, r.stderr
    page = html_out.read_text()
    start = page.index('type="application/json"')
    start = page.index(">", start) + 1
    data = json.loads(page[start:page.index("</script>", start)])
    s = data["strings"]
    frames = {(s[f[0]], f[2]): s[f[3]] for f in data["frames"]}
    assert frames[("work", 5)] == "while c() < e: pass  # HOT", frames
