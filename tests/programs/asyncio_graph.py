"""A program whose asyncio task graph is known, parked until its stdin
closes (tests/py/cli/test_dump_asyncio.py). Its tasks:

  main          gathers worker-a and worker-b
  worker-a      awaits the task leaf-a, two coroutines down
  leaf-a        waits on an Event, three coroutines down
  worker-b      waits on an Event
  group-parent  (3.11+) a TaskGroup of group-child-1 and group-child-2,
                waiting for them in the group's exit
  group-child-* wait on an Event
  lonely        waits on an Event; no task awaits it
  sub           a task of a subclass of asyncio.Task, waiting on an Event
  sub-waiter    awaits the task sub
  shared        waits on an Event; awaited by two tasks:
  awaiter-1     awaits the task shared
  awaiter-2     gathers shared
  wait-forer    awaits asyncio.wait_for(waited-for, timeout)
  shielder      awaits asyncio.shield(shielded)
  waiter        awaits asyncio.wait([waited])
  waited-for, shielded, waited   wait on an Event
  shield-maker  awaits asyncio.shield(a coroutine): shield makes its task,
                made-by-shield (named so by this program once made)
  wait-for-maker  awaits asyncio.wait_for(a coroutine, timeout): before
                3.12 wait_for makes its task, made-by-wait-for (3.12+
                awaits the coroutine itself: no task)

When every task waits, a callback (no task runs then) prints one line
"graph JSON": each task of asyncio.all_tasks() with its coroutine stack
innermost first, as the coroutines themselves say it (cr_await from the
task's coroutine, each frame's function, file and f_lineno), and the tasks
that await it as this program built them; then the program waits for
EOF on stdin and ends. With the argument replace-task-type it first puts
another class in the place of _asyncio.Task (for a reader that checks
it). With the argument running, main awaits one task, busy, whose
coroutine outer awaits spin, which prints "graph []" and reads stdin to
EOF: busy runs, blocked in that read. With running-eager (3.12+) busy is
an eager task: it runs from main's call of Task(), both running."""
import asyncio
import json
import sys

PARENTS = {"worker-a": ["main"], "worker-b": ["main"], "leaf-a": ["worker-a"], "group-child-1": ["group-parent"],
           "group-child-2": ["group-parent"], "sub": ["sub-waiter"], "shared": ["awaiter-1", "awaiter-2"],
           "waited-for": ["wait-forer"], "shielded": ["shielder"], "waited": ["waiter"],
           "made-by-shield": ["shield-maker"], "made-by-wait-for": ["wait-for-maker"]}
MADE = ("made_by_shield", "made_by_wait_for")   # coroutines whose tasks asyncio makes: named after them


class MyTask(asyncio.Task):
    """A subclass of the C Task (its objects have the same fields first)."""


async def forever(event):
    await event.wait()


async def leaf_inner(event):
    await forever(event)


async def leaf(event):
    await leaf_inner(event)


async def worker_a_inner(task):
    return await task


async def worker_a(event):
    t = asyncio.ensure_future(leaf(event))
    t.set_name("leaf-a")
    await worker_a_inner(t)


async def worker_b(event):
    await event.wait()


async def gather_of(task):
    await asyncio.gather(task)


async def wait_for_of(aw):
    # (before 3.12: the task ends by releasing a future wait_for awaits)
    await asyncio.wait_for(aw, 1e6)


async def shield_of(aw):
    await asyncio.shield(aw)


async def wait_of(task):
    await asyncio.wait([task])


async def made_by_shield(event):
    await event.wait()


async def made_by_wait_for(event):
    await event.wait()


async def group_parent(event):
    async with asyncio.TaskGroup() as g:
        g.create_task(forever(event), name="group-child-1")
        g.create_task(forever(event), name="group-child-2")


def stack_of(task):
    """The task's coroutines, innermost first: (function, file, line)."""
    frames, c = [], task.get_coro()
    while c is not None and getattr(c, "cr_frame", None) is not None:
        frames.append((c.cr_code.co_name, c.cr_code.co_filename, c.cr_frame.f_lineno))
        c = c.cr_await
    return frames[::-1]


def report(loop, event, rounds=[0]):
    tasks = asyncio.all_tasks(loop)
    if any(t._fut_waiter is None for t in tasks) and rounds[0] < 10000:
        rounds[0] += 1
        loop.call_soon(report, loop, event)   # not all parked yet
        return
    for t in tasks:
        code = getattr(t.get_coro(), "cr_code", None)
        if code is not None and code.co_name in MADE:
            t.set_name(code.co_name.replace("_", "-"))
    graph = [{"name": t.get_name(), "frames": stack_of(t), "parents": PARENTS.get(t.get_name(), []),
              "stack": [(f.f_code.co_name, f.f_lineno) for f in t.get_stack()]} for t in tasks]
    if sys.argv[1:] == ["replace-task-type"]:
        import _asyncio   # (the tasks made go on; a reader finds another Task type)
        _asyncio.Task = type("Task", (), {"__slots__": ()})
    print("graph", json.dumps(graph), flush=True)
    loop.add_reader(sys.stdin.fileno(), lambda: sys.stdin.read() == "" and event.set())


async def spin():
    print("graph []", flush=True)
    sys.stdin.read()   # (the task runs, blocked here, until EOF)


async def outer():
    await spin()


async def main():
    loop = asyncio.get_running_loop()
    asyncio.current_task().set_name("main")
    if sys.argv[1:] == ["running-eager"]:   # (3.12+: busy's first step runs in Task(), named first)
        await asyncio.Task(outer(), loop=loop, name="busy", eager_start=True)
        return
    if sys.argv[1:] == ["running"]:
        await loop.create_task(outer(), name="busy")
        return
    event = asyncio.Event()   # set at EOF on stdin: then every task ends
    sub = MyTask(forever(event), loop=loop, name="sub")
    others = [loop.create_task(forever(event), name="lonely"), sub,
              loop.create_task(worker_a_inner(sub), name="sub-waiter")]
    for name, awaiter, awaiting in (("shared", "awaiter-2", gather_of), ("waited-for", "wait-forer", wait_for_of),
                                    ("shielded", "shielder", shield_of), ("waited", "waiter", wait_of)):
        task = loop.create_task(forever(event), name=name)
        others += [task, loop.create_task(awaiting(task), name=awaiter)]
        if name == "shared":
            others.append(loop.create_task(worker_a_inner(task), name="awaiter-1"))
    others += [loop.create_task(shield_of(made_by_shield(event)), name="shield-maker"),
               loop.create_task(wait_for_of(made_by_wait_for(event)), name="wait-for-maker")]
    if sys.version_info >= (3, 11):
        others.append(loop.create_task(group_parent(event), name="group-parent"))
    loop.call_soon(report, loop, event)
    await asyncio.gather(loop.create_task(worker_a(event), name="worker-a"),
                         loop.create_task(worker_b(event), name="worker-b"))
    await asyncio.gather(*others)


if __name__ == "__main__":
    asyncio.run(main())
