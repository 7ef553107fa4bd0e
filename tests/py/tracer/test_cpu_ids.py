"""`stackwatch run --cpu` (format 1.13): the CPU each Python event ran on,
as a "cpu" record whenever a thread's events move to another CPU (and at
the start of each chunk). Checked by construction: the program pins its
thread to one CPU after another (os.sched_setaffinity moves the calling
thread before it returns) and calls a function there, by the hook's fast
path (a plain function) and by its slow path (a generator's frames); the
CPU of each call, the last CPU record at or before it, is the one it was
pinned to. Runs on every version: the fast path is built per version."""
import json
import os

from conftest import missing, run_traced
from stackwatch import Trace

PROGRAM = '''\
import os


def on(cpu):
    return cpu


def gen_on(cpu):
    yield cpu


def main():
    for cpu in CPUS:
        os.sched_setaffinity(0, {cpu})
        on(cpu)
        next(gen_on(cpu))


main()
'''


def cpu_of_calls(t, name):
    """[(call time, its CPU)] of the calls of `name` on the main thread:
    the CPU of the last CPU record at or before each."""
    cpus = [(e.t_ns, e.data["cpu"]) for e in t.ext_events(thread=0, kinds=["cpu"])]
    out = []
    for e in t.events(0):
        if e.kind in (0, 2) and t.codes[e.code].name == name:   # a call, a generator's run
            before = [c for ts, c in cpus if ts <= e.t_ns]
            out.append((e.t_ns, before[-1] if before else None))
    return out


def test_each_call_has_the_cpu_it_was_pinned_to(tmp_path):
    """Each call of on() and each run of gen_on() (its creation is not a
    call) is on the CPU the thread was pinned to just before; the Chrome
    export shows each record as an instant "cpu N" with the CPU as its arg;
    without --cpu there is no CPU record."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        missing("--cpu's test needs two CPUs to move between")
    order = [allowed[0], allowed[1], allowed[0], allowed[1], allowed[1], allowed[0]]
    program = PROGRAM.replace("CPUS", repr(order))
    swt, _ = run_traced(tmp_path, program, "--cpu")
    t = Trace(swt)
    calls = cpu_of_calls(t, "on")
    assert [c for _, c in calls] == order
    # gen_on's frame runs in the iteration of the on() call before it
    # (once at its creation too, from 3.11: still there).
    runs = cpu_of_calls(t, "gen_on")
    assert len(runs) >= len(order)
    for ts, cpu in runs:
        assert cpu == order[max(i for i, (at, _) in enumerate(calls) if at <= ts)], (ts, cpu)
    out = tmp_path / "t.json"
    t.export("chrome", str(out))
    marks = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "sched" and e["ph"] == "i"]
    assert [(m["name"], m["args"]["cpu"]) for m in marks] == [(f"cpu {e.data['cpu']}", e.data["cpu"])
                                                             for e in t.ext_events(kinds=["cpu"])]
    swt, _ = run_traced(tmp_path, program, name="plain.py", trace="plain.swt")
    assert Trace(swt).ext_events(kinds=["cpu"]) == []
