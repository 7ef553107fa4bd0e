"""At the recursion limit. sys.setprofile cannot be the ground truth here
(its Python callback needs recursion levels of its own, fails, and is
removed), so the program counts the frames that really ran: the trace, and
a handler, must see exactly those calls. A frame CPython refuses at its
start (RecursionError raised in the caller) is not a call. The program must
also behave as it does without stackwatch: same depth reached, handlers not
removed, no crash, whatever stops tracing deep down."""
import json
import sys

import pytest

from conftest import run, write
from stackwatch import Trace

PROGRAM = '''
import json, sys
ran = {"deep": 0, "via_builtin": 0, "gen_body": 0, "resume_deep": 0}

def deep(n):
    ran["deep"] += 1
    deep(n + 1)

def via_builtin(n):
    ran["via_builtin"] += 1
    list(map(via_builtin, [n + 1]))

def gen_body():
    while True:
        ran["gen_body"] += 1
        yield

def resume_deep(g, n):
    ran["resume_deep"] += 1
    next(g)
    resume_deep(g, n + 1)

def attempt(fn, *args):
    try:
        fn(*args)
    except RecursionError:
        pass

def main():
    attempt(deep, 0)
    attempt(via_builtin, 0)
    g = gen_body()
    attempt(resume_deep, g, 0)

MODE = sys.argv[1]
seen = {}
if MODE == "file":
    import stackwatch
    stackwatch.start(sys.argv[2])
    main()
    stackwatch.stop()
elif MODE == "handler":
    import stackwatch
    def on(ev):
        if ev.kind in ("call", "resume"):
            seen[ev.function] = seen.get(ev.function, 0) + 1
    h = stackwatch.add_handler(on, events="calls")
    main()
    h.remove()
else:
    main()
print(json.dumps({"ran": ran, "seen": seen}))
'''

NAMES = ("deep", "via_builtin", "gen_body", "resume_deep")


def run_mode(tmp, mode):
    script = write(tmp / "limit.py", PROGRAM)
    r = run(["python", script, mode, str(tmp / "t.swt")], cwd=tmp)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "was removed" not in r.stderr, r.stderr
    return json.loads(r.stdout), r


def short(name):
    return name.rsplit(".", 1)[-1]


def test_the_program_reaches_the_same_depth(tmp):
    """Also where CPython, not the tracer, refuses the frame. Exception:
    3.12 budgets C recursion separately (1500 levels, two per frame a C
    function calls, as via map() here), and a traced thread's budget is
    topped up for the hook's own levels, so such a recursion may go deeper
    traced than plain (docs/architecture.md, "Recursion and the C stack")."""
    plain, _ = run_mode(tmp, "plain")
    assert all(plain["ran"][n] > 100 for n in NAMES), plain
    for mode in ("file", "handler"):
        out, _ = run_mode(tmp, mode)
        if sys.version_info[:2] == (3, 12):
            assert out["ran"]["via_builtin"] >= plain["ran"]["via_builtin"]
            out["ran"]["via_builtin"] = plain["ran"]["via_builtin"]
        assert out["ran"] == plain["ran"], (mode, out["ran"], plain["ran"])


def test_the_trace_has_exactly_the_frames_that_ran(tmp):
    out, _ = run_mode(tmp, "file")
    t = Trace(str(tmp / "t.swt"))
    assert t.damage is None and t.dropped() == 0
    counts, depth, low = {}, 0, 0
    for kind, name in t.call_sequence(0):
        if kind in ("call", "resume"):
            counts[short(name)] = counts.get(short(name), 0) + 1
            depth += 1
        elif kind in ("return", "yield", "unwind"):
            depth -= 1
            low = min(low, depth)
    for n in NAMES:
        assert counts.get(n) == out["ran"][n], (n, counts.get(n), out["ran"][n])
    assert low >= 0 and depth == 0


def test_a_handler_sees_exactly_the_frames_that_ran(tmp):
    out, _ = run_mode(tmp, "handler")
    seen = {short(k): v for k, v in out["seen"].items()}
    for n in NAMES:
        assert seen.get(n) == out["ran"][n], (n, seen.get(n), out["ran"][n])


STOP_DEEP = '''
import sys, stackwatch
MODE = sys.argv[1]

def bottom():
    if MODE == "file":
        stackwatch.stop()
    else:
        h.remove()
    # C code that checks the C-recursion budget, then Python calls deeper
    repr([[1, [2]]])
    sorted([3, 1, 2], key=lambda x: -x)
    return down2(15)

def down(n):
    return bottom() if n == 0 else down(n - 1)

def down2(n):
    return repr([n]) if n == 0 else down2(n - 1)

if MODE == "file":
    stackwatch.start(sys.argv[2])
else:
    h = stackwatch.add_handler(lambda ev: None, events="calls")
print(down(sys.getrecursionlimit() - 60))
print(down2(sys.getrecursionlimit() - 60))
'''


@pytest.mark.parametrize("mode", ["file", "handler"])
def test_tracing_stopped_deep_down_leaves_the_program_working(tmp, mode):
    """3.12+: a traced thread's C-recursion budget is topped up while the hook
    runs; stopping deep in a recursion must not leave it below zero."""
    script = write(tmp / "stop_deep.py", STOP_DEEP)
    r = run(["python", script, mode, str(tmp / "t.swt")], cwd=tmp)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["[0]", "[0]"], r.stdout


def test_a_handler_recursing_without_end_is_removed_not_a_crash(tmp):
    """A handler's own frames have a stack guard of their own (lower than the
    program's, so that a handler runs at the program's deepest point): one
    that recurses without end under a raised limit gets RecursionError and
    is removed; the program goes on."""
    script = write(tmp / "p.py", '''
import sys, stackwatch
sys.setrecursionlimit(1000000)
def bad(ev):
    return bad(ev)
h = stackwatch.add_handler(bad, events="calls")
def f():
    return 1
f()
f()
print("alive")
''')
    r = run(["python", script], cwd=tmp)
    assert r.returncode == 0, (r.returncode, r.stderr[-800:])
    assert r.stdout.split() == ["alive"]
    assert r.stderr.count("was removed") == 1 and "RecursionError" in r.stderr, r.stderr
