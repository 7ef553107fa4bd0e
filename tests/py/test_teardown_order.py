"""A documented difference from sys.setprofile, pinned down exactly.

On CPython 3.12+, a frame's locals are cleared inside the evaluator as the
frame returns, before control comes back to a PEP 523 hook. Python code run
by that clearing (__del__, weakref callbacks) is therefore recorded by the
frame-eval backend *inside* the returning frame, while sys.setprofile (fed
by PY_RETURN, which fires before the clearing) reports it *after* the
return. On 3.9-3.11 the frame is cleared after the evaluator returns and the
two agree. See docs/architecture.md, "Finalizers at frame teardown".
"""
import sys
import threading

import stackwatch
from stackwatch.reader import Trace


class Noisy:
    def __del__(self):
        finalizer_body()


def finalizer_body():
    return None


def owner():
    obj = Noisy()  # noqa: F841 - freed when owner's frame is cleared
    return 1


def outer():
    owner()


def test_finalizer_at_teardown(tmp_path):
    p = str(tmp_path / "t.swt")
    with stackwatch.trace(p):
        outer()
    t = Trace(p)
    main = [i for i, th in enumerate(t.threads) if th["ident"] == threading.get_ident()][0]
    seq = [(k, n) for k, n in t.call_sequence(main)
           if n in ("outer", "owner", "Noisy.__del__", "__del__", "finalizer_body")]
    d = "Noisy.__del__" if sys.version_info >= (3, 11) else "__del__"
    if sys.version_info >= (3, 12):
        expected = [("call", "outer"), ("call", "owner"), ("call", d), ("call", "finalizer_body"),
                    ("return", "finalizer_body"), ("return", d), ("return", "owner"),
                    ("return", "outer")]
    else:
        expected = [("call", "outer"), ("call", "owner"), ("return", "owner"), ("call", d),
                    ("call", "finalizer_body"), ("return", "finalizer_body"), ("return", d),
                    ("return", "outer")]
    assert seq == expected


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
    p = str(tmp_path / "t.swt")
    with stackwatch.trace(p):
        holder()
    t = Trace(p)
    main = [i for i, th in enumerate(t.threads) if th["ident"] == threading.get_ident()][0]
    seq = [(k, n) for k, n in t.call_sequence(main) if n in ("holder", "suspended", "finalizer_body")]
    # A generator's runs are call-or-resume/yield slices (from 3.11 its first
    # run is a resumption: creating it ran the frame); GeneratorExit unwinds it.
    run = "resume" if sys.version_info >= (3, 11) else "call"
    first = [("call", "holder"), (run, "suspended"), ("yield", "suspended")]
    close = [("resume", "suspended"), ("call", "finalizer_body"), ("return", "finalizer_body"),
             ("unwind", "suspended")]
    if sys.version_info >= (3, 12):
        assert seq == first + close + [("return", "holder")]
    else:
        assert seq == first + [("return", "holder")] + close
