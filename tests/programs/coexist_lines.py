"""coverage.py and stackwatch's line events in one process
(tests/py/events/test_coexist_coverage.py).

    coexist_lines.py run RESULT TRACE sw|plain
        meant to run under `coverage run`: with "sw", stackwatch records
        line events of coexist_work.py (file tracer + a handler) around the
        middle workload; with "plain" the same program without stackwatch
        (coverage's baseline).
    coexist_lines.py api RESULT TRACE sw|plain DATAFILE
        with "sw", stackwatch's line events are on for the whole program;
        coverage is started and stopped through its API around the middle
        workload, measuring into DATAFILE.

RESULT gets JSON: the handler's line counts {lineno: n} and the session's
error.
"""
import json
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coexist_work as w  # noqa: E402

import stackwatch  # noqa: E402

GLOB = "*coexist_work.py"


def main():
    mode, result, trace, sw = sys.argv[1:5]
    sw = sw == "sw"
    seen = Counter()
    out = {"error": None}

    def on_line(ev):
        seen[ev.lineno] += 1

    def sw_on():
        stackwatch.start(trace, events=["line"], lines=[GLOB])
        return stackwatch.add_handler(on_line, events="line", where=GLOB)

    def sw_off(h):
        h.remove()
        out["error"] = stackwatch.stop().error

    if mode == "run":
        w.workload()
        h = sw_on() if sw else None
        w.workload()
        if h:
            sw_off(h)
        w.workload()
    else:
        import coverage
        h = sw_on() if sw else None
        w.workload()
        cov = coverage.Coverage(data_file=sys.argv[5], config_file=False)
        cov.start()
        w.workload()
        cov.stop()
        cov.save()
        w.workload()
        if h:
            sw_off(h)
    out["lines"] = dict(seen)
    with open(result, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
