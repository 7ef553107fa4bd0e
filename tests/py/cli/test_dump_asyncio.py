"""`stackwatch dump PID`'s asyncio tasks, read from the target's memory,
equal the task graph the target prints of itself (tests/programs/
asyncio_graph.py: asyncio.all_tasks(), each task's coroutine stack as its
coroutines say it, and who awaits whom as the program built it), for a
target of each version 3.9-3.13 read by one stackwatch: gather of named
tasks that await other tasks, a TaskGroup (3.11+), tasks waiting on an
Event, a task of a subclass of Task, a task awaited by two tasks (one
directly, one through gather), tasks awaited through asyncio.wait_for,
wait and shield, and tasks that shield and (before 3.12) wait_for make
themselves; the text form shows the same tree, a task under each task
awaiting it."""
import _asyncio
import json
import os
import subprocess
import sys

import pytest

from stackwatch import _native
from conftest import PROGRAMS, needs_sampler, run
from test_dump import gcore, pyenv_pythons

TARGETS = pyenv_pythons(("9", "10", "11", "12", "13"))


class Graph:
    """asyncio_graph.py, parked until stop()."""

    def __init__(self, python, *args):
        self.p = subprocess.Popen([python, os.path.join(PROGRAMS, "asyncio_graph.py"), *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        assert line.startswith("graph "), line
        self.tasks = {t["name"]: t for t in json.loads(line[len("graph "):])}
        self.pid = self.p.pid

    def stop(self):
        """Ends it (EOF: every task ends), which must go as the program says."""
        self.p.stdin.close()
        assert self.p.wait(timeout=60) == 0
        self.p.stdout.close()


def tasks_read(threads):
    """The tasks of every thread's loops, by name."""
    return {t["name"]: t for th in threads for t in th["asyncio"]}


def dump_main_thread(python, mode):
    """`dump --json` of the program in that mode: its main thread (the
    oldest, last) and the tasks read, by name."""
    g = Graph(python, mode)
    try:
        r = run(["dump", str(g.pid), "--json"])
    finally:
        g.stop()
    assert r.returncode == 0 and r.stderr == "", r.stderr
    thread = json.loads(r.stdout)[-1]
    return thread, tasks_read([thread])


def check_tasks(threads, g, version):
    """The tasks `dump --json` read equal the program's graph."""
    got = tasks_read(threads)
    expected = {"main", "worker-a", "worker-b", "leaf-a", "lonely", "sub", "sub-waiter", "shared", "awaiter-1",
                "awaiter-2", "waited-for", "wait-forer", "shielded", "shielder", "waited", "waiter"}
    minor = int(version.split(".")[1])
    expected |= {"shield-maker", "made-by-shield", "wait-for-maker"} | ({"made-by-wait-for"} if minor < 12 else set())
    if minor >= 11:
        expected |= {"group-parent", "group-child-1", "group-child-2"}
    assert set(g.tasks) == expected   # (the program's own all_tasks())
    assert set(got) == expected
    # the loop runs on the main thread, the oldest: its tasks are there
    assert all(t["asyncio"] == [] for t in threads[:-1]) and len(threads[-1]["asyncio"]) == len(expected)
    name_of = {t["address"]: name for name, t in got.items()}
    for name, own in g.tasks.items():
        t = got[name]
        assert [(f["function"], f["file"], f["line"]) for f in t["frames"]] == [tuple(f) for f in own["frames"]], name
        # asyncio's own get_stack(): the outermost coroutine's frame
        assert (t["frames"][-1]["function"], t["frames"][-1]["line"]) == tuple(own["stack"][-1]), name
        # (in the order read: by address)
        assert sorted(name_of[p] for p in t["parents"]) == sorted(own["parents"]), name
        assert t["parent"] == (t["parents"] or [None])[0], name
        assert sorted(name_of[c] for c in t["children"]) == sorted(n for n, o in g.tasks.items()
                                                                  if name in o["parents"]), name
    assert got["main"]["awaits"]["kind"] == "gather"
    assert sorted(name_of[c] for c in got["main"]["awaits"]["children"]) == ["worker-a", "worker-b"]
    assert got["worker-a"]["awaits"] == {"kind": "task", "address": got["leaf-a"]["address"],
                                         "type": "_asyncio.Task"}
    assert got["sub-waiter"]["awaits"] == {"kind": "task", "address": got["sub"]["address"], "type": "MyTask"}
    assert got["awaiter-1"]["awaits"]["kind"] == "task" and got["awaiter-2"]["awaits"]["kind"] == "gather"
    # 3.12+: wait_for awaits the task itself; before, a future the task's end releases
    assert got["wait-forer"]["awaits"]["kind"] == ("task" if minor >= 12 else "future")
    for name in expected - {"main", "worker-a", "sub-waiter", "awaiter-1", "awaiter-2", "wait-forer"}:
        assert got[name]["awaits"]["kind"] == "future" and got[name]["awaits"]["type"] == "_asyncio.Future"
    # the future each awaits is released by the task nested under it, and only there
    released = {name: [name_of[r] for r in t["awaits"].get("released_by", ())] for name, t in got.items()}
    assert {n: r for n, r in released.items() if r} == {
        "shielder": ["shielded"], "waiter": ["waited"], "shield-maker": ["made-by-shield"],
        **({"wait-forer": ["waited-for"], "wait-for-maker": ["made-by-wait-for"]} if minor < 12 else {})}
    return expected


@needs_sampler
@pytest.mark.versions("3.12")
@pytest.mark.parametrize("version", sorted(TARGETS) or ["none"])
def test_dump_asyncio_tree_equals_the_programs_graph(version):
    if version == "none":
        pytest.skip("no pyenv CPython 3.9-3.13")
    g = Graph(TARGETS[version])
    try:
        r = run(["dump", str(g.pid), "--json"])
        text = run(["dump", str(g.pid)])
        if version.startswith("3.13."):
            # the same read through the target's debug offsets (another 3.13 release's way)
            auto = _native.dump_process(g.pid)
            offsets = _native.dump_process(g.pid, layout="debug_offsets")
            assert offsets["layout"] == "debug_offsets" and offsets["asyncio_error"] is None
            assert offsets["asyncio"] == auto["asyncio"] and len(auto["asyncio"]) == 22
    finally:
        g.stop()
    assert r.returncode == 0 and r.stderr == "", r.stderr
    threads = json.loads(r.stdout)
    expected = check_tasks(threads, g, version)
    # the text: each task under each task that awaits it, its frames below
    # it the first time, "(shown above)" the next
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    head = [i for i, line in enumerate(lines) if line.startswith("Asyncio loop ")]
    assert len(head) == 1 and lines[head[0]].startswith(f"Asyncio loop 0x{threads[-1]['asyncio'][0]['loop']:x} "
                                                         f"(thread 0x{threads[-1]['thread_id']:016x}, ")
    indent, frames, again, under, under_first = {}, {}, {}, [], {}   # (under: the tasks shown, by indent)
    for line in lines[head[0] + 1:]:
        if line.lstrip().startswith("Task '"):
            name, depth = line.split("'")[1], len(line) - len(line.lstrip())
            under = under[:(depth - 2) // 4] + [name]
            if line.endswith(" (shown above)"):
                assert name in frames, line
                again.setdefault(name, []).append(under[-2])
                continue
            indent[name], frames[name] = depth, []
            under_first[name] = under[-2] if len(under) > 1 else None
            assert under_first[name] in (g.tasks[name]["parents"] or [None]), line
        else:
            frames[name].append(line.strip())
    assert set(indent) == expected
    assert list(again) == ["shared"] and sorted(again["shared"] + [under_first["shared"]]) == ["awaiter-1",
                                                                                              "awaiter-2"]
    for name, own in g.tasks.items():
        assert indent[name] == (indent[under_first[name]] + 4 if own["parents"] else 2), name
        assert frames[name] == [f'File "{file}", line {line} in {function}' for function, file, line in own["frames"]]


@needs_sampler
@pytest.mark.versions("3.12")
@pytest.mark.parametrize("version", sorted(TARGETS) or ["none"])
def test_dump_asyncio_running_task(version):
    """A task whose coroutines run (blocked in a read) is marked running,
    awaits nothing, and shows its outermost coroutine as its thread's stack
    has it (the rest of its stack is that thread's)."""
    if version == "none":
        pytest.skip("no pyenv CPython 3.9-3.13")
    thread, got = dump_main_thread(TARGETS[version], "running")
    assert set(got) == {"main", "busy"}
    busy, main = got["busy"], got["main"]
    assert busy["running"] and busy["awaits"] == {"kind": "nothing"} and busy["parent"] == main["address"]
    stack = [(f["function"], f["line"]) for f in thread["frames"]]
    assert [(f["function"], f["line"]) for f in busy["frames"]] == [stack[[n for n, _ in stack].index("outer")]]
    assert stack[[n for n, _ in stack].index("outer") - 1][0] == "spin"
    assert not main["running"] and main["awaits"]["kind"] == "task"


@needs_sampler
@pytest.mark.versions("3.12")
@pytest.mark.parametrize("version", sorted(v for v in TARGETS if int(v.split(".")[1]) >= 12) or ["none"])
def test_dump_asyncio_eager_task(version):
    """3.12+: an eager task running its first step (in asyncio.tasks'
    _eager_tasks, a set of tasks, not a WeakSet) is read, running, as is
    the task whose call of Task() runs it."""
    if version == "none":
        pytest.skip("no pyenv CPython 3.12+")
    thread, got = dump_main_thread(TARGETS[version], "running-eager")
    assert set(got) == {"main", "busy"}
    stack = [(f["function"], f["line"]) for f in thread["frames"]]
    names = [n for n, _ in stack]
    for name, function in (("busy", "outer"), ("main", "main")):
        assert got[name]["running"] and got[name]["awaits"] == {"kind": "nothing"}, name
        assert [(f["function"], f["line"]) for f in got[name]["frames"]] == [stack[names.index(function)]], name


@needs_sampler
@pytest.mark.versions("3.12")   # a second (gcore); the core reader is the live one's over other bytes
def test_dump_core_asyncio_tree(tmp):
    """`dump --core` of a gcore of the program reads the same tasks."""
    g = Graph(sys.executable)
    try:
        core = gcore(g.pid, tmp / "core")
    finally:
        g.stop()
    r = run(["dump", "--core", str(core), "--json"])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    check_tasks(json.loads(r.stdout), g, "%d.%d" % sys.version_info[:2])


@needs_sampler
@pytest.mark.versions("3.12")
def test_dump_asyncio_types_not_the_tables(tmp):
    """A target whose _asyncio.Task is not the type of the table (here the
    program put another class in its place): one line naming what differs,
    the threads still printed, exit 0."""
    g = Graph(sys.executable, "replace-task-type")
    try:
        r = run(["dump", str(g.pid), "--json"])
        text = run(["dump", str(g.pid)])
    finally:
        g.stop()
    v = "%d.%d.%d" % sys.version_info[:3]
    for out in (r, text):
        assert out.returncode == 0
        assert out.stderr == ("stackwatch: asyncio tasks not shown: asyncio's Task of this Python is Task of 16 bytes, "
                              f"not _asyncio.Task of {_asyncio.Task.__basicsize__} as in {v}'s table\n"), out.stderr
    threads = json.loads(r.stdout)
    assert threads[-1]["frames"][-1]["function"] == "<module>" and tasks_read(threads) == {}
    assert "Asyncio loop" not in text.stdout and 'asyncio_graph.py", line' in text.stdout
