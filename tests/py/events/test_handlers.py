"""Python handlers (stackwatch.add_handler) and the file tracer's extra
events: what arrives, filters, removal, a raising handler, and that the
trace file stays readable with EXT records in it."""
import gc
import os
import sys
import threading
import time

import pytest

import stackwatch
from conftest import run, write

HERE = os.path.abspath(__file__)


def _leaf(x):
    y = x * 2
    return y


def _boom():
    try:
        raise KeyError("k")
    except KeyError:
        return 1


def collect(events, where=HERE):
    seen = []
    h = stackwatch.add_handler(lambda ev: seen.append(ev), events=events, where=where)
    return seen, h


def test_calls_lines_and_exceptions_in_one_file():
    seen, h = collect(["calls", "line", "exceptions"])
    try:
        _leaf(1)
        _boom()
    finally:
        assert h.remove() is True
    kinds = [(e.kind, e.function) for e in seen]
    assert ("call", "_leaf") in kinds and ("return", "_leaf") in kinds
    leaf_lines = [e.lineno for e in seen if e.kind == "line" and e.function == "_leaf"]
    first = _leaf.__code__.co_firstlineno
    assert leaf_lines == [first + 1, first + 2]
    raised = [e for e in seen if e.kind == "raise"]
    assert len(raised) == 1 and raised[0].name == "KeyError" and raised[0].function == "_boom"
    if sys.version_info >= (3, 12):
        assert [e.name for e in seen if e.kind == "handled"] == ["KeyError"]
    assert all(e.filename == HERE for e in seen)
    assert all(e.thread_id == threading.get_ident() for e in seen)
    n = len(seen)
    _leaf(2)
    assert len(seen) == n, "events arrived after remove()"
    assert h.remove() is False


def test_where_filter_leaves_other_files_out():
    seen, h = collect("calls", where="*/no-such-dir/*")
    try:
        _leaf(1)
    finally:
        h.remove()
    assert seen == []


def test_gc_and_thread_events():
    seen, h = collect(["gc", "threads"], where=None)
    try:
        gc.collect()
        t = threading.Thread(target=_leaf, args=(1,), name="worker-x")
        t.start()
        t.join()
    finally:
        h.remove()
    starts = [e for e in seen if e.kind == "gc_start"]
    dones = [e for e in seen if e.kind == "gc_done"]
    assert starts and len(starts) == len(dones)
    assert dones[-1].data["generation"] == 2 and "collected" in dones[-1].data
    th = [(e.kind, e.name) for e in seen if e.kind.startswith("thread_")]
    assert th == [("thread_start", "worker-x"), ("thread_exit", "worker-x")]
    assert [e.data["native_id"] for e in seen if e.kind == "thread_start"] == [t.native_id]


def test_c_calls_carry_the_callable_name():
    seen, h = collect(["c_call", "c_return"])
    try:
        len([1])
    finally:
        h.remove()
    assert [(e.kind, e.name) for e in seen] == [("c_call", "builtins.len"), ("c_return", "builtins.len")]


def test_raising_handler_is_removed_and_reported(tmp):
    prog = write(tmp / "p.py", """
import stackwatch
calls = []
def bad(ev):
    calls.append(ev.kind)
    raise ValueError("handler bug")
def f():
    return 1
h = stackwatch.add_handler(bad, events="call", where=__file__)
f(); f(); f()
print("ran", len(calls), h.active)
""")
    out = run(["python", prog])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ran 1 False"
    assert out.stderr.count("handler bug") == 1 and "it was removed" in out.stderr


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown event"):
        stackwatch.add_handler(print, events="bogus")
    with pytest.raises(TypeError):
        stackwatch.add_handler(42)
    with pytest.raises(ValueError):
        stackwatch.add_handler(print, where=[])


def test_several_consumers_at_once(tmp):
    """A handler and the file tracer listen together; each gets what it
    asked for and the file reads back with its line and GC records."""
    seen, h = collect("calls")
    path = str(tmp / "t.swt")
    try:
        stackwatch.start(path, events=["line", "gc", "exceptions"], lines=[HERE])
        _leaf(3)
        _boom()
        gc.collect()
        summary = stackwatch.stop()
    finally:
        h.remove()
    assert summary.error is None and summary.dropped == 0
    assert [e.function for e in seen if e.kind == "call"][:2] == ["_leaf", "_boom"]
    tr = stackwatch.Trace(path)
    assert tr.damage is None
    names = [n for k, n in tr.call_sequence(0)]
    assert "_leaf" in names and "_boom" in names


def test_run_log_prints_readable_lines(tmp):
    prog = write(tmp / "p.py", "import gc\ndef f():\n    return 1\nf()\ngc.collect()\n")
    out = run(["run", "--no-trace", "--log", "--events", "gc,line", prog])
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stderr.splitlines() if "p.py" in l or "gc_" in l]
    assert any("call" in l and " f (p.py:2)" in l for l in lines)
    assert any("line" in l and "(p.py:3)" in l for l in lines)
    assert any("gc_done" in l and "collected=" in l for l in lines)


def test_run_rejects_bad_event_names(tmp):
    prog = write(tmp / "p.py", "pass\n")
    out = run(["run", "--events", "nope", prog])
    assert out.returncode != 0
    assert out.stderr.strip().startswith("stackwatch: error: --events: unknown event 'nope'")
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("to", ["file", "stderr"])
def test_log_file_written_in_order_and_without_letting_the_gil_go(tmp, to):
    """The log's writer writes its lines to a regular file's descriptor with
    the GIL held (task lines are made where the program holds its locks:
    a write() that lets the GIL go there made a queue's other threads
    convoy on its lock), after what the file object itself buffers: its
    own file (`--log FILE`) or sys.stderr redirected to one (`--log -`, a
    line at a time). A thread waiting for the GIL (the switch interval too
    long for it to ask) must not run during 40 writes of 64 KB; with the
    stream's write() it gets in at the first whose system call it catches."""
    path = tmp / "log.txt"
    err = sys.stderr
    if to == "stderr":
        sys.stderr = open(path, "w", encoding="utf-8")
    try:
        log = stackwatch.handlers.verbose(str(path) if to == "file" else None)
        go, ran = threading.Event(), []
        body, n = "x" * 200, 40 * 64 * 1024 // 240
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1000)   # (before the thread starts: no wait for the GIL asks for it)
        try:
            t = threading.Thread(target=lambda: (go.wait(), ran.append(1)))
            t.start()
            while not go._cond._waiters:
                time.sleep(0.001)
            go.set()
            sum(range(2_000_000))   # (C, GIL held: the thread wakes and waits for the GIL)
            for i in range(n):
                log._log.line(i * 1000, threading.get_ident(), "call", body)
            seen = list(ran)
            t.join()
        finally:
            sys.setswitchinterval(interval)
        log._log.flush()
        # (in the file object's buffer: written before the lines after it)
        own = "the file's own\n"
        if to == "file":
            log.out.write(own.encode())
        else:
            sys.stderr.write(own)
        log._log.line(n * 1000, threading.get_ident(), "call", "last")
        log.close()
    finally:
        if to == "stderr":
            sys.stderr.close()
            sys.stderr = err
    assert seen == []
    lines = path.read_text().splitlines()
    assert len(lines) == n + 2 and all(l.endswith(f"[MainThread] {'call':<12}{body}") for l in lines[:n])
    assert lines[0].split()[0] == "0.000" and lines[n - 1].split()[0] == f"{(n - 1) / 1000:.3f}"
    assert lines[n] == "the file's own" and lines[n + 1].endswith(f"{'call':<12}last")


def _queue_program(n):
    import asyncio

    async def worker(i, q):
        await asyncio.sleep(0)
        await q.put(i)

    async def main():
        q = asyncio.Queue()
        tasks = [asyncio.ensure_future(worker(i, q)) for i in range(n)]
        got = [await q.get() for _ in range(n)]
        await asyncio.gather(*tasks)
        return got

    return asyncio.run(main())


def _as_seen(ev, data, names, ids):
    """An Event as comparable across two runs: its task ids, asyncio
    names ("Task-N") and addresses (of channels) numbered by first
    appearance, no times."""
    import re

    def norm(k, v):
        if k in ("task", "peer", "origin") and isinstance(v, int) and v:
            return ids.setdefault(v, len(ids) + 1)
        if isinstance(v, str):
            return re.sub(r"Task-\d+|0x[0-9a-f]+", lambda m: "#%d" % names.setdefault(m.group(0), len(names)), v)
        return v
    return (ev[0], ev[2], ev[3], ev[4], ev[5], norm(None, ev[6]),
            [(k, norm(k, v)) for k, v in data.items() if k != "ago_ns"])


def test_events_made_again_in_place_equal_events_kept():
    """An Event no handler kept is filled again in place for the next event
    (its data dict too): the events of one program so delivered, a handler
    changing some data dicts as it goes, equal those of the same program
    delivered to a handler that keeps every Event (none made again); and
    Events kept are never changed after."""
    kept = []
    h = stackwatch.add_handler(kept.append, events="tasks")
    try:
        _queue_program(12)
    finally:
        h.remove()
    seen, some_kept, snaps = [], [], []

    def snapshot(ev):
        data = dict(ev.data)
        seen.append((ev, data))
        if len(seen) % 3 == 0:
            some_kept.append(ev)
            snaps.append((tuple(ev[:7]), data))
        elif len(seen) % 5 == 0:   # (changed after its snapshot: the next events' dicts must not show it)
            ev.data.pop(next(iter(ev.data)))
            ev.data["changed"] = 1
        seen[-1] = (tuple(ev), data)
    h = stackwatch.add_handler(snapshot, events="tasks")
    try:
        _queue_program(12)
    finally:
        h.remove()
    assert len(kept) > 100
    names, ids = {}, {}
    want = [_as_seen(ev, ev.data, names, ids) for ev in kept]
    names, ids = {}, {}
    got = [_as_seen(ev, data, names, ids) for ev, data in seen]
    assert got == want
    assert [(tuple(ev[:7]), dict(ev.data)) for ev in some_kept] == snaps
