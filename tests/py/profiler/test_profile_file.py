"""Profile files (".swprof"): a profiler's history stored and read back
(round trip equal), `stackwatch export` of a stored profile equal to the
profiler's direct output (collapsed byte for byte, speedscope, pprof totals
read by `go tool pprof`), `stackwatch stats` of a profile, time windows on
files, and bad input: unknown formats, empty, truncated and corrupted
files, files that are neither trace nor profile, bad rates and cycles."""
import csv
import io
import json
import re
import shutil
import subprocess
import threading
import time

import pytest

import stackwatch
from conftest import NO_GO, needs, needs_sampler, page_data, run, write
from mixed_workload import count_of, mixed_workload, spin_until

# Profile files, their exports and their damage: C over the profiler's
# history, the same on every Python (each version's sampler is tested in
# test_profiler*.py); on two of them.
pytestmark = [needs_sampler, pytest.mark.versions("3.10", "3.13")]

GO = shutil.which("go")


def worker(stop):
    while not stop.is_set():
        spin_until(time.perf_counter() + 0.002)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A profiler of two threads (cycles of 100 ms), its direct outputs and
    its profile file: (profiler, directory)."""
    d = tmp_path_factory.mktemp("stored")
    stop = threading.Event()
    t = threading.Thread(target=worker, args=(stop,), name="file-worker")
    with stackwatch.Profiler(interval="500us", cycle="100ms", maxlen=None) as p:
        t.start()
        mixed_workload(0.5)
        give_up = time.perf_counter() + 30
        while len(p.history()) < 5 and time.perf_counter() < give_up:   # (cycles with samples, not time)
            mixed_workload(0.1)
        stop.set()
        t.join()
    (d / "direct").mkdir()
    for fmt, name in (("collapsed", "out.txt"), ("speedscope", "out.json"), ("pprof", "out.pb.gz")):
        p.write(d / "direct" / name, fmt)
    p.save(d / "p.swprof")
    return p, d


@pytest.mark.timing
def test_round_trip_tree_file_tree(stored):
    p, d = stored
    live, back = p.history(), stackwatch.load_profile(d / "p.swprof")
    assert back.entries() == live.entries()
    assert len(back) >= 4
    for (s1, e1, t1), (s2, e2, t2) in zip(live, back):
        assert (s1, e1) == (s2, e2) and t1 == t2
    assert back.tree() == live.tree()
    assert back.tree().tree()["count"] == p.tree()["count"] == p.stats()["stored"]
    names = {t["thread_id"]: t["name"] for t in back.threads()}
    assert names == {t["thread_id"]: t["name"] for t in p.threads()}
    assert "file-worker" in names.values() and "MainThread" in names.values()
    info = back.info()
    st = p.stats()
    assert info["damage"] == "" and info["complete"]
    assert (info["mode"], info["interval_ns"], info["cycle_ns"], info["maxlen"]) == ("wall", 500_000, 100_000_000, 0)
    assert info["samples"] == st["stored"] and info["evicted"] == 0
    assert info["start_ns"] < info["stop_ns"] and abs(info["stop_ns"] / 1e9 - time.time()) < 600
    # Per thread.
    for t in p.threads():
        assert back.tree(thread_id=t["thread_id"]).tree()["count"] == t["samples"]


def speedscope_content(text):
    """A speedscope file's profiles with frames resolved: [(name, unit,
    sorted [(stack of (name, file, line), weight)])] (frame tables may list
    the functions in another order)."""
    doc = json.loads(text)
    frames = [(f["name"], f.get("file"), f.get("line")) for f in doc["shared"]["frames"]]
    out = []
    for prof in doc["profiles"]:
        stacks = sorted((tuple(frames[i] for i in s), w) for s, w in zip(prof["samples"], prof["weights"]))
        out.append((prof["name"], prof["unit"], prof["endValue"], stacks))
    return out


def test_export_of_a_stored_profile_equals_the_direct_output(stored, tmp_path):
    p, d = stored
    for fmt, name in (("collapsed", "out.txt"), ("speedscope", "out.json")):
        r = run(["export", str(d / "p.swprof"), "--format", fmt, "-o", str(tmp_path / name)])
        assert r.returncode == 0, r.stderr
        direct = (d / "direct" / name).read_bytes()
        exported = (tmp_path / name).read_bytes()
        if fmt == "collapsed":
            assert exported == direct
        else:
            assert speedscope_content(exported) == speedscope_content(direct)
    # The flame graph page embeds the same trees, frames and strings.
    (tmp_path / "h").mkdir()
    p.write(tmp_path / "h" / "f.html", "html")
    r = run(["export", str(d / "p.swprof"), "--format", "html", "-o", str(tmp_path / "f.html")])
    assert r.returncode == 0, r.stderr
    direct, exported = (page_data((x / "f.html").read_text()) for x in (tmp_path / "h", tmp_path))
    for key in ("version", "title", "interval_ns", "strings", "frames", "threads"):
        assert exported[key] == direct[key], key
    assert "MainThread (%d)" % threading.main_thread().ident in [t["name"] for t in exported["threads"]]


@needs(NO_GO)
def test_pprof_export_totals_match_with_go_tool_pprof(stored, tmp_path):
    p, d = stored
    out = tmp_path / "e.pb.gz"
    r = run(["export", str(d / "p.swprof"), "--format", "pprof", "-o", str(out)])
    assert r.returncode == 0, r.stderr

    def top(path, index):
        res = subprocess.run([GO, "tool", "pprof", "-top", f"-sample_index={index}", "-unit=ns",
                              "-nodecount=100000", "-nodefraction=0", str(path)],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        m = re.search(r"^Showing nodes accounting for (\d+)(?:ns)?, [\d.]+% of (\d+)(?:ns)? total$", res.stdout,
                      re.M)
        assert m, res.stdout
        rows = {}
        for line in res.stdout.splitlines():
            x = re.fullmatch(r"\s*(\d+)(?:ns)?\s+[\d.]+%\s+[\d.]+%\s+(\d+)(?:ns)?\s+[\d.]+%\s+(.+)", line)
            if x:
                rows[x.group(3)] = (int(x.group(1)), int(x.group(2)))
        return int(m.group(2)), rows
    total, rows = top(out, "samples")
    total_ns, _ = top(out, "wall")
    assert total == p.stats()["stored"]
    assert total_ns == p.tree()["time_ns"]
    direct_total, direct_rows = top(d / "direct" / "out.pb.gz", "samples")
    assert (total, rows) == (direct_total, direct_rows)
    assert rows["f60"][1] == count_of(p.tree(), "f60")


PHASES = """\
import time
def spin(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass
def a():
    spin(0.6)
def b():
    spin(0.6)
a()
b()
"""


@pytest.fixture(scope="module")
def phases(tmp_path_factory):
    d = tmp_path_factory.mktemp("phases")
    script = write(d / "phases.py", PHASES)
    r = run(["profile", "--cycle", "100ms", "-o", str(d / "ph.swprof"), script], cwd=str(d))
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stderr and "ph.swprof" in r.stderr
    return d


@pytest.mark.timing
@pytest.mark.slow
def test_export_window_of_a_profile_file(phases, tmp_path):
    def stacks(*window):
        out = tmp_path / "w.txt"
        r = run(["export", str(phases / "ph.swprof"), "--format", "collapsed", "-o", str(out), *window])
        assert r.returncode == 0, r.stderr
        return out.read_text()
    early, late, whole = stacks("--stop", "300ms"), stacks("--start", "900ms"), stacks()
    assert ";a (" in early and ";b (" not in early
    assert ";b (" in late and ";a (" not in late
    assert ";a (" in whole and ";b (" in whole
    h = stackwatch.load_profile(phases / "ph.swprof")
    t0 = h.info()["start_ns"] / 1e9
    assert count_of(stackwatch.get_profile(h, stop=t0 + 0.3).tree(), "b") == 0


@pytest.mark.timing
def test_stats_of_a_profile_lists_the_hot_function_first(phases):
    r = run(["stats", str(phases / "ph.swprof")])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.match(r".*ph\.swprof: wall mode, 1000us interval, \d+ samples of 1 thread, \d+ cycles", lines[0]), lines[0]
    table = lines[lines.index("all threads") + 2:]
    assert re.search(r"\bspin\s+\(.*phases\.py:2\)", table[0]), r.stdout   # all the own time
    r = run(["stats", str(phases / "ph.swprof"), "--sort", "total", "-n", "2"])
    assert r.returncode == 0, r.stderr
    rows = r.stdout.splitlines()[-2:]
    found = [re.search(r" (\d+\.\d)%  (spin|<module>) ", x) for x in rows]
    assert all(found) and {m.group(2) for m in found} == {"spin", "<module>"}, r.stdout
    assert all(float(m.group(1)) >= 99 for m in found), r.stdout


def test_stats_per_thread(stored):
    _, d = stored
    r = run(["stats", str(d / "p.swprof")])
    assert r.returncode == 0, r.stderr
    assert "\nthread " not in r.stdout   # per-thread tables only when asked
    r = run(["stats", str(d / "p.swprof"), "--threads"])
    assert r.returncode == 0, r.stderr
    assert "\nthread MainThread (" in r.stdout and "\nthread file-worker (" in r.stdout
    worker_table = r.stdout.split("\nthread file-worker (")[1]
    assert "spin_until" in worker_table.splitlines()[2]


# ---- filters of frames (--include, --exclude, --max-depth) ----

def _collapsed(path):
    """{stack (tuple of (name, file)): samples} of a collapsed export."""
    out = {}
    for line in open(path).read().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = []
        for f in stack.split(";"):
            name, _, where = f.rpartition(" (")
            frames.append((name, where[:-1].rsplit(":", 1)[0]))
        out[tuple(frames)] = out.get(tuple(frames), 0) + int(n)
    return out


def _cut(stacks, include=(), exclude=(), depth=0):
    """The stacks as a filtered reading keeps them: frames of functions
    matching no include glob (when given) or an exclude glob left out, by
    name, the name after its last dot, or file; then at most `depth`
    frames (the deeper ones' samples to the last kept)."""
    import fnmatch

    def hits(globs, name, file):
        return any(fnmatch.fnmatchcase(x, g) for g in globs for x in (name, name.rsplit(".", 1)[-1], file))
    out = {}
    for stack, n in stacks.items():
        kept = tuple(f for f in stack if (not include or hits(include, *f)) and not hits(exclude, *f))
        kept = kept[:depth] if depth else kept
        if kept:
            out[kept] = out.get(kept, 0) + n
    return out


@pytest.mark.parametrize("opts,include,exclude,depth", [
    (["--exclude", "f60", "--exclude", "*threading.py"], (), ("f60", "*threading.py"), 0),
    (["--include", "f*", "--include", "<module>"], ("f*", "<module>"), (), 0),
    (["--max-depth", "2"], (), (), 2),
    (["--exclude", "spin_until", "--max-depth", "3"], (), ("spin_until",), 3),
])
def test_profile_filters_equal_a_filtered_reading(stored, tmp_path, opts, include, exclude, depth):
    """A profile's export with --include/--exclude/--max-depth equals its
    unfiltered export with those frames taken out of every stack (their
    samples going to the caller)."""
    _, d = stored
    f = str(d / "p.swprof")
    full, cut = tmp_path / "full.txt", tmp_path / "cut.txt"
    assert run(["export", f, "--format", "collapsed", "-o", str(full)]).returncode == 0
    r = run(["export", f, "--format", "collapsed", "-o", str(cut)] + opts)
    assert r.returncode == 0, r.stderr
    want = _cut(_collapsed(full), include, exclude, depth)
    assert want and _collapsed(cut) == want


def test_stats_of_a_profile_with_filters(stored):
    _, d = stored
    f = str(d / "p.swprof")
    r = run(["stats", f, "--exclude", "spin_until", "-n", "1000"])
    assert r.returncode == 0, r.stderr
    assert "spin_until" not in r.stdout and "f60" in r.stdout
    total = int(re.search(r" (\d+) samples of", r.stdout).group(1))
    table = r.stdout.split("\nall threads\n")[1].splitlines()[1:]
    own = sum(int(line.split()[0]) for line in table if line.strip())
    assert own <= total and own >= 0.99 * total   # samples of frames left out go to their callers
    r = run(["stats", f, "--max-depth", "1", "-n", "1000"])
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.split("\nall threads\n")[1].splitlines()[1:] if line.strip()]
    # One frame per stack: every function's own samples are its total, and
    # they add up to every sample.
    assert rows and all(row[0] == row[2] for row in rows), r.stdout
    assert sum(int(row[0]) for row in rows) == int(re.search(r" (\d+) samples of", r.stdout).group(1))
    assert "--max-depth" in one_error(run(["stats", f, "--max-depth", "0"]))


# ---- bad input ----

def one_error(r):
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    errors = [x for x in lines if x.startswith("stackwatch: error: ")]
    assert len(errors) == 1, r.stderr
    return errors[0]


def test_unknown_format_and_misplaced_options(stored, tmp_path):
    _, d = stored
    f = str(d / "p.swprof")
    assert "unknown format 'svg' for a profile" in one_error(run(["export", f, "--format", "svg", "-o", "x"]))
    assert "--min-duration applies to traces" in one_error(
        run(["export", f, "--format", "collapsed", "-o", str(tmp_path / "x"), "--min-duration", "1ms"]))
    assert "--sort calls applies to traces" in one_error(run(["stats", f, "--sort", "calls"]))
    assert "--start" in one_error(run(["export", f, "--format", "collapsed", "-o", str(tmp_path / "x"),
                                       "--start", "soon"]))
    assert "--start is after --stop" in one_error(
        run(["export", f, "--format", "collapsed", "-o", str(tmp_path / "x"), "--start", "2s", "--stop", "1s"]))
    r = run(["profile", "--format", "flame", "x.py"])
    assert "invalid choice: 'flame'" in one_error(r)


def test_empty_and_foreign_files(tmp_path):
    empty = tmp_path / "empty.swprof"
    empty.write_bytes(b"")
    for cmd in (["stats", str(empty)], ["export", str(empty), "--format", "collapsed", "-o", str(tmp_path / "o")]):
        assert "empty file" in one_error(run(cmd))
    foreign = tmp_path / "notes.txt"
    foreign.write_text("hello, world\n")
    assert "not a stackwatch trace (.swt) or profile (.swprof)" in one_error(run(["stats", str(foreign)]))
    assert "No such file" in one_error(run(["stats", str(tmp_path / "missing.swprof")]))
    # Right magic, nothing after it.
    stub = tmp_path / "stub.swprof"
    stub.write_bytes(b"\x89SWP\r\n\x1a\n")
    assert "not a readable stackwatch profile" in one_error(run(["stats", str(stub)]))
    with pytest.raises(ValueError, match="empty file"):
        stackwatch.load_profile(empty)


def test_damaged_files_give_their_intact_part_and_an_error(stored, tmp_path):
    _, d = stored
    data = (d / "p.swprof").read_bytes()
    whole = stackwatch.load_profile(d / "p.swprof")
    n = len(whole)
    # Truncated in the middle: the trees before the cut are read.
    cut = tmp_path / "cut.swprof"
    cut.write_bytes(data[:len(data) - 150])   # inside the last trees
    h = stackwatch.load_profile(cut)
    assert 0 < len(h) <= n and "truncated" in h.info()["damage"]
    assert 0 < h.tree().total < whole.tree().total
    assert [e.start for e in h.entries()] == [e.start for e in whole.entries()][:len(h)]
    r = run(["stats", str(cut)])
    err = one_error(r)
    assert r.returncode == 1 and "is damaged (truncated" in err and "intact part" in err
    assert "all threads" in r.stdout
    out = tmp_path / "cut.txt"
    r = run(["export", str(cut), "--format", "collapsed", "-o", str(out)])
    assert r.returncode == 1 and "is damaged" in one_error(r)
    assert out.read_text().count("\n") > 0
    # One byte flipped in the last tree: everything before it is read.
    flipped = bytearray(data)
    flipped[len(data) - 40] ^= 0xFF
    bad = tmp_path / "flipped.swprof"
    bad.write_bytes(bytes(flipped))
    h = stackwatch.load_profile(bad)
    assert "checksum mismatch" in h.info()["damage"]
    assert len(h) >= n - 1 and h.tree().total < whole.tree().total
    assert "checksum mismatch" in one_error(run(["stats", str(bad)]))
    # The header chunk damaged: every tree still reads (what META said is unknown).
    head = bytearray(data)
    head[20] ^= 0xFF
    (tmp_path / "head.swprof").write_bytes(bytes(head))
    h = stackwatch.load_profile(tmp_path / "head.swprof")
    assert len(h) == n and h.tree().total == whole.tree().total and h.info()["mode"] == "unknown"
    err = one_error(run(["stats", str(tmp_path / "head.swprof")]))
    assert "checksum mismatch in the chunk at offset 16" in err and "the META chunk is lost" in err
    # Nothing intact at all: nothing to read.
    for k in range(16, len(head) // 2):
        head[k] ^= 0x55
    (tmp_path / "none.swprof").write_bytes(bytes(head[:len(head) // 2]))
    assert "no intact header chunk" in one_error(run(["stats", str(tmp_path / "none.swprof")]))


@pytest.mark.parametrize("args, message", [
    (["--rate", "0"], "sampling rate must be positive"),
    (["--rate", "-5"], "sampling rate must be positive"),
    (["--interval", "10us"], "below the minimum of 20us"),
    (["--rate", "100000"], "above the maximum of 50000 Hz"),
    (["--cycle", "1ms"], "cycle must be from 10ms to 1h"),
    (["--cycle", "soon"], "invalid cycle"),
])
def test_bad_rates_and_cycles(args, message, tmp_path):
    script = write(tmp_path / "s.py", "print('ran')\n")
    r = run(["profile", *args, "-o", str(tmp_path / "o.swprof"), script])
    assert message in one_error(r)
    assert "ran" not in r.stdout


def test_export_of_several_profiles_merges_them(stored, tmp_path):
    _, d = stored
    f = str(d / "p.swprof")
    single, double = tmp_path / "one.txt", tmp_path / "two.txt"
    assert run(["export", f, "--format", "collapsed", "-o", str(single)]).returncode == 0
    r = run(["export", f, f, "--format", "collapsed", "-o", str(double)])
    assert r.returncode == 0, r.stderr

    def lines(path):
        out = {}
        for line in path.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            out[stack] = int(n)
        return out
    one, two = lines(single), lines(double)
    assert one.keys() == two.keys() and all(two[k] == 2 * one[k] for k in one)
    r = run(["export", f, f, "--format", "speedscope", "-o", str(tmp_path / "s.json")])
    assert r.returncode == 0, r.stderr
    names = [p["name"] for p in json.loads((tmp_path / "s.json").read_text())["profiles"]]
    assert len(names) == 4 and all(n.startswith("p.swprof: ") for n in names), names
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    assert "not a stackwatch trace (.swt) or profile" in one_error(
        run(["export", f, str(notes), "--format", "collapsed", "-o", str(tmp_path / "x")]))


def test_trace_files_still_go_to_the_trace_commands(tmp_path):
    script = write(tmp_path / "t.py", "def f():\n    return 1\nf()\n")
    trace = tmp_path / "t.swt"
    assert run(["run", "-q", "-o", str(trace), script]).returncode == 0
    r = run(["stats", str(trace)])
    assert r.returncode == 0 and "events" in r.stdout, r.stderr
    out = str(tmp_path / "x.json")
    # Several traces are merged (tests/e2e/test_follow.py); a file that is
    # not one is refused.
    assert "t.py" in one_error(run(["export", str(trace), script, "--format", "chrome", "-o", out]))
    # --start/--stop now apply to traces too (tests/py/tracer/test_filters.py)
    assert run(["export", str(trace), "--format", "chrome", "-o", out, "--start", "1s"]).returncode == 0
    assert run(["export", str(trace), "--format", "chrome", "-o", out]).returncode == 0


def _collapsed_stacks(path):
    """[(frames outermost first, samples)] of a collapsed export."""
    out = []
    for line in open(path):
        stack, n = line.rstrip("\n").rsplit(" ", 1)
        out.append((stack.split(";"), int(n)))
    return out


def test_stats_of_a_profile_as_data_and_its_callers(stored, tmp_path):
    """--json, --csv, --callers and --callees of a profile file, against the
    collapsed export of the same file (every stack with its samples)."""
    _, d = stored
    f = str(d / "p.swprof")
    col = tmp_path / "p.collapsed.txt"
    assert run(["export", f, "-o", str(col)]).returncode == 0
    stacks = _collapsed_stacks(col)
    r = run(["stats", f, "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["samples"] == sum(n for _, n in stacks) == sum(t["samples"] for t in doc["threads"])
    frame = lambda fn: f"{fn['name']} ({fn['file']}:{fn['line']})"
    own = {frame(fn): fn["own"] for fn in doc["functions"]}
    # own: the samples whose innermost frame is the function
    expect = {}
    for frames, n in stacks:
        expect[frames[-1]] = expect.get(frames[-1], 0) + n
    assert {k: v for k, v in own.items() if v} == expect
    # calls: caller -> callee samples, as the adjacent frames of the stacks
    pairs = {}
    for frames, n in stacks:
        for a, b in zip([None] + frames, frames):
            pairs[(a, b)] = pairs.get((a, b), 0) + n
    got = {(None if c["caller"] is None else frame(c["caller"]), frame(c["callee"])): c["samples"]
           for c in doc["calls"]}
    assert got == pairs
    r = run(["stats", f, "--csv"])
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert sum(int(x["own"]) for x in rows) == doc["samples"]
    assert {x["thread"] for x in rows} == {t["name"] for t in doc["threads"]}
    # --callers / --callees of spin_until: the same pairs, as tables
    r = run(["stats", f, "--callers", "spin_until", "--callees", "spin_until", "-n", "1000"])
    assert r.returncode == 0, r.stderr
    for caller_side, title in ((True, "callers of spin_until"), (False, "called by spin_until")):
        table = r.stdout.split("\n" + title)[1].split("\n\n")[0].splitlines()[2:]
        shown = sorted(int(line.split()[0]) for line in table if line.strip())
        want = sorted(n for (a, b), n in pairs.items()
                      if (b if caller_side else a) is not None
                      and (b if caller_side else a).startswith("spin_until ("))
        assert shown == want and (want or not caller_side), (title, r.stdout)   # (spin_until is a leaf)
    assert "no function of the profile" in one_error(run(["stats", f, "--callers", "no_such_fn"]))
