"""Call trees over time (stackwatch.profiler.history): a tree per cycle in a bounded
history, time windows, merging, omitted files, dask-like dicts, watch()
with a stop condition, and bad arguments. Ground truths: the merge of a
whole history is the whole-run tree; merging a tree with itself doubles
every count; a program that runs a() then b() has only a() in the window
over its first part."""
import functools
import sys
import threading
import time

import pytest

import stackwatch
from conftest import needs_sampler, page_data
from mixed_workload import count_of, spin_until

# The history's trees, windows and merges are the same code on every
# Python; the sampler under them is tested on all five elsewhere.
pytestmark = [needs_sampler, pytest.mark.versions("3.9", "3.13")]


# Each spins for `seconds`, then, given a profiler or history `p`, until it
# has stored `samples` samples (the tests count samples: on a loaded machine
# the sampler misses rounds, so they wait for samples, not for a time).
def phase_a(seconds, p=None, samples=0):
    spin_until(time.perf_counter() + seconds, p=p, samples=samples)


def phase_b(seconds, p=None, samples=0):
    spin_until(time.perf_counter() + seconds, p=p, samples=samples)


def counts(tree):
    """{(name, filename, line) path: (count, self, time_ns)} of a tree."""
    out = {}
    stack = [((), tree)]
    while stack:
        path, node = stack.pop()
        out[path] = (node["count"], node["self"], node["time_ns"])
        for c in node["children"]:
            stack.append((path + ((c["name"], c["filename"], c["line"]),), c))
    return out


@pytest.fixture(scope="module")
def a_then_b():
    """A profiler over a() for ~0.6 s then b() for ~0.6 s, cycles of 100 ms;
    the wall-clock time of the switch."""
    with stackwatch.Profiler(interval="1ms", cycle="100ms", maxlen=None) as p:
        phase_a(0.6, p, 300)
        switch = time.time()
        phase_b(0.6, p, 600)
    return p, switch


@pytest.mark.timing
def test_history_has_a_tree_per_cycle_in_time_order(a_then_b):
    p, _ = a_then_b
    h = p.history()
    entries = h.entries()
    st = p.stats()
    run_s = (st["stop_ns"] - st["start_ns"]) / 1e9
    # A cycle in which the sampler took no sample (a loaded machine can
    # starve it that long) has no entry: at most one entry per cycle, each
    # a whole number of cycles after the first.
    assert 1 <= len(entries) <= run_s / 0.1 + 2, (len(entries), run_s)
    assert len(h) == len(entries)
    for e, nxt in zip(entries, entries[1:]):
        assert e.start < e.stop <= nxt.start
        assert nxt.start - e.start >= 0.1 - 1e-6
        cycles = (nxt.start - entries[0].start) / 0.1
        assert abs(cycles - round(cycles)) < 1e-4, cycles
    for e in entries[:-1]:
        assert abs((e.stop - e.start) - 0.1) < 1e-6
    assert sum(e.samples for e in entries) == st["stored"]
    assert all(e.thread_ids == (threading.main_thread().ident,) for e in entries)
    # Each entry, as iterated, is its own samples.
    assert [t.total for _, _, t in h] == [e.samples for e in entries]


@pytest.mark.timing
def test_window_over_the_first_part_has_a_not_b(a_then_b):
    p, switch = a_then_b
    h = p.history()
    first = stackwatch.get_profile(h, start=None, stop=switch - 0.25).tree()
    last = stackwatch.get_profile(h, start=switch + 0.25).tree()
    assert count_of(first, "phase_a") > 30 and count_of(first, "phase_b") == 0
    assert count_of(last, "phase_b") > 30 and count_of(last, "phase_a") == 0
    # A window in the future is empty; one over everything is everything.
    assert stackwatch.get_profile(h, start=time.time() + 10).total == 0
    assert stackwatch.get_profile(h).total == p.stats()["stored"]


def test_whole_history_merged_is_the_whole_run_tree(a_then_b):
    p, _ = a_then_b
    h = p.history()
    assert counts(h.tree().tree()) == counts(p.tree())
    per_cycle = stackwatch.merge(*[t for _, _, t in h])
    assert per_cycle == h.tree()
    assert counts(per_cycle.tree()) == counts(p.tree())


def test_merging_a_tree_with_itself_doubles_every_count(a_then_b):
    p, _ = a_then_b
    t = p.history().tree()
    twice = stackwatch.merge(t, t)
    one, two = counts(t.tree()), counts(twice.tree())
    assert one.keys() == two.keys()
    for k, (c, s, ns) in one.items():
        assert two[k] == (2 * c, 2 * s, 2 * ns), k
    assert t.merge(t) == twice
    assert twice.total == 2 * t.total


def test_to_dict_is_dask_shaped(a_then_b):
    p, _ = a_then_b
    d = p.history().tree().to_dict()
    assert d["identifier"] == "root" and d["count"] == p.stats()["stored"]
    stack, found = [d], []
    while stack:
        node = stack.pop()
        for ident, c in node["children"].items():
            assert c["identifier"] == ident
            stack.append(c)
            if c["description"]["name"] == "phase_a":
                found.append(c)
    (a,) = found
    desc = a["description"]
    assert a["identifier"] == f"phase_a;{__file__};{phase_a.__code__.co_firstlineno}"
    assert desc == {"filename": __file__, "name": "phase_a", "line_number": phase_a.__code__.co_firstlineno,
                    "line": "def phase_a(seconds, p=None, samples=0):"}
    assert a["count"] == sum(c["count"] for c in a["children"].values()) + a["self"]


@pytest.mark.timing
def test_maxlen_keeps_the_newest_and_counts_the_rest():
    with stackwatch.Profiler(interval="1ms", cycle="50ms", maxlen=3) as p:
        phase_a(0.5)
        give_up = time.perf_counter() + 30   # (cycles with samples, not time)
        while p.history().info()["evicted"] < 5 and time.perf_counter() < give_up:
            phase_a(0.05)
    h = p.history()
    entries = h.entries()
    assert len(entries) == 3
    info = h.info()
    assert info["evicted"] >= 5
    assert info["evicted_samples"] + sum(e.samples for e in entries) == p.stats()["stored"]
    assert entries[-1].stop <= time.time()


@pytest.mark.timing
def test_omit_removes_frames_and_attaches_children_to_the_parent(tmp_path):
    helper = tmp_path / "omit_me_helper.py"
    helper.write_text("def middle(f, s):\n    return f(s)\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import omit_me_helper
    finally:
        sys.path.remove(str(tmp_path))
    with stackwatch.Profiler(interval="1ms", omit=["*/omit_me_*.py"]) as p:
        omit_me_helper.middle(functools.partial(phase_a, p=p, samples=200), 0.3)   # (no frame of its own)
    with stackwatch.Profiler(interval="1ms") as q:
        omit_me_helper.middle(functools.partial(phase_a, p=q, samples=200), 0.3)
    assert count_of(p.tree(), "middle") == 0 and count_of(p.tree(), "phase_a") > 30
    assert count_of(q.tree(), "middle") > 30
    # phase_a hangs directly under the test function.
    here = sys._getframe().f_code.co_name

    def parents_of(tree, name):
        """{parent name: samples of `name` under it}"""
        found, stack = {}, [(None, tree)]
        while stack:
            parent, node = stack.pop()
            if node["name"] == name:
                found[parent] = found.get(parent, 0) + node["count"]
            stack += [(node["name"], c) for c in node["children"]]
        return found

    # The sampler reads the thread while it runs, so a sample taken as the
    # calls return may rarely join two instants (pystack.c retries those);
    # all but such strays are where they belong.
    for tree, parent in ((p.tree(), here), (q.tree(), "middle")):
        found = parents_of(tree, "phase_a")
        assert found.get(parent, 0) >= 0.97 * sum(found.values()), found
    assert "middle" not in parents_of(p.tree(), "phase_a")
    assert count_of(p.history().tree().tree(), "middle") == 0


@pytest.mark.timing
def test_watch_stops_when_asked_and_is_live_meanwhile():
    # stop() is asked by the watch's own thread; the test says when it
    # answers True (not a clock: on a loaded machine phase_a's samples may
    # take longer than any fixed deadline).
    asked = threading.Event()
    h = stackwatch.watch(interval="1ms", cycle="100ms", stop=asked.is_set)
    assert h.running
    phase_a(0.25, h, 100)
    seen = len(h)
    assert seen >= 1
    t_end = time.time() + 30
    while len(h) <= seen and time.time() < t_end:
        phase_b(0.05)
    assert h.running and len(h) > seen   # live: cycles go on being added
    asked.set()
    while h.running and time.time() < t_end:
        phase_b(0.05)
    assert not h.running
    tree = stackwatch.get_profile(h)
    assert count_of(tree.tree(), "phase_a") > 20
    # The helper thread that polls stop() is not in the profile.
    assert count_of(tree.tree(), "poll") == 0
    h.stop()   # stopping again is harmless


@pytest.mark.timing
def test_watch_one_thread():
    main = threading.get_ident()
    done = threading.Event()

    def other():
        while not done.is_set():
            phase_b(0.01)
    t = threading.Thread(target=other)
    t.start()
    try:
        h = stackwatch.watch(thread_id=main, cycle="100ms")
        phase_a(0.3)
        give_up = time.perf_counter() + 30   # (samples of each thread, not time)
        while not (count_of(h.tree().tree(), "phase_a") > 20 and
                   count_of(h.tree(thread_id=t.ident).tree(), "phase_b") > 20) and time.perf_counter() < give_up:
            phase_a(0.01)
        h.stop()
    finally:
        done.set()
        t.join()
    mine = h.tree().tree()
    assert count_of(mine, "phase_a") > 20 and count_of(mine, "phase_b") == 0
    everyone = h.tree(thread_id=t.ident).tree()
    assert count_of(everyone, "phase_b") > 20
    assert [x["thread_id"] for x in h.threads()] == [main]


@pytest.mark.parametrize("kwargs, message", [
    ({"cycle": "1ms"}, "cycle must be from 10ms to 1h"),
    ({"cycle": "2 parsecs"}, "invalid cycle"),
    ({"cycle": "7200s"}, "cycle must be from 10ms to 1h"),
    ({"maxlen": 0}, "maxlen must be a positive integer or None"),
    ({"maxlen": -3}, "maxlen must be a positive integer or None"),
    ({"maxlen": 2.5}, "maxlen must be a positive integer or None"),
    ({"maxlen": True}, "maxlen must be a positive integer or None"),
    ({"omit": [3]}, "omit patterns must be non-empty strings"),
    ({"omit": [""]}, "omit patterns must be non-empty strings"),
    ({"omit": 5}, "omit must be a glob pattern or a sequence"),
    ({"omit": ["*"] * 65}, "at most 64 omit patterns"),
    ({"interval": "10us"}, "below the minimum of 20us"),
    ({"stop": 3}, "stop must be a callable"),
    ({"thread_id": -1}, "thread_id must be a thread ident"),
])
def test_bad_arguments_are_value_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        stackwatch.watch(**kwargs)


def test_bad_windows_and_merges():
    with stackwatch.Profiler(cycle="100ms") as p:
        phase_a(0.05)
    h = p.history()
    with pytest.raises(ValueError, match="is after stop"):
        stackwatch.get_profile(h, start=10, stop=5)
    with pytest.raises(ValueError, match="wall-clock seconds"):
        stackwatch.get_profile(h, start="yesterday")
    with pytest.raises(ValueError, match="wall-clock seconds"):
        stackwatch.get_profile(h, stop=float("nan"))
    with pytest.raises(TypeError, match="takes a History"):
        stackwatch.get_profile({}, 0, 1)
    with pytest.raises(TypeError, match="takes CallTree or History"):
        stackwatch.merge(h.tree(), {"count": 1})
    assert stackwatch.merge().total == 0
    assert stackwatch.merge(h).total == h.tree().total
    with pytest.raises(ValueError, match="unknown profile format"):
        h.write("x", "svg")


def test_trees_and_windows_write_every_format(a_then_b, tmp_path):
    import gzip
    import json
    p, switch = a_then_b
    h = p.history()
    tree = stackwatch.get_profile(h, stop=switch - 0.25)
    for fmt, name in (("collapsed", "t.txt"), ("speedscope", "t.json"), ("html", "t.html"), ("pprof", "t.pb.gz")):
        tree.write(tmp_path / name, fmt)
        h.write(tmp_path / ("w-" + name), fmt, stop=switch - 0.25)
    lines = (tmp_path / "t.txt").read_text().splitlines()
    assert sum(int(x.rpartition(" ")[2]) for x in lines) == tree.total
    assert (tmp_path / "w-t.txt").read_text() == (tmp_path / "t.txt").read_text()
    assert all("phase_b" not in x for x in lines)
    doc = json.loads((tmp_path / "t.json").read_text())
    assert len(doc["profiles"]) == 1 and sum(len(s) > 0 for s in doc["profiles"][0]["samples"]) > 0
    names = [x["name"] for x in json.loads((tmp_path / "w-t.json").read_text())["profiles"]]
    assert names == [f"MainThread ({threading.main_thread().ident})"]
    data = page_data((tmp_path / "w-t.html").read_text())
    assert data["threads"][0]["samples"] == tree.total
    assert gzip.decompress((tmp_path / "t.pb.gz").read_bytes())
    with pytest.raises(ValueError, match="unknown profile format"):
        tree.write(tmp_path / "x", "svg")


def deep(n, seconds):
    if n:
        return deep(n - 1, seconds)
    phase_a(seconds)


def test_deep_stacks_compare_and_convert_without_recursion():
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(5000)
    try:
        with stackwatch.Profiler(interval="1ms", max_depth=4096) as p:
            deep(3000, 0.2)
    finally:
        sys.setrecursionlimit(limit)
    t = p.history().tree()
    assert t == stackwatch.merge(t) and t != stackwatch.merge(t, t)
    d, depth = t.to_dict(source=False), 0
    while d["children"]:
        d = max(d["children"].values(), key=lambda c: c["count"])
        depth += 1
    assert depth > 3000
