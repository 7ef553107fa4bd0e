"""asyncio's tasks in the task events (issue 22), against the program's own
log: a task named by create_task(name=...), one renamed by set_name while
it runs, exits with a result, an exception and a cancellation, a TaskGroup's
tasks (3.11+) and eager tasks (3.12+: their first step runs inside
create_task, and must run as the task, on its own track)."""
import json
import sys

import pytest

from conftest import run_own_log, run_traced
from stackwatch import Trace
from stackwatch.tracer.task_events import read_task_events

# The program logs each creation (before create_task, so that an eager
# task's first step comes after it) and each exit (with its outcome and
# result, just before it happens); the tasks are named at the end as
# stackwatch names them: the asyncio name (the last one given) and the
# coroutine's qualified name.
PROGRAM = r'''
import asyncio, json, sys

log, tasks = [], {}

def spawn(coro, via=None, **kw):
    entry = {"kind": "create", "task": None, "outcome": None, "result": None}
    log.append(entry)
    t = (via or asyncio.create_task)(coro, **kw)
    tasks[id(t)] = (t, coro.__qualname__)
    entry["task"] = id(t)
    return t

def exits(outcome, result):
    log.append({"kind": "exit", "task": id(asyncio.current_task()), "outcome": outcome, "result": result})

async def ok(n):
    await asyncio.sleep(0)
    exits("result", repr(n))
    return n

async def fails():
    await asyncio.sleep(0)
    exits("exception", repr(ValueError("on purpose")))
    raise ValueError("on purpose")

async def sleeper():
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        exits("cancelled", None)
        raise

async def renamed():
    await asyncio.sleep(0)
    asyncio.current_task().set_name("late-name")
    await asyncio.sleep(0)
    exits("result", "3")
    return 3

def first_step_mark():
    return asyncio.current_task()

async def eager_done(ran):
    ran.append(first_step_mark())   # inside create_task
    exits("result", "7")
    return 7

async def eager_waits(ran):
    ran.append(first_step_mark())
    await asyncio.sleep(0.001)
    exits("result", "8")
    return 8

async def main():
    a = spawn(ok(1), name="fetcher")
    b, s, r = spawn(fails()), spawn(sleeper()), spawn(renamed())
    await asyncio.sleep(0)
    s.cancel()
    got = await asyncio.gather(a, b, s, r, return_exceptions=True)
    assert got[0] == 1 and type(got[1]) is ValueError and type(got[2]) is asyncio.CancelledError and got[3] == 3
    if sys.version_info >= (3, 11):
        async with asyncio.TaskGroup() as tg:
            for i in range(3):
                spawn(ok(10 + i), via=tg.create_task)
    if sys.version_info >= (3, 12):
        loop = asyncio.get_running_loop()
        loop.set_task_factory(asyncio.eager_task_factory)
        ran = []
        e1 = spawn(eager_done(ran))
        e2 = spawn(eager_waits(ran))
        assert ran == [e1, e2] and e1.done() and not e2.done()   # both first steps ran in create_task
        assert await e2 == 8
        loop.set_task_factory(None)

asyncio.run(main())
names = {k: f"{t.get_name()} {qn}" for k, (t, qn) in tasks.items()}
for e in log:
    e["task"] = names[e["task"]]
json.dump(log, open(sys.argv[1], "w"))
'''


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    folder = tmp_path_factory.mktemp("aio")
    own = folder / "log.json"
    swt, _ = run_traced(folder, PROGRAM, "--events", "tasks", args=(str(own),))
    return swt, read_task_events(swt), json.loads(own.read_text())


@pytest.mark.versions("3.9", "3.12")
def test_creations_and_exits_equal_the_programs_log(traced):
    _, doc, log = traced
    mine = {e["task"] for e in log}
    got = [{"kind": e["kind"], "task": e["task"]} for e in doc["events"]
           if e["kind"] in ("create", "exit") and e["task"] in mine]
    assert got == [{"kind": e["kind"], "task": e["task"]} for e in log]
    tasks = {t["name"]: t for t in doc["tasks"]}
    for e in log:
        if e["kind"] == "exit":
            assert (tasks[e["task"]]["outcome"], tasks[e["task"]]["result"]) == (e["outcome"], e["result"]), e
    expected = 4 + (3 if sys.version_info >= (3, 11) else 0) + (2 if sys.version_info >= (3, 12) else 0)
    assert len(mine) == expected and all(tasks[n]["kind"] == "asyncio" for n in mine)
    main = next(n for n in tasks if n.endswith(" main"))
    assert {tasks[n]["created_by"] for n in mine} == {main}   # (a TaskGroup's too)


@pytest.mark.versions("3.9", "3.12")
def test_names_given_by_asyncio(traced):
    """create_task(name=...) names the task from its creation on (3.9-3.11's
    asyncio.create_task sets it after loop.create_task returns); set_name
    renames it (a TASK_NAME), its events all carry its last name."""
    _, doc, log = traced
    names = [e["task"] for e in log if e["kind"] == "create"]
    assert "fetcher ok" in names and "late-name renamed" in names
    assert [e["kind"] for e in doc["events"] if e["task"] == "fetcher ok"][0] == "create"
    assert not any(t["name"].endswith(" renamed") and t["name"] != "late-name renamed" for t in doc["tasks"])


@pytest.mark.skipif(sys.version_info < (3, 12), reason="eager tasks are 3.12's")
@pytest.mark.versions("3.12")
def test_eager_first_steps_run_as_their_tasks(traced):
    """An eager task's first step runs inside create_task: it is recorded
    after the task's creation, as the task (a switch to it), and the
    coroutine's frames are on the task's own track, not its creator's."""
    swt, doc, _ = traced
    for coro in ("eager_done", "eager_waits"):
        name = next(t["name"] for t in doc["tasks"] if t["name"].endswith(" " + coro))
        kinds = [e["kind"] for e in doc["events"] if e["task"] == name]
        assert kinds[:2] == ["create", "switch"], kinds
    t = Trace(swt)
    seen = {}
    for pos, th in enumerate(t.threads):
        names = {t.codes[e.code].name for e in t.events(pos) if e.kind in (0, 2) and e.code in t.codes}
        for fn in ("first_step_mark", "eager_done", "eager_waits"):
            if fn in names:
                seen.setdefault(fn, []).append(th["name"])
    assert seen["eager_done"] == [n for n in seen["eager_done"] if n.endswith(" eager_done")] != []
    assert seen["eager_waits"] == [n for n in seen["eager_waits"] if n.endswith(" eager_waits")] != []
    assert sorted(seen["first_step_mark"]) == sorted(seen["eager_done"] + seen["eager_waits"])


AT_START = r'''
import asyncio, json, sys, threading
import greenlet, stackwatch

async def getter(q):
    return await q.get()

async def spinner():
    for _ in range(3):
        await asyncio.sleep(0)
    return "spun"

async def queue():
    return asyncio.Queue()

loop = asyncio.new_event_loop()
q = loop.run_until_complete(queue())
g, s = loop.create_task(getter(q)), loop.create_task(spinner())
loop.run_until_complete(asyncio.sleep(0))   # the getter waits on the queue, the spinner is runnable
name = lambda t: f"{t.get_name()} {t.get_coro().__qualname__}"
own = {"blocked": [name(t) for t in (g, s) if t._fut_waiter is not None], "getter": name(g), "spinner": name(s),
       "queue": f"Queue {id(q):#x}"}
go, later = threading.Event(), threading.Event()
stackwatch.name(go, "go")
own["ends"], own["raised"] = [], {}
def waits(fails):
    go.wait()
    own["ends"].append(threading.current_thread().name)   # (its last line)
    if fails:
        raise ValueError("late")
threading.excepthook = lambda a: own["raised"].update({a.thread.name: repr(a.exc_value)})
waiter = threading.Thread(target=waits, args=(False,), name="waiter")   # threads ...
waiter.start()
failer = threading.Thread(target=waits, args=(True,), name="failer")
failer.start()
idle = threading.Thread(target=later.wait, name="idle")    # (blocked until tracing stops)
idle.start()
while not (len(go._cond._waiters) == 2 and later._cond._waiters):
    pass
own["threads"] = {t.name: t.native_id for t in threading.enumerate()}
def paused():
    greenlet.getcurrent().parent.switch()
    return "resumed"
gl = greenlet.greenlet(paused)                            # ... and a greenlet alive at the start
gl.switch()
stackwatch.start(sys.argv[1], events=["tasks"])
loop.run_until_complete(q.put(1))
assert loop.run_until_complete(g) == 1 and loop.run_until_complete(s) == "spun"
go.set()
waiter.join()
failer.join()
assert gl.switch() == "resumed"
stackwatch.stop()
later.set()
idle.join()
loop.close()
json.dump(own, open(sys.argv[2], "w"))
'''


@pytest.mark.versions("3.9", "3.12")   # (3.9 and 3.10 end a thread otherwise: task_hooks._LimboLock)
def test_tasks_alive_at_the_start(tmp_path):
    """Tasks alive when tracing starts are listed with their state then: a
    task waiting on a queue (as the program saw it) blocks on that queue at
    the start, and its wake pairs with it; a runnable one is listed, named,
    with no block. The listing's own calls are not recorded: the first call
    on the main thread is the program's first after start(); nor are the
    import system's of the stackwatch.stop the program names (it imports
    nothing while tracing)."""
    swt, own = run_own_log(tmp_path, AT_START)
    t = Trace(swt)
    main = next(i for i, th in enumerate(t.threads) if th["name"] == "MainThread")
    called = [t.codes[e.code] for e in t.events(main) if e.kind in (0, 2)]
    assert called[0].name == "run_until_complete" and not [c for c in called if "importlib" in c.filename]
    doc = read_task_events(swt)
    names = {t["name"] for t in doc["tasks"]}
    assert own["blocked"] == [own["getter"]] and {own["getter"], own["spinner"]} <= names
    getter = [(e["kind"], e["reason"], e["channel"]) for e in doc["events"] if e["task"] == own["getter"]]
    assert getter[:3] == [("switch", None, None), ("block", "queue", own["queue"]), ("wake", None, own["queue"])]
    assert not [e for e in doc["events"] if e["task"] == own["spinner"] and e["kind"] == "block"]
    assert [e["kind"] for e in doc["events"] if e["task"] == own["spinner"]][-1] == "exit"
    # The threads alive at the start are listed, and their end ends the
    # join; the greenlet is listed, made where it is first switched to.
    tasks = {t["name"]: t for t in doc["tasks"]}
    assert tasks["waiter"]["kind"] == "thread" and tasks["waiter"]["created_by"] is None
    # Every thread alive at the start, with its state then (META
    # tasks_at_start), the one that recorded nothing too.
    at_start = {n: t["at_start"] for n, t in tasks.items() if t["at_start"]}
    assert at_start["MainThread"] == {"state": "running", "waits_on": None}
    assert at_start["waiter"] == {"state": "blocked", "waits_on": "event go"}
    assert at_start["idle"]["state"] == "blocked" and at_start["idle"]["waits_on"].startswith("event Event 0x")
    assert set(at_start) == {"MainThread", "waiter", "failer", "idle"} and tasks[own["getter"]]["at_start"] is None
    assert {n: tasks[n]["thread"] for n in at_start} == own["threads"]   # (idle's too, which recorded nothing)
    join = [(e["kind"], e["other"]) for e in doc["events"] if e["channel"] == "thread waiter"]
    assert join == [("block", None), ("wake", "waiter")], join
    # Their exits (at Thread._delete, or 3.9 and 3.10's last `with`; their
    # run began before the hooks), as the program saw them end: the one that raised with its
    # exception; before the wake of a join (the failer's may have ended
    # before its join began: no wait). The thread that ends after tracing
    # stops has none.
    exits = [(e["task"], tasks[e["task"]]["outcome"], tasks[e["task"]]["result"])
             for e in doc["events"] if e["kind"] == "exit" and tasks[e["task"]]["kind"] == "thread"]
    assert sorted(exits) == sorted([(n, "exception", own["raised"][n]) if n in own["raised"] else (n, "result", None)
                                    for n in own["ends"]]) and len(exits) == 2, exits
    for n in own["ends"]:
        order = [e["kind"] for e in doc["events"] if e["task"] == n and e["kind"] == "exit"
                 or e["channel"] == f"thread {n}" and e["kind"] == "wake"]
        assert order == ["exit", "wake"] or n == "failer" and order == ["exit"], (n, order)
    assert [t["kind"] for t in doc["tasks"]].count("greenlet") == 1
