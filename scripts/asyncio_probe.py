"""Run by scripts/gen-asyncio-layouts.py under each installed CPython
(3.9-3.13): finds, in this interpreter's own memory, where asyncio's C
Task and Future objects (private to Modules/_asynciomodule.c, in no
installed header) and the few other objects the task tree is read through
(coroutine, frame value stack, set, list, weakref, bound method; tuple,
functools.partial, function closure and cell for done callbacks) keep
each field, by making objects whose field values are known and finding
those values in their bytes. Every offset is found by two probes of
different objects that must agree, and must be the only match in each;
otherwise the probe fails (exit 1) naming the field. Prints one JSON
object: field -> value."""
import asyncio
import ctypes
import json
import os
import sys
import types
import weakref

PTR = ctypes.sizeof(ctypes.c_void_p)
NO = 0xFFFFFFFF


MEM = os.open("/proc/self/mem", os.O_RDONLY)   # a read of an unmapped address fails, never faults


def read(addr, size):
    try:
        raw = os.pread(MEM, size, addr)
    except (OSError, OverflowError):
        raw = b""
    return raw + bytes(size - len(raw))   # (what cannot be read: zeros, matching nothing)


def words(addr, size):
    """The pointer-sized words of size bytes at addr: [(offset, value)]."""
    raw = read(addr, size)
    return [(o, int.from_bytes(raw[o:o + PTR], sys.byteorder)) for o in range(0, size - PTR + 1, PTR)]


def int32s(addr, size):
    raw = read(addr, size)
    return [(o, int.from_bytes(raw[o:o + 4], sys.byteorder, signed=True)) for o in range(0, size - 3, 4)]


def only(field, offsets):
    if len(offsets) != 1:
        sys.exit(f"asyncio_probe: {field}: {len(offsets)} places match ({offsets})")
    return offsets[0]


def agree(field, *found):
    """The one offset every probe found."""
    values = [only(field, f) for f in found]
    if len(set(values)) != 1:
        sys.exit(f"asyncio_probe: {field}: the probes disagree ({values})")
    return values[0]


def where(obj, value, size=None):
    """Offsets in obj's first size bytes (its basic size) holding value."""
    size = size or type(obj).__basicsize__
    return [o for o, w in words(id(obj), size) if w == value]


def tp_name(t):
    """The type's tp_name, as CPython makes __module__ and __name__ of it."""
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def probe_set(out):
    small, big = {5}, set(range(100))
    # key then hash in 16-byte entries: 5 (hash 5) in slot 5 of the 8 inline ones
    entry = only("set entry (key 5)", where(small, id(5)))
    if words(id(small) + entry + PTR, PTR)[0][1] != 5:
        sys.exit("asyncio_probe: set entry: the hash does not follow the key")
    out["set_entry_size"] = 2 * PTR
    out["set_entry_key"] = 0
    inline = entry - 5 * out["set_entry_size"]
    big_words = dict(words(id(big), type(big).__basicsize__))
    out["set_mask"] = agree("set mask", where(small, 7),
                            [o for o, w in big_words.items() if w >= len(big) and not (w + 1) & w and w < 1 << 20])
    mask = big_words[out["set_mask"]]
    # 7 hashes to slot 7 & mask of the big set's table
    out["set_table"] = agree("set table", where(small, id(small) + inline),
                             [o for o, w in big_words.items()
                              if w != id(type(big)) and words(w + (7 & mask) * 2 * PTR, PTR)[0][1] == id(7)])


def probe_list(out):
    items = [object() for _ in range(9)]
    a, b = [], []
    for x in items[:7]:
        a.append(x)   # (grown by appends: room for more than they hold)
    for x in items:
        b.append(x)
    out["list_size"] = agree("list size", where(a, 7), where(b, 9))
    out["list_items"] = agree("list items", *[[o for o, w in words(id(x), type(x).__basicsize__)
                                               if w != id(type(x)) and words(w, PTR)[0][1] == id(items[0])]
                                              for x in (a, b)])


def probe_dicts(out):
    """Before 3.11 (dict-common.h, not installed): a module's dict, and a
    dict's keys object: its size (a count of slots, a power of two), its
    count of entries, where its index table starts (one byte per slot up
    to 255 slots), and its entries (hash, key, value) after it."""
    names = ["module_dict", "keys_size", "keys_nentries", "keys_indices", "entry_size", "entry_key", "entry_value"]
    if sys.version_info >= (3, 11):
        out.update({k: NO for k in names})   # (the layout's own, from the headers)
        return
    out["module_dict"] = agree("module dict", where(json, id(json.__dict__)), where(os, id(os.__dict__)))
    small = {"k0": "v0", "k1": "v1", "k2": "v2"}
    big = dict(small)
    big.update((f"x{i}", i) for i in range(9))
    # the keys object: the one word of the dict that points to the keys of its entries
    keys = [o for o, w in words(id(small), type(small).__basicsize__) if w != id(dict)
            and any(x == id("k0") for _, x in words(w, 256))]
    keys_at = agree("dict keys", keys, [o for o in keys if any(x == id("k0") for _, x in
                                                               words(words(id(big) + o, PTR)[0][1], 1024))])
    ks, kb = words(id(small) + keys_at, PTR)[0][1], words(id(big) + keys_at, PTR)[0][1]
    ws, wb = dict(words(ks, 1024)), dict(words(kb, 1024))
    size_s = [o for o in ws if o < 64 and ws[o] > len(small) and not ws[o] & (ws[o] - 1)]
    size_b = [o for o in wb if o < 64 and wb[o] > len(big) and not wb[o] & (wb[o] - 1) and wb[o] != ws.get(o)]
    out["keys_size"] = agree("keys size", [o for o in size_s if o in size_b], size_b)
    out["keys_nentries"] = agree("keys entries", where_in(ws, 3, 64), where_in(wb, 12, 64))
    entry = {}
    for name, d, w in (("small", small, ws), ("big", big, wb)):
        k0, v0, k1 = (only(f"{name} key", where_in(w, id(x), 1024)) for x in ("k0", "v0", "k1"))
        h0 = only(f"{name} hash", where_in(w, hash("k0") & (1 << 64) - 1, 1024))
        start = min(k0, v0, h0)
        entry[name] = (start - w[out["keys_size"]], k1 - k0, k0 - start, v0 - start)
    if entry["small"] != entry["big"]:
        sys.exit(f"asyncio_probe: dict entries: the probes disagree ({entry})")
    out["keys_indices"], out["entry_size"], out["entry_key"], out["entry_value"] = entry["small"]


def where_in(ws, value, limit):
    return [o for o, w in ws.items() if w == value and o < limit]


def probe_weakref(out):
    class A:
        pass
    x, y = A(), A()
    rx, ry = weakref.ref(x), weakref.ref(y)
    out["weakref_object"] = agree("weakref object", where(rx, id(x)), where(ry, id(y)))


def probe_type_base(out):
    """PyTypeObject.tp_base: the base class of a class (its first)."""
    class A:
        pass

    class B(A):
        pass

    class C(B):
        pass
    out["type_base"] = agree("type base", where(B, id(A)), where(C, id(B)))


def probe_callback_objects(out):
    """What a done callback can be and where it keeps the futures it will
    release (asyncio's wait_for, wait and shield): a tuple's items, a
    functools.partial's args, a function's closure, a cell's object."""
    import functools
    a, b = object(), object()
    ta, tb = (a, None), (None, None, b)
    t5, t7 = tuple(object() for _ in range(5)), tuple(object() for _ in range(7))
    out["tuple_size"] = agree("tuple size", where(t5, 5, 3 * PTR), where(t7, 7, 3 * PTR))
    out["tuple_items"] = agree("tuple items", where(ta, id(a), 64), [o - 2 * PTR for o in where(tb, id(b), 64)])
    pa, pb = functools.partial(print, a), functools.partial(print, b, a)
    out["partial_args"] = agree("partial args", where(pa, id(pa.args)), where(pb, id(pb.args)))

    def closing(x):
        def inner():
            return x
        return inner
    fa, fb = closing(a), closing(b)
    out["function_closure"] = agree("function closure", where(fa, id(fa.__closure__)), where(fb, id(fb.__closure__)))
    out["cell_ref"] = agree("cell object", where(fa.__closure__[0], id(a)), where(fb.__closure__[0], id(b)))


def probe_method(out):
    class A:
        def m(self):
            pass
    x, y = A(), A()
    mx, my = x.m, y.m
    out["method_self"] = agree("bound method self", where(mx, id(x)), where(my, id(y)))


async def waits(fut):
    return await fut


async def awaits_inner(marker, fut):
    # (marker: localsplus[0], never loaded onto the stack)
    return await waits(fut)


async def awaits_inner_deeper(marker, fut):
    return [1, 2, await waits(fut)]


def probe_tasks(out, loop):
    import _asyncio
    T, F = _asyncio.Task, _asyncio.Future
    if asyncio.Task is not T or asyncio.Future is not F:
        sys.exit("asyncio_probe: asyncio's Task and Future are not the C ones")
    out["task_size"], out["future_size"] = T.__basicsize__, F.__basicsize__
    out["coro_size"] = types.CoroutineType.__basicsize__
    f1, f2 = loop.create_future(), loop.create_future()
    m1, m2 = object(), object()
    t1 = loop.create_task(awaits_inner(m1, f1), name="probe-one")
    t2 = loop.create_task(awaits_inner_deeper(m2, f2), name="probe-two")
    loop.run_until_complete(asyncio.sleep(0))   # each task runs to its await
    out["fut_loop"] = agree("future loop", where(f1, id(loop)), where(t2, id(loop)))
    out["task_coro"] = agree("task coro", where(t1, id(t1.get_coro())), where(t2, id(t2.get_coro())))
    out["task_name"] = agree("task name", where(t1, id(t1.get_name())), where(t2, id(t2.get_name())))
    out["task_fut_waiter"] = agree("task fut_waiter", where(t1, id(f1)), where(t2, id(f2)))

    def cb(_):
        pass

    def cb2(_):
        pass
    g1, g2 = loop.create_future(), loop.create_future()
    g1.add_done_callback(cb)
    g2.add_done_callback(cb2)
    out["fut_callback0"] = agree("future callback0", where(g1, id(cb)), where(g2, id(cb2)))
    # the callbacks after the first: a list of (callback, context) tuples
    g1.add_done_callback(cb2)
    g2.add_done_callback(cb)

    def later(fut, second):
        return [o for o, w in words(id(fut), F.__basicsize__)
                if w and words(w + PTR, PTR)[0][1] == id(list)
                and words(words(words(w + out["list_items"], PTR)[0][1], PTR)[0][1] + out["tuple_items"],
                          PTR)[0][1] == id(second)]
    out["fut_callbacks"] = agree("future callbacks", later(g1, cb2), later(g2, cb))
    # the state: an int 0 while pending (then 2 finished, 1 cancelled)
    a, b = loop.create_future(), loop.create_future()
    before_a, before_b = dict(int32s(id(a), F.__basicsize__)), dict(int32s(id(b), F.__basicsize__))
    result = object()
    a.set_result(result)
    b.cancel()
    after_a, after_b = dict(int32s(id(a), F.__basicsize__)), dict(int32s(id(b), F.__basicsize__))
    out["fut_state"] = agree("future state",
                             [o for o in before_a if before_a[o] == 0 and after_a[o] == 2 and o % 4 == 0],
                             [o for o in before_b if before_b[o] == 0 and after_b[o] == 1 and o % 4 == 0])
    out["fut_state_pending"], out["fut_state_cancelled"], out["fut_state_finished"] = 0, 1, 2
    # attributes of a Python subclass (_GatheringFuture's _children): a dict
    # at __dictoffset__, or a managed one (-1: the layout's own reading)
    from asyncio.tasks import _GatheringFuture
    if _GatheringFuture.__dictoffset__ != F.__dictoffset__:
        sys.exit("asyncio_probe: _GatheringFuture's dict is not where Future keeps it")
    out["fut_dict"] = F.__dictoffset__ if F.__dictoffset__ > 0 else NO
    if F.__dictoffset__ > 0:
        g = _GatheringFuture([f1], loop=loop)
        d = words(id(g) + F.__dictoffset__, PTR)[0][1]
        if words(d + PTR, PTR)[0][1] != id(dict):
            sys.exit("asyncio_probe: no dict at Future's __dictoffset__")
    probe_frames(out, t1, t2, m1, m2)
    for f in (f1, f2):
        f.set_result(None)
    loop.run_until_complete(asyncio.gather(t1, t2))


def probe_frames(out, t1, t2, m1, m2):
    """Where a suspended coroutine keeps its frame, and where that frame
    keeps the top of its value stack (the object it awaits)."""
    c1, c2 = t1.get_coro(), t2.get_coro()
    i1, i2 = c1.cr_await, c2.cr_await
    if sys.version_info >= (3, 11):
        # the frame is embedded in the coroutine: found by its first local
        # variable (the argument fut), localsplus[0]; the reader places the
        # frame's other fields by the version's layout (its frame_localsplus)
        out["coro_frame_kind"], out["coro_frame"] = 2, NO
        base1, base2 = id(c1), id(c2)
        span = type(c1).__basicsize__ + 64 * PTR
        out["coro_localsplus"] = agree("coroutine localsplus",
                                       [o for o, w in words(base1, span) if w == id(m1)],
                                       [o for o, w in words(base2, span) if w == id(m2)])
    else:
        out["coro_frame_kind"], out["coro_localsplus"] = 1, NO
        out["coro_frame"] = agree("coroutine frame", where(c1, id(c1.cr_frame)), where(c2, id(c2.cr_frame)))
        base1, base2 = id(c1.cr_frame), id(c2.cr_frame)
        span = type(c1.cr_frame).__basicsize__ + 64 * PTR
    # the awaited coroutine: the top of the stack, found at slot s1 / s2
    s1 = only("awaited slot", [o for o, w in words(base1, span) if w == id(i1)])
    s2 = only("awaited slot", [o for o, w in words(base2, span) if w == id(i2)])
    if s2 - s1 != 2 * PTR:
        sys.exit(f"asyncio_probe: the deeper await is not two slots up ({s1}, {s2})")
    d1, d2 = dict(words(base1, span)), dict(words(base2, span))
    i1w, i2w = dict(int32s(base1, span)), dict(int32s(base2, span))
    past = [o for o in d1 if o < s1 and d1[o] == base1 + s1 + PTR and d2.get(o) == base2 + s2 + PTR]
    if past:
        out["frame_stack_kind"], out["frame_stack_top"] = 1, only("stack pointer", past)
        out["frame_stack_base"] = NO
        return
    # 3.11/3.12: an int count of slots from localsplus
    if sys.version_info >= (3, 11):
        count = [o for o in i1w if o < s1 and i1w[o] == (s1 - out["coro_localsplus"]) // PTR + 1
                 and i2w.get(o) == (s2 - out["coro_localsplus"]) // PTR + 1]
        out["frame_stack_kind"], out["frame_stack_top"] = 2, only("stack top", count)
        out["frame_stack_base"] = out["coro_localsplus"]
        return
    # 3.10: an int depth over a base pointer (f_valuestack)
    for o in d1:
        b1, b2 = d1[o], d2.get(o, 0)
        if not (base1 < b1 <= base1 + s1 and base2 < b2 <= base2 + s2) or (base1 + s1 - b1) % PTR:
            continue
        depth = [k for k in i1w if k < s1 and i1w[k] == (base1 + s1 - b1) // PTR + 1
                 and i2w.get(k) == (base2 + s2 - b2) // PTR + 1]
        if depth:
            out["frame_stack_kind"], out["frame_stack_top"] = 3, only("stack depth", depth)
            out["frame_stack_base"] = o
            return
    sys.exit("asyncio_probe: the top of a coroutine frame's stack is not found")


def main():
    out = {"version_hex": sys.hexversion, "pointer_size": PTR}
    probe_set(out)
    probe_dicts(out)
    probe_list(out)
    probe_weakref(out)
    probe_method(out)
    probe_callback_objects(out)
    probe_type_base(out)
    loop = asyncio.new_event_loop()
    try:
        probe_tasks(out, loop)
    finally:
        loop.close()
    out["tp_names"] = {k: tp_name(t) for k, t in (("task", asyncio.Task), ("future", asyncio.Future),
                                                   ("coroutine", types.CoroutineType), ("set", set),
                                                   ("list", list), ("weakref", weakref.ref),
                                                   ("method", types.MethodType), ("tuple", tuple),
                                                   ("partial", __import__("functools").partial),
                                                   ("function", types.FunctionType),
                                                   ("cell", types.CellType))}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
