"""The Python API: start/stop, trace(), @traced, threads, filters, ring
mode, fork."""
import gc
import os
import types
import threading

import pytest

import stackwatch
from conftest import calls_by_name, needs_module, run, write
from stackwatch import Trace


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def test_start_stop(tmp_path):
    p = str(tmp_path / "a.swt")
    stackwatch.start(p)
    assert stackwatch.is_tracing()
    fib(10)
    s = stackwatch.stop()
    assert not stackwatch.is_tracing()
    assert s.path == p and s.events > 0 and s.dropped == 0 and s.error is None
    assert calls_by_name(p)["fib"] == 177


def test_double_start_and_stop_errors(tmp_path):
    with stackwatch.trace(str(tmp_path / "a.swt")):
        with pytest.raises(RuntimeError, match="already tracing"):
            stackwatch.start(str(tmp_path / "b.swt"))
    with pytest.raises(RuntimeError, match="not tracing"):
        stackwatch.stop()


def test_bad_options(tmp_path):
    with pytest.raises(ValueError):
        stackwatch.start(str(tmp_path / "a.swt"), buffer_size="huge")
    with pytest.raises(ValueError):
        stackwatch.start(str(tmp_path / "a.swt"), buffer_size=100)
    with pytest.raises(ValueError):
        stackwatch.start(str(tmp_path / "a.swt"), max_depth=-2)
    with pytest.raises(OSError):
        stackwatch.start(str(tmp_path / "no" / "such" / "dir.swt"))
    assert not stackwatch.is_tracing()


def test_traced_decorator(tmp_path):
    p = str(tmp_path / "d.swt")

    @stackwatch.traced(p)
    def work():
        return fib(8)

    assert work() == 21
    assert work.summary.events > 0
    assert calls_by_name(p)["fib"] == 67


def test_thread_started_before_tracing(tmp_path):
    p = str(tmp_path / "t.swt")
    go, done = threading.Event(), threading.Event()

    def body():
        go.wait()
        fib(9)
        done.set()

    th = threading.Thread(target=body, name="early-bird")
    th.start()
    stackwatch.start(p)
    go.set()
    done.wait()
    th.join()
    stackwatch.stop()
    t = Trace(p)
    c = calls_by_name(p)
    assert c["fib"] == 109
    assert any(x["name"] == "early-bird" for x in t.threads) or len(t.threads) >= 2


def test_thread_names(tmp_path):
    p = str(tmp_path / "n.swt")
    with stackwatch.trace(p):
        ts = [threading.Thread(target=fib, args=(5,), name=f"worker-{i}") for i in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    names = {t["name"] for t in Trace(p).threads}
    assert {"worker-0", "worker-1", "worker-2", "MainThread"} <= names


def test_max_depth(tmp_path):
    p = str(tmp_path / "m.swt")

    def outer():
        fib(6)

    with stackwatch.trace(p, max_depth=3):
        outer()
    t = Trace(p)
    main = [i for i, th in enumerate(t.threads) if th["ident"] == threading.get_ident()][0]
    assert max(e.depth for e in t.events(main)) <= 2
    assert calls_by_name(p)["fib"] >= 1


def test_exclude_and_include(tmp_path):
    p = str(tmp_path / "e.swt")

    def outer():
        fib(5)

    with stackwatch.trace(p, exclude=[__name__]):
        outer()
    assert "fib" not in calls_by_name(p)
    p2 = str(tmp_path / "i.swt")
    with stackwatch.trace(p2, include=[__file__]):
        outer()
        threading.current_thread()
    c = calls_by_name(p2)
    assert c.get("fib") == 15 and "current_thread" not in c


def test_ring_keeps_most_recent(tmp_path):
    p = str(tmp_path / "r.swt")
    with stackwatch.trace(p, buffer_size="4K", ring="16K") as tr:
        for _ in range(20):
            fib(15)
        fib(3)
    t = Trace(p)
    assert tr.summary.dropped > 0
    assert t.dropped() == tr.summary.dropped
    assert os.path.getsize(p) < 64 * 1024
    # The most recent events are there: the final fib(3) is the last call tree.
    main = [i for i, th in enumerate(t.threads) if th["ident"] == threading.get_ident()][0]
    seq = [e for e in t.call_sequence(main) if e[1] == "fib"]
    assert seq[-10:] == [("call", "fib"), ("call", "fib"), ("call", "fib"), ("return", "fib"),
                         ("call", "fib"), ("return", "fib"), ("return", "fib"), ("call", "fib"),
                         ("return", "fib"), ("return", "fib")]


def events_bytes(path):
    """The bytes of a trace file's EVENTS chunks (type 4), headers included
    (docs/format.md, "Chunk")."""
    import struct
    d = open(path, "rb").read()
    i, total = 16, 0
    while i + 12 <= len(d):
        kind, _, _, n, _ = struct.unpack_from("<BBHII", d, i)
        total += 12 + n if kind == 4 else 0
        i += 12 + n
    return total


@pytest.mark.parametrize("size,k", [("16K", 16), ("64K", 64), ("1M", 1024)])
def test_ring_keeps_what_size_says(tmp_path, size, k):
    """--ring SIZE: at most SIZE bytes of events per thread, and at least
    3/4 of it when the thread recorded more (with the default 256K buffer,
    --ring 64K kept about 490K)."""
    prog = write(tmp_path / "prog.py", "def f(i):\n    return i\nfor i in range(400000):\n    f(i)\n")
    r = run(["run", "-q", "--ring", size, "-o", str(tmp_path / "r.swt"), prog])
    assert r.returncode == 0, r.stderr
    kept = events_bytes(tmp_path / "r.swt")
    assert 0.75 * k * 1024 <= kept <= k * 1024, kept
    assert Trace(str(tmp_path / "r.swt")).dropped() > 0


def events_bytes_by_thread(path):
    """events_bytes per thread index (the first varint of an EVENTS
    payload, docs/format.md "EVENTS")."""
    import struct
    d = open(path, "rb").read()
    i, by = 16, {}
    while i + 12 <= len(d):
        kind, _, _, n, _ = struct.unpack_from("<BBHII", d, i)
        if kind == 4:
            j, index, shift = i + 12, 0, 0
            while True:
                index |= (d[j] & 0x7F) << shift
                shift += 7
                j += 1
                if d[j - 1] < 0x80:
                    break
            by[index] = by.get(index, 0) + 12 + n
        i += 12 + n
    return by


@pytest.mark.versions("3.12")
def test_ring_bound_holds_wherever_a_thread_ends(tmp_path):
    """--ring 16K keeps four chunks of 4K per thread, and a sealed chunk with
    its header must fit its 4K, else three full ones and a last partial one
    written when the thread ends can exceed 16K (it kept 16,387 bytes once).
    Threads ending 20 calls apart put that partial chunk at every fill."""
    prog = write(tmp_path / "prog.py", "import threading\n"
                 "def f(i):\n    return i\n"
                 "def work(n):\n    for i in range(n):\n        f(i)\n"
                 "for k in range(40):\n"
                 "    t = threading.Thread(target=work, args=(6000 + 20 * k,))\n"
                 "    t.start()\n    t.join()\n")
    r = run(["run", "-q", "--ring", "16K", "-o", str(tmp_path / "r.swt"), prog])
    assert r.returncode == 0, r.stderr
    kept = events_bytes_by_thread(tmp_path / "r.swt")
    assert len(kept) == 41, kept
    # Each worker recorded 12,000 events or more: more than 16K.
    workers = {i: n for i, n in kept.items() if i}
    assert all(0.75 * 16384 <= n <= 16384 for n in workers.values()), sorted(workers.items())


def test_ring_too_small_is_one_line(tmp_path):
    prog = write(tmp_path / "prog.py", "pass\n")
    r = run(["run", "-q", "--ring", "8K", "-o", str(tmp_path / "r.swt"), prog])
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["stackwatch: error: ring must be at least 16K (four chunks of 4K), "
                                     "not 8192 bytes"], r.stderr
    assert not os.path.exists(tmp_path / "r.swt")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_fork_child_writes_own_file(tmp_path):
    p = str(tmp_path / "f.swt")
    with stackwatch.trace(p):
        fib(5)
        pid = os.fork()
        if pid == 0:
            fib(7)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        fib(4)
    assert status == 0
    assert calls_by_name(p)["fib"] == 15 + 9
    child = str(tmp_path / f"f.{pid}.swt")
    assert os.path.exists(child)
    assert calls_by_name(child)["fib"] == 41
    assert Trace(child).meta["pid"] == pid


def test_init_of_class_defined_while_tracing(tmp_path):
    """On 3.13 the specialised constructor call skips the frame hook; classes
    created after tracing started are covered by the function watcher."""
    p = str(tmp_path / "i.swt")
    with stackwatch.trace(p):
        class Late:
            def __init__(self, v):
                self.v = v

        def build():
            for i in range(1000):
                Late(i)
        build()
    c = calls_by_name(p)
    assert c["test_init_of_class_defined_while_tracing.<locals>.Late.__init__"
             if "test_init_of_class_defined_while_tracing.<locals>.Late.__init__" in c else "__init__"] == 1000


def test_init_of_classes_made_again_and_again(tmp_path):
    """3.13: an __init__ whose code object took the address of a freed one
    (a class made from freshly compiled source and freed, again and again:
    the shape of modules imported afresh, whose code is freed once run) is
    seen on every call, also once CPython pushes its frame inline (the
    address of the first was once kept as watched: 872 of 1,000 calls were
    seen)."""
    p = str(tmp_path / "i.swt")
    source = "class Fresh:\n    def __init__(self, v):\n        self.v = v\n"
    gc.freeze()   # (the collections below then scan only what the loop made: 50 of the whole heap took 3-4 s)
    try:
        with stackwatch.trace(p):
            for _ in range(50):
                ns = {}
                exec(compile(source, "<fresh>", "exec"), ns)
                for i in range(20):
                    ns["Fresh"](i)
                del ns
                gc.collect()   # (a class is a cycle: its code is freed here)
    finally:
        gc.unfreeze()
    c = calls_by_name(p)
    assert c.get("Fresh.__init__", c.get("__init__")) == 1000, c   # (no qualname before 3.11)


def init_made_before_tracing(self, v):
    self.v = v


def test_init_under_another_name_while_tracing(tmp_path):
    """On 3.13 a function of another name that becomes a class's __init__
    after tracing started (in a class body, by assignment, through type())
    is still seen on every call, also once the call is specialised."""
    p = str(tmp_path / "i.swt")
    with stackwatch.trace(p):
        def init_in_body(self, v):
            self.v = v

        def init_assigned(self, v):
            self.v = v

        def init_via_type(self, v):
            self.v = v

        class InBody:
            __init__ = init_in_body

        class Assigned:
            pass

        Assigned.__init__ = init_assigned

        class AssignedEarlier:
            pass

        AssignedEarlier.__init__ = init_made_before_tracing
        ViaType = type("ViaType", (), {"__init__": init_via_type})

        def build():
            for i in range(500):
                InBody(i)
                Assigned(i)
                AssignedEarlier(i)
                ViaType(i)
        build()
    c = calls_by_name(p)
    for name in ("init_in_body", "init_assigned", "init_via_type"):
        key = f"test_init_under_another_name_while_tracing.<locals>.{name}"
        assert c.get(key, c.get(name)) == 500, (name, c)
    assert c["init_made_before_tracing"] == 500, c


def init_named_otherwise(self, v):
    self.v = v


class DefinedBefore:
    __init__ = init_named_otherwise


def used_plainly_then_as_init(self, v):
    self.v = v


class ExistingBefore:
    pass


def test_init_of_another_name_counted_once(tmp_path):
    """3.13: an __init__ of another name, whether CPython pushes its frame
    inline (the loop) or calls it through the frame hook (from C: map), is
    counted once per call: the hook's frames of such a code are not counted
    again by the init gap's events (they were, through map). Also for a
    function the trace saw as an ordinary one before it became __init__."""
    p = str(tmp_path / "i.swt")
    holder = types.SimpleNamespace()
    with stackwatch.trace(p):
        used_plainly_then_as_init(holder, 0)
        used_plainly_then_as_init(holder, 0)
        ExistingBefore.__init__ = used_plainly_then_as_init
        for cls in (DefinedBefore, ExistingBefore):
            for i in range(500):
                cls(i)
            list(map(cls, range(500)))
    c = calls_by_name(p)
    assert c["init_named_otherwise"] == 1000, c
    assert c["used_plainly_then_as_init"] == 1002, c


def plain_then_in_a_class_body(self, v):
    self.v = v


def test_init_seen_plainly_then_in_a_class_body(tmp_path):
    """3.13: a function the trace has already seen as an ordinary one, then
    made the __init__ of a class created while tracing (`__init__ = f` in
    the class body), is seen on every call, also once CPython pushes its
    frame inline; defined before tracing or while tracing."""
    p = str(tmp_path / "i.swt")
    holder = types.SimpleNamespace()
    with stackwatch.trace(p):
        def local_plain_then_init(self, v):
            self.v = v

        plain_then_in_a_class_body(holder, 0)
        local_plain_then_init(holder, 0)

        class Later:
            __init__ = plain_then_in_a_class_body

        class LocalLater:
            __init__ = local_plain_then_init

        for cls in (Later, LocalLater):
            for i in range(500):
                cls(i)
            list(map(cls, range(500)))
    c = calls_by_name(p)
    assert c["plain_then_in_a_class_body"] == 1001, c
    key = "test_init_seen_plainly_then_in_a_class_body.<locals>.local_plain_then_init"
    assert c.get(key, c.get("local_plain_then_init")) == 1001, c


class ClassAliveAtStart:
    pass


def test_no_dict_watcher_left_behind(tmp_path):
    """Tracing leaves no dict watched after it stops (3.13 watches the
    classes' dicts while it traces): a dict watcher another tool adds later,
    which may be given the same id, hears only of the dicts it watches."""
    _testcapi = needs_module("_testcapi", "this Python was built without its _testcapi module")
    if not hasattr(_testcapi, "add_dict_watcher"):
        pytest.skip("this Python has no dict watchers (3.12+)")
    with stackwatch.trace(str(tmp_path / "w.swt")):
        class MadeWhileTracing:
            def __init__(self):
                pass
        MadeWhileTracing()
    wid = _testcapi.add_dict_watcher(0)
    try:
        ClassAliveAtStart.attr = 1
        MadeWhileTracing.attr = 1
        assert _testcapi.get_dict_watcher_events() == []
    finally:
        _testcapi.clear_dict_watcher(wid)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_fork_gives_no_multithreading_warning(tmp_path):
    """stackwatch's background flusher thread must not make os.fork() warn
    (3.12+ warns when a process with several OS threads forks)."""
    import warnings
    p = str(tmp_path / "w.swt")
    with stackwatch.trace(p):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
    assert not [w for w in caught if "multi-threaded" in str(w.message)]


# A program that starts (and stops) tracing itself, run under `stackwatch
# run` and, as a followed child, under the session following it: its
# start() joins that session, whose trace keeps every thread and task event.
NESTED = r"""
import os, queue, subprocess, sys, threading
import stackwatch

q = queue.Queue()


def work(tag):
    for i in range(3):
        q.put(f"{tag}-{i}")


def spawn(tag):
    t = threading.Thread(target=work, args=(tag,), name=tag)
    t.start()
    t.join()


folder, role = sys.argv[1], sys.argv[2]
spawn(role + "-before")
stackwatch.start(os.path.join(folder, role + "-inner.swt"), events=["line"])
spawn(role + "-inside")
s = stackwatch.stop()
spawn(role + "-after")
print(role, os.path.basename(s.path), stackwatch.is_tracing(), flush=True)
stackwatch.stop()   # one the program never started: the session goes on
assert stackwatch.is_tracing()
if role == "parent":
    subprocess.run([sys.executable, __file__, folder, "child"], check=True)
"""


@pytest.mark.versions("3.12")
def test_start_inside_run_joins_its_session(tmp_path):
    from stackwatch.tracer.follow import child_traces
    from stackwatch.tracer.task_events import read_task_events
    prog = write(tmp_path / "nested.py", NESTED)
    out = str(tmp_path / "t.swt")
    r = run(["run", "--events", "tasks", "-o", out, prog, str(tmp_path), "parent"])
    assert r.returncode == 0, r.stderr
    [(_, child)] = child_traces(out)
    assert r.stdout.split("\n")[:2] == ["parent t.swt True", f"child {os.path.basename(child)} True"]
    for role, path in (("parent", out), ("child", child)):
        assert not os.path.exists(tmp_path / f"{role}-inner.swt")
        said = [line for line in r.stderr.splitlines() if f"{role}-inner.swt" in line]
        assert len(said) == 1 and "joins the session" in said[0] and path in said[0], r.stderr
        host = "stackwatch run" if role == "parent" else "the parent process's stackwatch"
        assert f"stop() leaves the session {host} started running ({path})" in r.stderr, r.stderr
        t = Trace(path)
        names = {th["name"] for th in t.threads if not th["task"]}
        assert {f"{role}-{w}" for w in ("before", "inside", "after")} <= names, names
        # Every put of the program is in the trace, in the order it made them.
        doc = read_task_events(path)
        sent = [e["value"] for e in doc["events"] if e["kind"] == "send"]
        assert sent == [repr(f"{role}-{w}-{i}") for w in ("before", "inside", "after") for i in range(3)]
        # The program's start() to stop() is a region of the main thread,
        # around the creation of the thread it started inside.
        main = next(i for i, th in enumerate(t.threads) if th["name"] == "MainThread")
        regions = t.ext_events(main, ["region_begin", "region_end"])
        assert [(e.kind, e.data.get("name")) for e in regions] == [
            ("region_begin", f"stackwatch.start({role}-inner.swt)"), ("region_end", None)]
        created = {e["task"]: e["t_ns"] for e in doc["events"] if e["kind"] == "create"}
        assert regions[0].t_ns < created[f"{role}-inside"] < regions[1].t_ns
        assert created[f"{role}-before"] < regions[0].t_ns < regions[1].t_ns < created[f"{role}-after"]
