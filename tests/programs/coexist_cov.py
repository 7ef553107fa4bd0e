"""coverage.py and stackwatch in one process (tests/py/events/test_coexist_coverage.py).

    coexist_cov.py run TRACE RESULT [c_calls]
        meant to run under `coverage run`: stackwatch is started and stopped
        in the middle, while coverage measures.
    coexist_cov.py api TRACE RESULT DATAFILE [c_calls]
        stackwatch traces everything; coverage is started and stopped through
        its API in the middle (it measures into DATAFILE).

A line ending in a "cov" comment that lists modes must be executed in
exactly those modes (the test reads these markers). RESULT gets JSON: the tracer state coverage left
behind at each phase, and stackwatch's TraceSummary fields.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coexist_work as w  # noqa: E402

import stackwatch  # noqa: E402


def tracer_state():
    mon = getattr(sys, "monitoring", None)
    tr = sys.gettrace()
    return {
        "gettrace": type(tr).__name__ if tr is not None else None,
        "gettrace_id": id(tr) if tr is not None else None,
        "monitoring_tool": mon.get_tool(mon.COVERAGE_ID) if mon else None,
    }


def before():
    return "before"          # cov: run


def during():
    return "during"          # cov: run, api


def after():
    return "after"           # cov: run


def never():
    return "never"           # cov:


def main():
    mode, trace, result = sys.argv[1:4]
    c_calls = sys.argv[-1] == "c_calls"
    states = {}
    if mode == "run":
        states["before"] = tracer_state()
        before()
        w.workload()
        stackwatch.start(trace, c_calls=c_calls)
        states["during"] = tracer_state()
        during()
        w.workload()
        summary = stackwatch.stop()
        states["after"] = tracer_state()
        after()
        w.workload()
    else:
        import coverage
        stackwatch.start(trace, c_calls=c_calls)
        states["before"] = tracer_state()
        before()
        w.workload()
        cov = coverage.Coverage(data_file=sys.argv[4], config_file=False)
        cov.start()
        states["during"] = tracer_state()
        during()
        w.workload()
        cov.stop()
        cov.save()
        states["after"] = tracer_state()
        after()
        w.workload()
        summary = stackwatch.stop()
    with open(result, "w") as f:
        json.dump({"states": states, "error": summary.error, "events": summary.events,
                   "is_tracing": stackwatch.is_tracing()}, f)


if __name__ == "__main__":
    main()
