"""Call counts per function equal cProfile's for the same program."""
import cProfile
import pstats

import stackwatch
from stackwatch import Trace

import corpus


def workload():
    corpus.case_recursion()
    corpus.case_generators()
    corpus.case_exceptions()
    corpus.case_objects_hot_loop()
    corpus.case_misc()


def test_call_counts_equal_cprofile(tmp_path):
    workload()
    prof = cProfile.Profile()
    prof.enable()
    workload()
    prof.disable()
    st = pstats.Stats(prof).stats
    expected = {}
    for (filename, line, name), (cc, nc, tt, ct, callers) in st.items():
        if filename == corpus.__file__:
            key = (name.split(".")[-1], line)
            expected[key] = expected.get(key, 0) + nc
    p = str(tmp_path / "c.swt")
    with stackwatch.trace(p):
        workload()
    t = Trace(p)
    got = {}
    for r in t.stats():
        c = t.codes[r.code]
        if c.filename == corpus.__file__:
            key = (c.name, c.firstlineno)
            got[key] = got.get(key, 0) + r.calls
    # cProfile names comprehensions/lambdas like we do; compare all it saw.
    assert expected
    for key, n in expected.items():
        assert got.get(key) == n, (key, n, got.get(key))
