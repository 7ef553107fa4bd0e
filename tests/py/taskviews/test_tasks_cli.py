"""`stackwatch tasks FILE [--json]` and `export --format sequence` on a
real greenlet program's trace (greenlet_prog.py), checked against the
program's own log: the switches in its order, each greenlet running at
least as long as it slept; and the one-line errors. The views are the
same Python on every version and the reader has tests of its own
(tracer/test_task_events.py): these run on 3.12 only."""
import json
import sys

import pytest

from conftest import page_data, run, write
from greenlet_prog import traced
from stackwatch.taskviews import analysis
from stackwatch.tracer.task_events import read_task_events

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 12), reason="the views are checked on 3.12 only")


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
                        "the trace has no task events")):
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


def test_asyncio_waits_against_the_programs_own_timing(tmp_path):
    """Each task's time blocked by reason lies within the awaits the
    program timed (a wait is inside its await) and is most of them; the
    blocking profile names the lines of the awaits; the queue's waits were
    ended by the producer's put."""
    from conftest import run_traced
    own = tmp_path / "log.json"
    swt, _ = run_traced(tmp_path, ASYNCIO, "--events", "tasks", args=(str(own),))
    log = json.loads(own.read_text())
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
