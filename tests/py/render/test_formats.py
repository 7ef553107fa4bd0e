"""The registry of output formats (stackwatch.render.formats): every place
that names a format or an output file agrees with it, and the rule that
trees of one profiler snapshot are rendered on the profile's own function
table (so the live profiler writes what it always wrote)."""
import json
import threading
import time

import pytest

from mixed_workload import count_of, spin_until
from stackwatch import _native
from stackwatch.render import formats
from conftest import needs_sampler



def test_every_entry_is_whole():
    kinds = {formats.TREES, formats.PROFILES, formats.TRACES}
    for name, f in formats.FORMATS.items():
        # TASKS: written from a trace's task events (the sequence diagram).
        assert f.name == name and f.fits and f.fits <= kinds and (f.takes in f.fits or
                                                                  (f.takes, f.fits) == (formats.TASKS, {formats.TRACES})), f
        assert f.suffixes and all(s.startswith(".") and s == s.lower() for s in f.suffixes), f
        assert isinstance(f.binary, bool)
        assert f.write is not None or f.takes == formats.TRACES, f
        assert formats.default_output(name, pid=7) == "stackwatch-7" + f.suffixes[0]


def test_names_are_what_the_api_and_the_command_line_offer():
    from stackwatch.cli import export, profile
    from stackwatch.profiler import FORMATS
    assert FORMATS == profile.FORMATS == ("collapsed", "speedscope", "html", "pprof", "pstats", "callgrind",
                                          "stackwatch")
    assert export.PROFILE_FORMATS == ("collapsed", "speedscope", "html", "pprof", "pstats", "callgrind")
    trees = ("collapsed", "speedscope", "html", "pprof", "pstats", "callgrind")
    assert export.TRACE_FORMATS == trees + ("perfetto", "chrome", "ctf", "sequence")
    assert formats.names(formats.TRACES) == trees + ("swt", "perfetto", "chrome", "ctf", "sequence")


def test_an_output_name_implies_its_format():
    fits = (formats.TREES, formats.PROFILES)
    for name in formats.names(*fits):
        assert formats.of_output(formats.default_output(name), *fits) == name
    cases = {"p.JSON": "speedscope", "p.htm": "html", "x.pprof": "pprof", "a.pb.gz": "pprof",
             "r.swprof": "stackwatch", "s.txt": "collapsed"}
    for path, name in cases.items():
        assert formats.of_output(path, *fits) == name, path
    # A trace's x.json is the timeline VizTracer and Chrome users open; the
    # longer suffix still names speedscope.
    cases = {"t.json": "chrome", "t.speedscope.json": "speedscope", "t.pftrace": "perfetto",
             "t.html": "html", "t.prof": "pstats", "t.sequence.html": "sequence"}
    for path, name in cases.items():
        assert formats.of_output(path, formats.TRACES) == name, path


@pytest.mark.parametrize("path", ["out.dat", "out", "out.svg", "p.pftrace"])
def test_an_output_name_that_names_no_format_is_an_error(path):
    # Never a silent guess: the error lists every ending that names a format.
    with pytest.raises(ValueError) as e:
        formats.of_output(path, formats.TREES, formats.PROFILES)
    assert str(e.value).startswith(f"'{path}': its ending names no known format (known: ")
    for f in formats.FORMATS.values():
        for suffix in f.suffixes:
            assert (f"{suffix} ({f.name})" in str(e.value)) == (f.name in formats.names(formats.TREES,
                                                                                            formats.PROFILES))


def test_unknown_names_list_what_fits():
    with pytest.raises(ValueError, match=r"unknown profile format 'swt' \(choose from: collapsed, speedscope, "
                                         r"html, pprof, pstats, callgrind\)$"):
        formats.get("swt", formats.TREES)
    assert formats.get("stackwatch", formats.TREES, formats.PROFILES).takes == formats.PROFILES


def frames(doc):
    return [(f["name"], f["file"], f["line"]) for f in json.loads(doc)["shared"]["frames"]]


def sampled_in(p, name):
    """Spins until the profiler has sampled this thread inside `name` (on a
    loaded machine that can take a while), at most 30 s."""
    deadline = time.perf_counter() + 30
    while time.perf_counter() < deadline:
        spin_until(time.perf_counter() + 0.01)
        try:
            if count_of(p.tree(threading.get_ident()), name):
                return
        except KeyError:    # no sample of this thread yet
            pass


def spin_a(p):
    sampled_in(p, "spin_a")


def spin_b(p):
    sampled_in(p, "spin_b")


@needs_sampler
def test_a_snapshot_is_rendered_on_the_profiles_table():
    from stackwatch.profiler import Profiler
    with Profiler(interval="500us") as p:
        t = threading.Thread(target=spin_a, args=(p,))
        t.start()
        t.join()
        spin_b(p)
    snap = p._s.thread_trees()
    assert len(snap) >= 2
    whole = frames(_native.render_trees("speedscope", [(None, tree) for _, tree in snap]))
    main = next(tree for tid, tree in snap if tid == threading.main_thread().ident)
    # Part of a snapshot: still on the profile's table, every function in
    # the order the profile first saw it (spin_a ran first, in a thread).
    part = frames(_native.render_trees("speedscope", [(None, main)]))
    assert part == whole
    names = [n for n, _, _ in whole]
    assert names.index("spin_a") < names.index("spin_b")
    # A copy (a tree of its own table) is numbered afresh: only its own
    # functions, in the order the tree shows them.
    copy = _native.CallTree()
    copy.merge(main)
    own = frames(_native.render_trees("speedscope", [(None, copy)]))
    assert set(own) < set(whole) and "spin_a" not in [n for n, _, _ in own]
    # And every tree in it is the profiler's own.
    for tid, tree in snap:
        assert tree.tree() == p.tree(tid)


def spin_odd(p):
    sampled_in(p, "spin_odd")


@needs_sampler
def test_a_thread_name_that_is_not_utf8_is_written_escaped(tmp_path):
    from stackwatch.profiler import Profiler
    with Profiler(interval="500us") as p:
        t = threading.Thread(target=spin_odd, args=(p,), name="odd\udcffname")
        t.start()
        t.join()
    for name in formats.names(formats.TREES):
        p.write(tmp_path / name, name)
    profiles = json.loads((tmp_path / "speedscope").read_text())["profiles"]
    assert f"odd\\udcffname ({t.ident})" in [x["name"] for x in profiles]
