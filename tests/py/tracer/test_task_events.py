"""The task events document (stackwatch.tracer.task_events.read_task_events,
issue 22) against the program's own log: a factorial computed by greenlets
passing numbers with switch(), logged by the program's own
greenlet.settrace callback (chained by stackwatch's), must come out of the
trace as the same switches, in the same order, from the same code."""
import json
import subprocess
import sys

import pytest

from conftest import needs_module, write
from stackwatch.tracer.task_events import read_task_events

# The program's own log: every switch as (task switched to, task switched
# from, the function that called switch(): None when the origin ended).
GREENLETS = r'''
import json, sys
import greenlet, stackwatch

log, where = [], []
names = {}

def label(g):
    return "MainThread" if g.parent is None else names[id(g)]

def mine(event, args):
    origin, target = args
    log.append({"kind": "switch", "task": label(target), "other": label(origin),
                "function": where.pop() if where and not origin.dead else None})

def produce(n):
    for i in range(1, n + 1):
        where.append("produce")
        consumer.switch(i)
    where.append("produce")
    consumer.switch(None)

def consume(first):
    acc, i = 1, first
    while i is not None:
        acc *= i
        where.append("consume")
        i = producer.switch()
    return acc

greenlet.settrace(mine)
producer = greenlet.greenlet(produce)
consumer = greenlet.greenlet(consume)
names[id(producer)], names[id(consumer)] = "greenlet produce", "greenlet consume"
def run(n):
    where.append("run")
    return producer.switch(n)

stackwatch.start(sys.argv[1], events=["tasks"])
result = run(int(sys.argv[3]))
stackwatch.stop()
greenlet.settrace(None)
assert result == 120, result
json.dump(log, open(sys.argv[2], "w"))
'''


def _run(folder, program, *args):
    """Runs the program (it starts and stops tracing itself): (its trace's
    path, its own log)."""
    prog = write(folder / "p.py", program)
    swt, log = folder / "t.swt", folder / "log.json"
    r = subprocess.run([sys.executable, prog, str(swt), str(log), *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return str(swt), json.loads(log.read_text())


@pytest.fixture(scope="module")
def greenlets(tmp_path_factory):
    needs_module("greenlet", "greenlet is not installed (scripts/venv.sh installs it)")
    return _run(tmp_path_factory.mktemp("greenlets"), GREENLETS, "5")


def test_greenlet_switches_equal_the_programs_log(greenlets):
    swt, log = greenlets
    doc = read_task_events(swt)
    json.dumps(doc)   # JSON-ready
    tasks = {t["name"]: t for t in doc["tasks"]}
    assert set(tasks) == {"MainThread", "greenlet produce", "greenlet consume"}
    assert tasks["MainThread"]["kind"] == "thread" and tasks["MainThread"]["id"] == 0
    assert tasks["greenlet produce"]["kind"] == tasks["greenlet consume"]["kind"] == "greenlet"
    assert len({t["thread"] for t in doc["tasks"]}) == 1
    got = [{k: e[k] for k in ("kind", "task", "other", "function")} for e in doc["events"] if e["kind"] == "switch"]
    assert got == log and len(log) == 13
    times = [e["t_ns"] for e in doc["events"]]
    assert times == sorted(times)
    for e in doc["events"]:
        assert e["task_id"] == tasks[e["task"]]["id"]
        assert (e["file"] is None) == (e["function"] is None)
        assert e["file"] is None or e["file"].endswith("p.py")
