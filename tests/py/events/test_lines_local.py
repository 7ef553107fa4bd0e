"""Line and instruction events of chosen files on 3.12+ (issue 3): local
sys.monitoring events of the matching code objects only (events/monitoring.py,
native/ext/tracer/lines_local.c). Ground truth: a second sys.monitoring tool that
records LINE / INSTRUCTION globally for the same files."""
import json
import sys

import pytest

from conftest import run

pytestmark = pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is 3.12+")

HARNESS = r'''
import json, sys, threading
import stackwatch
mon = sys.monitoring
GT = 1
mon.use_tool_id(GT, "groundtruth")
truth, got, on = [], [], [False]
def want(f):
    return f.endswith(("tgt.py", "tgt2.py"))
def gt_line(code, line):
    if on[0] and want(code.co_filename):
        truth.append(("line", code.co_filename, line, threading.get_ident()))
def gt_instr(code, off):
    if on[0] and want(code.co_filename):
        truth.append(("instruction", code.co_filename, off, threading.get_ident()))
mon.register_callback(GT, mon.events.LINE, gt_line)
mon.register_callback(GT, mon.events.INSTRUCTION, gt_instr)
mon.set_events(GT, mon.events.LINE | mon.events.INSTRUCTION)
def handler(e):
    v = e.lineno if e.kind == "line" else e.data["offset"]
    got.append((e.kind, e.filename, v, e.thread_id))
def tool():
    return [t for t in range(6) if mon.get_tool(t) == "stackwatch"][0]
state = {}
def start():
    state["h"] = stackwatch.add_handler(handler, events=("line", "instruction"),
                                        where=["*/tgt.py", "*/tgt2.py"])
    on[0] = True
    t = tool()
    state["tool"] = t
    state["global"] = mon.get_events(t)
    import json as other
    state["other_local"] = mon.get_local_events(t, other.dumps.__code__) | \
        mon.get_local_events(t, threading.Thread.start.__code__)
def stop():
    on[0] = False
    t = state["tool"]
    state["h"].remove()
    import tgt
    state["after"] = [mon.get_tool(t), mon.get_local_events(t, tgt.before.__code__)]
sys.modules["harness"] = sys.modules[__name__]
import tgt
'''

TGT = r'''
import threading
import harness

def before(n):
    s = 0
    for i in range(n):
        s += i
    return s

go = threading.Event()
def waiting():
    go.wait()
    x = 0
    for i in range(5):
        x += before(i)
    return x

t0 = threading.Thread(target=waiting)
t0.start()
harness.start()
y = 1
y += before(4)
go.set()
t0.join()

def after(n):
    def nested(k):
        return k * 2
    sq = [nested(i) for i in range(n)]
    f = lambda v: v + 1
    def gen():
        for v in sq:
            yield f(v)
    return sum(gen())

class K:
    def __init__(self):
        self.v = after(3)

z = after(4) + K().v
import tgt2
z += tgt2.g(3)
ts = [threading.Thread(target=after, args=(i,)) for i in range(3)]
for t in ts:
    t.start()
for t in ts:
    t.join()
harness.stop()
'''

TGT2 = r'''
def g(n):
    return sum(i * i for i in range(n))
'''


def test_local_line_and_instruction_events_equal_ground_truth(tmp_path):
    (tmp_path / "tgt.py").write_text(TGT)
    (tmp_path / "tgt2.py").write_text(TGT2)
    (tmp_path / "main.py").write_text(HARNESS + r'''
import json
print(json.dumps({"truth": truth, "got": got, "state": {k: state[k] for k in ("global", "other_local", "after")}}))
''')
    p = run(["python", "main.py"], cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    truth = [tuple(x) for x in out["truth"]]
    got = [tuple(x) for x in out["got"]]
    # The ground truth includes the last line (harness.stop()) before the
    # handler goes; the handler sees it too.
    assert len(truth) > 500
    assert {t[0] for t in truth} == {"line", "instruction"}
    assert {t[1].rsplit("/", 1)[1] for t in truth} == {"tgt.py", "tgt2.py"}
    assert len({t[3] for t in truth}) >= 2   # main and other threads (idents may be reused)
    for tid in {t[3] for t in truth}:
        assert [t for t in got if t[3] == tid] == [t for t in truth if t[3] == tid], tid
    assert len(got) == len(truth)
    st = out["state"]
    LINE, INSTRUCTION = 1 << 5, 1 << 6   # sys.monitoring.events
    assert st["global"] & (LINE | INSTRUCTION) == 0, "line events must not be global"
    assert st["other_local"] == 0, "other files' code must carry no local events"
    assert st["after"][0] is None, "the tool id is freed when the handler goes"


def test_global_when_a_consumer_wants_lines_everywhere(tmp_path):
    (tmp_path / "main.py").write_text(r'''
import sys, stackwatch
mon = sys.monitoring
a = stackwatch.add_handler(lambda e: None, events="line", where="*/nothing.py")
t = [t for t in range(6) if mon.get_tool(t) == "stackwatch"][0]
print(mon.get_events(t) & mon.events.LINE, mon.get_local_events(t, stackwatch.add_handler.__code__))
b = stackwatch.add_handler(lambda e: None, events="line")
print(mon.get_events(t) & mon.events.LINE)
b.remove()
print(mon.get_events(t) & mon.events.LINE)
a.remove()
print(mon.get_tool(t))
''')
    p = run(["python", "main.py"], cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["0", "0", "32", "0", "None"]


def test_filters_change_while_running_from_another_thread(tmp_path):
    """A second handler for another file, added and removed from another
    thread, gets that file's code objects their local events and takes
    them away again; the first handler's stay."""
    (tmp_path / "fa.py").write_text("def a():\n    return 1\n")
    (tmp_path / "fb.py").write_text("def b():\n    return 2\n")
    (tmp_path / "main.py").write_text(r'''
import sys, threading, stackwatch, fa, fb
mon = sys.monitoring
LINE = mon.events.LINE
seen = []
ha = stackwatch.add_handler(lambda e: seen.append(("a", e.lineno)), events="line", where="*/fa.py")
t = [t for t in range(6) if mon.get_tool(t) == "stackwatch"][0]
def local():
    return [mon.get_local_events(t, fa.a.__code__) & LINE, mon.get_local_events(t, fb.b.__code__) & LINE]
out = [local()]
box = {}
th = threading.Thread(target=lambda: box.update(h=stackwatch.add_handler(
    lambda e: seen.append(("b", e.lineno)), events="line", where="*/fb.py")))
th.start(); th.join()
out.append(local())
fa.a(); fb.b()
th = threading.Thread(target=lambda: box["h"].remove())
th.start(); th.join()
out.append(local())
fa.a(); fb.b()
ha.remove()
out.append(mon.get_tool(t))
print(out, seen)
''')
    p = run(["python", "main.py"], cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == ("[[32, 0], [32, 32], [32, 0], None] "
                                "[('a', 2), ('b', 2), ('a', 2)]")


@pytest.mark.skipif(sys.version_info[:2] != (3, 13), reason="the __init__ gap is 3.13's")
def test_init_gap_keeps_the_local_line_events_of_an_existing_init(tmp_path):
    """On 3.13 the call tracer's __init__ gap sets its own local events on
    existing __init__ code objects; an __init__ of a file whose lines are
    wanted keeps its line events, and loses only the gap's when it ends."""
    (tmp_path / "fc.py").write_text("class C:\n    def __init__(self, v):\n        self.v = v\n")
    (tmp_path / "main.py").write_text(r'''
import sys, stackwatch, fc
mon = sys.monitoring
lines = []
h = stackwatch.add_handler(lambda e: lines.append(e.lineno), events="line", where="*/fc.py")
t = [t for t in range(6) if mon.get_tool(t) == "stackwatch"][0]
before = mon.get_local_events(t, fc.C.__init__.__code__)
stackwatch.start("t.swt")
during = mon.get_local_events(t, fc.C.__init__.__code__)
for i in range(50):
    fc.C(i)
stackwatch.stop()
after = mon.get_local_events(t, fc.C.__init__.__code__)
h.remove()
print(before, during, after, len(lines))
''')
    p = run(["python", "main.py"], cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    line, start, ret = 32, 1, 4   # sys.monitoring.events.LINE, PY_START, PY_RETURN
    assert p.stdout.split() == [str(line), str(line | start | ret), str(line), "50"]


def test_code_held_by_a_local_variable_of_a_running_frame(tmp_path):
    """A code object compiled before the consumer came, referred to only by
    a local variable of a frame that is running, gets its line events."""
    (tmp_path / "main.py").write_text(r'''
import sys, stackwatch
def main():
    code = compile("a = 1\nb = 2\nc = a + b\n", __file__.replace("main.py", "held.py"), "exec")
    lines = []
    h = stackwatch.add_handler(lambda e: lines.append(e.lineno), events="line", where="*/held.py")
    exec(code, {})
    h.remove()
    print(lines)
main()
''')
    p = run(["python", "main.py"], cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[1, 2, 3]"
