"""Task switches (`--events tasks`, trace format 1.7): greenlets switching
from inside nested calls, each one's calls checked against the program's
own ground truth (sys.setprofile plus greenlet.getcurrent(): per greenlet,
its call / return sequence) on the trace's per-task tracks, in the Python
view and in both exports as their real readers take them."""
import json
import os
import subprocess
import sys

import pytest

from conftest import chrome_slices, perfetto_timeline, run_own_log, run_traced, write
from stackwatch import Trace
from stackwatch.tracer.task_events import read_task_events

# The program logs, per greenlet, the calls and returns of its own
# functions; worker_a and worker_b switch to each other from inside
# leaf() (two levels down), so each one's returns come while the other's
# frames are open.
PROGRAM = r'''
import json, sys
import greenlet

log = {}
N = int(sys.argv[2]) if len(sys.argv) > 2 else 3

def prof(frame, event, arg):
    if event in ("call", "return") and frame.f_code.co_filename == __file__ and frame.f_code.co_name != "prof":
        g = greenlet.getcurrent()
        log.setdefault("main" if g.parent is None else g.name, []).append((event, frame.f_code.co_name))

def leaf(n, other):
    if not other.dead:
        other.switch(n)
    return n

def mid(n, other):
    return leaf(n, other) + 1

def worker_a(x):
    for i in range(N):
        mid(i, gb)

def worker_b(x):
    for i in range(N + 1):
        mid(i, ga)

def driver():
    ga.switch(0)
    while not gb.dead:
        gb.switch()

ga = greenlet.greenlet(worker_a)
ga.name = "greenlet worker_a"
gb = greenlet.greenlet(worker_b)
gb.name = "greenlet worker_b"
sys.setprofile(prof)
driver()
sys.setprofile(None)
open(sys.argv[1], "w").write(json.dumps(log))
'''

OWN = {"driver", "worker_a", "worker_b", "mid", "leaf"}


def _need_greenlet():
    try:
        import greenlet  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("greenlet is not installed (scripts/venv.sh installs it)")
        pytest.skip("greenlet is not installed (scripts/venv.sh installs it)")


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """The program run with task events: (trace path, its ground truth)."""
    _need_greenlet()
    folder = tmp_path_factory.mktemp("tasks")
    truth = folder / "truth.json"
    swt, _ = run_traced(folder, PROGRAM, "--events", "tasks", args=(str(truth),))
    return swt, json.loads(truth.read_text())


def _track(t, name):
    return next(i for i, th in enumerate(t.threads) if th["name"] == name)


def _own_sequence(t, pos, synthetic=False, names=OWN):
    """The calls and returns of the program's functions (names) on a
    track, as the ground truth lists them (those the reader made up, or
    the others)."""
    seq = []
    for e in t.events(pos):
        code = t.codes.get(e.code)
        if code is None or _bare(code.name) not in names or bool(e.synthetic) != synthetic:
            continue
        if e.kind in (0, 2):
            seq.append(["call", _bare(code.name)])
        elif e.kind in (1, 3, 4):
            seq.append(["return", _bare(code.name)])
    return seq


def _bare(qualname):
    return qualname.rsplit(".", 1)[-1]


def _check_nesting(t):
    """Every track nests: its depths go up by one per call and each return
    ends the innermost frame the track itself opened."""
    for pos in range(len(t.threads)):
        stack = []
        for e in t.events(pos):
            if e.kind in (0, 2, 5):
                assert e.depth == len(stack)
                stack.append(e.code)
            elif e.kind in (1, 3, 4, 6):
                assert stack and stack.pop() == e.code and e.depth == len(stack)
        assert not stack


def test_each_greenlet_calls_nest_on_its_own_task(traced):
    swt, truth = traced
    t = Trace(swt)
    names = [th["name"] for th in t.threads]
    assert names == ["MainThread", "greenlet worker_a", "greenlet worker_b"]
    tasks = [th for th in t.threads if th["task"]]
    assert len({th["task"] for th in tasks}) == 2 and all(th["thread"] == t.threads[0]["index"] for th in tasks)
    assert set(truth) == {"main", "greenlet worker_a", "greenlet worker_b"}
    for key, want in truth.items():
        pos = 0 if key == "main" else _track(t, key)
        assert _own_sequence(t, pos) == [list(x) for x in want], key
    _check_nesting(t)


def test_a_chunk_read_after_a_gap_knows_every_tasks_frames(tmp_path):
    """Ring mode discards the oldest chunks: the first chunk kept is read
    alone, and its TASK_FRAMES chunk gives the frames every task had open
    then (the suspended ones too), so that each task's later returns close
    its own frames: what each track shows is exactly the end of its ground
    truth, after the frames reopened at the start."""
    _need_greenlet()
    truth_path = tmp_path / "truth.json"
    swt, _ = run_traced(tmp_path, PROGRAM, "--events", "tasks", "--ring", "32K", "--buffer-size", "4K",
                        args=(str(truth_path), "2000"))
    t = Trace(swt)
    truth = json.loads(truth_path.read_text())
    assert t.threads[0]["dropped"] > 0   # the ring did discard chunks
    _check_nesting(t)
    for key in ("greenlet worker_a", "greenlet worker_b"):
        pos = _track(t, key)
        got, want = _own_sequence(t, pos), [list(x) for x in truth[key]]
        assert 100 < len(got) < len(want) and got == want[-len(got):], key
        # The frames reopened are those the task had open where its kept
        # events begin.
        open_ = []
        for ev, name in want[:len(want) - len(got)]:
            open_.append(name) if ev == "call" else open_.pop()
        assert _own_sequence(t, pos, synthetic=True)[:len(open_)] == [["call", n] for n in open_]


def test_exports_show_a_track_per_task(traced, tmp_path):
    swt, truth = traced
    # Chrome JSON: a thread_name per task, its B/E balanced per tid, and the
    # program's calls on each task's tid in the ground truth's order.
    Trace(swt).export("chrome", str(tmp_path / "t.json"))
    doc = json.loads((tmp_path / "t.json").read_text())
    tid_of = {e["args"]["name"]: e["tid"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert {"greenlet worker_a", "greenlet worker_b"} <= set(tid_of)
    slices = chrome_slices(doc)
    for key in ("greenlet worker_a", "greenlet worker_b"):
        mine = sorted((b, -e, name) for name, b, e, tid in slices if tid == tid_of[key] and name in OWN)
        assert [name for _, _, name in mine] == [name for ev, name in truth[key] if ev == "call"]
        # Nested: each slice lies inside the one that began before it and is still open.
        open_ = []
        for b, neg_e, name in mine:
            while open_ and open_[-1] <= b:
                open_.pop()
            assert not open_ or -neg_e <= open_[-1], (key, name)
            open_.append(-neg_e)
    # Perfetto: a track per task named after it, its slices nested at the
    # ground truth's depths.
    tl = perfetto_timeline(swt, tmp_path / "t.pftrace")
    uuid_of = {d.thread.thread_name: u for u, d in tl.tracks.items() if d.HasField("thread")}
    for key in ("greenlet worker_a", "greenlet worker_b"):
        got = [(name, info["depth"]) for (name, _, _, track, _), info in zip(tl.slices, tl.slice_info)
               if track == uuid_of[key] and name in OWN]
        want, depth = [], 0
        for ev, name in truth[key]:   # in the order slices end: the returns
            if ev == "call":
                depth += 1
            else:
                depth -= 1
                want.append((name, depth))
        assert sorted(got) == sorted(want) and len(got) == len(want)
        ends = [n for n, _ in got]
        assert ends == [n for n, _ in want]


def test_without_task_events_no_tasks(tmp_path):
    """Task events off: no task tracks, the TASK chunk absent, greenlet's
    trace callback untouched."""
    _need_greenlet()
    swt, _ = run_traced(tmp_path, PROGRAM + "\nimport greenlet\nassert greenlet.gettrace() is None\n",
                        args=(str(tmp_path / "truth.json"),))
    t = Trace(swt)
    assert [th["name"] for th in t.threads] == ["MainThread"] and not t.threads[0]["task"]


def test_a_greenlet_trace_callback_set_before_stays_chained(tmp_path):
    """A program's own greenlet.settrace callback, set before tracing
    starts, still sees every switch, and it is back when tracing stops."""
    _need_greenlet()
    program = r'''
import sys, greenlet, stackwatch
seen = []
def mine(event, args):
    seen.append((event, args[1].name if args[1].parent else "main"))
greenlet.settrace(mine)
def child():
    greenlet.getcurrent().parent.switch(1)
g = greenlet.greenlet(child)
g.name = "child"
stackwatch.start(sys.argv[1], events=["tasks"])
g.switch()
g.switch()
stackwatch.stop()
assert greenlet.gettrace() is mine, greenlet.gettrace()
assert seen == [("switch", "child"), ("switch", "main"), ("switch", "child"), ("switch", "main")], seen
'''
    out = tmp_path / "inner.swt"
    prog = write(tmp_path / "p.py", program)
    r = subprocess.run([sys.executable, prog, str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    t = Trace(str(out))
    assert [th["name"] for th in t.threads][1:] == ["greenlet child"]


def test_task_events_with_a_handler_too(tmp_path):
    """With a handler as well (`--log`), which switches the mechanisms
    again, the callback is installed once (not chained to itself), every
    switch reaches the log, and the tracks are still exact."""
    _need_greenlet()
    truth_path, log = tmp_path / "truth.json", tmp_path / "events.log"
    swt, _ = run_traced(tmp_path, PROGRAM, "--events", "tasks", "--log", str(log), args=(str(truth_path),))
    truth = json.loads(truth_path.read_text())
    t = Trace(swt)
    for key in ("greenlet worker_a", "greenlet worker_b"):
        assert _own_sequence(t, _track(t, key)) == [list(x) for x in truth[key]]
    # main -> a, then 3 + 3 switches between a and b inside leaf(), a ends
    # into main, main -> b, b ends into main.
    assert log.read_text().count(" task_switch") == 10


# asyncio tasks: the program logs, per task (asyncio.current_task()), the
# calls and returns of its own functions (a coroutine's: at each resume and
# each suspension), with sys.setprofile. Workers await a coroutine that
# awaits in turn, and pass values through a queue to a consumer.
ASYNCIO_PROGRAM = r'''
import asyncio, json, sys

log = {}

def prof(frame, event, arg):
    if event in ("call", "return") and frame.f_code.co_filename == __file__ and frame.f_code.co_name != "prof":
        try:
            task = asyncio.current_task()
        except RuntimeError:
            task = None
        log.setdefault(task.get_name() if task else "main", []).append((event, frame.f_code.co_name))

def leaf(n):
    return n * 2

async def mid(n, q):
    await asyncio.sleep(0)
    await q.put(leaf(n))
    return n

async def worker(i, q):
    s = 0
    for k in range(3):
        s += await mid(10 * i + k, q)
    return s

async def consumer(q, n):
    return sum([await q.get() for _ in range(n)])

async def main():
    q = asyncio.Queue(maxsize=2)
    loop = asyncio.get_running_loop()
    c = loop.create_task(consumer(q, 9), name="consumer")
    ws = [loop.create_task(worker(i, q), name=f"worker{i}") for i in range(3)]
    await asyncio.gather(*ws)
    return await c

total = 2 * sum(10 * i + k for i in range(3) for k in range(3))
sys.setprofile(prof)
assert asyncio.run(main()) == total
sys.setprofile(None)
open(sys.argv[1], "w").write(json.dumps(log))
'''


@pytest.mark.versions("3.9", "3.12")
def test_each_asyncio_tasks_calls_equal_its_own_log(tmp_path):
    """Each asyncio task's track holds exactly its calls and returns (its
    coroutines' resumes and suspensions included), as the program's own
    sys.setprofile and asyncio.current_task() log them."""
    truth_path = tmp_path / "truth.json"
    swt, _ = run_traced(tmp_path, ASYNCIO_PROGRAM, "--events", "tasks", args=(str(truth_path),))
    truth = json.loads(truth_path.read_text())
    t = Trace(swt)
    _check_nesting(t)
    own = {"leaf", "mid", "worker", "consumer", "main"}
    assert set(truth) == {"Task-1", "consumer", "worker0", "worker1", "worker2"}   # (asyncio.run's is Task-1)
    for key, want in truth.items():
        pos = next(i for i, th in enumerate(t.threads) if th["task"] and th["name"].split(" ")[0] == key)
        got = _own_sequence(t, pos, names=own)
        assert got == [list(x) for x in want if x[1] in own] and got, key
    assert not _own_sequence(t, 0, names=own)   # (none on the loop's thread)


GEVENT_PROGRAM = r'''
import json, os, sys
if sys.argv[2:] == ["pure"]:   # gevent's pure-Python hub: its switches are greenlet.switch() called from Python
    os.environ["PURE_PYTHON"] = "1"
import gevent, gevent.event, greenlet

log = {}

def prof(frame, event, arg):
    if event in ("call", "return") and frame.f_code.co_filename == __file__ and frame.f_code.co_name != "prof":
        g = greenlet.getcurrent()
        log.setdefault("main" if g.parent is None else str(id(g)), []).append((event, frame.f_code.co_name))

def inner(i, n):
    gevent.sleep(0.001 * (i % 3))
    return n + i

def outer(i):
    s = 0
    for k in range(3):
        s = inner(i, s)
    return s

def main():
    jobs = [gevent.spawn(outer, i) for i in range(5)]
    gevent.joinall(jobs)

def handoff():
    """A value handed over by gevent's hub (AsyncResult's waiter is
    switched to with it): the hub's switch, no message."""
    result = gevent.event.AsyncResult()
    waiter = gevent.spawn(result.get)
    gevent.sleep(0)
    result.set("handed over")
    assert waiter.get() == "handed over"

sys.setprofile(prof)
main()
handoff()
sys.setprofile(None)
assert gevent.__file__ and (sys.argv[2:] != ["pure"]) == (type(gevent.hub.Hub.switch).__name__ != "function")
open(sys.argv[1], "w").write(json.dumps(log))
'''


# gevent's hub: named by its run method (3.9 and 3.10 code objects have no
# qualified name)
GEVENT_HUB = "greenlet Hub.run" if sys.version_info >= (3, 11) else "greenlet run"


def _need_gevent():
    try:
        import gevent  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("gevent is not installed (scripts/venv.sh installs it)")
        pytest.skip("gevent is not installed (scripts/venv.sh installs it)")


def _no_messages(swt):
    """The switches inside gevent's hub (a value handed to a waiter among
    them) are switches only: no send, no receive."""
    doc = read_task_events(swt)
    kinds = [e["kind"] for e in doc["events"]]
    assert kinds.count("switch") > 20 and "send" not in kinds and "receive" not in kinds
    assert len([t for t in doc["tasks"] if t["kind"] == "greenlet"]) == 7   # the hub, 5 outers, the waiter


@pytest.mark.skipif(sys.version_info < (3, 10), reason="gevent has no wheel for 3.9 in the package index here")
def test_gevent_greenlets_each_on_their_own_task(tmp_path):
    """gevent (from PyPI): five greenlets that sleep inside nested calls,
    switched by gevent's hub; each one's calls and returns, on its own
    track, equal the program's own log of that greenlet; the hub's
    switches carry no message."""
    _need_gevent()
    truth_path = tmp_path / "truth.json"
    swt, _ = run_traced(tmp_path, GEVENT_PROGRAM, "--events", "tasks", args=(str(truth_path),))
    _no_messages(swt)
    truth = json.loads(truth_path.read_text())
    t = Trace(swt)
    _check_nesting(t)
    names = [th["name"] for th in t.threads]
    hub = GEVENT_HUB
    assert names.count("greenlet outer") == 5 and hub in names
    _check_gevent_names(swt)
    own = {"inner", "outer", "main"}
    got = []
    for pos in range(len(t.threads)):
        seq = [["call" if e.kind in (0, 2) else "return", t.codes[e.code].name] for e in t.events(pos)
               if e.kind in (0, 1, 2, 3, 4) and t.codes[e.code].name in own
               and t.codes[e.code].filename.endswith("prog.py")]
        if seq:
            got.append(json.dumps(seq))
    # (before 3.12 a list comprehension is a function of its own: left out)
    want = [json.dumps([list(x) for x in v if x[1] in own]) for v in truth.values() if any(x[1] in own for x in v)]
    assert len(want) == 6 and sorted(got) == sorted(want)


@pytest.mark.versions("3.12")
def test_gevent_pure_python_hub_switches_carry_no_message(tmp_path):
    """gevent's pure-Python hub calls greenlet.switch() from Python, with
    the values it hands over: still switches only."""
    _need_gevent()
    swt, _ = run_traced(tmp_path, GEVENT_PROGRAM, "--events", "tasks", args=(str(tmp_path / "truth.json"), "pure"))
    _no_messages(swt)
    _check_gevent_names(swt)


def _check_gevent_names(swt):
    """Each greenlet gevent.spawn() made is named by the function given to
    it (outer; AsyncResult.get), not by gevent's own code it runs first
    (Greenlet.run in pure Python, Timeout._start_new_or_dummy under
    result.get), on its track and in the task document alike."""
    spawned = ["greenlet outer"] * 5 + ["greenlet AsyncResult.get"]
    tracks = [th["name"] for th in Trace(swt).threads if th["task"] and th["name"] != GEVENT_HUB]
    assert sorted(tracks) == sorted(spawned), tracks
    doc = [t["name"].split(" #")[0] for t in read_task_events(swt)["tasks"]
           if t["kind"] == "greenlet" and t["name"] != GEVENT_HUB]
    assert sorted(doc) == sorted(spawned), doc


# Greenlets alive before task events start: `worker` began (it waits in a
# nested call), `later` did not; `orphan` began under `middle` (a greenlet
# that began too), whose switch() to it was called before tracing, so the
# value orphan ends with reaches middle by greenlet's own switch, never
# seen: its result is not known. The program logs each one's run function
# and what its parent's switch() returned.
AT_START = r'''
import json, sys, greenlet, stackwatch
main = greenlet.getcurrent()
def worker(n):
    def inner():
        main.switch("paused")
    inner()
    return n * 2
def later(n):
    return [n + 1]
def orphan():
    main.switch("orphan paused")
    return "lost"
def boom():
    main.switch()
    raise ValueError("boom")
def middle():
    o = greenlet.greenlet(orphan)
    got = o.switch()                     # (greenlet's own switch: tracing has not started)
    return ("middle saw", got)
gl, g2 = greenlet.greenlet(worker), greenlet.greenlet(later)
assert gl.switch(3) == "paused"
mid = greenlet.greenlet(middle)
assert mid.switch() == "orphan paused"
orphan_g = mid.gr_frame.f_locals["o"]
b = greenlet.greenlet(boom)
b.switch()
stackwatch.start(sys.argv[1], events=["tasks"])
results = {"greenlet worker": ("result", gl.switch()), "greenlet later": ("result", g2.switch(5))}
results["greenlet middle"] = ("result", orphan_g.switch())   # orphan ends into middle, which ends into us
try:
    b.switch()
except ValueError as e:   # (the exception boom raised, raised by our switch())
    results["greenlet boom"] = ("exception", e)
stackwatch.stop()
json.dump({k: [o, repr(v)] for k, (o, v) in results.items()}, open(sys.argv[2], "w"))
'''


@pytest.mark.versions("3.12")
def test_greenlets_alive_at_the_start_named_and_their_results(tmp_path):
    """A greenlet that began before task events is named by its run
    function (the outermost frame it runs), one not started yet by its
    .run; each exit's result (or exception) is the one its parent's
    switch() returned (or raised), as the program logged it, or marked unknown when no switch of ours
    returned it (never None)."""
    swt, own = run_own_log(tmp_path, AT_START)
    doc = read_task_events(swt)
    tasks = {t["name"]: t for t in doc["tasks"] if t["kind"] == "greenlet"}
    assert set(tasks) == {"greenlet worker", "greenlet later", "greenlet middle", "greenlet orphan",
                          "greenlet boom"}, list(tasks)
    for name, (outcome, result) in own.items():
        assert (tasks[name]["outcome"], tasks[name]["result"], tasks[name]["result_unknown"]) == \
            (outcome, result, False), name
    lost = tasks["greenlet orphan"]
    assert (lost["outcome"], lost["result"], lost["result_unknown"]) == ("result", None, True)
    exits = [e["task"] for e in doc["events"] if e["kind"] == "exit"]
    assert sorted(exits) == sorted(tasks), exits
