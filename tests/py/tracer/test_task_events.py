"""The task events document (stackwatch.tracer.task_events.read_task_events,
issue 22) against the program's own log: a factorial computed by greenlets
passing numbers with switch(), logged by the program's own
greenlet.settrace callback (chained by stackwatch's) and by its own code
around each switch(), must come out of the trace as the same switches and
messages, in the same order, from the same code."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import needs_module, perfetto_timeline, run_traced, write
from conftest import run as run_cli
from stackwatch import Trace
from stackwatch.taskviews.analysis import analyze
from stackwatch.tracer.task_events import read_task_events
from stackwatch.tracer.tracefile import RECORD_KINDS
from synth_trace import _chunk, varint

# The program's own log: every switch as (task switched to, task switched
# from, the function that called switch(): None when the origin ended),
# after the exit of a greenlet that ended and the creation of one that
# starts (greenlet tells of a greenlet first when it starts: its creation
# is its first switch in, by the greenlet that switches to it, there).
# The values switch() passes are messages: sent as the sender calls
# switch(), received when the receiver's switch() returns with them or its
# run function starts with them (several as a tuple); a switch() that
# passes nothing (the consumer's) carries none, nor does a greenlet's
# return into its parent (its exit's result).
GREENLETS = r'''
import json, sys
import greenlet, stackwatch

log, where, started = [], [], set()
names = {}

def label(g):
    return "MainThread" if g.parent is None else names[id(g)]

def mine(event, args):
    origin, target = args
    if origin.dead:
        log.append({"kind": "exit", "task": label(origin), "other": None, "function": None, "value": None})
    if target.parent is not None and id(target) not in started:
        started.add(id(target))
        log.append({"kind": "create", "task": label(target), "other": label(origin), "function": where[-1],
                    "value": None})
    log.append({"kind": "switch", "task": label(target), "other": label(origin),
                "function": where.pop() if where and not origin.dead else None, "value": None})

def send(to, *values):
    """to.switch(*values), logged as a send and its receive."""
    me = greenlet.getcurrent()
    value = repr(values[0] if len(values) == 1 else values)
    log.append({"kind": "send", "task": label(me), "other": label(to), "function": "send", "value": value})
    return to.switch(*values)

def received(value, by, sender):
    log.append({"kind": "receive", "task": by, "other": sender, "function": by.split()[-1], "value": repr(value)})
    return value

def produce(n):
    received(n, "greenlet produce", "MainThread")
    where.append("send")
    send(consumer, 1, "numbers")
    for i in range(2, n + 1):
        where.append("send")
        send(consumer, i)
    where.append("send")
    send(consumer, None)

def consume(first, channel):
    received((first, channel), "greenlet consume", "greenlet produce")
    acc, i = 1, first
    while i is not None:
        acc *= i
        where.append("consume")
        i = received(producer.switch(), "greenlet consume", "greenlet produce")
    return acc

greenlet.settrace(mine)
producer = greenlet.greenlet(produce)
consumer = greenlet.greenlet(consume)
names[id(producer)], names[id(consumer)] = "greenlet produce", "greenlet consume"
def run(n):
    where.append("send")
    return send(producer, n)

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
    got = [{k: e[k] for k in ("kind", "task", "other", "function", "value")} for e in doc["events"]]
    assert got == log and len(log) == 30
    assert {e["channel"] for e in doc["events"] if e["kind"] in ("send", "receive")} == {"switch"}
    assert tasks["greenlet consume"]["created_by"] == "greenlet produce"
    assert tasks["greenlet consume"]["outcome"] == "result" and tasks["greenlet produce"]["outcome"] is None
    assert tasks["greenlet consume"]["result"] == "120"   # (its return into its parent: its exit's, not a message)
    # Made where produce() switched to it, inside run() (the creator's open frames, innermost first).
    stack = [(f["function"], f["line"] is not None) for f in tasks["greenlet consume"]["creation_stack"]]
    assert stack == [("send", True), ("produce", False)]   # (produce is the greenlet's outermost frame)
    assert [f["function"] for f in tasks["greenlet produce"]["creation_stack"]] == ["send", "run"]
    times = [e["t_ns"] for e in doc["events"]]
    assert times == sorted(times)
    for e in doc["events"]:
        assert e["task_id"] == tasks[e["task"]]["id"]
        assert (e["file"] is None) == (e["function"] is None)
        assert e["file"] is None or e["file"].endswith("p.py")


# asyncio: a gather tree and a factorial through an asyncio.Queue. The
# program logs its own creations (its loop's create_task: the creator is
# the task running then), sends and receives (after each put and get returns) and
# exits (before each return), naming tasks as stackwatch does
# ("Task-N coroutine") and the queue by its class and address.
ASYNCIO = r'''
import asyncio, json, sys
import stackwatch

log, results, given, seen = [], {}, {}, {}

def name(t):
    return given.get(id(t)) or f"{t.get_name()} {t.get_coro().__qualname__}" if t is not None else "MainThread"

# Tasks are named when the log is written.
def note(kind, task=None, other=None, channel=None, value=None):
    log.append({"kind": kind, "task": task or asyncio.current_task(), "other": other,
                "channel": channel, "value": value})

if sys.argv[2:] == ["uvloop"]:   # (uvloop's loop: the same task model)
    import uvloop
    Base = uvloop.Loop
else:
    Base = asyncio.SelectorEventLoop

class Loop(Base):
    # (not a task factory: 3.13.0's create_task names a factory's task "None")
    def create_task(self, coro, **kwargs):
        t = super().create_task(coro, **kwargs)
        note("create", t, asyncio.current_task(self) or "MainThread")
        return t

def done(value):
    note("exit")
    results[asyncio.current_task()] = repr(value)
    return value

async def tree(depth, n):
    if depth == 0:
        await asyncio.sleep(0.001)
        return done(n)
    left, right = await asyncio.gather(tree(depth - 1, 2 * n), tree(depth - 1, 2 * n + 1))
    return done(left + right)

async def producer(q, n):
    seen["tasks"] = stackwatch.tasks()   # the consumer waits in its first get
    for i in list(range(1, n + 1)) + [None]:
        await q.put(i)
        note("send", channel="numbers", value=repr(i))
    return done(n)

async def consumer(q):
    acc = 1
    while True:
        v = await q.get()
        note("receive", channel="numbers", value=repr(v))
        if v is None:
            return done(acc)
        acc *= v

async def sleeper():
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        note("exit")
        raise

async def amain():
    s = asyncio.ensure_future(sleeper())
    await asyncio.sleep(0)   # it starts, and sleeps
    s.cancel()
    try:
        await s
    except asyncio.CancelledError:
        pass
    q = asyncio.Queue()
    stackwatch.name(q, "numbers")
    c = asyncio.ensure_future(consumer(q))
    given[id(c)] = "the consumer"
    stackwatch.name(c, "the consumer", group="workers")
    p = asyncio.ensure_future(producer(q, 6))
    fact, _ = await asyncio.gather(c, p)
    total = await asyncio.ensure_future(tree(2, 1))
    return done((fact, total))

loop = Loop()
assert loop.run_until_complete(amain()) == (720, 22)
loop.close()
for e in log:   # (a name given later names the task everywhere)
    e["task"] = name(e["task"])
    e["other"] = e["other"] if e["other"] in (None, "MainThread") else name(e["other"])
results = {name(t): r for t, r in results.items()}
json.dump({"log": log, "results": results, "tasks": seen["tasks"]}, open(sys.argv[1], "w"))
'''


@pytest.fixture(scope="module")
def asyncio_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("asyncio")
    own = folder / "log.json"
    swt, _ = run_traced(folder, ASYNCIO, "--events", "tasks", "--log", str(folder / "events.log"), args=(str(own),))
    return swt, json.loads(own.read_text())


def test_asyncio_events_equal_the_programs_log(asyncio_run):
    _check_asyncio(*asyncio_run)


def test_task_names_are_written_once(asyncio_run, tmp_path):
    """Format 1.18: a task's name is one STRINGS entry, which its definition
    (TASK_INTERNED) and its TASK_CREATE name by id; the same trace as a 1.17
    writer wrote it (the name inline in both), as a 1.16 one and as a 1.15
    one reads as the same document."""
    swt, _ = asyncio_run
    doc = read_task_events(swt)
    data = open(swt, "rb").read()
    for minor in (17, 16, 15):
        old = tmp_path / f"1.{minor}.swt"
        old.write_bytes(_as_format(data, minor))
        assert read_task_events(str(old)) == doc, minor
    older = open(tmp_path / "1.17.swt", "rb").read()
    # (the automatic names: stackwatch.name() names the consumer later, in
    # a TASK_NAME record, inline)
    created = [e["task"] for e in doc["events"] if e["kind"] == "create" and e["task"].startswith("Task-")]
    assert len(created) == 10
    for name in created:   # (two copies fewer: the definition's and the creation's)
        assert data.count(name.encode()) == older.count(name.encode()) - 2, name


@pytest.mark.versions("3.12")
def test_uvloop_tasks_equal_the_programs_log(tmp_path):
    """The same program on uvloop's loop (which runs no asyncio Handle):
    the same events."""
    needs_module("uvloop", "uvloop is not installed (scripts/venv.sh installs it)")
    own = tmp_path / "log.json"
    swt, _ = run_traced(tmp_path, ASYNCIO, "--events", "tasks", args=(str(own), "uvloop"))
    _check_asyncio(swt, json.loads(own.read_text()))


def _check_asyncio(swt, own):
    doc = read_task_events(swt)
    tasks = {t["name"]: t for t in doc["tasks"]}
    mine = [{"kind": e["kind"], "task": e["task"], "other": e["other"] if e["kind"] == "create" else None,
             "channel": e["channel"], "value": e["value"]}
            for e in doc["events"] if e["kind"] in ("create", "send", "receive", "exit")
            and not e["task"].endswith("shutdown_asyncgens") and not e["task"].endswith("shutdown_default_executor")]
    assert mine == own["log"]
    assert len([e for e in mine if e["kind"] == "create"]) == 11   # amain, sleeper, consumer, producer, 7 trees
    sleeper = next(t for n, t in tasks.items() if n.endswith(" sleeper"))
    assert sleeper["outcome"] == "cancelled" and sleeper["result"] is None
    # amain awaits the sleeper: a join on it, by name (which task awaits which)
    assert next(e for e in doc["events"] if e["kind"] == "block" and e["task"] == "Task-1 amain")["channel"] == \
        sleeper["name"]
    assert [(e["kind"], e["other"], e["reason"]) for e in doc["events"] if e["task"] == sleeper["name"]
            and e["kind"] in ("block", "wake")] == [("block", None, "sleep"), ("wake", "Task-1 amain", None)]
    for name, result in own["results"].items():
        assert tasks[name]["kind"] == "asyncio" and tasks[name]["outcome"] == "result"
        assert tasks[name]["result"] == result, name
    # Every receive knows its sender (the producer), every send its receiver.
    for e in doc["events"]:
        if e["kind"] in ("send", "receive"):
            assert e["other"] == ("the consumer" if e["kind"] == "send"
                                  else next(n for n in tasks if n.endswith(" producer")))
    # A wake ends a block of the task it wakes, and comes from another
    # task; no task runs while it is blocked.
    for wake, block in _wakes(doc):
        assert wake["other"] != wake["task"] and wake["channel"] == block["channel"]
    blocked = set()
    for e in doc["events"]:
        if e["kind"] == "block":
            blocked.add(e["task"])
        elif e["kind"] == "wake":
            blocked.discard(e["task"])
        elif e["kind"] == "switch":
            assert e["task"] not in blocked, f"{e['task']} ran while blocked"
    # Which task awaits which: a tree's gather joins the two trees it made,
    # and the one of them that ends last ends its wait (its done callback,
    # which the loop runs as its own, runs on its behalf).
    made = {}
    for e in doc["events"]:
        if e["kind"] == "create":
            made.setdefault(e["other"], []).append(e["task"])
    exits = {e["task"]: e["t_ns"] for e in doc["events"] if e["kind"] == "exit"}
    joins = 0
    for wake, block in _wakes(doc):
        if block["reason"] == "join" and block["task"].endswith(" tree") and made.get(block["task"]):
            children = made[block["task"]]
            assert block["channel"] == ", ".join(children) and len(children) == 2
            assert wake["other"] == max(children, key=exits.get)
            joins += 1
    assert joins == 3
    reasons = {(e["task"].split(" ")[-1], e["reason"]) for e in doc["events"] if e["kind"] == "block"}
    assert reasons == {("consumer", "queue"), ("tree", "sleep"), ("tree", "join"), ("amain", "join"), ("sleeper", "sleep")}
    assert {e["channel"] for e in doc["events"] if e["kind"] in ("send", "receive")} == {"numbers"}
    # A tree's children are made by gather, called by their parent tree's
    # coroutine, on its track; located in the program's own code that made
    # them: its loop's create_task.
    for name, task in tasks.items():
        if name.endswith(" tree") and task["created_by"].endswith(" tree"):
            stack = [_bare(f["function"]) for f in task["creation_stack"]]
            assert stack.index("create_task") < stack.index("gather") < stack.index("tree")
            assert [_bare(f["function"]) for f in task["creation_stack"] if f["line"] is not None] == ["create_task"]
    assert tasks["the consumer"]["group"] == "workers"


def test_log_lines_are_the_traces_events(asyncio_run):
    """`--log` prints a line per task event, in the trace's order, naming
    the tasks as the trace does (a name given later from its line on):
    each switch from one task to the other, with every task's state."""
    swt, _ = asyncio_run
    doc = read_task_events(swt)
    lines = [line.split("] ", 1)[1] for line in open(os.path.join(os.path.dirname(swt), "events.log"))
             if "] task_" in line]
    # (a wake the woken task tells, task_woken, is in the document at the
    # time of the wake, before the log line: compared apart)
    logged = [line.split()[0][5:] for line in lines if not line.startswith("task_name")]
    assert [k for k in logged if k not in ("wake", "woken")] == [e["kind"] for e in doc["events"] if e["kind"] != "wake"]
    assert sum(k in ("wake", "woken") for k in logged) == sum(e["kind"] == "wake" for e in doc["events"])
    renamed = dict(re.match(r"task_name +(.*) named (.*) \(group workers\)$", line).groups()
                   for line in lines if line.startswith("task_name"))
    assert renamed == {next(n for n in renamed): "the consumer"}
    switches = [re.match(r"task_switch +(.*) -> (.*?)  \[(.*)\]$", line).groups() for line in lines
                if line.startswith("task_switch")]
    assert [(renamed.get(a, a), renamed.get(b, b)) for a, b, _ in switches] == \
        [(e["other"], e["task"]) for e in doc["events"] if e["kind"] == "switch"]
    assert all(f"{b}: running" in states for _, b, states in switches)
    blocked = next(states for a, _, states in switches if a == "the consumer" and "the consumer: blocked" in states)
    assert "the consumer: blocked on queue numbers" in blocked


def test_live_tasks_while_one_waits(asyncio_run):
    """stackwatch.tasks(), called by the producer as it starts: the
    consumer waits in its first get on the queue named "numbers"."""
    _, own = asyncio_run
    live = {t["name"]: t for t in own["tasks"]}
    consumer, producer = live["the consumer"], next(t for n, t in live.items() if n.endswith(" producer"))
    assert consumer["state"] == "blocked" and consumer["waits_on"] == "queue numbers"
    assert consumer["group"] == "workers" and consumer["kind"] == "asyncio"
    assert any(f["function"] == "consumer" for f in consumer["stack"])
    assert producer["state"] == "running" and producer["stack"][0]["function"] == "producer"
    assert live["MainThread"]["state"] == "running" and live["MainThread"]["kind"] == "thread"
    amain = next(t for n, t in live.items() if n.endswith(" amain"))
    assert amain["state"] == "blocked" and amain["waits_on"] == f"join the consumer, {producer['name']}"


def test_asyncio_coroutines_run_on_their_tasks_tracks(asyncio_run):
    """Each coroutine's frames lie on its own task's track (they are
    resumed there at every step), none on the event loop's thread."""
    swt, own = asyncio_run
    t = Trace(swt)
    mine = {"tree", "producer", "consumer", "amain"}
    assert "the consumer" in [th["name"] for th in t.threads]   # stackwatch.name() renames the track
    for pos, th in enumerate(t.threads):
        names = {t.codes[e.code].name for e in t.events(pos) if e.kind in (0, 2) and e.code in t.codes}
        own_code = th["name"].split(" ")[-1]
        if th["task"] and own_code in mine:
            assert names & mine == {own_code}, th["name"]
        elif not th["task"]:
            assert not names & mine


def _bare(qualname):
    """A function's name without its class (3.9 and 3.10 record code
    objects by name, having no co_qualname)."""
    return qualname.rsplit(".", 1)[-1]


def _wakes(doc):
    """(wake, the block it ends) of every wake, checking that each ends a
    block of its task (one at a time)."""
    waiting, out = {}, []
    for e in doc["events"]:
        if e["kind"] == "block":
            assert e["task"] not in waiting
            waiting[e["task"]] = e
        elif e["kind"] == "wake":
            assert e["task"] in waiting, e
            out.append((e, waiting.pop(e["task"])))
    return out


# trio: a factorial through a memory channel between two tasks of a
# nursery, and a task that raises (caught by its parent). Each task logs
# its creations (before start_soon), sends (before each send), receives
# (after each returns) and its exit (before it returns or raises), naming
# tasks as trio does, "trio " and the function's qualified name.
TRIO = r'''
import json, sys
import trio

log = []

def me():
    return "trio " + trio.lowlevel.current_task().name

def note(kind, task=None, **kw):
    log.append({"kind": kind, "task": task or me(), **kw})

async def producer(send, n):
    async with send:
        for i in range(1, n + 1):
            note("send", value=repr(i))
            await send.send(i)
    note("exit")
    return n

async def consumer(recv, out):
    acc = 1
    async with recv:
        async for v in recv:
            note("receive", value=repr(v))
            acc *= v
    out.append(acc)
    note("exit")

async def fails():
    note("exit")
    raise ValueError("on purpose")

async def main():
    send, recv = trio.open_memory_channel(0)
    out = []
    async with trio.open_nursery() as nursery:
        for f, args in ((consumer, (recv, out)), (producer, (send, 6))):
            note("create", "trio __main__." + f.__name__, other=me())
            nursery.start_soon(f, *args)
    try:
        async with trio.open_nursery() as nursery:
            note("create", "trio __main__.fails", other=me())
            nursery.start_soon(fails)
    except BaseException:   # (an ExceptionGroup from 3.11)
        pass
    note("exit")
    return out[0]

assert trio.run(main) == 720
json.dump(log, open(sys.argv[1], "w"))
'''

# trio's guest mode: its run loop driven by asyncio's (start_guest_run).
TRIO_GUEST = r'''
import asyncio
import trio

async def child(i):
    await trio.sleep(0)
    return i * 10

async def trio_main():
    async with trio.open_nursery() as n:
        for i in range(3):
            n.start_soon(child, i, name=f"child{i}")
    return "done"

async def host():
    loop = asyncio.get_running_loop()
    finished = loop.create_future()
    trio.lowlevel.start_guest_run(trio_main, run_sync_soon_threadsafe=loop.call_soon_threadsafe,
                                  done_callback=finished.set_result, host_uses_signal_set_wakeup_fd=True)
    assert (await finished).unwrap() == "done"

asyncio.run(host())
'''


@pytest.mark.versions("3.12")
def test_trio_guest_run_tasks(tmp_path):
    """A trio run started by trio.lowlevel.start_guest_run inside an
    asyncio program: its tasks are recorded as trio.run's are, beside the
    asyncio task that hosts them."""
    needs_module("trio", "trio is not installed (scripts/venv.sh installs it)")
    swt, _ = run_traced(tmp_path, TRIO_GUEST, "--events", "tasks")
    doc = read_task_events(swt)
    tasks = {t["name"]: t for t in doc["tasks"]}
    children = [f"trio child{i}" for i in range(3)]
    assert [tasks[c]["kind"] for c in children] == ["trio"] * 3
    assert [tasks[c]["created_by"] for c in children] == ["trio __main__.trio_main"] * 3
    assert [(tasks[c]["outcome"], tasks[c]["result"]) for c in children] == [("result", "0"), ("result", "10"),
                                                                             ("result", "20")]
    assert (tasks["trio __main__.trio_main"]["outcome"], tasks["trio __main__.trio_main"]["result"]) == \
        ("result", "'done'")
    assert any(t["kind"] == "asyncio" and t["name"].endswith(" host") for t in doc["tasks"])
    assert {e["task"] for e in doc["events"] if e["kind"] == "switch"} >= set(children)



@pytest.mark.versions("3.12")
def test_trio_tasks_equal_the_programs_log(tmp_path):
    needs_module("trio", "trio is not installed (scripts/venv.sh installs it)")
    own = tmp_path / "log.json"
    swt, _ = run_traced(tmp_path, TRIO, "--events", "tasks", args=(str(own),))
    doc = read_task_events(swt)
    tasks = {t["name"]: t for t in doc["tasks"]}
    mine = {"trio __main__." + f for f in ("main", "producer", "consumer", "fails")}
    got = [{"kind": e["kind"], "task": e["task"], **({"other": e["other"]} if e["kind"] == "create" else {}),
            **({"value": e["value"]} if e["kind"] in ("send", "receive") else {})}
           for e in doc["events"] if e["task"] in mine and e["kind"] in ("create", "send", "receive", "exit")
           and not (e["kind"] == "create" and e["task"] == "trio __main__.main")]
    assert got == json.loads(own.read_text())
    assert {tasks[n]["kind"] for n in mine} == {"trio"}
    assert (tasks["trio __main__.main"]["outcome"], tasks["trio __main__.main"]["result"]) == ("result", "720")
    assert tasks["trio __main__.producer"]["result"] == "6"
    assert tasks["trio __main__.fails"]["outcome"] == "exception"
    assert tasks["trio __main__.fails"]["result"] == "ValueError('on purpose')"
    # The messages pair up (producer to consumer) on one channel; the
    # channel's waits are ended by the other side.
    messages = [e for e in doc["events"] if e["kind"] in ("send", "receive")]
    assert len({e["channel"] for e in messages}) == 1 and all(e["other"] for e in messages)
    for wake, block in _wakes(doc):
        if block["reason"] == "channel":
            assert {wake["task"], wake["other"]} == {"trio __main__.producer", "trio __main__.consumer"}
    assert {e["reason"] for e in doc["events"] if e["kind"] == "block" and e["task"] in mine} >= {"channel", "join"}
    # main's nurseries: each wait ends with the end of the last of its children.
    exits = {e["task"]: e["t_ns"] for e in doc["events"] if e["kind"] == "exit"}
    ends = [wake["other"] for wake, block in _wakes(doc) if block["task"] == "trio __main__.main"
            and block["reason"] == "join"]
    assert ends == [max(("trio __main__.producer", "trio __main__.consumer"), key=exits.get), "trio __main__.fails"]
    # Each task's coroutine runs on its own track.
    t = Trace(swt)
    for pos, th in enumerate(t.threads):
        if th["name"] in mine:
            names = {_bare(t.codes[e.code].name) for e in t.events(pos) if e.kind in (0, 2) and e.code in t.codes}
            assert th["name"].split(".")[-1] in names and not names & ({"main", "producer", "consumer", "fails"}
                                                                         - {th["name"].split(".")[-1]})


# Threads: a factorial through a queue.Queue, and a thread that raises.
# Each thread logs its own sends and receives (after each put and get
# returns) and its end; the main thread logs each creation before the
# start.
THREADS = r'''
import json, queue, sys, threading, time
import stackwatch

logs = {}
q = queue.Queue()
CHANNEL = f"Queue {id(q):#x}"

def note(kind, name=None, **kw):
    logs.setdefault(name or threading.current_thread().name, []).append({"kind": kind, **kw})

def producer(n):
    for i in list(range(1, n + 1)) + [None]:
        q.put(i)
        note("send", channel=CHANNEL, value=repr(i))
    note("exit")

def consumer(out):
    acc = 1
    while (v := q.get()) is not None:
        note("receive", channel=CHANNEL, value=repr(v))
        acc *= v
    note("receive", channel=CHANNEL, value=repr(v))
    out.append(acc)
    note("exit")

def fails():
    note("exit")
    raise ValueError("on purpose")

go = threading.Event()
stackwatch.name(go, "go")

def waiter():
    go.wait()
    note("exit")

out = []
threads = [threading.Thread(target=consumer, args=(out,), name="consumer"),
           threading.Thread(target=producer, args=(7,), name="producer"),
           threading.Thread(target=fails, name="fails"), threading.Thread(target=waiter, name="waiter")]
for t in threads:
    note("create", t.name, other="MainThread")
    t.start()
while not go._cond._waiters:   # the waiter waits for go (a block on the event) ...
    time.sleep(0.001)
live = {t["name"]: t for t in stackwatch.tasks()}
go.set()                       # ... and the main thread sets it (its wake)
assert (live["waiter"]["state"], live["waiter"]["waits_on"]) == ("blocked", "event go"), live["waiter"]
assert live["MainThread"]["state"] == "running" and live["waiter"]["stack"][-1]["function"] in ("_bootstrap",
                                                                                                  "Thread._bootstrap")
for t in threads:
    t.join()
assert out == [5040], out
json.dump(logs, open(sys.argv[1], "w"))
'''


def test_thread_events_equal_each_threads_log(tmp_path):
    own = tmp_path / "log.json"
    swt, _ = run_traced(tmp_path, THREADS, "--events", "tasks", args=(str(own),))
    logs = json.loads(own.read_text())
    doc = read_task_events(swt)
    tasks = {t["name"]: t for t in doc["tasks"]}
    for name, log in logs.items():
        mine = [{"kind": e["kind"], **({"other": e["other"]} if e["kind"] == "create" else {}),
                 **({"channel": e["channel"], "value": e["value"]} if e["kind"] in ("send", "receive") else {})}
                for e in doc["events"] if e["task"] == name and e["kind"] in ("create", "send", "receive", "exit")]
        assert mine == log, name
        assert tasks[name]["kind"] == "thread" and tasks[name]["created_by"] == "MainThread"
        # Made by the main thread's code, in Thread.start (which waits for it to start).
        stack = [_bare(f["function"]) for f in tasks[name]["creation_stack"]]
        assert stack[-1] == "<module>" and "start" in stack
        assert [f["function"] for f in tasks[name]["creation_stack"] if f["line"] is not None] == ["<module>"]
    # Each send reaches the consumer; each receive comes from the producer.
    for e in doc["events"]:
        if e["kind"] in ("send", "receive"):
            assert e["other"] == ("consumer" if e["kind"] == "send" else "producer")
    assert tasks["fails"]["outcome"] == "exception" and tasks["fails"]["result"] == "ValueError('on purpose')"
    # Blocks and wakes pair up: a thread is woken only while it waits, by
    # another thread, on what it waits on; the waiter by the main thread.
    woken = set()
    for e, block in _wakes(doc):
        assert e["channel"] == block["channel"] and e["other"] != e["task"] and e["t_ns"] >= block["t_ns"]
        woken.add(e["task"])
        if e["task"] == "waiter":
            assert (block["reason"], e["channel"], e["other"]) == ("event", "go", "MainThread")
            assert block["function"] == "waiter" and e["function"] == "<module>"
    assert "waiter" in woken
    assert tasks["consumer"]["outcome"] == tasks["producer"]["outcome"] == "result"
    # A channel's name is interned (format 1.16): written once in the file,
    # however many records name it (an automatic name: class and address).
    data = open(swt, "rb").read()
    channels = {e["channel"] for e in doc["events"] if e["channel"] and " 0x" in e["channel"]}
    assert channels and all(data.count(c.encode()) == 1 for c in channels), channels
    # The same trace as a 1.15 writer wrote it (each channel inline, the
    # kinds of 1.9-1.12, no STRINGS) reads as the same document.
    old = tmp_path / "old.swt"
    old.write_bytes(_as_format(data, 15))
    assert read_task_events(str(old)) == doc


def _varint_at(b, i):
    v = shift = 0
    while True:
        v |= (b[i] & 0x7F) << shift
        shift += 7
        i += 1
        if not b[i - 1] & 0x80:
            return v, i


def _as_format(data, minor):
    """A trace rewritten as a writer of format 1.<minor> (15, 16 or 17)
    wrote it (docs/format.md): its task events of the kinds added after
    that minor (1.16's 33-37, 1.18's 38) as the older kinds of the same
    name, whose interned str (a STRINGS entry's id) is a str; the
    TASK_INTERNED chunks (1.18, type 12) as TASK chunks (type 8), the name
    inline; before 1.16 no STRINGS chunks. Every other chunk as it is (an
    older writer's STRINGS had no task names: entries no record names are
    read as nothing; 1.17's ON_CPU fields, which a task trace has none of,
    stay)."""
    older = {k.name: n for n, k in RECORD_KINDS.items() if k.source == "older" and k.since <= minor}
    renumber = {n: older[k.name] for n, k in RECORD_KINDS.items()
                if k.source == "dispatch" and k.since > minor and k.name in older}
    strings, chunks, i = {}, [], 16
    while i < len(data):   # (a whole file, as the writer left it)
        kind, length = data[i], int.from_bytes(data[i + 4:i + 8], "little")
        chunks.append((kind, data[i + 12:i + 12 + length]))
        i += 12 + length
    for kind, p in chunks:
        j = 0
        while kind == 11 and j < len(p):   # STRINGS: varint id, str text
            sid, j = _varint_at(p, j)
            n, j = _varint_at(p, j)
            strings[sid], j = p[j:j + n], j + n

    def tasks_inline(p):   # TASK_INTERNED entries (varint task, thread, string id) as TASK's
        out, j = b"", 0
        while j < len(p):
            task, j = _varint_at(p, j)
            thread, j = _varint_at(p, j)
            sid, j = _varint_at(p, j)
            out += varint(task) + varint(thread) + varint(len(strings[sid])) + strings[sid]
        return out

    def event_body(p):
        j = 0
        for _ in range(4):   # thread index, seq, t_start, dropped
            _, j = _varint_at(p, j)
        depth, j = _varint_at(p, j)
        for _ in range(depth):
            _, j = _varint_at(p, j)
        n, j = _varint_at(p, j)
        out = bytearray(p[:j])
        for _ in range(n):
            start = j
            x, j = _varint_at(p, j)
            if x & 7 in (0, 2, 5):   # CALL, RESUME, C_CALL: a code id
                _, j = _varint_at(p, j)
            if x & 7 != 7 or _varint_at(p, j)[0] not in renumber:
                if x & 7 == 7:
                    _, k = _varint_at(p, j)
                    length, k = _varint_at(p, k)
                    j = k + length
                out += p[start:j]
                continue
            ext, j = _varint_at(p, j)
            length, j = _varint_at(p, j)
            payload, j = p[j:j + length], j + length
            fields, k = b"", 0
            for f in RECORD_KINDS[ext].fields:
                if k == len(payload):   # (a field a later minor appended, absent: TASK_WAKE's cause, 1.19)
                    break
                if f.type == "str" and not f.interned:
                    n, k2 = _varint_at(payload, k)
                    fields, k = fields + payload[k:k2 + n], k2 + n
                else:
                    v, k2 = _varint_at(payload, k)
                    text = strings[v] if f.interned else None
                    fields += varint(len(text)) + text if text is not None else payload[k:k2]
                    k = k2
            out += p[start:start + len(varint(x))] + varint(renumber[ext]) + varint(len(fields)) + fields
        return bytes(out)

    def chunk(kind, p):
        if kind == 4:
            return _chunk(4, event_body(p))
        return _chunk(8, tasks_inline(p)) if kind == 12 else _chunk(kind, p)

    head = data[:10] + minor.to_bytes(2, "little") + data[12:16]
    return head + b"".join(chunk(kind, p) for kind, p in chunks if kind != 11 or minor >= 16)


# A lock convoy, with a Lock and then an RLock: the main thread holds the
# lock while it starts four threads, each of which logs its block and then
# waits in `with lock:` (the main thread starts the next one only once this
# one sleeps in the lock's futex wait: /proc's syscall, with no timeout,
# which the GIL's waits have); then it releases the lock, and each thread
# that gets it logs who let it in (the holder before it, who wrote its name
# down before releasing) and holds it while the others wait.
LOCKS = r'''
import json, platform, sys, threading, time
import stackwatch

FUTEX = {"x86_64": "202", "aarch64": "98"}[platform.machine()]

def asleep_on_a_lock(t):
    try:
        fields = open(f"/proc/self/task/{t.native_id}/syscall").read().split()
    except OSError:
        return False
    return fields[0] == FUTEX and fields[4] == "0x0"

log = []

def convoy(lock, n):
    holder = ["MainThread"]
    def worker():
        me = threading.current_thread().name
        log.append({"kind": "block", "task": me, "other": None, "channel": "the lock", "reason": "lock"})
        with lock:
            log.append({"kind": "wake", "task": me, "other": holder[0], "channel": "the lock", "reason": None})
            holder[0] = me
    lock.acquire()
    threads = [threading.Thread(target=worker, name=f"{type(lock).__name__}-{i}") for i in range(n)]
    for t in threads:
        t.start()
        while not asleep_on_a_lock(t):
            time.sleep(0.0005)
    lock.release()
    for t in threads:
        t.join()

for lock in (threading.Lock(), threading.RLock()):
    stackwatch.name(lock, "the lock")
    with lock:   # (uncontended: no event)
        pass
    convoy(lock, 4)
json.dump(log, open(sys.argv[1], "w"))
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task/T/syscall")
def test_lock_convoy_equals_the_programs_log(tmp_path):
    """Who blocked on which lock, and who released it and let whom in, in
    order: the same as the program logs of itself."""
    own = tmp_path / "log.json"
    swt, _ = run_traced(tmp_path, LOCKS, "--events", "tasks", args=(str(own),))
    doc = read_task_events(swt)
    got = [{k: e[k] for k in ("kind", "task", "other", "channel", "reason")} for e in doc["events"]
           if e["kind"] in ("block", "wake") and e["channel"] == "the lock"]
    assert got == json.loads(own.read_text()) and len(got) == 16
    _wakes(doc)   # (each wake ends a block of its task)
    waits = [e for e in doc["events"] if e["channel"] == "the lock"]
    assert all(_bare(e["function"]) == "worker" for e in waits)
    for wake, block in _wakes(doc):
        if wake["channel"] == "the lock":
            assert block["t_ns"] <= wake["t_ns"]


# More locks waited on at once than task_locks.c once kept (64): 70
# threads, each asleep on a lock of its own that the main thread holds,
# then all let in. Every block and every wake is recorded, by its lock.
MANY_LOCKS = LOCKS.split("log = []")[0] + r'''
locks = [threading.Lock() for _ in range(70)]
for i, lock in enumerate(locks):
    stackwatch.name(lock, f"lock-{i}")
    lock.acquire()
def worker(lock):
    with lock:
        pass
threads = [threading.Thread(target=worker, args=(lock,), name=f"t-{i}") for i, lock in enumerate(locks)]
for t in threads:
    t.start()
for t in threads:
    while not asleep_on_a_lock(t):
        time.sleep(0.0005)
for lock in locks:
    lock.release()
for t in threads:
    t.join()
'''


@pytest.mark.versions("3.12")   # (task_locks.c's table: the same C on every version)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task/T/syscall")
def test_more_locks_waited_on_than_64_are_all_recorded(tmp_path):
    swt, _ = run_traced(tmp_path, MANY_LOCKS, "--events", "tasks")
    doc = read_task_events(swt)
    for kind in ("block", "wake"):
        got = {(e["task"], e["channel"]) for e in doc["events"] if e["kind"] == kind and e["channel"].startswith("lock-")}
        assert got == {(f"t-{i}", f"lock-{i}") for i in range(70)}, kind


# A join that gives up (its timeout) is woken by its own thread, and every
# join's block has its wake, also when the thread ended just before its
# joiner was listed (it still looked alive: seen on 3.13 under load).
JOINS = r'''
import threading, time
def slow():
    time.sleep(0.3)
t = threading.Thread(target=slow, name="slow")
t.start()
t.join(timeout=0.05)
t.join()
quick = [threading.Thread(target=lambda: None, name=f"quick-{i}") for i in range(40)]
for q in quick:
    q.start()
for q in quick:
    q.join()
'''


@pytest.mark.versions("3.12", "3.13")
def test_every_join_has_its_wake(tmp_path):
    swt, _ = run_traced(tmp_path, JOINS, "--events", "tasks")
    doc = read_task_events(swt)
    joins = [(w["other"], w["channel"]) for w, b in _wakes(doc) if b["reason"] == "join"]
    assert joins[:2] == [("MainThread", "thread slow"), ("slow", "thread slow")]
    assert all(other == channel[len("thread "):] for other, channel in joins[2:]), joins
    assert not [e for e in doc["events"] if e["kind"] == "block"
                and e not in [b for _, b in _wakes(doc)]], "a block with no wake"


# The values a queue passes are recorded as their repr, those written
# without repr (ints that fit in 64 bits, None, True, False) included.
VALUES = r'''
import queue
q = queue.Queue()
for v in VALUES:
    q.put(v)
for v in VALUES:
    q.get()
'''
QUEUED = [-5, 0, 2**70, -2**63, 2**63 - 1, True, False, None, 7, "x", 1.5]


@pytest.mark.versions("3.12")   # (task_wrappers.c: the same C on every version)
def test_queued_values_are_their_reprs(tmp_path):
    swt, _ = run_traced(tmp_path, f"VALUES = {QUEUED!r}\n" + VALUES, "--events", "tasks")
    doc = read_task_events(swt)
    for kind in ("send", "receive"):
        assert [e["value"] for e in doc["events"] if e["kind"] == kind] == [repr(v) for v in QUEUED], kind


# A factorial through multiprocessing pipes between two threads of one
# process (a one-way pipe named "numbers", and a duplex one's bytes), and
# the result handed to the main thread through the program's own channel
# (stackwatch.sent / received). Each thread logs its sends and receives
# after each returns. The consumer starts first and waits for its first
# number (the main thread starts the producer once it sleeps in read()).
PIPES = r'''
import json, multiprocessing, platform, sys, threading, time
import stackwatch

READ = {"x86_64": "0", "aarch64": "63"}[platform.machine()]
logs = {}

def note(kind, **kw):
    logs.setdefault(threading.current_thread().name, []).append({"kind": kind, **kw})

def asleep_reading(t):
    try:
        return open(f"/proc/self/task/{t.native_id}/syscall").read().split()[0] == READ
    except OSError:
        return False

numbers_in, numbers_out = multiprocessing.Pipe(duplex=False)
stackwatch.name(numbers_out, "numbers")
talk_a, talk_b = multiprocessing.Pipe()
TALK = f"Pipe {id(talk_a):#x} 1>2"

def producer(n):
    for i in list(range(1, n + 1)) + [None]:
        numbers_out.send(i)
        note("send", channel="numbers", value=repr(i))
    talk_a.send_bytes(b"done!", 0, 4)
    note("send", channel=TALK, value=repr(b"done"))

def consumer(out):
    acc = 1
    while (v := numbers_in.recv()) is not None:
        note("receive", channel="numbers", value=repr(v))
        acc *= v
    note("receive", channel="numbers", value=repr(v))
    note("receive", channel=TALK, value=repr(talk_b.recv_bytes()))
    stackwatch.sent("results", acc)
    note("send", channel="results", value=repr(acc))
    out.append(acc)

out = []
c = threading.Thread(target=consumer, args=(out,), name="consumer")
p = threading.Thread(target=producer, args=(6,), name="producer")
c.start()
while not asleep_reading(c):
    time.sleep(0.0005)
p.start()
p.join()
c.join()
stackwatch.received("results", out[0])
note("receive", channel="results", value=repr(out[0]))
assert out == [720]
json.dump(logs, open(sys.argv[1], "w"))
'''


SEND_BEFORE_BLOCK = r'''
import multiprocessing, multiprocessing.connection, threading, time
a, b = multiprocessing.Pipe(duplex=False)
# The race, made certain: the receiver's poll finds nothing although the
# message was sent before (a sender between its poll and its block's record).
multiprocessing.connection.Connection.poll = lambda self, *args: False
t = threading.Thread(target=b.send, args=(1,), name="producer")
t.start()
t.join()
time.sleep(0.01)
assert a.recv() == 1
'''


@pytest.mark.versions("3.12")
def test_a_send_before_the_receivers_block_wakes_it_at_the_block(tmp_path):
    """A pipe's receiver whose poll found nothing records its block, then is
    woken by the sender; when the send came first (between the poll and
    the block's record: CI saw it once), the wake is at the block, never
    before the wait it ends (it was at the send, 10 ms before the block
    here, and every view saw a wake without a wait)."""
    swt, _ = run_traced(tmp_path, SEND_BEFORE_BLOCK, "--events", "tasks")
    doc = read_task_events(swt)
    pipe = [e for e in doc["events"] if (e["channel"] or "").startswith("Pipe ")]
    assert [(e["kind"], e["task"]) for e in pipe] == [("send", "producer"), ("block", "MainThread"),
                                                      ("wake", "MainThread"), ("receive", "MainThread")]
    block, wake = pipe[1], pipe[2]
    assert wake["other"] == "producer" and block["t_ns"] <= wake["t_ns"] <= pipe[3]["t_ns"]
    _wakes(doc)


@pytest.mark.versions("3.12")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task/T/syscall")
def test_pipes_and_user_channels_equal_each_threads_log(tmp_path):
    own = tmp_path / "log.json"
    swt, _ = run_traced(tmp_path, PIPES, "--events", "tasks", args=(str(own),))
    logs = json.loads(own.read_text())
    doc = read_task_events(swt)
    peers = {"numbers": ("producer", "consumer"), "results": ("consumer", "MainThread")}
    for name, log in logs.items():
        mine = [{"kind": e["kind"], "channel": e["channel"], "value": e["value"]} for e in doc["events"]
                if e["task"] == name and e["kind"] in ("send", "receive")]
        assert mine == log, name
    for e in doc["events"]:
        if e["kind"] in ("send", "receive"):   # paired: each message's sender and receiver
            sender, receiver = peers.get(e["channel"], ("producer", "consumer"))
            assert (e["task"], e["other"]) == ((sender, receiver) if e["kind"] == "send" else (receiver, sender))
            assert e["function"] == {"MainThread": "<module>"}.get(e["task"], e["task"])
    # The consumer's first recv waits on the pipe, and the producer's first send ends its wait.
    waits = [(e["kind"], e["other"]) for e in doc["events"] if e["task"] == "consumer" and e["channel"] == "numbers"
             and e["kind"] in ("block", "wake")]
    assert waits[:2] == [("block", None), ("wake", "producer")]
    first_send = next(e for e in doc["events"] if e["kind"] == "send")
    wake = next(e for e in doc["events"] if e["kind"] == "wake" and e["task"] == "consumer")
    assert first_send["t_ns"] <= wake["t_ns"]
    _wakes(doc)


# The waits on a condition, a future and I/O, in asyncio and in threads:
# each waiter logs its block (before it waits), each waker the wake it makes
# (before it makes it: a notify, a set_result, a send on the other end of a
# socketpair). Data that arrives on a socket wakes an asyncio task from the
# loop's own callback, where no task runs: the loop's thread (MainThread).
WAITS = r'''
import asyncio, concurrent.futures, json, platform, socket, sys, threading, time
import stackwatch

RECV = {"x86_64": "45", "aarch64": "207"}[platform.machine()]
log = []

def me():
    task = asyncio.current_task() if asyncio._get_running_loop() else None
    return task.get_name() if task else threading.current_thread().name

def note(kind, reason, channel, task=None, other=None):   # (a wake's reason: by I/O, no task)
    log.append({"kind": kind, "task": task or me(), "other": other if kind == "wake" else None,
                "reason": reason, "channel": channel})

async def cond_waiter(c):
    async with c:
        note("block", "condition", "cond")
        await c.wait()

async def cond_notifier(c):
    while not c._waiters:
        await asyncio.sleep(0)
    async with c:
        note("wake", None, "cond", "cond_waiter", me())
        c.notify()

async def fut_waiter(f):
    note("block", "future", "fut")
    return await f

async def fut_setter(f):
    await asyncio.sleep(0)
    note("wake", None, "fut", "fut_waiter", me())
    f.set_result(5)

async def reader(loop, s, stream):
    note("block", "io", "sock")
    assert await loop.sock_recv(s, 5) == b"hello"
    note("block", "io", "stream")
    assert await stream.read(5) == b"again"

async def writer(loop, s, out):
    for data, channel in ((b"hello", "sock"), (b"again", "stream")):
        await asyncio.sleep(0.001)
        note("wake", "io", channel, "reader", None)   # (the data: I/O readiness, not the loop's thread)
        s.send(data) if channel == "sock" else out.write(data)

def pooled():   # in an executor's worker thread: its return ends the wait
    note("wake", None, "pooled", "pool_waiter", me())
    return 7

async def pool_waiter(loop, pool):
    note("block", "future", "pooled")
    fut = loop.run_in_executor(pool, pooled)
    stackwatch.name(fut, "pooled")
    assert await fut == 7

def soon(loop, f):   # a thread's call_soon_threadsafe ends the wait
    note("wake", None, "soon", "thread_waiter", me())
    loop.call_soon_threadsafe(f.set_result, 8)

async def thread_waiter(loop):
    f = loop.create_future()
    stackwatch.name(f, "soon")
    note("block", "future", "soon")
    setter = threading.Thread(target=soon, args=(loop, f), name="soon_setter")
    setter.start()   # (it waits for the thread to start, in threading's code: a block of the task's, and its wake)
    assert await f == 8
    setter.join()

async def main():
    loop = asyncio.get_running_loop()
    await asyncio.create_task(pool_waiter(loop, pool), name="pool_waiter")
    await asyncio.create_task(thread_waiter(loop), name="thread_waiter")
    c, f = asyncio.Condition(), loop.create_future()
    stackwatch.name(c, "cond")
    stackwatch.name(f, "fut")
    await asyncio.gather(asyncio.create_task(cond_waiter(c), name="cond_waiter"),
                         asyncio.create_task(cond_notifier(c), name="cond_notifier"))
    await asyncio.gather(asyncio.create_task(fut_waiter(f), name="fut_waiter"),
                         asyncio.create_task(fut_setter(f), name="fut_setter"))
    a, b = socket.socketpair()
    a.setblocking(False)
    stackwatch.name(a, "sock")
    c2, d2 = socket.socketpair()
    stream, keep = await asyncio.open_connection(sock=c2)
    stackwatch.name(stream, "stream")
    _, out = await asyncio.open_connection(sock=d2)
    await asyncio.gather(asyncio.create_task(reader(loop, a, stream), name="reader"),
                         asyncio.create_task(writer(loop, b, out), name="writer"))
    out.close()
    keep.close()

# (its worker started before the loop: its submit then waits on nothing)
pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pool")
pool.submit(int).result()
while not pool._idle_semaphore._value:
    time.sleep(0.0005)
# (argv[2] "uvloop": the same program on uvloop's loop gives the same answers)
(__import__("uvloop").run if sys.argv[2:] == ["uvloop"] else asyncio.run)(main())
pool.shutdown()

def asleep_in_recv(t):
    try:
        return open(f"/proc/self/task/{t.native_id}/syscall").read().split()[0] == RECV
    except OSError:
        return False

cf, tc = concurrent.futures.Future(), threading.Condition()
x, y = socket.socketpair()
for obj, name in ((cf, "cf"), (tc, "tcond"), (x, "pair")):
    stackwatch.name(obj, name)

def cf_waiter():
    note("block", "future", "cf")
    cf.result()

def tc_waiter():
    with tc:
        note("block", "condition", "tcond")
        tc.wait()

def pair_waiter():
    note("block", "io", "pair")
    x.recv(5)

def live_then_set():
    live = {t["name"]: t for t in stackwatch.tasks()}
    assert (live["cf_waiter"]["state"], live["cf_waiter"]["waits_on"]) == ("blocked", "future cf"), live["cf_waiter"]
    cf.set_result(3)

for target, ready, wake in ((cf_waiter, lambda t: cf._condition._waiters, live_then_set),
                            (tc_waiter, lambda t: tc._waiters, None),
                            (pair_waiter, asleep_in_recv, lambda: y.send(b"12345"))):
    t = threading.Thread(target=target, name=target.__name__, daemon=True)   # (a failed check ends the program)
    t.start()
    while not ready(t):
        time.sleep(0.0005)
    channel = {"cf_waiter": "cf", "tc_waiter": "tcond", "pair_waiter": "pair"}[t.name]
    if wake is None:
        with tc:
            note("wake", None, channel, t.name, "MainThread")
            tc.notify()
    else:
        note("wake", None, channel, t.name, "MainThread")
        wake()
    t.join()
json.dump(log, open(sys.argv[1], "w"))
'''


@pytest.mark.versions("3.12")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task/T/syscall")
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_condition_future_and_io_waits_equal_the_programs_log(tmp_path, loop):
    """Blocks on a condition, a future and I/O (asyncio's and threading's)
    and who woke each, as the program logs them: the reason, the channel
    (its stackwatch.name()) and the waker (run_in_executor's: the worker
    thread; a thread's call_soon_threadsafe: that thread; asyncio's socket
    and stream reads: none, I/O, with the wake's reason "io"). The --log
    says the same. On uvloop's loop (its callbacks and I/O compiled, no
    asyncio Handle) the same program's log, so the same answers."""
    if loop == "uvloop":
        needs_module("uvloop", "uvloop is not installed (scripts/venv.sh installs it)")
    own, log = tmp_path / "log.json", tmp_path / "tasks.log"
    swt, _ = run_traced(tmp_path, WAITS, "--events", "tasks", "--log", str(log), "--include", "*prog.py",
                        args=(str(own), loop))   # (the program's calls only: a short log)
    doc = read_task_events(swt)
    want = json.loads(own.read_text())
    named = {e["channel"] for e in want}
    got = [{"kind": e["kind"], "task": e["task"].split(" ")[0], "other": e["other"] and e["other"].split(" ")[0],
            "reason": e["reason"], "channel": e["channel"]}
           for e in doc["events"] if e["kind"] in ("block", "wake") and e["channel"] in named]
    assert got == want and len(want) == 18
    wakes = [line.split("] task_wake ")[1].strip() for line in log.read_text().splitlines() if "] task_wake " in line]
    assert [w.split("  at ")[0] for w in wakes if w.startswith("reader")] == [
        "reader reader woken by io (sock)", "reader reader woken by io (stream)"], wakes
    # (the task that started a thread, blocked in Thread.start, woken by the new thread: the task, not its thread)
    assert [w.split(" (")[0] for w in wakes if w.endswith(")") and "(Event " in w and "soon_setter" in w] == [
        "thread_waiter thread_waiter woken by soon_setter"], wakes
    io_waits = [w for w in analyze(doc, longest=1000)["longest_waits"] if w["on"] in ("sock", "stream")]
    assert [(w["ended_by"], w["ended_reason"]) for w in io_waits] == [(None, "io")] * 2   # (`stackwatch tasks`)
    for wake, block in _wakes(doc):
        if wake["channel"] in named:   # at the program's own code
            assert block["file"].endswith("prog.py") and wake["t_ns"] >= block["t_ns"]


# WAITS's asyncio part on trio's run loop, logged as WAITS logs it: the
# same waits (on trio's objects: an Event where asyncio has a future), each
# ended by the same waker, with the same cause: to_thread's worker thread,
# a thread's TrioToken.run_sync_soon (asyncio's call_soon_threadsafe), a
# task's notify and set, and data on a socket and on a stream (I/O).
TRIO_WAITS = r'''
import json, socket, sys, threading
import trio, stackwatch

log = []

def me():
    try:
        return trio.lowlevel.current_task().name.rsplit(".", 1)[-1]
    except RuntimeError:
        return threading.current_thread().name

def note(kind, reason, channel, task=None, other=None):   # (as WAITS's)
    log.append({"kind": kind, "task": task or me(), "other": other if kind == "wake" else None,
                "reason": reason, "channel": channel})

def pooled():   # in a worker thread: its return ends the wait
    note("wake", None, None, "pool_waiter", me())
    return 7

async def pool_waiter():
    note("block", "future", None)
    assert await trio.to_thread.run_sync(pooled, thread_name="pool_0") == 7

def soon(token, e):   # a thread's run_sync_soon ends the wait
    note("wake", None, "soon", "thread_waiter", me())
    token.run_sync_soon(e.set)

async def thread_waiter():
    e = trio.Event()
    stackwatch.name(e, "soon")
    setter = threading.Thread(target=soon, args=(trio.lowlevel.current_trio_token(), e), name="soon_setter")
    note("block", "event", "soon")
    setter.start()
    await e.wait()
    setter.join()

async def cond_waiter(c):
    async with c:
        note("block", "condition", "cond")
        await c.wait()

async def cond_notifier(c):
    while not c.statistics().tasks_waiting:
        await trio.sleep(0)
    async with c:
        note("wake", None, "cond", "cond_waiter", me())
        c.notify()

async def fut_waiter(e):
    note("block", "event", "fut")
    await e.wait()

async def fut_setter(e):
    await trio.sleep(0)
    note("wake", None, "fut", "fut_waiter", me())
    e.set()

async def reader(s, stream):
    note("block", "io", "sock")
    await trio.lowlevel.wait_readable(s)
    assert s.recv(5) == b"hello"
    note("block", "io", "stream")
    assert await stream.receive_some(5) == b"again"

async def writer(s, out):
    for data, channel in ((b"hello", "sock"), (b"again", "stream")):
        await trio.sleep(0.001)
        note("wake", "io", channel, "reader", None)
        s.send(data) if channel == "sock" else await out.send_all(data)

async def main():
    async with trio.open_nursery() as n:
        n.start_soon(pool_waiter)
    async with trio.open_nursery() as n:
        n.start_soon(thread_waiter)
    c, e = trio.Condition(), trio.Event()
    stackwatch.name(c, "cond")
    stackwatch.name(e, "fut")
    async with trio.open_nursery() as n:
        n.start_soon(cond_waiter, c)
        n.start_soon(cond_notifier, c)
    async with trio.open_nursery() as n:
        n.start_soon(fut_waiter, e)
        n.start_soon(fut_setter, e)
    a, b = socket.socketpair()
    a.setblocking(False)
    stackwatch.name(a, "sock")
    c2, d2 = socket.socketpair()
    stackwatch.name(c2, "stream")
    stream, out = trio.SocketStream(trio.socket.from_stdlib_socket(c2)), trio.SocketStream(trio.socket.from_stdlib_socket(d2))
    async with trio.open_nursery() as n:
        n.start_soon(reader, a, stream)
        n.start_soon(writer, b, out)

trio.run(main)
json.dump(log, open(sys.argv[1], "w"))
'''


@pytest.mark.versions("3.12")
def test_trio_wakes_equal_asyncios(tmp_path):
    """The waits of TRIO_WAITS and who ended each equal its own log (the
    trace), and its log equals WAITS's on asyncio's loop (run untraced):
    trio's run loop gives asyncio's answers for the waker and the cause
    (no waker, I/O, for data; the thread for a wake from another thread)."""
    needs_module("trio", "trio is not installed (scripts/venv.sh installs it)")
    own, mirror = tmp_path / "log.json", tmp_path / "asyncio.json"
    swt, _ = run_traced(tmp_path, TRIO_WAITS, "--events", "tasks", "--include", "*prog.py", args=(str(own),))
    want = json.loads(own.read_text())
    mine, named = {e["task"] for e in want}, {e["channel"] for e in want}

    def short(name):   # ("trio __main__.reader": reader)
        return name and (name.split(" ")[1].rsplit(".", 1)[-1] if name.startswith("trio ") else name)
    # (not the waits in threading's Thread.start and join, on the thread's Event and the thread)
    got = [{"kind": e["kind"], "task": short(e["task"]), "other": short(e["other"]), "reason": e["reason"],
            "channel": e["channel"]} for e in read_task_events(swt)["events"]
           if e["kind"] in ("block", "wake") and short(e["task"]) in mine and e["channel"] in named]
    assert got == want and len(want) == 12
    r = run_cli(["python", write(tmp_path / "aio.py", WAITS), str(mirror)])
    assert r.returncode == 0, r.stderr

    def wakers(log):
        return [(e["kind"], e["task"], e["other"], e["reason"] if e["kind"] == "wake" else None) for e in log]
    assert wakers(want) == wakers(json.loads(mirror.read_text())[:len(want)])


# stackwatch.name() holds what it names weakly: a queue, a lock, a thread,
# a greenlet and an asyncio task, named and used while task events are
# recorded, are freed once the program drops them.
NAMED = r'''
import asyncio, gc, queue, sys, threading, weakref
import greenlet, stackwatch

def named_then_dropped():
    q, lock = queue.Queue(), threading.Lock()
    t, g = threading.Thread(target=lambda: q.put(1), name="t"), greenlet.greenlet(lambda: lock.acquire())
    for obj, name in ((q, "the queue"), (lock, "the lock"), (t, "the thread"), (g, "the greenlet")):
        stackwatch.name(obj, name, group="named")
    t.start()
    t.join()
    q.get()
    g.switch()
    lock.release()

    async def main():
        task = asyncio.get_running_loop().create_task(asyncio.sleep(0))
        stackwatch.name(task, "the task", group="named")
        await task
        return task
    task = asyncio.run(main())
    return [weakref.ref(x) for x in (q, lock, t, g, task)]

stackwatch.start(sys.argv[1], events=["tasks"])
refs = named_then_dropped()
gc.collect()
alive = [r() for r in refs if r() is not None]
stackwatch.stop()
assert not alive, alive
from stackwatch.events import task_hooks
assert not task_hooks._names, dict(task_hooks._names)
'''


@pytest.mark.versions("3.12")
def test_names_are_weakly_held(tmp_path):
    prog = write(tmp_path / "p.py", NAMED)
    r = subprocess.run([sys.executable, prog, str(tmp_path / "t.swt")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    doc = read_task_events(str(tmp_path / "t.swt"))
    named = {t["name"] for t in doc["tasks"] if t["group"] == "named"}
    assert named == {"the thread", "the greenlet", "the task"}, named   # (the names were used)
    assert {e["channel"] for e in doc["events"] if e["kind"] in ("send", "receive")} == {"the queue"}


@pytest.mark.versions("3.12")
def test_wrapped_only_while_task_events_are_recorded(tmp_path):
    """asyncio's and threading's methods (its lock types' too) are wrapped
    only while task events are wanted, and are the originals again after;
    a replacement the program made meanwhile stays."""
    program = r'''
import asyncio, queue, socket, sys, threading
import stackwatch
import multiprocessing.connection as mc
originals = (asyncio.events.Handle._run, threading.Thread.start, queue.Queue._put, mc.Pipe, mc.Connection.send)
sockets = dict(socket.socket.__dict__), socket.socketpair
Lock = type(threading.Lock())
lock_methods = dict(Lock.__dict__)
stackwatch.start(sys.argv[1] + ".plain")
assert (asyncio.events.Handle._run, threading.Thread.start, queue.Queue._put) == originals[:3]
assert dict(Lock.__dict__) == lock_methods
stackwatch.stop()
stackwatch.start(sys.argv[1], events=["tasks"])
assert asyncio.events.Handle._run is not originals[0] and threading.Thread.start is not originals[1]
assert Lock.__dict__["acquire"] is not lock_methods["acquire"]
assert "recv" in socket.socket.__dict__ and socket.socketpair is not sockets[1]
for bad in ((True, -2), (False, 1), (True, "x")):   # refused as by the lock's own, not taken
    free = threading.Lock()
    try:
        free.acquire(*bad)
    except (ValueError, TypeError):
        assert not free.locked()
    else:
        raise AssertionError(bad)
held = threading.Lock()
release = held.release   # bound while wrapped: still the lock's release after
held.acquire()
mine = lambda self, item: None
queue.Queue._put = mine
stackwatch.stop()
assert (asyncio.events.Handle._run, threading.Thread.start) == originals[:2] and queue.Queue._put is mine
assert (mc.Pipe, mc.Connection.send) == originals[3:]
assert dict(Lock.__dict__) == lock_methods
assert (dict(socket.socket.__dict__), socket.socketpair) == sockets
release()
assert not held.locked()
'''
    prog = write(tmp_path / "p.py", program)
    r = subprocess.run([sys.executable, prog, str(tmp_path / "t.swt")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(sys.version_info < (3, 12), reason="eager tasks are 3.12's")
def test_eager_tasks(tmp_path):
    """An eager task that ends in its first step (run inside create_task)
    exits right after its creation; the hooks never touch a finished
    task's coroutine (3.12.1's get_coro() crashes on it)."""
    program = r'''
import asyncio

async def quick():
    return 5

async def slow():
    await asyncio.sleep(0.001)
    return 6

async def main():
    asyncio.get_running_loop().set_task_factory(asyncio.eager_task_factory)
    a = asyncio.create_task(quick())
    async with asyncio.TaskGroup() as tg:
        b = tg.create_task(slow())
    return await a + b.result()

assert asyncio.run(main()) == 11
'''
    swt, _ = run_traced(tmp_path, program, "--events", "tasks")
    doc = read_task_events(swt)
    # (by coroutine: 3.13.0's create_task names a task factory's tasks "None")
    got = [(e["kind"], e["task"].split()[-1]) for e in doc["events"] if e["kind"] in ("create", "exit")][:6]
    assert got == [("create", "main"), ("create", "quick"), ("exit", "quick"), ("create", "slow"), ("exit", "slow"),
                   ("exit", "main")]
    results = {t["name"].split()[-1]: (t["outcome"], t["result"]) for t in doc["tasks"]}
    assert results["quick"] == ("result", "5") and results["slow"] == ("result", "6")


@pytest.mark.versions("3.12")
def test_two_sessions_in_one_process(tmp_path):
    """A task that blocks while the first session traces and is woken in
    the second: the second trace has no wake of a task it never saw block
    (the first session's waits are not carried over; its ids are not the
    second's), and its own blocks and wakes pair up."""
    program = r'''
import asyncio, sys, stackwatch

async def get(q):
    return await q.get()

async def queue():
    return asyncio.Queue()

loop = asyncio.new_event_loop()
q = loop.run_until_complete(queue())
t = loop.create_task(get(q))
stackwatch.start(sys.argv[1] + "0.swt", events=["tasks"])
loop.run_until_complete(asyncio.sleep(0.01))   # t blocks on the queue
stackwatch.stop()
stackwatch.start(sys.argv[1] + "1.swt", events=["tasks"])
loop.run_until_complete(q.put(1))
assert loop.run_until_complete(t) == 1
stackwatch.stop()
'''
    prog = write(tmp_path / "p.py", program)
    r = subprocess.run([sys.executable, prog, str(tmp_path / "t")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    first, second = (read_task_events(str(tmp_path / f"t{i}.swt")) for i in range(2))
    assert [(e["kind"], e["reason"]) for e in first["events"] if e["kind"] in ("block", "wake")
            and e["task"].endswith(" get")] == [("block", "queue")]
    _wakes(second)   # (each wake ends a block of the same trace)
    # The queue's name, interned again by the second trace (its own strings).
    channel = {e["channel"] for e in first["events"] if e["kind"] == "block" and e["task"].endswith(" get")}
    assert {e["channel"] for e in second["events"] if e["kind"] == "receive"} == channel
    assert [e["kind"] for e in second["events"] if e["task"].endswith(" get")][-3:] == ["switch", "receive", "exit"]


@pytest.mark.versions("3.12")
def test_log_without_a_trace(tmp_path):
    """`--no-trace --log`: the task events reach the log with no trace
    written, the tasks named and switched as with one."""
    program = r'''
import asyncio

async def child():
    await asyncio.sleep(0)
    return 7

async def parent():
    return await asyncio.ensure_future(child())

assert asyncio.run(parent()) == 7
'''
    prog = write(tmp_path / "p.py", program)
    log = tmp_path / "events.log"
    r = run_cli(["run", "--no-trace", "--events", "tasks", "--log", str(log), prog])
    assert r.returncode == 0, r.stderr
    lines = [line.split("] ", 1)[1].split("  at ")[0].strip() for line in log.read_text().splitlines()
             if "] task_" in line]
    assert "task_create  Task-2 child (asyncio) created by Task-1 parent" in lines
    assert "task_block   Task-1 parent blocks on join Task-2 child" in lines
    assert "task_exit    Task-2 child exited: result 7" in lines
    assert any(line.startswith("task_switch  MainThread -> Task-2 child  [Task-2 child: running") for line in lines)
    assert not list(tmp_path.glob("*.swt"))


def test_an_event_located_nowhere_is_not_in_code_zero(tmp_path):
    """A task event with no location is written with no code (format 1.14),
    not as code 0, which is a function of the trace: the readers give it no
    function, and the event located in code 0 keeps its own."""
    import stackwatch
    from stackwatch import _native
    from stackwatch.events.task_hooks import _K

    def located_here():
        _native.hooks.task_event(_K["task_send"], 0, 0, 0, "q", "'here'", (located_here.__code__, 7))
        _native.hooks.task_event(_K["task_send"], 0, 0, 0, "q", "'nowhere'", None)

    p = str(tmp_path / "t.swt")
    stackwatch.start(p, events=["tasks"])
    located_here()
    stackwatch.stop()
    t = Trace(p)
    here = [c.id for c in t.codes.values() if c.qualname.endswith("located_here")]
    sends = t.ext_events(kinds=["task_send"])
    assert [(e.data["value"], e.code, e.line) for e in sends] == [("'here'", here[0], 7), ("'nowhere'", None, 0)]
    doc = read_task_events(p)
    # (3.9/3.10 name a code by its name, not its qualified name)
    assert [(e["value"], e["function"] and e["function"].split(".")[-1]) for e in doc["events"]
            if e["kind"] == "send"] == [("'here'", "located_here"), ("'nowhere'", None)]
    chrome = str(tmp_path / "t.json")
    assert run_cli(["export", p, "--format", "chrome", "-o", chrome]).returncode == 0
    with open(chrome) as f:
        args = [e["args"] for e in json.load(f)["traceEvents"] if e.get("args", {}).get("value") == "'nowhere'"]
    assert args and all(a["function"] == "?" for a in args), args


# Tasks that switch, block, wake, send, receive, raise, are cancelled and
# named, and greenlets passing values: the same events in every run (one
# thread, no timers that fire). The program also logs them through a
# Python handler of its own (stackwatch.Event objects, the Python path to
# the same writer).
DETERMINISTIC = r'''
import asyncio, sys
import greenlet
import stackwatch

own = stackwatch.handlers.verbose(sys.argv[1])
handler = stackwatch.add_handler(own, events="tasks")

async def worker(i, q):
    await asyncio.sleep(0)
    await q.put(i)
    if i == 2:
        raise ValueError(i)
    return i

async def consumer(q, n):
    total = 0
    for _ in range(n):
        total += await q.get()
    return total

async def sleeper():
    await asyncio.sleep(60)

async def main():
    q = asyncio.Queue()
    stackwatch.name(q, "numbers")
    c = asyncio.create_task(consumer(q, 4))
    stackwatch.name(c, "the consumer", group="workers")
    s = asyncio.create_task(sleeper())
    await asyncio.sleep(0)
    s.cancel()
    await asyncio.gather(*(worker(i, q) for i in range(4)), return_exceptions=True)
    return await c

assert asyncio.run(main()) == 6

def child(x):
    return main_g.switch(x + 1) * 2

main_g = greenlet.getcurrent()
g = greenlet.greenlet(child)
assert g.switch(1) == 2 and g.switch(20) == 40
handler.remove()
own.close()
'''


# A thread woken twice, renamed between (the log's writer keeps the thread
# it found under a native id and reads its name again at each line), and a
# thread of a class with a name property of its own (asked in Python).
RENAMED = r"""
import threading, time

class Own(threading.Thread):
    @property
    def name(self):
        return "own-" + self._name

    @name.setter
    def name(self, value):
        self._name = value

def twice(ev, again):
    ev.wait()
    again.wait()

for make in (threading.Thread, Own):
    ev, again = threading.Event(), threading.Event()
    t = make(target=twice, args=(ev, again), name="first")
    t.start()
    for e, name in ((ev, "second"), (again, "third")):
        while not e._cond._waiters:
            time.sleep(0.001)
        t.name = name
        e.set()
    t.join()
"""


def test_log_names_a_woken_thread_as_it_is_named_then(tmp_path):
    """A wake's line names the thread woken (found by its native id) by
    its name at that moment, as threading tells it."""
    prog = write(tmp_path / "p.py", RENAMED)
    log = tmp_path / "events.log"
    r = run_cli(["run", "--no-trace", "--events", "tasks", "--log", str(log), prog])
    assert r.returncode == 0, r.stderr
    woken = [line.split("task_wake", 1)[1].split(" woken by ")[0].strip() for line in log.read_text().splitlines()
             if "task_wake" in line and "woken by MainThread" in line]
    assert woken == ["second", "third", "own-second", "own-third"], woken


@pytest.mark.versions("3.12")
def test_log_without_a_trace_equals_the_log_with_one(tmp_path):
    """The task lines of `--no-trace --log` (the log's writer in C, no trace)
    are those of `--log` with the trace, line for line but for the times,
    and those of a Python handler (stackwatch.handlers.verbose) given the
    same events as stackwatch.Event objects."""
    needs_module("greenlet", "greenlet is not installed")
    prog = write(tmp_path / "p.py", DETERMINISTIC)

    def task_lines(path):
        lines = [line.rstrip("\n").split(" ms  ", 1)[1] for line in open(path) if "] task_" in line]
        assert lines
        return lines

    r = run_cli(["run", "-q", "--events", "tasks", "--log", str(tmp_path / "with.log"), "-o", str(tmp_path / "t.swt"),
                 prog, str(tmp_path / "own_with.log")])
    assert r.returncode == 0, r.stderr
    r = run_cli(["run", "-q", "--no-trace", "--events", "tasks", "--log", str(tmp_path / "without.log"), prog,
                 str(tmp_path / "own_without.log")])
    assert r.returncode == 0, r.stderr
    without = task_lines(tmp_path / "without.log")
    assert without == task_lines(tmp_path / "with.log")
    assert without == task_lines(tmp_path / "own_without.log") == task_lines(tmp_path / "own_with.log")
    # (every kind, and the states at a switch)
    assert {line.split()[1] for line in without} == {"task_create", "task_switch", "task_name", "task_block",
                                                      "task_wake", "task_woken", "task_send", "task_receive",
                                                      "task_exit"}
    assert "[MainThread] task_exit    Task-3 sleeper exited: cancelled" in without
    assert any(line.startswith("[MainThread] task_switch  MainThread -> the consumer  [the consumer: running, "
                               "Task-1 main: blocked on join Task-4 worker") for line in without)



# DETERMINISTIC's tasks, and a thread started from a function (its
# creation stack: the starter's frames) that runs them again; joined once
# it has ended (a join that blocks or not, as the thread ends first or not,
# would make the events of two runs differ).
WITHOUT_CALLS = DETERMINISTIC + r"""
import threading

def start_putter():
    t = threading.Thread(target=lambda: asyncio.run(main()), name="putter")
    t.start()
    while t.is_alive():
        pass
    t.join()

start_putter()
"""


SAME_PLACE = """
import asyncio

async def leaf():
    await asyncio.sleep(0)

def make(n):   # tasks made one after another at one place: the same codes walked
    return [asyncio.ensure_future(leaf()) for _ in range(n)]

async def deeper(k, n):
    if k:
        return await deeper(k - 1, n)
    return make(n)

async def main():
    ts = make(3)
    ts += [asyncio.create_task(leaf()) for _ in range(2)]
    ts += make(2)
    ts += await deeper(2, 2)
    ts += make(1)
    ts += await deeper(1, 1)
    await asyncio.gather(*ts)

asyncio.run(main())
"""


def test_creation_stacks_made_again_at_one_place_without_calls(tmp_path):
    """Without calls, a creation stack that walks the same codes as the one
    before it is written with that one's string (file_events.c last_stack):
    tasks made in turn at one place, at another line, from a deeper stack
    over the same innermost code, and back, each have the creation stack
    the replay of a trace with calls finds for it."""
    prog = write(tmp_path / "p.py", SAME_PLACE)
    docs = {}
    for name, no_trace in (("with", []), ("without", ["--no-trace"])):
        out = str(tmp_path / f"{name}.swt")
        r = run_cli(["run", "-q", *no_trace, "--events", "tasks", "-o", out, prog])
        assert r.returncode == 0, r.stderr
        docs[name] = [(k["name"], k["creation_stack"]) for k in read_task_events(out)["tasks"] if "leaf" in k["name"]]
    assert len(docs["without"]) == 11
    assert docs["without"] == docs["with"]
    depth = [[f["function"] for f in stack].count("deeper") for _, stack in docs["without"]]
    assert depth == [0] * 7 + [3, 3, 0, 2], depth


@pytest.mark.versions("3.12")
def test_a_trace_without_calls_holds_the_same_task_events(tmp_path):
    """`run --no-trace --events tasks -o FILE` writes the task records
    without the call records: the task document of that file equals that
    of a trace with calls of the same program, event for event in order
    (kind, task, other task, channel, value, reason; not the times, nor a
    switch's location, which is the innermost open frame of a trace with
    calls), task for task (name, kind, creator, outcome, result), and each
    creation stack, written with the creation (TASK_STACK), holds the
    program's frame that made the task with its line, as the replay of
    the trace with calls finds it."""
    needs_module("greenlet", "greenlet is not installed")
    prog = write(tmp_path / "p.py", WITHOUT_CALLS)
    docs = {}
    for name, no_trace in (("with", []), ("without", ["--no-trace"])):
        out = str(tmp_path / f"{name}.swt")
        r = run_cli(["run", "-q", *no_trace, "--events", "tasks", "-o", out, prog, str(tmp_path / f"{name}.log")])
        assert r.returncode == 0, r.stderr
        docs[name] = read_task_events(out)
    t = Trace(str(tmp_path / "without.swt"))
    assert t.meta.get("calls") == 0 and not t.calls
    assert "putter" in {th["name"] for th in t.threads}   # (named with no frame hook: found in threading's _limbo)
    assert all(not t.events(pos) for pos in range(len(t.threads)))   # (no call records)
    assert Trace(str(tmp_path / "with.swt")).calls

    def events(doc):
        """(Addresses in channel names, by order of appearance: each run has its own.
        Thread.start's wait for the new thread to start, the main thread's
        only Event, is left out: it blocks only when the main thread gets to
        the wait before the new thread sets it, which the two runs need not
        share: one in make test at load 15 had it in one run only.)"""
        seen = {}
        numbered = lambda c: c and re.sub(r"0x[0-9a-f]+", lambda m: f"#{seen.setdefault(m[0], len(seen))}", c)
        started = lambda e: (e["kind"] in ("block", "wake") and e["task"] == "MainThread"
                             and (e["channel"] or "").startswith("Event "))
        return [(e["kind"], e["task"], e["other"], numbered(e["channel"]), e["value"], e["reason"])
                for e in doc["events"] if not started(e)]

    def tasks(doc):
        return [(k["name"], k["kind"], k["created_by"], k["outcome"], k["result"]) for k in doc["tasks"]]

    without, with_calls = docs["without"], docs["with"]
    assert events(without) == events(with_calls)
    assert len(events(without)) > 60 and {e[0] for e in events(without)} == {
        "create", "switch", "block", "wake", "send", "receive", "exit"}
    assert tasks(without) == tasks(with_calls)
    deep = 0
    for a, b in zip(without["tasks"], with_calls["tasks"]):
        stack = a["creation_stack"]
        if a["kind"] == "thread" and stack:   # (the replay finds the starter waiting in Thread.start for it)
            assert [f["function"] for f in stack] == ["start_putter", "<module>"], stack
            assert b["creation_stack"][-2:] == stack
        else:
            assert stack == b["creation_stack"], a["name"]
        deep += len(stack) > 2
    assert deep >= 8
    # Every view of the task events reads it; the call trees say in one line that it has none.
    seq = tmp_path / "s.html"
    assert run_cli(["export", str(tmp_path / "without.swt"), "--format", "sequence", "-o", str(seq)]).returncode == 0
    assert "putter" in seq.read_text()
    r = run_cli(["tasks", str(tmp_path / "without.swt")])
    assert r.returncode == 0 and "the consumer" in r.stdout, r.stderr
    chrome = tmp_path / "t.json"
    assert run_cli(["export", str(tmp_path / "without.swt"), "-o", str(chrome)]).returncode == 0
    names = {e["args"]["name"] for e in json.loads(chrome.read_text())["traceEvents"] if e.get("name") == "thread_name"}
    assert {"the consumer", "putter"} <= {n.split(" (")[0] for n in names}, names
    r = run_cli(["export", str(tmp_path / "without.swt"), "-o", str(tmp_path / "f.html")])
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "without calls" in r.stderr, r.stderr
    timeline = perfetto_timeline(tmp_path / "without.swt", tmp_path / "t.pftrace")   # (a track per task)
    tracks = {td.name or td.thread.thread_name for td in timeline.tracks.values()}
    named = {re.sub(r" #\d+$", "", k["name"]) for k in without["tasks"]}   # (the document's "name #2": a second one)
    assert named <= tracks and timeline.instants and not timeline.slices, named - tracks
    # What cannot be recorded without calls: one line each, before the program runs.
    for words, said in ((["--no-trace"], "needs --events"), (["--no-trace", "--events", "tasks", "--format", "html"],
                        "drawn from the call records"), (["--no-trace", "--events", "tasks", "--cpu"], "--cpu")):
        r = run_cli(["run", *words, "-o", str(tmp_path / "no.swt"), prog])
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and said in r.stderr, r.stderr
    assert not (tmp_path / "no.swt").exists() and not (tmp_path / "no.flamegraph.html").exists()

# Modules task events hook or that come with them (multiprocessing brings
# pickle, tempfile, bz2, lzma; asyncio brings ssl and concurrent.futures).
HOOKED_OR_HEAVY = ("asyncio", "ssl", "concurrent", "multiprocessing", "pickle", "queue", "greenlet", "gevent",
                   "socket", "trio", "uvloop", "_asyncio", "_ssl", "_multiprocessing", "_pickle", "_queue")
WHICH_IMPORTED = r'''
import sys
if len(sys.argv) > 1:   # (under `run`, no argument: stackwatch started it)
    import stackwatch
    stackwatch.start(sys.argv[1], events=["tasks"])
print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] in %r)))
if len(sys.argv) > 1:
    stackwatch.stop()
''' % (HOOKED_OR_HEAVY,)


@pytest.mark.versions("3.9", "3.12")
def test_task_events_import_nothing_the_program_did_not(tmp_path):
    """Task events hook asyncio, queue, multiprocessing, greenlet, ... when
    the program imports them (task_imports.c), never by importing them
    themselves: of those modules, a program that starts task events (from
    Python, or under `run --events tasks`) has in sys.modules what it has
    without stackwatch."""
    prog = write(tmp_path / "p.py", WHICH_IMPORTED)
    plain = run_cli(["python", prog])
    started = run_cli(["python", prog, str(tmp_path / "a.swt")])
    under_run = run_cli(["run", "-q", "--events", "tasks", "-o", str(tmp_path / "b.swt"), prog])
    for r in (plain, started, under_run):
        assert r.returncode == 0, r.stderr
    assert started.stdout == plain.stdout and under_run.stdout == plain.stdout


# Greenlets in two threads at once, each thread logging its switches with
# its own greenlet.settrace callback (greenlet's are per thread), set before
# its first switch: stackwatch's goes on each thread at its first switch
# and chains the program's.
GREENLETS_IN_THREADS = r'''
import json, sys, threading
import greenlet, stackwatch

log = {}

def play(n):
    me = threading.current_thread().name
    mine = log.setdefault(threading.get_native_id(), [])
    def label(g):
        return me if g.parent is None else "child"
    greenlet.settrace(lambda event, pair: mine.append([label(pair[1]), label(pair[0])]))
    main = greenlet.getcurrent()
    def steps():
        for i in range(n):
            main.switch(i)
        return n
    child = greenlet.greenlet(steps)
    got = [child.switch() for _ in range(n + 1)]
    assert got == list(range(n)) + [n], got
    greenlet.settrace(None)

stackwatch.start(sys.argv[1], events=["tasks"])
threads = [threading.Thread(target=play, args=(40,), name=name) for name in ("left", "right")]
for t in threads:
    t.start()
for t in threads:
    t.join()
stackwatch.stop()
json.dump(log, open(sys.argv[2], "w"))
'''


@pytest.mark.versions("3.9", "3.12")
def test_greenlets_in_other_threads_switch_as_their_log_says(tmp_path):
    """greenlet.settrace is per thread: greenlets switching in threads that
    are not the one that started task events have their switches too, the
    same, thread by thread and in order, as the program's own callbacks
    log (which stackwatch's calls after it on each thread)."""
    needs_module("greenlet", "greenlet is not installed (scripts/venv.sh installs it)")
    swt, log = _run(tmp_path, GREENLETS_IN_THREADS)
    assert sorted(len(entries) for entries in log.values()) == [82, 82]   # (41 switches each way)
    got = {}
    for e in read_task_events(swt)["events"]:
        if e["kind"] == "switch":
            names = [n.split()[0] if n.startswith("greenlet ") else n for n in (e["task"], e["other"])]
            got.setdefault(str(e["thread"]), []).append(["child" if n == "greenlet" else n for n in names])
    assert got == log
