"""EXT events in the trace file (`stackwatch run --events ...`): the reader
decodes them (Trace.ext_events), `stackwatch stats` counts them, and the
Perfetto / Chrome exports show them. Ground truth: the same program run
under a sys.settrace line recorder, a sys.monitoring (3.12+) or settrace
(3.9-3.11) exception recorder, gc.collect()'s own results and the
threads' own native ids."""
import json
import sys
from collections import Counter

import pytest

from conftest import perfetto_timeline, run, thread_pos
from stackwatch import Trace

PROGRAM = '''\
import gc
gc.disable()   # first: no automatic collection, whatever was allocated before
import threading


def g(i):
    if i % 3 == 0:
        raise ValueError(i)
    return i


def f(n):
    total = 0
    for i in range(n):
        try:
            total += g(i)
        except ValueError:
            total -= 1
    return total


def worker():
    f(4)


f(10)
found = 0
for k in range(3):
    for _ in range(5):
        a = []
        a.append(a)
    del a
    found += gc.collect()
th = threading.Thread(target=worker, name="w1")
th.start()
th.join()
print("found", found, "native_id", th.native_id)
'''

# Runs the program under recorders and prints what they saw as JSON:
# lines per thread name, raises and (3.12+) handled exceptions.
RECORDER = '''\
import json, sys, threading
path = sys.argv[1]
src = open(path).read()
lines, raises, handled = {}, [], []

def tracer(frame, event, arg):
    if frame.f_code.co_filename != path:
        return None
    return local

def local(frame, event, arg):
    if event == "line":
        lines.setdefault(threading.current_thread().name, []).append(
            [frame.f_code.co_name, frame.f_lineno])
    elif event == "exception" and sys.version_info < (3, 12) and arg[2].tb_next is None:
        raises.append([frame.f_code.co_name, frame.f_lineno, arg[0].__name__])
    return local

if sys.version_info >= (3, 12):
    mon = sys.monitoring
    TOOL = 4
    mon.use_tool_id(TOOL, "recorder")
    def line_of(code, off):  # 0 where the instruction has no line (a handler's start)
        for s, e, l in code.co_lines():
            if s <= off < e:
                return l or 0
        return 0
    def on_raise(code, off, exc):
        if code.co_filename == path:
            raises.append([code.co_name, line_of(code, off), type(exc).__name__])
    def on_handled(code, off, exc):
        if code.co_filename == path:
            # The handler's first instruction has no line: the first one
            # after it that has one (its except clause).
            handled.append([code.co_name, next(l for s, e, l in code.co_lines() if e > off and l),
                            type(exc).__name__])
    mon.register_callback(TOOL, mon.events.RAISE, on_raise)
    mon.register_callback(TOOL, mon.events.EXCEPTION_HANDLED, on_handled)
    mon.set_events(TOOL, mon.events.RAISE | mon.events.EXCEPTION_HANDLED)
threading.settrace(tracer)
sys.settrace(tracer)
code = compile(src, path, "exec")
exec(code, {"__name__": "__main__", "__file__": path})
sys.settrace(None)
threading.settrace(None)
if sys.version_info >= (3, 12):
    mon.set_events(TOOL, 0)
print(json.dumps({"lines": lines, "raises": raises, "handled": handled}))
'''


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    d = tmp_path_factory.mktemp("ext")
    prog = d / "prog.py"
    prog.write_text(PROGRAM)
    rec = d / "rec.py"
    rec.write_text(RECORDER)
    truth = run(["python", str(rec), str(prog)])
    assert truth.returncode == 0, truth.stderr
    out = d / "t.swt"
    r = run(["run", "-o", str(out), "--events", "exceptions,gc,threads", "--lines", str(prog), str(prog)])
    assert r.returncode == 0, r.stderr
    found, native_id = (int(x) for x in r.stdout.split()[1::2])
    return dict(prog=str(prog), trace=str(out), truth=json.loads(truth.stdout.splitlines()[-1]),
                found=found, native_id=native_id, dir=d)


def located(t, e):
    c = t.codes[e.code]
    return c.filename, c.name, e.line


def test_line_events_equal_settrace(recorded):
    t = Trace(recorded["trace"])
    for name in ("MainThread", "w1"):
        got = [[t.codes[e.code].name, e.line] for e in t.ext_events(thread_pos(t, name), kinds="line")
               if t.codes[e.code].filename == recorded["prog"]]
        assert got == recorded["truth"]["lines"][name], name
    assert len(recorded["truth"]["lines"]["w1"]) > 10


def test_raise_events_equal_the_interpreters(recorded):
    t = Trace(recorded["trace"])
    got = [[t.codes[e.code].name, e.line, e.data["type"]] for e in t.ext_events(kinds="raise")
           if t.codes[e.code].filename == recorded["prog"]]
    truth = recorded["truth"]["raises"]
    assert Counter(map(tuple, got)) == Counter(map(tuple, truth))
    assert Counter(r[0] for r in truth)["g"] == 4 + 2  # i = 0, 3, 6, 9 and 0, 3
    if sys.version_info >= (3, 12):
        got = [[t.codes[e.code].name, e.line, e.data["type"]] for e in t.ext_events(kinds="handled")
               if t.codes[e.code].filename == recorded["prog"]]
        assert Counter(map(tuple, got)) == Counter(map(tuple, recorded["truth"]["handled"]))
        assert len(got) == 6
    else:
        assert t.ext_events(kinds="handled") == []


def test_gc_events_equal_gc_collect(recorded):
    t = Trace(recorded["trace"])
    starts = t.ext_events(kinds="gc_start")
    dones = t.ext_events(kinds="gc_done")
    assert len(starts) == len(dones) == 3
    assert all(e.data["generation"] == 2 for e in starts + dones)
    assert sum(e.data["collected"] + e.data["uncollectable"] for e in dones) == recorded["found"] >= 15
    s = t.ext_summary()
    assert s["gc_collections"] == 3
    pairs = sum(d.t_ns - s_.t_ns for s_, d in zip(starts, dones))
    assert s["gc_ns"] == pairs > 0


def test_thread_events(recorded):
    t = Trace(recorded["trace"])
    pos = thread_pos(t, "w1")
    evs = t.ext_events(pos, kinds=["thread_start", "thread_exit"])
    assert [e.kind for e in evs] == ["thread_start", "thread_exit"]
    assert all(e.data == {"name": "w1", "native_id": recorded["native_id"]} for e in evs)
    assert t.threads[pos]["native_tid"] == recorded["native_id"]
    # Around the thread's target (its bootstrap's own frames come before).
    calls = [e for e in t.events(pos) if not e.synthetic and t.codes[e.code].name == "worker"]
    assert len(calls) == 2
    assert evs[0].t_ns <= calls[0].t_ns and evs[1].t_ns >= calls[-1].t_ns


def test_unknown_kind_name_is_an_error(recorded):
    with pytest.raises(ValueError, match="unknown event kind"):
        Trace(recorded["trace"]).ext_events(kinds="lines")


def test_stats_prints_event_counts(recorded):
    r = run(["stats", recorded["trace"]])
    assert r.returncode == 0, r.stderr
    t = Trace(recorded["trace"])
    counts = t.ext_summary()["counts"]
    assert counts["line"] == len(t.ext_events(kinds="line"))
    assert f"{counts['line']:>10}  line" in r.stdout
    assert f"{3:>10}  gc_start" in r.stdout
    assert "GC: 3 collections" in r.stdout
    assert "exceptions raised (by type and location)" in r.stdout
    row = next(line for line in r.stdout.splitlines() if "ValueError" in line and " g  (" in line)
    assert int(row.split()[0]) == 6
    assert (f"{recorded['prog']}:" in row)


def test_chrome_export_shows_events(recorded, tmp_path):
    out = tmp_path / "t.json"
    Trace(recorded["trace"]).export("chrome", str(out))
    doc = json.loads(out.read_text())
    t = Trace(recorded["trace"])
    inst = [e for e in doc["traceEvents"] if e["ph"] == "i" and e.get("cat") != ""]
    by_cat = Counter(e.get("cat") for e in inst)
    assert by_cat["line"] == len(t.ext_events(kinds="line"))
    assert by_cat["exception"] == len(t.ext_events(kinds=["raise", "handled"]))
    assert by_cat["thread"] == 2
    gc = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(gc) == 3 and all(e["cat"] == "gc" and e["dur"] > 0 for e in gc)
    assert sum(e["args"]["collected"] + e["args"]["uncollectable"] for e in gc) == recorded["found"]
    raise_g = [e for e in inst if e["name"] == "raise ValueError" and e["args"]["function"].endswith("g")]
    assert len(raise_g) == 6 and all(e["args"]["file"] == recorded["prog"] for e in raise_g)
    # Instants sit on the thread that recorded them.
    w1 = next(e["tid"] for e in doc["traceEvents"] if e["ph"] == "M" and e.get("args", {}).get("name") == "w1")
    assert {e["tid"] for e in inst if e["cat"] == "thread"} == {w1}


def test_perfetto_export_shows_events(recorded, tmp_path):
    t = Trace(recorded["trace"])
    tl = perfetto_timeline(recorded["trace"], tmp_path / "t.pftrace")   # slices balanced
    instants = Counter()
    annotations = []
    for _, track, te in tl.instants:
        instants[te.categories[0]] += 1
        annotations.append({a.name: (a.string_value or a.uint_value) for a in te.debug_annotations})
        assert tl.tracks[track].HasField("thread")
    gc_slices = []
    for name, begin, end, track, end_event in tl.slices:
        td = tl.tracks[track]
        if td.name == "GC":
            assert tl.tracks[td.parent_uuid].HasField("thread")
            args = {a.name: a.uint_value for a in end_event.debug_annotations}
            gc_slices.append((end - begin, name, args))
    assert instants["line"] == len(t.ext_events(kinds="line"))
    assert instants["exception"] == len(t.ext_events(kinds=["raise", "handled"]))
    assert instants["thread"] == 2
    assert len(gc_slices) == 3
    assert all(d > 0 and n == "GC (generation 2)" for d, n, _ in gc_slices)
    assert sum(a["collected"] + a["uncollectable"] for _, _, a in gc_slices) == recorded["found"]
    raised = [a for a in annotations if a.get("type") == "ValueError" and a.get("function") == "g"]
    assert len(raised) == 6 and all(a["file"] == recorded["prog"] and a["line"] == 8 for a in raised)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="handled exceptions are recorded on 3.12+ (sys.monitoring)")
def test_stats_exception_tables_give_real_lines(tmp_path):
    """The exceptions tables of `stats` name the line: the raise's, and for
    a handled exception its except clause (the program prints the line
    before its handler's body); no `:?`."""
    prog = tmp_path / "exc.py"
    prog.write_text("import sys\n"
                    "def f():\n"
                    "    try:\n"
                    "        raise ValueError('x')\n"
                    "    except ValueError:\n"
                    "        print(sys._getframe().f_lineno - 1)\n"
                    "for i in range(3):\n"
                    "    f()\n")
    r = run(["run", "-q", "--events", "exceptions", "-o", str(tmp_path / "e.swt"), str(prog)])
    assert r.returncode == 0 and r.stdout == "5\n5\n5\n", r.stderr
    out = run(["stats", str(tmp_path / "e.swt")]).stdout
    raised = out.split("exceptions raised")[1].split("\n\n")[0]
    handled = out.split("exceptions handled")[1].split("\n\n")[0]
    assert f"3  ValueError               f  ({prog}:4)" in raised
    assert f"3  ValueError               f  ({prog}:5)" in handled
    assert ":?)" not in out


def test_record_table_is_the_python_view(recorded):
    """The Python view of EXT records is the C table (native/trace/records.h,
    _native.RECORD_KINDS): every kind the dispatch layer writes has the name
    of its event kind (what ext_events(kinds=...) and --events take), and
    an event's data holds exactly its row's fields other than its location,
    in the row's order."""
    import stackwatch
    from stackwatch.tracer import tracefile as tf
    dispatch = {k.name for k in tf.RECORD_KINDS.values() if k.source == "dispatch"}
    assert dispatch and dispatch <= set(stackwatch.EVENTS)
    kernel = {k.name for k in tf.RECORD_KINDS.values() if k.source == "kernel"}
    assert kernel == {"syscall", "kernel_lost", "off_cpu", "on_cpu", "wakeup", "page_fault"}   # run --kernel (1.8, 1.10)
    # (and the tracer's CPU records, run --cpu: 1.13)
    assert set(tf.EXT_KINDS.values()) == dispatch | kernel | {"region_begin", "region_end", "cpu"}
    by_name = {k.name: k for k in tf.RECORD_KINDS.values()}
    t = Trace(recorded["trace"])
    seen = set()
    for e in t.ext_events():
        row = by_name[e.kind]
        assert list(e.data) == [f.name for f in row.fields if f.slot not in ("code", "line")]
        assert (e.code is not None) == any(f.type == "code" for f in row.fields)
        seen.add(e.kind)
    assert {"line", "raise", "gc_start", "gc_done", "thread_start"} <= seen
