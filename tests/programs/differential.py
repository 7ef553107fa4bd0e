"""Runs one corpus case twice, under a sys.setprofile recorder (the ground
truth) and under stackwatch, and prints both call sequences as JSON:
{"truth": {"main": [...], "threads": [[...], ...]}, "traced": {...}}.

Usage: python differential.py CASE TRACE_PATH [c_calls] [handler]
       python differential.py CASE TRACE_PATH all

(all: the four ways, python or c_calls, file or handler, one after the
other in this one process, as {"python file": {...}, ...}.)

With c_calls, calls of builtin functions are compared too (c_call/c_return,
named as native/ext/tracer/ccalls.c names them). With handler, the stackwatch side
is a Python handler (stackwatch.add_handler) instead of the file tracer.
"""
import json
import os
import sys
import threading
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

import stackwatch  # noqa: E402
from stackwatch import Trace  # noqa: E402

NEW_NAMES = sys.version_info >= (3, 11)


def code_name(code):
    return code.co_qualname if NEW_NAMES else code.co_name


def c_name(fn):
    self = getattr(fn, "__self__", None)
    if self is None or isinstance(self, types.ModuleType):
        mod = getattr(fn, "__module__", None)
        return f"{mod}.{fn.__name__}" if mod else fn.__name__
    tp = self if isinstance(self, type) else type(self)
    return f"{tp.__name__}.{fn.__name__}"


def ground_truth(fn, c_calls=False):
    events = {}
    lock = threading.Lock()

    def rec(frame, event, arg):
        if c_calls and event in ("c_call", "c_return", "c_exception"):
            with lock:
                key = id(threading.current_thread())
                kind = "c_call" if event == "c_call" else "c_return"
                events.setdefault(key, []).append((kind, c_name(arg)))
        elif event in ("call", "return"):
            with lock:
                # Keyed by the Thread object: idents are reused by later threads.
                key = id(threading.current_thread())
                events.setdefault(key, []).append((event, code_name(frame.f_code)))

    threading.setprofile(rec)
    sys.setprofile(rec)
    try:
        fn()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    main = events.pop(id(threading.current_thread()), [])
    return main, list(events.values())


def subtree(seq, root):
    """The events from the first call of `root` to its matching return."""
    out, depth = [], 0
    for kind, name in seq:
        if not out and not (kind == "call" and name == root):
            continue
        out.append((kind, name))
        depth += 1 if kind in ("call", "c_call") else -1
        if depth == 0:
            break
    return out


# Weakref callbacks run when an object dies. When that is depends on who
# holds references, and a sys.setprofile recorder changes that itself (it
# materialises frame objects, which keep locals alive), so their position in
# the sequence is not a property of the program. Their subtrees are left out
# of both sides; everything else must match exactly.
OBSERVER_DEPENDENT = ("_remove", "WeakSet.__init__.<locals>._remove")


def drop_subtrees(seq, names):
    out, skip = [], 0
    for kind, name in seq:
        if skip:
            skip += 1 if kind in ("call", "c_call") else -1
            continue
        if kind == "call" and name in names:
            skip = 1
            continue
        out.append((kind, name))
    return out


# Inside Thread.start and Thread.join, which calls are made depends on
# whether the other thread has got there yet (start waits for the thread
# only if it has not signalled; join's bookkeeping of finished threads
# checks every thread whose end CPython has not yet completed), not on the
# program. In the threads case both sides keep these calls and their
# returns, and leave out what is inside them.
SCHEDULER_DEPENDENT = {"threads": ("Thread.start", "Thread.join") if NEW_NAMES else ("start", "join")}


def drop_interiors(seq, names):
    out, depth = [], 0
    for kind, name in seq:
        if depth:
            depth += 1 if kind in ("call", "c_call") else -1
            if depth:
                continue
        elif kind == "call" and name in names:
            depth = 1
        out.append((kind, name))
    return out


def normalise(seq):
    m = {"call": "call", "resume": "call", "return": "return", "yield": "return", "unwind": "return",
         "c_call": "c_call", "c_return": "c_return"}
    return [(m[k], n) for k, n in seq if k in m]


def by_handler(fn, c_calls):
    """The sequences a stackwatch handler sees: (main, [per thread])."""
    events, lock = {}, threading.Lock()

    def on(ev):
        with lock:
            key = id(threading.current_thread())
            name = ev.name if ev.kind.startswith("c_") else ev.function
            events.setdefault(key, []).append((ev.kind, name))

    h = stackwatch.add_handler(on, events=["calls", "c_call", "c_return", "c_raise"] if c_calls else "calls")
    try:
        fn()
    finally:
        h.remove()
    main = events.pop(id(threading.current_thread()), [])
    m = {"c_raise": "c_return"}
    conv = lambda seq: normalise([(m.get(k, k), n) for k, n in seq])
    return conv(main), [conv(s) for s in events.values()]


def compare(fn, case, path, c_calls, handler):
    """{"truth", "traced", "dropped", "error", "damage"} of one way of
    tracing fn (the file tracer into path, or a handler)."""
    root = code_name(fn.__code__)
    run_name = "Thread.run" if NEW_NAMES else "run"
    t_main, t_threads = ground_truth(fn, c_calls)
    fn()
    fn()
    if handler:
        h_main, h_threads = by_handler(fn, c_calls)
        traced_main = subtree(h_main, root)
        traced_threads = [subtree(s, run_name) for s in h_threads]
        summary = types.SimpleNamespace(dropped=0, error=None)
        damage = None
    else:
        stackwatch.start(path, c_calls=c_calls)
        fn()
        summary = stackwatch.stop()
        tr = Trace(path)
        damage = tr.damage
        traced_main, traced_threads = [], []
        for i, th in enumerate(tr.threads):
            seq = normalise(tr.call_sequence(i))
            if th["ident"] == threading.get_ident():
                traced_main = subtree(seq, root)
            else:
                traced_threads.append(subtree(seq, run_name))

    def clean(seq):
        return drop_interiors(drop_subtrees(seq, OBSERVER_DEPENDENT), SCHEDULER_DEPENDENT.get(case, ()))

    truth = {"main": clean(subtree(t_main, root)),
             "threads": sorted(clean(s) for s in (subtree(s, run_name) for s in t_threads) if s)}
    traced = {"main": clean(traced_main), "threads": sorted(clean(s) for s in traced_threads if s)}
    return {"truth": truth, "traced": traced, "dropped": summary.dropped, "error": summary.error, "damage": damage}


# The ways of tracing compared, in the order one process runs them all.
WAYS = [(c_calls, handler) for c_calls in (False, True) for handler in (False, True)]


def main():
    case, path = sys.argv[1], sys.argv[2]
    fn = corpus.CASES[case]
    fn()  # warm up: let the adaptive interpreter specialise call sites
    if "all" in sys.argv[3:]:
        # every way in one process (tests/py/tracer/test_differential.py),
        # each with its own ground truth taken just before it, keyed
        # "python file", "c_calls handler", ...
        out = {}
        for c_calls, handler in WAYS:
            key = f"{'c_calls' if c_calls else 'python'} {'handler' if handler else 'file'}"
            out[key] = compare(fn, case, f"{path}.{key.replace(' ', '-')}", c_calls, handler)
        json.dump(out, sys.stdout)
        return
    json.dump(compare(fn, case, path, "c_calls" in sys.argv[3:], "handler" in sys.argv[3:]), sys.stdout)


if __name__ == "__main__":
    main()
