"""Object-lifetime events (native/ext/tracer/objects.c): counts per class against
the known program tests/programs/objects_target.py (hot loops, a subclass,
__slots__, __del__, a class made while the events are on, a namedtuple,
copies, a linked list freed in one cascade, cycles freed by the collector),
delivered to handlers and recorded in the .swt file (decoded here from
docs/format.md, independently of the C reader); and that turning the
events off restores every class."""
import collections
import json
import os
import struct

import stackwatch
from stackwatch import _native
from conftest import PROGRAMS, read_varint, run, write

TARGET = os.path.join(PROGRAMS, "objects_target.py")
KINDS = ("new_start", "new_done", "delete_start", "delete_done")


def target(*args):
    out = run(["python", TARGET, *args])
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_handler_counts_equal_ground_truth():
    d = target("handler")
    for cls, n in d["expected"].items():
        for k in KINDS:
            assert d["seen"].get(f"{k} {cls}") == n, (k, cls)
    assert d["files"] == [os.path.realpath(TARGET)] or d["files"] == [TARGET]
    assert d["state_after"] == {"classes": 0, "on": 0}


# ---- a small decoder of the .swt format (docs/format.md) ----

def _str(b, i):
    n, i = read_varint(b, i)
    return b[i:i + n].decode("utf-8"), i + n


def ext_events(path):
    """[(ext kind, payload bytes)] of every EXT event, in file order per thread."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89SWT\r\n\x1a\n"
    pos, out = 16, []
    while pos + 12 <= len(data):
        ctype, _, _, plen, _ = struct.unpack_from("<BBHII", data, pos)
        p = data[pos + 12:pos + 12 + plen]
        pos += 12 + plen
        if ctype != 4:
            continue
        i = 0
        for _ in range(4):          # thread, seq, t_start, dropped
            _, i = read_varint(p, i)
        depth, i = read_varint(p, i)
        for _ in range(depth):
            _, i = read_varint(p, i)
        n, i = read_varint(p, i)
        for _ in range(n):
            x, i = read_varint(p, i)
            op = x & 7
            if op in (0, 2, 5):
                _, i = read_varint(p, i)
            elif op == 7:
                kind, i = read_varint(p, i)
                ln, i = read_varint(p, i)
                out.append((kind, p[i:i + ln]))
                i += ln
    return out


def test_file_records_counts_equal_ground_truth(tmp):
    path = str(tmp / "o.swt")
    d = target("file", path)
    assert d["error"] is None and d["dropped"] == 0
    counts = collections.Counter()
    files = set()
    order = []
    for kind, payload in ext_events(path):
        if 8 <= kind <= 11:
            name, i = _str(payload, 0)
            file, i = _str(payload, i)
            assert i == len(payload)
            counts[(KINDS[kind - 8], name)] += 1
            if name in d["expected"]:
                files.add(file)
            if name == "SwSlotted" and kind in (10, 11):
                order.append(kind)
    for cls, n in d["expected"].items():
        for k in KINDS:
            assert counts[(k, cls)] == n, (k, cls)
    assert files == {TARGET}
    # The linked list is freed in one cascade: its delete events nest.
    depth = top = 0
    for k in order:
        depth += 1 if k == 10 else -1
        assert depth >= 0
        top = max(top, depth)
    assert depth == 0 and top > 1
    tr = stackwatch.Trace(path)
    assert tr.damage is None


def test_off_restores_and_metaclasses_keep_working(tmp):
    prog = write(tmp / "p.py", """
import gc, stackwatch
from stackwatch import _native
class M1(type):
    pass
class M2(M1):
    def __new__(m, *a):
        return super().__new__(m, *a)
class Old:
    pass
seen = []
h = stackwatch.add_handler(lambda ev: seen.append((ev.kind, ev.name)), events=["new_done", "delete_done"])
class New(Old):
    pass
class K(metaclass=M2):
    pass
K2 = type("K2", (Old,), {})
New(); K(); K2()
on = _native._objects_state()
h.remove()
n = len(seen)
objs = [New(), K(), K2(), Old()]
del objs
class After(New):
    pass
After()
gc.collect()
print(on["on"], on["classes"] > 10, sorted(set(seen)), len(seen) == n, _native._objects_state())
""")
    out = run(["python", prog])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("[")[0].strip() == "1 True"
    tail = out.stdout.strip()
    for k in ("'New'", "'K'", "'K2'"):
        assert f"('new_done', {k})" in tail and f"('delete_done', {k})" in tail
    assert tail.endswith("True {'classes': 0, 'on': 0}")


def test_nothing_installed_without_a_consumer():
    assert _native._objects_state() == {"classes": 0, "on": 0}
    h = stackwatch.add_handler(lambda ev: None, events="calls")
    try:
        assert _native._objects_state()["on"] == 0
    finally:
        h.remove()
    h = stackwatch.add_handler(lambda ev: None, events="delete_done")
    try:
        assert _native._objects_state()["on"] == 1
    finally:
        h.remove()
    assert _native._objects_state() == {"classes": 0, "on": 0}


def test_raising_handler_is_removed_program_unharmed(tmp):
    prog = write(tmp / "p.py", """
import stackwatch
class A:
    def __del__(self):
        pass
def bad(ev):
    raise RuntimeError("object handler bug")
h = stackwatch.add_handler(bad, events="objects")
xs = [A() for _ in range(5)]
del xs
print("ok", h.active)
""")
    out = run(["python", prog])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok False"
    assert out.stderr.count("object handler bug") == 1


def test_run_log_shows_object_events(tmp):
    prog = write(tmp / "p.py", "class Foo:\n    pass\nfor _ in range(3):\n    Foo()\n")
    out = run(["run", "--no-trace", "--log", "--events", "objects", prog])
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stderr.splitlines() if " Foo" in l]
    assert sum("new_done" in l for l in lines) == 3
    assert sum("delete_done" in l for l in lines) == 3
