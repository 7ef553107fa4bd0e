"""The filters of `stats` and `export` (--thread, --start/--stop,
--include/--exclude, --max-depth; cli/filters.py over native/trace/
filter.c), each checked against a reading of the same trace done here
from its events, and `stats --callers/--callees/--json/--csv`."""
import csv
import io
import json
import threading

import pytest

import stackwatch
from conftest import chrome_slices, run
from stackwatch import Trace


def leaf(n):
    return sum(range(n))


def mid(k):
    for i in range(k):
        leaf(100 + i)


def top():
    for _ in range(5):
        mid(4)


def workload():
    top()
    th = threading.Thread(target=mid, args=(7,), name="helper")
    th.start()
    th.join()


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("flt") / "t.swt")
    with stackwatch.trace(p):
        workload()
    return p


def stats_json(path, *extra):
    r = run(["stats", path, "--json", *extra])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    funcs = {f["qualname"]: f for f in doc["functions"]}
    funcs[ALL] = doc["functions"]   # several functions may share a name (3.9, 3.10: no qualified names)
    return doc, funcs


ALL = ("all",)


def test_no_filter_equals_the_trace_stats(trace):
    t = Trace(trace)
    _, funcs = stats_json(trace)
    calls = {}
    for r in t.stats():
        calls[t.codes[r.code].qualname] = calls.get(t.codes[r.code].qualname, 0) + r.calls
    assert {k: funcs[k]["calls"] for k in ("leaf", "mid", "top")} == {k: calls[k] for k in ("leaf", "mid", "top")}
    assert funcs["leaf"]["calls"] == 5 * 4 + 7


def test_thread(trace):
    _, funcs = stats_json(trace, "--thread", "helper")
    assert funcs["mid"]["calls"] == 1 and funcs["leaf"]["calls"] == 7 and "top" not in funcs
    _, funcs = stats_json(trace, "--thread", "Main*")
    assert funcs["leaf"]["calls"] == 20 and funcs["top"]["calls"] == 1


def _own_sum(funcs):
    return sum(f["own_ns"] for f in funcs[ALL])


def test_exclude_gives_the_time_to_the_caller(trace):
    _, full = stats_json(trace)
    _, cut = stats_json(trace, "--exclude", "leaf")
    assert "leaf" not in cut
    assert cut["mid"]["own_ns"] == full["mid"]["own_ns"] + full["leaf"]["own_ns"]
    assert _own_sum(cut) == _own_sum(full)
    _, by_file = stats_json(trace, "--exclude", "*threading.py")
    assert not [f for f in by_file[ALL] if f["file"].endswith("threading.py")]


def test_include_keeps_only_matches(trace):
    _, full = stats_json(trace)
    _, only = stats_json(trace, "--include", "leaf", "--include", "mid")
    assert set(only) == {"leaf", "mid", ALL}
    assert only["leaf"] == full["leaf"] and only["mid"]["calls"] == full["mid"]["calls"]


def test_max_depth(trace):
    t = Trace(trace)
    _, full = stats_json(trace)
    _, cut = stats_json(trace, "--max-depth", "1")
    # depth 1: the outermost frames of each thread only
    outermost = set()
    for pos in range(len(t.threads)):
        outermost |= {t.codes[e.code].qualname for e in t.events(pos) if e.depth == 0 and e.kind == 0}
    assert set(cut) - {ALL} <= outermost and "leaf" not in cut
    assert _own_sum(cut) == _own_sum(full)


def test_window_counts_the_calls_in_it(trace):
    t = Trace(trace)
    times = sorted(e.t_ns for pos in range(len(t.threads)) for e in t.events(pos))
    start, stop = times[len(times) // 3], times[2 * len(times) // 3]
    _, win = stats_json(trace, "--start", f"{start}ns", "--stop", f"{stop}ns")
    calls = {}
    for pos in range(len(t.threads)):
        for e in t.events(pos):
            if e.kind == 0 and not e.synthetic and start <= e.t_ns <= stop:
                c = t.codes[e.code]
                key = (c.qualname, c.filename, c.firstlineno)
                calls[key] = calls.get(key, 0) + 1
    assert {(f["qualname"], f["file"], f["line"]): f["calls"] for f in win[ALL] if f["calls"]} == calls
    # own times of two halves add up to the whole's
    _, a = stats_json(trace, "--stop", f"{start}ns")
    _, b = stats_json(trace, "--start", f"{start}ns")
    _, full = stats_json(trace)
    assert _own_sum(a) + _own_sum(b) == _own_sum(full)


def test_exports_filtered(trace, tmp_path):
    t = Trace(trace)
    helper = [th for th in t.threads if th["name"] == "helper"][0]
    out = tmp_path / "h.json"
    r = run(["export", trace, "--format", "chrome", "--thread", "helper", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert {e["tid"] for e in doc["traceEvents"] if e["ph"] in "BE"} == {helper["native_tid"]}
    slices = chrome_slices(doc)
    assert sum(name == "leaf" for name, *_ in slices) == 7
    out = tmp_path / "x.collapsed.txt"
    r = run(["export", trace, "--exclude", "leaf", "--max-depth", "3", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "leaf" not in text and max(line.count(";") for line in text.splitlines()) <= 2


@pytest.mark.parametrize("args, message", [
    (["--max-depth", "0"], "--max-depth: '0' is not a positive whole number"),
    (["--start", "soon"], "--start: invalid duration 'soon'"),
    (["--start", "2s", "--stop", "1s"], "--start is after --stop"),
    (["--thread", "nobody"], "--thread 'nobody': no such thread"),
    (["--callers", "nothing_like_this"], "no function of the trace is called 'nothing_like_this'"),
])
def test_bad_values_are_one_line(trace, args, message):
    r = run(["stats", trace] + args)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_callers_and_callees(trace):
    r = run(["stats", trace, "--callers", "leaf", "--callees", "mid"])
    assert r.returncode == 0, r.stderr
    callers = r.stdout.split("callers of leaf")[1].split("\n\n")[0].splitlines()[2:]
    assert len(callers) == 1 and callers[0].split()[0] == "27" and " mid " in callers[0]
    callees = r.stdout.split("called by mid")[1].split("\n\n")[0].splitlines()[2:]
    assert any(line.split()[0] == "27" and " leaf " in line for line in callees), callees
    doc, _ = stats_json(trace)
    pairs = {(c["caller"], c["callee"]): c["calls"] for c in doc["calls"]}
    assert pairs[("mid", "leaf")] == 27 and pairs[("top", "mid")] == 5


def test_csv(trace):
    r = run(["stats", trace, "--csv"])
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    leaf = {row["thread"]: int(row["calls"]) for row in rows if row["function"] == "leaf"}
    assert leaf == {"MainThread": 20, "helper": 7}
