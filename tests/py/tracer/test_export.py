"""Exports are checked by real consumers: Perfetto protobuf decoded with the
official schema (perfetto_trace_pb2 from the `perfetto` package), Chrome
JSON parsed and its B/E events balanced per thread."""
import json
import threading
from collections import Counter

import pytest

import stackwatch
from conftest import chrome_slices, perfetto_timeline, run
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
    pb2 = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    script = tmp_path / "p.py"
    script.write_text("def f(n):\n    return n if n < 2 else f(n-1)+f(n-2)\nf(8)\n")
    r = run(["run", "--format", "perfetto", "-o", str(tmp_path / "o.pftrace"), str(script)])
    assert r.returncode == 0, r.stderr
    trace = pb2.Trace()
    trace.ParseFromString((tmp_path / "o.pftrace").read_bytes())
    assert sum(p.track_event.type == 1 for p in trace.packet if p.HasField("track_event")) >= 67
