"""Exports are checked by real consumers: Perfetto protobuf decoded with the
official schema (perfetto_trace_pb2 from the `perfetto` package), Chrome
JSON parsed and its B/E events balanced per thread."""
import json
import threading

import pytest

import stackwatch
from conftest import run
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
    pb2 = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    out = tmp_path / "t.pftrace"
    Trace(trace_file).export("perfetto", str(out))
    trace = pb2.Trace()
    trace.ParseFromString(out.read_bytes())
    tracks = {}
    names = {}
    depth = {}
    begins = {}
    thread_names = set()
    last_ts = {}
    for pkt in trace.packet:
        if pkt.HasField("track_descriptor"):
            td = pkt.track_descriptor
            tracks[td.uuid] = td
            if td.HasField("thread"):
                thread_names.add(td.thread.thread_name)
        if pkt.HasField("interned_data"):
            for en in pkt.interned_data.event_names:
                names[(pkt.trusted_packet_sequence_id, en.iid)] = en.name
        if pkt.HasField("track_event"):
            te = pkt.track_event
            assert te.track_uuid in tracks
            # What trace_processor needs to keep an event: its sequence's
            # incremental state cleared by the sequence's first packet and
            # required by the others, and time never going back on it.
            seq = pkt.trusted_packet_sequence_id
            first = seq not in last_ts
            assert pkt.sequence_flags == (pb2.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED if first
                                          else pb2.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE)
            assert pkt.timestamp >= last_ts.get(seq, 0)
            last_ts[seq] = pkt.timestamp
            if te.type == pb2.TrackEvent.TYPE_SLICE_BEGIN:
                depth[te.track_uuid] = depth.get(te.track_uuid, 0) + 1
                n = names[(pkt.trusted_packet_sequence_id, te.name_iid)]
                begins[n] = begins.get(n, 0) + 1
            elif te.type == pb2.TrackEvent.TYPE_SLICE_END:
                depth[te.track_uuid] -= 1
                assert depth[te.track_uuid] >= 0
    assert all(d == 0 for d in depth.values())
    assert begins["fib"] == 177 + 25
    assert begins["gen"] == 3  # first run + 2 resumptions
    assert {"MainThread", "helper"} <= thread_names
    assert len(last_ts) == 2 and min(last_ts.values()) > 0


def test_chrome_json(trace_file, tmp_path):
    out = tmp_path / "t.json"
    r = run(["export", trace_file, "--format", "chrome", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    stack = {}
    count = 0
    for ev in doc["traceEvents"]:
        if ev["ph"] == "B":
            stack.setdefault(ev["tid"], []).append(ev)
            count += ev["name"] == "fib"
        elif ev["ph"] == "E":
            b = stack[ev["tid"]].pop()
            assert ev["ts"] >= b["ts"]
    assert all(not s for s in stack.values())
    assert count == 177 + 25


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
