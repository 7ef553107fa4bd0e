"""`stackwatch tasks FILE [--json]` and `export --format sequence` on a
real greenlet program's trace (greenlet_prog.py), checked against the
program's own log: the switches in its order, each greenlet running at
least as long as it slept; and the one-line errors. The views are the
same Python on every version and the reader has tests of its own
(tracer/test_task_events.py): these run on 3.12 only."""
import json

import pytest

from conftest import page_data, run, write
from greenlet_prog import traced
from stackwatch.taskviews import analysis
from stackwatch.tracer.task_events import read_task_events

# The views are Python over a document, the same on every version.
pytestmark = pytest.mark.versions("3.12")


@pytest.fixture(scope="module")
def greenlets(tmp_path_factory):
    return traced(tmp_path_factory.mktemp("views"))


def test_json_is_the_document_and_its_analysis(greenlets):
    swt, log = greenlets
    r = run(["tasks", swt, "--json"])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    analyzed = out.pop("analysis")
    assert out == read_task_events(swt)
    assert [[e["task"], e["other"]] for e in out["events"] if e["kind"] == "switch"] == log["switches"]
    per = analyzed["tasks"]
    # time.sleep inside a greenlet is running time (no wait is recorded),
    # and the three tasks of one thread never run at once.
    for name, slept in log["slept"].items():
        assert per[name]["running_ns"] >= slept, name
        assert per[name]["switches_in"] == sum(1 for s in log["switches"] if s[0] == name)
    assert sum(p["running_ns"] for p in per.values()) <= analyzed["span_ns"]
    for p in per.values():
        assert p["running_ns"] + p["runnable_ns"] + p["blocked_ns"] == p["end_ns"] - p["start_ns"]


def test_text_report(greenlets):
    swt, log = greenlets
    r = run(["tasks", swt])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    events = len(read_task_events(swt)["events"])
    assert lines[0].startswith(f"t.swt: 3 tasks, {events} task events over ")
    for name in ("MainThread", "greenlet produce", "greenlet consume"):
        assert any(name in x for x in lines[3:7]), name
    assert "blocking profile: no task waited" in r.stdout


def test_sequence_export_of_the_trace(greenlets, tmp_path):
    swt, log = greenlets
    out = tmp_path / "s.sequence.html"
    r = run(["export", swt, "-o", str(out)])      # the format from the name
    assert r.returncode == 0, r.stderr
    data = page_data(out.read_text())
    names = [t["name"] for t in data["tasks"]]
    switch = data["kinds"].index("switch")
    pairs = [[names[a], names[b]] for k, a, b in zip(data["events"]["kind"], data["events"]["task"],
                                                      data["events"]["other"]) if k == switch]
    assert pairs == log["switches"]
    r = run(["export", swt, "--format", "sequence", "--thread", "MainThread", "-o", str(out)])
    assert r.returncode == 2 and "--thread does not apply to sequence" in r.stderr


def test_one_line_errors(greenlets, tmp_path):
    no_tasks, _ = traced_without_tasks(tmp_path)
    text = write(tmp_path / "x.txt", "hello")
    for args, said in ((["tasks", str(tmp_path / "nope.swt")], "nope.swt: no such file"),
                       (["tasks", text], "not a stackwatch trace"),
                       (["tasks", no_tasks], "the trace has no task events (record them with: stackwatch run "
                                             "--events tasks"),
                       (["export", no_tasks, "--format", "sequence", "-o", str(tmp_path / "o.html")],
                        "the trace has no task events"),
                       (["run", "--format", "sequence", "-o", str(tmp_path / "r.html"), text],
                        "--format sequence draws the task events: record them with --events tasks")):
        r = run(args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and said in r.stderr, (args, r.stderr)
        assert r.stderr.startswith("stackwatch: error: ")


def traced_without_tasks(folder):
    from conftest import run_traced
    return run_traced(folder, "print(sum(range(10)))\n")


def test_analysis_of_the_real_document_is_json_ready(greenlets):
    swt, _ = greenlets
    a = analysis.analyze(read_task_events(swt))
    assert json.loads(json.dumps(a)) == a


# asyncio: tasks that sleep and a consumer that waits on a queue, each
# await timed by the program itself (per coroutine function).
ASYNCIO = r'''
import asyncio, json, sys, time

log = {}

def note(name, what, t):
    log.setdefault(name, []).append([what, time.perf_counter_ns() - t])

async def sleeper_a(n):
    for _ in range(n):
        t = time.perf_counter_ns()
        await asyncio.sleep(0.01)   # SLEEP LINE
        note("sleeper_a", "sleep", t)

async def sleeper_b(n):
    for _ in range(n):
        t = time.perf_counter_ns()
        await asyncio.sleep(0.01)   # SLEEP LINE
        note("sleeper_b", "sleep", t)

async def producer(q):
    for i in range(3):
        t = time.perf_counter_ns()
        await asyncio.sleep(0.01)   # SLEEP LINE
        note("producer", "sleep", t)
        await q.put(i)

async def consumer(q):
    for _ in range(3):
        t = time.perf_counter_ns()
        await q.get()   # QUEUE LINE
        note("consumer", "queue", t)

async def main():
    q = asyncio.Queue()
    await asyncio.gather(sleeper_a(2), sleeper_b(3), producer(q), consumer(q))

asyncio.run(main())
json.dump(log, open(sys.argv[1], "w"))
'''


@pytest.fixture(scope="module")
def asyncio_trace(tmp_path_factory):
    """(the trace of ASYNCIO, the program's own log)."""
    from conftest import run_traced
    folder = tmp_path_factory.mktemp("asyncio")
    own = folder / "log.json"
    swt, _ = run_traced(folder, ASYNCIO, "--events", "tasks", args=(str(own),))
    return swt, json.loads(own.read_text())


def test_asyncio_waits_against_the_programs_own_timing(asyncio_trace):
    """Each task's time blocked by reason lies within the awaits the
    program timed (a wait is inside its await) and is most of them; the
    blocking profile names the lines of the awaits; the queue's waits were
    ended by the producer's put."""
    swt, log = asyncio_trace
    r = run(["tasks", swt, "--json"])
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)["analysis"]
    # Tasks are named "Task-N function" (their coroutine's qualname).
    names = {fn: next(n for n in a["tasks"] if n.endswith(" " + fn)) for fn in log}
    for fn, awaits in log.items():
        per = a["tasks"][names[fn]]
        for reason in ("sleep", "queue"):
            timed = [ns for what, ns in awaits if what == reason]
            got = per["blocked_by_reason"].get(reason, 0)
            assert got <= sum(timed), (fn, reason)
            if reason == "sleep":
                assert got >= 0.5 * 10_000_000 * len(timed), (fn, reason)
    lines = ASYNCIO.splitlines()
    sleep_lines = {i for i, x in enumerate(lines, 1) if "# SLEEP LINE" in x}
    queue_line = next(i for i, x in enumerate(lines, 1) if "# QUEUE LINE" in x)
    rows = {(p["reason"], p["line"]): p for p in a["blocking_profile"]}
    assert sum(p["waits"] for (reason, line), p in rows.items() if reason == "sleep" and line in sleep_lines) == 8
    assert {reason for reason, line in rows} == {"sleep", "queue", "join"}
    assert rows[("queue", queue_line)]["waits"] >= 1
    queue_waits = [w for w in a["longest_waits"] if w["reason"] == "queue"]
    assert queue_waits and all(w["ended_by"] == names["producer"] and w["ended_how"] == "wake" for w in queue_waits)


def _flows_expected(doc):
    """(kind, from task, to task) of every flow the document makes: each
    create and wake with the other task known, and each receive (of a
    message some send on its channel gave)."""
    out = []
    for e in doc["events"]:
        if e["kind"] in ("create", "wake") and e["other"]:
            out.append((e["kind"], e["other"], e["task"]))
        elif e["kind"] == "receive" and e["channel"]:
            out.append(("send", e["other"], e["task"]))
    return sorted(out)


def test_flows_between_tasks_in_perfetto_and_chrome(asyncio_trace, tmp_path):
    """The Perfetto export (decoded with the official schema) and the
    Chrome one carry a flow per creation, wake and message of the task
    events, from the track of the task that made it to the other's, never
    back in time; each flow id starts once and ends once."""
    from conftest import chrome_slices, perfetto_decode
    swt, _ = asyncio_trace
    want = _flows_expected(read_task_events(swt))
    assert len(want) >= 8 + 3 + 3     # (the tasks' creations, the queue's wakes and messages)
    out = tmp_path / "t.pftrace"
    assert run(["export", swt, "-o", str(out)]).returncode == 0
    p = perfetto_decode(out)
    name = {u: d.thread.thread_name for u, d in p.tracks.items() if d.HasField("thread")}
    starts, ends = {}, {}
    for ts, uuid, te in p.instants:
        for f in te.flow_ids:
            assert f not in starts
            starts[f] = (te.name, name[uuid], ts)
        for f in te.terminating_flow_ids:
            assert f not in ends
            ends[f] = (te.name, name[uuid], ts)
    assert set(starts) == set(ends)
    assert all(starts[f][2] <= ends[f][2] for f in starts)
    got = sorted((starts[f][0], starts[f][1], ends[f][1]) for f in starts)
    assert got == want
    # Chrome: "s" and "f" of each id, each in a zero-length slice of its own.
    out = tmp_path / "t.json"
    assert run(["export", swt, "-o", str(out)]).returncode == 0
    doc = json.loads(out.read_text())
    thread_name = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and "tid" in e}
    s = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "s"}
    f = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "f"}
    assert set(s) == set(f) and all(x["bp"] == "e" for x in f.values())
    assert sorted((s[i]["name"], thread_name[s[i]["tid"]], thread_name[f[i]["tid"]]) for i in s) == want
    marks = {(x[1], x[3]) for x in chrome_slices(doc) if x[1] == x[2] and x[0] in ("create", "wake", "send")}
    assert all((e["ts"], e["tid"]) in marks for e in s.values())


def test_the_page_and_stackwatch_tasks_count_the_same_waits(asyncio_trace):
    """The sequence diagram's waits (render/sequence.py, below this room)
    are those of the analysis, task for task and nanosecond for nanosecond."""
    from stackwatch.render import sequence
    doc = read_task_events(asyncio_trace[0])
    data = sequence.data(doc, "t")
    names = [t["name"] for t in data["tasks"]]
    page = sorted((names[t], w) for t, w in zip(data["events"]["task"], data["events"]["wait"]) if w >= 0)
    waits = analysis.analyze(doc, longest=10 ** 9)["longest_waits"]
    assert page == sorted((w["task"], w["duration_ns"]) for w in waits) and len(page) >= 8
