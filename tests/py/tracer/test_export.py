"""Exports are checked by real consumers: Perfetto protobuf decoded with the
official schema (perfetto_trace_pb2 from the `perfetto` package), Chrome
JSON parsed and its B/E events balanced per thread."""
import json
import threading
from collections import Counter

import pytest

import stackwatch
from conftest import NO_PERFETTO, PERFETTO_PB2, calls_by_name, chrome_slices, needs_module, perfetto_timeline, run
from stackwatch import Trace


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def gen():
    yield 1
    yield 2


def workload():
    fib(10)
    list(gen())
    th = threading.Thread(target=fib, args=(6,), name="helper")
    th.start()
    th.join()


@pytest.fixture
def trace_file(tmp_path):
    p = str(tmp_path / "t.swt")
    with stackwatch.trace(p):
        workload()
    return p


def test_perfetto_decodes_with_official_schema(trace_file, tmp_path):
    tl = perfetto_timeline(trace_file, tmp_path / "t.pftrace")
    begins = Counter(name for name, *_ in tl.slices)
    thread_names = {td.thread.thread_name for td in tl.tracks.values() if td.HasField("thread")}
    assert begins["fib"] == 177 + 25
    assert begins["gen"] == 3  # first run + 2 resumptions
    assert {"MainThread", "helper"} <= thread_names
    assert len(tl.sequences) == 2 and min(tl.sequences.values()) > 0


def _chrome_per_thread(doc):
    """{tid: [(name, begin ns, end ns, depth, cat, (file, line))]} of a
    Chrome export, in the order the slices end."""
    open_, out = {}, {}
    for e in doc["traceEvents"]:
        if e["ph"] == "B":
            open_.setdefault(e["tid"], []).append(e)
        elif e["ph"] == "E":
            stack = open_[e["tid"]]
            b = stack.pop()
            args = b.get("args", {})
            out.setdefault(e["tid"], []).append((b["name"], round(b["ts"] * 1000), round(e["ts"] * 1000), len(stack),
                                                 b["cat"], (args.get("file"), args.get("line"))))
    assert not any(open_.values())
    return out


def raises():
    raise ValueError("x")


def varied():
    """Python calls, recursion, C calls, a generator resumed, an exception
    unwinding a frame, and a second thread."""
    fib(9)
    list(gen())
    sorted([3, 1, 2], key=abs)
    try:
        raises()
    except ValueError:
        pass
    th = threading.Thread(target=fib, args=(5,), name="helper")
    th.start()
    th.join()


def test_perfetto_equals_chrome_and_stats(tmp_path):
    """The compact Perfetto encoding (interned names, categories and
    source locations, incremental timestamps, per-thread defaults) decoded
    as trace_processor would: every slice's name, begin, end, nesting,
    category and source location equal the Chrome export's, thread by
    thread, and its slices per function equal Trace.stats()'s calls."""
    path = str(tmp_path / "v.swt")
    with stackwatch.trace(path, c_calls=True):
        varied()
    t = Trace(path)
    tl = perfetto_timeline(path, tmp_path / "v.pftrace")
    out = tmp_path / "v.json"
    t.export("chrome", str(out))
    chrome = _chrome_per_thread(json.loads(out.read_text()))
    boot0, mono0 = t.meta["boot0_ns"], t.meta["mono0_ns"]
    perfetto = {}
    for (name, begin, end, track, _), info in zip(tl.slices, tl.slice_info):
        td = tl.tracks[track]
        assert td.HasField("thread")   # no GC or samples here
        file, function, line = info["source"]
        assert function == name
        perfetto.setdefault(td.thread.tid, []).append(
            (name, begin - boot0, end - boot0, info["depth"], info["categories"], (file, line)))
    assert len(perfetto) == 2
    for tid, rows in chrome.items():
        want = [(n, b - mono0, e - mono0, d, [c], src) for n, b, e, d, c, src in rows]
        assert perfetto[tid] == want
    assert Counter(name for name, *_ in tl.slices) == calls_by_name(t)
    assert {"python", "c"} == {c for info in tl.slice_info for c in info["categories"]}
    assert max(info["depth"] for info in tl.slice_info) >= 8
    # ... and the encoding is the compact one: every event's time a delta,
    # on its thread's default track, every slice named by an interned iid.
    enc = tl.encoding
    assert enc["incremental"] == enc["events"] == enc["default_track"] == 2 * len(tl.slices)
    assert enc["name_iid"] == len(tl.slices)


def test_chrome_json(trace_file, tmp_path):
    out = tmp_path / "t.json"
    r = run(["export", trace_file, "--format", "chrome", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    slices = chrome_slices(json.loads(out.read_text()))   # balanced, in time order
    assert sum(name == "fib" for name, *_ in slices) == 177 + 25


def test_min_duration_filter(trace_file, tmp_path):
    full, short = tmp_path / "a.json", tmp_path / "b.json"
    t = Trace(trace_file)
    t.export("chrome", str(full))
    t.export("chrome", str(short), min_duration_ns=10**9)
    n_full = sum(e["ph"] == "B" for e in json.loads(full.read_text())["traceEvents"])
    n_short = sum(e["ph"] == "B" for e in json.loads(short.read_text())["traceEvents"])
    assert n_full > 200 and n_short < 10


def test_run_writes_perfetto_directly(tmp_path):
    pb2 = needs_module(PERFETTO_PB2, NO_PERFETTO)
    script = tmp_path / "p.py"
    script.write_text("def f(n):\n    return n if n < 2 else f(n-1)+f(n-2)\nf(8)\n")
    r = run(["run", "--format", "perfetto", "-o", str(tmp_path / "o.pftrace"), str(script)])
    assert r.returncode == 0, r.stderr
    trace = pb2.Trace()
    trace.ParseFromString((tmp_path / "o.pftrace").read_bytes())
    assert sum(p.track_event.type == 1 for p in trace.packet if p.HasField("track_event")) >= 67
