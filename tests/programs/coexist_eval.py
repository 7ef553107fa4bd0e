"""Another PEP 523 frame evaluator (tests/programs/other_eval.c, a counting
evaluator that chains to the previous one) together with stackwatch
(tests/py/events/test_coexist_eval.py). Runs in its own process so that an evaluator
left installed, or a crash, cannot affect other tests.

    coexist_eval.py SO SCENARIO TMPDIR RESULT

SO is the compiled other_eval extension. Each scenario appends what it
observes to a log that is written to RESULT as JSON (after every step, so a
crash leaves the steps before it). Trace files go to TMPDIR.
"""
import importlib.util
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coexist_work as w  # noqa: E402

import stackwatch  # noqa: E402

so, scenario, tmpdir, result = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("other_eval", so)
oe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(oe)
oe.watch(w.fib.__code__)
log = {}


def note(key, value):
    log[key] = value
    with open(result, "w") as f:
        json.dump(log, f)


def state(key):
    note(key, {"watched": oe.watched(), "is_current": oe.is_current(),
               "current_is_default": oe.current_is_default(),
               "sw_tracing": stackwatch.is_tracing()})


def trace(name):
    return os.path.join(tmpdir, name)


def stop(key):
    s = stackwatch.stop()
    note(key, {"path": s.path, "error": s.error})


if scenario == "installed_before":
    # other evaluator first; stackwatch starts and stops while it runs
    oe.install()
    w.fib(12)
    state("alone")
    stackwatch.start(trace("a.swt"))
    w.workload()
    state("together")
    stop("sw")
    state("after_sw_stop")
    w.fib(12)
    state("after_sw_stop_run")
    note("prev_is_default", oe.prev_is_default())
    oe.uninstall()
    state("uninstalled")
elif scenario == "installed_during":
    # stackwatch first; the other evaluator comes and goes in the middle
    stackwatch.start(trace("a.swt"))
    w.workload()
    oe.install()
    w.workload()
    state("together")
    oe.uninstall()
    w.workload()
    state("other_gone")
    stop("sw")
    state("end")
elif scenario == "outlives_stackwatch":
    # stackwatch first, the other evaluator installed on top of it;
    # stackwatch stops first (it cannot unlink itself), the other goes on
    stackwatch.start(trace("a.swt"))
    w.workload()
    oe.install()
    w.workload()
    state("together")
    stop("sw")
    w.fib(12)
    state("after_sw_stop")
    oe.uninstall()
    w.fib(12)
    state("other_gone")
elif scenario == "restart_under_other":
    # as outlives_stackwatch, then stackwatch starts again while the other
    # evaluator (which still chains to stackwatch's) is installed
    stackwatch.start(trace("a.swt"))
    oe.install()
    w.fib(12)
    stop("sw")
    state("after_sw_stop")
    stackwatch.start(trace("b.swt"))
    note("restarted", True)
    w.workload()
    state("together_again")
    stop("sw2")
    oe.uninstall()
    w.fib(12)
    state("end")
elif scenario == "restart_after_other":
    # as outlives_stackwatch; after the other evaluator is gone, stackwatch
    # runs another session: exact, and nothing is left installed after it
    stackwatch.start(trace("a.swt"))
    oe.install()
    w.fib(12)
    stop("sw")
    oe.uninstall()
    state("other_gone")
    stackwatch.start(trace("b.swt"))
    w.workload()
    stop("sw2")
    state("end")
else:
    raise SystemExit(f"unknown scenario {scenario}")
note("done", True)
