"""Exact traces written in the formats of call trees (collapsed, speedscope,
the HTML flame graph, pprof) from their exact durations, checked against
the trace's own `stats` (Trace.stats(): calls, own and total time per
function): per function, the own nanoseconds summed over the tree's paths
equal stats' own time, the calls its calls, and the total time of its
outermost frames its total time. pprof is read by `go tool pprof`."""
import gzip
import json
import re
import shutil
import subprocess
import threading
from collections import Counter

import pytest

import stackwatch
from conftest import NO_CALLGRIND, NO_GO, needs, nested, page_data, run
from go_pprof import top
from stackwatch import Trace


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def leaf(n):
    return sum(range(n))


def branch():
    for i in range(30):
        leaf(200 + i)
    fib(9)


def gen():
    yield leaf(10)
    yield leaf(20)


def workload():
    branch()
    list(gen())
    th = threading.Thread(target=branch, name="helper")
    th.start()
    th.join()


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    d = tmp_path_factory.mktemp("trees")
    p = str(d / "t.swt")
    with stackwatch.trace(p):
        workload()
    t = Trace(p)
    stats = {}   # {name: [calls, own_ns, total_ns]}
    for r in t.stats():
        name = t.codes[r.code].qualname
        s = stats.setdefault(name, [0, 0, 0])
        s[0] += r.calls
        s[1] += r.own_ns
        s[2] += r.total_ns
    return p, d, t, stats


def by_function(tree):
    """{name: [calls, own_ns, total_ns of its outermost frames]} of a tree
    as nested dicts (CallTree.tree() or the page's data)."""
    out = {}
    stack = [(tree, ())]
    while stack:
        node, path = stack.pop()
        name = node["name"]
        if name != "<root>":
            s = out.setdefault(name, [0, 0, 0])
            s[0] += node["self"]
            s[1] += node["self_time_ns"]
            if name not in path:
                s[2] += node["time_ns"]
            path = path + (name,)
        stack.extend((c, path) for c in node["children"])
    return out


def merged(per_thread):
    out = {}
    for f in per_thread:
        for name, v in f.items():
            s = out.setdefault(name, [0, 0, 0])
            for i in range(3):
                s[i] += v[i]
    return out


def test_trees_equal_stats(traced):
    _, _, t, stats = traced
    trees = t.trees()
    assert trees.exact and len(trees.threads) == 2
    got = merged(by_function(tree.tree()) for _, _, tree in trees.threads)
    for name in ("fib", "leaf", "branch", "gen", "workload"):
        assert got[name] == stats[name], name
    assert stats["fib"][0] == 2 * 109 and stats["leaf"][0] == 2 * 30 + 2


def test_collapsed_is_own_nanoseconds(traced):
    p, d, t, stats = traced
    out = d / "t.collapsed.txt"
    r = run(["export", p, "-o", str(out)])
    assert r.returncode == 0, r.stderr
    own = Counter()
    for line in out.read_text().splitlines():
        stack, _, value = line.rpartition(" ")
        own[stack.split(";")[-1].split(" (")[0]] += int(value)
    for name in ("fib", "leaf", "branch"):
        assert own[name] == stats[name][1], name


def test_html_page_holds_the_exact_trees(traced):
    p, d, t, stats = traced
    out = d / "t.html"
    r = run(["export", p, "-o", str(out)])
    assert r.returncode == 0, r.stderr
    data = page_data(out.read_text(encoding="utf-8"))
    assert data["counts"] == "calls"
    got = merged(by_function(nested(data, th)) for th in data["threads"])
    for name in ("fib", "leaf", "branch", "gen"):
        assert got[name] == stats[name], name


def test_speedscope_weights_are_own_time(traced):
    p, d, t, stats = traced
    out = d / "t.speedscope.json"
    r = run(["export", p, "--format", "speedscope", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    names = [f["name"] for f in doc["shared"]["frames"]]
    own = Counter()
    for prof in doc["profiles"]:
        assert prof["unit"] == "nanoseconds"
        for stack, w in zip(prof["samples"], prof["weights"]):
            own[names[stack[-1]]] += w
    for name in ("fib", "leaf", "branch"):
        assert own[name] == stats[name][1], name


@needs(NO_GO)
def test_pprof_read_by_go_tool_pprof(traced):
    p, d, t, stats = traced
    out = d / "t.pb.gz"
    r = run(["export", p, "-o", str(out)])
    assert r.returncode == 0, r.stderr
    gzip.decompress(out.read_bytes())
    for index, col in (("wall", 1), ("calls", 0)):
        rows = {name: flat for name, (flat, _) in top(out, index, "-edgefraction=0")[2].items()}
        for name in ("fib", "leaf", "branch"):
            assert rows[name] == stats[name][col], (index, name, rows)


def test_run_writes_a_flame_graph_directly(tmp_path):
    script = tmp_path / "p.py"
    script.write_text("def f(n):\n    return n if n < 2 else f(n-1)+f(n-2)\nf(8)\n")
    out = tmp_path / "p.html"
    r = run(["run", "-o", str(out), "--format", "html", str(script)])
    assert r.returncode == 0, r.stderr
    data = page_data(out.read_text(encoding="utf-8"))
    assert data["counts"] == "calls" and by_function(nested(data, data["threads"][0]))["f"][0] == 67
    r = run(["run", "-o", str(tmp_path / "q.html"), "--format", "html", "--min-duration", "1us", str(script)])
    assert r.returncode != 0 and "--min-duration" in r.stderr


def test_min_duration_is_for_timelines(traced):
    p, d, *_ = traced
    r = run(["export", p, "-o", str(d / "x.html"), "--min-duration", "1us"])
    assert r.returncode == 2 and "--min-duration applies to the timeline formats" in r.stderr, r.stderr
    r = run(["export", p, "-o", str(d / "x.unknown")])
    assert r.returncode == 2 and "give --format" in r.stderr, r.stderr


# ---- pstats and callgrind (render/functions.py) ----

def test_pstats_loads_with_the_calls_of_stats_and_cprofile(traced, tmp_path):
    import pstats
    p, d, t, stats = traced
    out = d / "t.pstats"
    r = run(["export", p, "-o", str(out)])
    assert r.returncode == 0, r.stderr
    st = pstats.Stats(str(out))
    by_name = {}
    for (filename, line, name), (cc, nc, tt, ct, callers) in st.stats.items():
        by_name.setdefault(name, []).append((cc, nc, tt, ct, callers))
    for name in ("fib", "leaf", "branch", "gen"):
        (cc, nc, tt, ct, callers), = by_name[name]
        assert nc == stats[name][0], name
        assert round(tt * 1e9) == stats[name][1] and round(ct * 1e9) == stats[name][2], name
    # fib: 2 primitive calls (from branch, once per thread), the rest recursive
    (cc, nc, *_, callers), = by_name["fib"]
    assert cc == 2 and {k[2]: v[1] for k, v in callers.items()} == {"branch": 2, "fib": nc - 2}
    # cProfile of what the main thread ran counts the same calls (the
    # thread left out: 3.12's cProfile sees every thread).
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
    branch()
    list(gen())
    prof.disable()
    ref = {k[2]: v[1] for k, v in pstats.Stats(prof).stats.items() if k[0] == __file__}
    main = Counter()
    for row in t.stats():
        if row.thread == 0:
            main[t.codes[row.code].qualname] += row.calls
    for name in ("fib", "leaf", "branch", "gen"):
        assert ref[name] == main[name], name


CALLGRIND = shutil.which("callgrind_annotate")


@needs(NO_CALLGRIND)
def test_callgrind_read_by_callgrind_annotate(traced):
    p, d, t, stats = traced
    out = d / "t.callgrind"
    r = run(["export", p, "-o", str(out)])
    assert r.returncode == 0, r.stderr
    ann = subprocess.run([CALLGRIND, "--threshold=100", str(out)], capture_output=True, text=True, timeout=60)
    assert ann.returncode == 0, ann.stderr
    own = {}
    for line in ann.stdout.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+\S*:(\w+)", line)
        if m:
            own[m.group(2)] = int(m.group(1).replace(",", ""))
    for name in ("fib", "leaf", "branch"):
        assert own[name] == stats[name][1], (name, ann.stdout)
    total = re.search(r"^([\d,]+) \([^)]*\)\s+PROGRAM TOTALS", ann.stdout, re.M)
    assert total and int(total.group(1).replace(",", "")) == sum(v[1] for v in stats.values())


@needs(NO_CALLGRIND)
@pytest.mark.versions("3.10", "3.13")   # the writers: the same on every version
def test_profiles_write_pstats_and_callgrind(tmp_path):
    import pstats
    from conftest import SAMPLER
    if not SAMPLER:
        pytest.skip("the sampling profiler does not support this CPython")
    script = tmp_path / "spin.py"
    script.write_text("import time\ndef spin():\n    t = time.perf_counter() + 0.3\n    while time.perf_counter() < t:\n"
                      "        pass\nspin()\n")
    out = tmp_path / "p.pstats"
    r = run(["profile", "-o", str(out), str(script)])
    assert r.returncode == 0, r.stderr
    st = pstats.Stats(str(out))
    spin, = [v for k, v in st.stats.items() if k[2] == "spin"]
    assert spin[1] > 10 and spin[3] > 0.1   # samples, and their time in seconds
    r = run(["profile", "-o", str(tmp_path / "p.callgrind"), str(script)])
    assert r.returncode == 0, r.stderr
    ann = subprocess.run([CALLGRIND, str(tmp_path / "p.callgrind")], capture_output=True, text=True, timeout=60)
    assert ann.returncode == 0 and ":spin" in ann.stdout, ann.stdout + ann.stderr
