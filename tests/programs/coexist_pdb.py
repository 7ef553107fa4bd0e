"""pdb and stackwatch in one process (tests/py/events/test_coexist_pdb.py), driven by
commands on stdin.

    coexist_pdb.py set_trace TRACE RESULT
        stackwatch traces; pdb.set_trace() is called in the middle.
    python -m pdb coexist_pdb.py plain TRACE RESULT
        pdb runs the whole program (breakpoints set from stdin); the program
        starts and stops stackwatch itself.

Either way the traced part computes fib(12), fib(10) and one workload().
RESULT gets JSON with stackwatch's TraceSummary fields and what
sys.gettrace() was before start and after stop.
"""
import json
import os
import pdb
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coexist_work as w  # noqa: E402

import stackwatch  # noqa: E402


def main():
    mode, trace, result = sys.argv[1:4]
    tracer_before = sys.gettrace()
    stackwatch.start(trace)
    x = w.fib(12)
    if mode == "set_trace":
        pdb.Pdb(nosigint=True).set_trace()
    y = w.fib(10)
    w.workload()
    summary = stackwatch.stop()
    tracer_after = sys.gettrace()
    with open(result, "w") as f:
        json.dump({"x": x, "y": y, "error": summary.error,
                   "tracer_before": repr(tracer_before), "tracer_after": repr(tracer_after),
                   "same_tracer": tracer_before == tracer_after}, f)


if __name__ == "__main__":
    main()
