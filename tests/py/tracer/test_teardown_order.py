"""Code run while a returning frame is torn down comes after its return.

On CPython 3.12+ a frame's locals are cleared inside the evaluator as the
frame returns, before control comes back to a PEP 523 hook, so the hook
sees Python code run by that clearing (__del__, weakref callbacks, a
suspended generator closed) *inside* the returning frame. sys.setprofile
(fed by PY_RETURN, which fires before the clearing) reports it *after* the
return. stackwatch writes a TEARDOWN event when such code starts and the
reader ends the frame there (docs/format.md); live handlers are given the
frame's end at that moment. So every version gives sys.setprofile's order. Each case here is compared with a sys.setprofile
recorder run on the same program, and with the order written out.
"""
import sys
import threading
import weakref

import pytest

import stackwatch
from stackwatch import Trace

NEW_NAMES = sys.version_info >= (3, 11)


def name_of(code):
    return code.co_qualname if NEW_NAMES else code.co_name


def traced(fn, tmp_path, names, **opts):
    p = str(tmp_path / "t.swt")
    with stackwatch.trace(p, **opts):
        fn()
    t = Trace(p)
    main = [i for i, th in enumerate(t.threads) if th["ident"] == threading.get_ident()][0]
    return [(k, n) for k, n in t.call_sequence(main) if n in names]


def by_handler(fn, names):
    seq = []
    h = stackwatch.add_handler(lambda ev: seq.append((ev.kind, ev.function)), events="calls")
    try:
        fn()
    finally:
        h.remove()
    return [(k, n) for k, n in seq if n in names]


def by_setprofile(fn, names):
    seq = []

    def rec(frame, event, arg):
        if event in ("call", "return"):
            seq.append((event, name_of(frame.f_code)))

    sys.setprofile(rec)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return [(k, n) for k, n in seq if n in names]


def plain(seq):
    m = {"resume": "call", "yield": "return", "unwind": "return"}
    return [(m.get(k, k), n) for k, n in seq]


class Noisy:
    def __del__(self):
        finalizer_body()


class Nested:
    def __del__(self):
        inner = Noisy()  # noqa: F841 - freed as this __del__'s frame is cleared
        return None


def finalizer_body():
    return None


def owner():
    obj = Noisy()  # noqa: F841 - freed when owner's frame is cleared
    return 1


def outer():
    owner()


DEL = "Noisy.__del__" if NEW_NAMES else "__del__"
NESTED_DEL = "Nested.__del__" if NEW_NAMES else "__del__"


def check(fn, tmp_path, names, expected, **opts):
    """The trace file and a live handler both give the expected sequence,
    which is sys.setprofile's (whose kinds are only call and return)."""
    seq = traced(fn, tmp_path, names, **opts)
    assert plain(seq) == by_setprofile(fn, names)
    assert seq == expected
    assert by_handler(fn, names) == expected


def test_finalizer_at_teardown(tmp_path):
    check(outer, tmp_path, ("outer", "owner", DEL, "finalizer_body"),
          [("call", "outer"), ("call", "owner"), ("return", "owner"), ("call", DEL),
           ("call", "finalizer_body"), ("return", "finalizer_body"), ("return", DEL),
           ("return", "outer")])


def raiser():
    obj = Noisy()  # noqa: F841
    raise KeyError("k")


def catcher():
    try:
        raiser()
    except KeyError:
        pass


def test_finalizer_at_teardown_of_a_raising_frame(tmp_path):
    """The frame ends as it really did: by an exception ("unwind")."""
    check(catcher, tmp_path, ("catcher", "raiser", DEL, "finalizer_body"),
          [("call", "catcher"), ("call", "raiser"), ("unwind", "raiser"), ("call", DEL),
           ("call", "finalizer_body"), ("return", "finalizer_body"), ("return", DEL),
           ("return", "catcher")])


def several():
    a, b = Noisy(), Nested()  # noqa: F841 - b's __del__ frees an object at its own teardown
    return 1


def test_nested_and_several_finalizers(tmp_path):
    # several ends before either finalizer (its locals are cleared in order:
    # a, then b); Nested.__del__ ends before the finalizer its own clearing runs.
    fin = [("call", DEL), ("call", "finalizer_body"), ("return", "finalizer_body"), ("return", DEL)]
    check(several, tmp_path, ("several", DEL, NESTED_DEL, "finalizer_body"),
          [("call", "several"), ("return", "several")] + fin +
          [("call", NESTED_DEL), ("return", NESTED_DEL)] + fin)


def callback_body(ref):
    return None


def weak_owner():
    obj = Noisy()
    keep = weakref.ref(obj, callback_body)  # noqa: F841 - the callback runs at teardown
    return 1


def test_weakref_callback_at_teardown(tmp_path):
    names = ("weak_owner", DEL, "finalizer_body", "callback_body")
    seq = traced(weak_owner, tmp_path, names)
    assert plain(seq) == by_setprofile(weak_owner, names)
    assert by_handler(weak_owner, names) == seq
    assert seq[:2] == [("call", "weak_owner"), ("return", "weak_owner")]
    assert ("call", "callback_body") in seq or ("call", DEL) in seq


def returning_generator():
    obj = Noisy()  # noqa: F841 - freed as the generator's frame is cleared at its return
    yield 1


def drive():
    for _ in returning_generator():
        pass


def test_finalizer_at_teardown_of_a_generator(tmp_path):
    run = "resume" if sys.version_info >= (3, 11) else "call"
    check(drive, tmp_path, ("drive", "returning_generator", DEL),
          [("call", "drive"), (run, "returning_generator"), ("yield", "returning_generator"),
           ("resume", "returning_generator"), ("return", "returning_generator"), ("call", DEL),
           ("return", DEL), ("return", "drive")])


def suspended():
    try:
        yield 1
    finally:
        finalizer_body()


def holder():
    it = suspended()
    next(it)  # left suspended: closed when holder's frame is cleared
    return 1


def test_generator_closed_at_teardown(tmp_path):
    # A generator's runs are call-or-resume/yield slices (from 3.11 its first
    # run is a resumption: creating it ran the frame); GeneratorExit unwinds it.
    run = "resume" if sys.version_info >= (3, 11) else "call"
    check(holder, tmp_path, ("holder", "suspended", "finalizer_body"),
          [("call", "holder"), (run, "suspended"), ("yield", "suspended"), ("return", "holder"),
           ("resume", "suspended"), ("call", "finalizer_body"), ("return", "finalizer_body"),
           ("unwind", "suspended")])


HIDDEN = """
def hidden_owner(make):
    obj = make()
    return 1
"""


def test_teardown_of_an_unrecorded_frame(tmp_path, monkeypatch):
    """A frame the trace leaves out (--exclude) is not the one a TEARDOWN
    would end: its recorded caller stays open around the finalizer its
    clearing runs."""
    (tmp_path / "sw_hidden_mod.py").write_text(HIDDEN)
    monkeypatch.syspath_prepend(str(tmp_path))
    import sw_hidden_mod

    def calls_hidden():
        sw_hidden_mod.hidden_owner(Noisy)

    names = ("test_teardown_of_an_unrecorded_frame.<locals>.calls_hidden" if NEW_NAMES else "calls_hidden",
             "hidden_owner", DEL)
    seq = traced(calls_hidden, tmp_path, names, exclude=["sw_hidden_mod"])
    assert seq == [("call", names[0]), ("call", DEL), ("return", DEL), ("return", names[0])]


def bare_owner():
    obj = Noisy()  # noqa: F841
    return  # a return that starts its line: instrumented for line events


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is 3.12+")
@pytest.mark.parametrize("events", ["line", "line+instruction+return"])
def test_how_the_frame_left_under_another_tools_instrumentation(tmp_path, events):
    """Live handlers are told whether the frame being cleared returned or
    raised by its current instruction, which another sys.monitoring tool
    may have replaced by an instrumented one."""
    mon = sys.monitoring
    tool = next(t for t in (1, 3, 4, 0) if mon.get_tool(t) is None)
    ev = mon.events.LINE
    mon.use_tool_id(tool, "test_teardown_order")
    mon.register_callback(tool, mon.events.LINE, lambda code, line: None)
    if events != "line":
        ev |= mon.events.INSTRUCTION | mon.events.PY_RETURN
        mon.register_callback(tool, mon.events.INSTRUCTION, lambda code, off: None)
        mon.register_callback(tool, mon.events.PY_RETURN, lambda code, off, val: None)
    mon.set_events(tool, ev)
    try:
        def bare():
            bare_owner()
        name = "test_how_the_frame_left_under_another_tools_instrumentation.<locals>.bare"
        check(bare, tmp_path, (name, "bare_owner", DEL),
              [("call", name), ("call", "bare_owner"), ("return", "bare_owner"), ("call", DEL),
               ("return", DEL), ("return", name)])
        check(catcher, tmp_path, ("catcher", "raiser", DEL),
              [("call", "catcher"), ("call", "raiser"), ("unwind", "raiser"), ("call", DEL),
               ("return", DEL), ("return", "catcher")])
    finally:
        mon.set_events(tool, 0)
        for e in (mon.events.LINE, mon.events.INSTRUCTION, mon.events.PY_RETURN):
            mon.register_callback(tool, e, None)
        mon.free_tool_id(tool)
