"""The per-task analysis (stackwatch.tasks.analysis) of a document made
by hand (hand_doc.py), checked against its timeline worked out by hand;
and its text report."""
import pytest

from hand_doc import DOC, END_NS, EXPECTED, HOSTILE
from stackwatch.taskviews import analysis, report

# Python over a document, the same on every version.
pytestmark = pytest.mark.versions("3.12")


def test_times_per_task_equal_the_hand_worked_timeline():
    a = analysis.analyze(DOC, end_ns=END_NS)
    assert set(a["tasks"]) == set(EXPECTED)
    for name, want in EXPECTED.items():
        got = a["tasks"][name]
        assert {k: got[k] for k in want} == want, name
        # Every task's time is accounted for, once: from its start to its end.
        assert got["running_ns"] + got["runnable_ns"] + got["blocked_ns"] == got["end_ns"] - got["start_ns"], name
    assert a["span_ns"] == END_NS


def test_blocking_profile_and_longest_waits_say_who_ended_them():
    a = analysis.analyze(DOC, end_ns=END_NS)
    profile = [(p["reason"], p["function"], p["line"], p["waits"], p["total_ns"]) for p in a["blocking_profile"]]
    assert profile == [("join", "driver", 31, 1, 70), ("queue", "consumer", 60, 1, 20), ("lock", "lock_it", 12, 1, 10)]
    waits = [(w["task"], w["duration_ns"], w["ended_by"], w["ended_how"]) for w in a["longest_waits"]]
    # main's join ended when a switched back to it; a's queue wait by the
    # hostile task's wake (at put); T2's lock by main's wake.
    assert waits == [("main", 70, "worker a", "switch"), ("worker a", 20, HOSTILE, "wake"), ("T2", 10, "main", "wake")]
    assert a["longest_waits"][1]["end_site"]["function"] == "put"


def test_text_report_lists_every_task_and_wait():
    lines = []
    report.write(lines.append, DOC, analysis.analyze(DOC, end_ns=END_NS), "t.swt")
    text = "\n".join(lines)
    assert lines[0] == "t.swt: 4 tasks, 15 task events over 120ns"
    row = next(x for x in lines if x.rstrip().endswith("queue 20ns") and "worker a" in x)
    assert row.split()[:5] == ["40ns", "30ns", "20ns", "2", "1"]
    assert "greenlet (workers)" in row
    assert "driver (prog.py:31)" in text and "worker a (switch at finish (prog.py:90))" in text
    assert HOSTILE in text
