"""The line of a Python frame's return, yield or unwind event, as handlers
and the function__return probe get it: the line being run when the frame
leaves (CPython's own probes and frame.f_lineno give that), not the
function's first line. Checked against sys.setprofile, whose 'return'
events see the frame itself (ground truth), on a program that leaves its
functions from several lines: early returns, a generator's yields and its
end, an exception that unwinds two frames, a lambda, a method."""
import sys

import stackwatch

HERE = __file__


def early(x):
    if x > 1:
        return "big"
    y = x + 1
    return y


def gen(n):
    for i in range(n):
        yield i
    if n:
        return


def inner():
    d = {}
    return d["missing"]


def outer():
    v = 1
    inner()
    return v


class K:
    def method(self):
        return [i
                for i in range(2)]


def workload():
    early(0)
    early(5)
    list(gen(3))
    try:
        outer()
    except KeyError:
        pass
    f = lambda: (  # noqa: E731
        1)
    f()
    K().method()


def short(function):
    """A function's name without its qualifying prefix (handlers give the
    qualified name where the Python has one)."""
    return function.rsplit(".", 1)[-1]


def profile_exits():
    """[(function, line)] of every 'return' sys.setprofile sees in this file
    during workload()."""
    seen = []

    def prof(frame, event, arg):
        if event == "return" and frame.f_code.co_filename == HERE and frame.f_code.co_name != "workload":
            seen.append((frame.f_code.co_name, frame.f_lineno))
    sys.setprofile(prof)
    try:
        workload()
    finally:
        sys.setprofile(None)
    return seen


def handler_exits():
    seen = []
    h = stackwatch.add_handler(lambda ev: seen.append((ev.kind, short(ev.function), ev.lineno)),
                               events="calls", where=HERE)
    try:
        workload()
    finally:
        h.remove()
    return [e for e in seen if e[1] != "workload"]


def test_exit_lines_are_those_setprofile_sees():
    workload()   # (code objects warmed, specialised)
    expected = profile_exits()
    got = handler_exits()
    exits = [(f, line) for kind, f, line in got if kind in ("return", "yield", "unwind")]
    assert exits == expected, (exits, expected)
    kinds = {(kind, f) for kind, f, _ in got}
    # What the program does: yields, a return from a generator, unwinds.
    assert {("yield", "gen"), ("return", "gen"), ("unwind", "inner"), ("unwind", "outer")} <= kinds, kinds
    first = early.__code__.co_firstlineno
    assert [line for f, line in exits if f == "early"] == [first + 4, first + 2]
    # Calls and resumes still give the first line.
    assert all(line == globals()[f].__code__.co_firstlineno for kind, f, line in got
               if kind == "call" and f in ("early", "gen", "inner", "outer"))
