"""The profiler's pprof output (gzipped profile.proto), read by its real
consumer, `go tool pprof` (Debian golang-go), and by a minimal protobuf
decoder written here from profile.proto: the totals, per-function values
and per-thread stacks equal what Profiler.stats()/tree()/threads() report;
`stackwatch profile` picks pprof from the output's suffix; bad formats and
unwritable outputs are clean errors."""
import glob
import gzip
import re
import threading
import time

import pytest

from conftest import NO_GO, SAMPLER, needs, needs_sampler, read_varint, run, write
from go_pprof import GO, go_pprof, top
from mixed_workload import count_of, mixed_workload, spin_until
from stats_bounds import CYCLE, Blocks, time_shares
from stackwatch import _native

# The pprof writer is C over the profiler's tree, the same on every Python
# (each version's sampler is tested in test_profiler*.py).
pytestmark = [needs_sampler, pytest.mark.versions("3.10")]

if SAMPLER:
    from stackwatch.profiler import Profiler

needs_go = needs(NO_GO)


# ---- a workload with known functions ----

def worker_loop(stop):
    while not stop.is_set():
        spin_until(time.perf_counter() + 0.002)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """(profiler, path of its pprof file, wall-clock start and end)."""
    stop = threading.Event()
    worker = threading.Thread(target=worker_loop, args=(stop,), name="pprof-worker")
    t0 = time.time_ns()
    with Profiler(interval="500us") as p:
        worker.start()
        mixed_workload(0.6)
        stop.set()
        worker.join()
    t1 = time.time_ns()
    path = tmp_path_factory.mktemp("pprof") / "p.pb.gz"
    p.write(path, "pprof")
    return p, path, t0, t1


# ---- go tool pprof ----

def raw_samples(path):
    """The samples of `go tool pprof -raw`: [(count, ns, labels text)], and
    the header lines."""
    out = go_pprof("-raw", path)
    head, _, rest = out.partition("\nSamples:\n")
    body = rest.split("\nLocations\n")[0].splitlines()
    assert body[0].split() == ["samples/count", "wall/nanoseconds"], body[:2]
    samples = []
    for line in body[1:]:
        m = re.fullmatch(r"\s*(\d+)\s+(\d+):(?: \d+)* ?", line)
        if m:
            samples.append([int(m.group(1)), int(m.group(2)), ""])
        else:
            assert samples and line.strip().startswith("thread:["), line
            samples[-1][2] += line.strip()
    return samples, head


@needs_go
def test_totals_match_the_profiler(profiled):
    p, path, *_ = profiled
    st, tree = p.stats(), p.tree()
    assert tree["count"] == st["stored"] > 50, st   # ~2400 when the machine is idle
    shown, total, _ = top(path, "samples")
    assert shown == total == st["stored"]
    shown_ns, total_ns, _ = top(path, "wall")
    assert shown_ns == total_ns == tree["time_ns"]
    samples, head = raw_samples(path)
    assert sum(s[0] for s in samples) == st["stored"]
    assert sum(s[1] for s in samples) == tree["time_ns"]
    assert "PeriodType: wall nanoseconds" in head
    assert re.search(r"^Period: 500000$", head, re.M), head


@needs_go
def test_functions_match_the_tree(profiled):
    p, path, *_ = profiled
    tree = p.tree()
    _, _, by_count = top(path, "samples")
    _, _, by_ns = top(path, "wall")
    for name in ("f60", "f30", "f10", "mixed_workload", "worker_loop", "spin_until"):
        assert name in by_count, (name, sorted(by_count))
        if name != "spin_until":   # called from several functions: pprof counts each sample once
            assert by_count[name][1] == count_of(tree, name), name
            assert by_ns[name][1] == count_of(tree, name, "time_ns"), name
    # spin_until is the leaf of nearly every sample.
    assert by_count["spin_until"][0] >= 0.9 * tree["count"]


@needs_go
@pytest.mark.timing
@pytest.mark.slow
@pytest.mark.versions("3.12")   # (the pprof writer: the same on every version)
def test_shares_in_go_pprof_match_ground_truth(tmp_path):
    """The 60/30/10 workload for 1.5 s: the wall time `go tool pprof` reads
    from the file for each function is the profile's, to the nanosecond, and
    the profile's shares are the real ones within the bound
    stats_bounds.time_shares derives from the run (1 false failure in
    10,000)."""
    blocks = Blocks()
    with Profiler(interval="1ms", cycle=CYCLE, maxlen=None) as p:
        mixed_workload(1.5, blocks)
    p.write(tmp_path / "shares.pb.gz", "pprof")
    _, _, by_ns = top(tmp_path / "shares.pb.gz", "wall")
    tree = p.tree()
    assert {n: by_ns[n][1] for n in blocks.totals()} == {n: count_of(tree, n, "time_ns") for n in blocks.totals()}
    names = sorted(blocks.totals())
    bad, report = time_shares(p, blocks, lambda t: {n: count_of(t, n, "time_ns") for n in names})
    assert not bad, (bad, report, p.stats())


@needs_go
def test_thread_labels(profiled):
    p, path, *_ = profiled
    threads = {t["name"]: t for t in p.threads()}
    assert {"MainThread", "pprof-worker"} <= set(threads), threads
    tags = go_pprof("-tags", path)
    for name, t in threads.items():
        assert f"{name} ({t['thread_id']})" in tags, tags
        shown, total, rows = top(path, "samples", f"-tagfocus=thread=^{re.escape(name)} ")
        assert shown == p.tree(t["thread_id"])["count"] == t["samples"] < total, name
    _, _, worker_rows = top(path, "samples", "-tagfocus=thread=^pprof-worker ")
    assert "worker_loop" in worker_rows and "f60" not in worker_rows, worker_rows
    samples, _ = raw_samples(path)
    assert all(s[2].startswith("thread:[") for s in samples)


# ---- the file itself, decoded here ----

def fields(buf):
    """(number, value) of each field of a message: ints for varints, bytes
    for length-delimited fields."""
    i = 0
    while i < len(buf):
        tag, i = read_varint(buf, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = read_varint(buf, i)
        elif wt == 2:
            n, i = read_varint(buf, i)
            v, i = buf[i:i + n], i + n
            assert i <= len(buf)
        else:
            raise AssertionError(f"wire type {wt} in field {num}")
        yield num, v


def packed(v):
    if isinstance(v, int):
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = read_varint(v, i)
        out.append(x)
    return out


def decode(path):
    data = path.read_bytes()
    assert data[:2] == b"\x1f\x8b", "not gzipped"
    prof = {"strings": [], "sample_type": [], "samples": [], "locations": {}, "functions": {}}
    for num, v in fields(gzip.decompress(data)):
        if num in (1, 11):
            vt = dict(fields(v))
            pair = (vt.get(1, 0), vt.get(2, 0))
            if num == 1:
                prof["sample_type"].append(pair)
            else:
                prof["period_type"] = pair
        elif num == 2:
            s = {"locs": [], "vals": [], "labels": []}
            for n, x in fields(v):
                if n == 1:
                    s["locs"] += packed(x)
                elif n == 2:
                    s["vals"] += packed(x)
                elif n == 3:
                    s["labels"].append(dict(fields(x)))
            prof["samples"].append(s)
        elif num == 4:
            loc = dict(fields(v))
            prof["locations"][loc[1]] = dict(fields(loc[4]))[1]
        elif num == 5:
            fn = dict(fields(v))
            prof["functions"][fn[1]] = fn
        elif num == 6:
            prof["strings"].append(v.decode("utf-8"))
        elif num in (9, 10, 12):
            prof[{9: "time_nanos", 10: "duration_nanos", 12: "period"}[num]] = v
    return prof


def test_file_fields(profiled):
    p, path, t0, t1 = profiled
    prof = decode(path)
    s = prof["strings"]
    assert s[0] == ""
    assert [(s[a], s[b]) for a, b in prof["sample_type"]] == [("samples", "count"), ("wall", "nanoseconds")]
    assert (s[prof["period_type"][0]], s[prof["period_type"][1]]) == ("wall", "nanoseconds")
    assert prof["period"] == p.interval_ns == 500_000
    assert t0 - 50_000_000 <= prof["time_nanos"] <= t1
    st = p.stats()
    assert prof["duration_nanos"] == st["stop_ns"] - st["start_ns"]
    for fn in prof["functions"].values():
        assert s[fn[2]] and fn.get(3, 0) == 0   # a name; no system_name (see calltree_pprof.c)


def test_stacks_equal_the_tree_of_each_thread(profiled):
    """Ground truth: every thread's tree from Profiler.tree(thread_id), as
    {stack: (self, self_time_ns)}, equals the decoded samples labelled
    with that thread."""
    p, path, *_ = profiled
    prof = decode(path)
    s = prof["strings"]

    def frame(loc):
        fn = prof["functions"][prof["locations"][loc]]
        return (s[fn[2]], s[fn[4]], fn[5])

    from_file = {}
    for smp in prof["samples"]:
        (label,) = smp["labels"]
        assert s[label[1]] == "thread"
        ident = int(re.fullmatch(r".* \((\d+)\)", s[label[2]]).group(1))
        stack = tuple(frame(loc) for loc in reversed(smp["locs"]))
        assert (ident, stack) not in from_file   # one sample per distinct stack
        from_file[(ident, stack)] = tuple(smp["vals"])

    from_tree = {}
    for t in p.threads():
        todo = [(c, ()) for c in p.tree(t["thread_id"])["children"]]
        while todo:
            node, above = todo.pop()
            stack = above + ((node["name"], node["filename"], node["line"]),)
            if node["self"]:
                from_tree[(t["thread_id"], stack)] = (node["self"], node["self_time_ns"])
            todo.extend((c, stack) for c in node["children"])
    assert from_file == from_tree


def test_odd_names_survive(tmp_path):
    """<lambda>-style names keep their brackets; a file name that is not
    valid UTF-8 is still a valid string."""
    src = "def spin():\n    import time\n    e = time.perf_counter() + 0.1\n    while time.perf_counter() < e: pass\n"
    ns = {}
    exec(compile(src, 'we"ird;\\näme\udcff.py', "exec"), ns)
    odd = eval("lambda: spin()", ns)
    with Profiler(interval="500us") as p:
        odd()
    p.write(tmp_path / "o.pb.gz", "pprof")
    prof = decode(tmp_path / "o.pb.gz")
    names = {prof["strings"][fn[2]] for fn in prof["functions"].values()}
    files = {prof["strings"][fn[4]] for fn in prof["functions"].values()}
    assert {"<lambda>", "spin"} <= names, names
    # The surrogate reaches the file as U+FFFD (one per byte the reader got).
    assert [f for f in files if re.fullmatch('we"ird;\\\\näme\ufffd+\\.py', f)], files
    if GO:
        _, _, rows = top(tmp_path / "o.pb.gz", "samples")
        assert "<lambda>" in rows, rows


# ---- the CLI ----

PROGRAM = '''
import time
def spin(d):
    e = time.thread_time() + d
    while time.thread_time() < e:
        pass
def work(seconds):
    spin(seconds)
work(0.3)
spin(0.1)
'''


def wrote_samples(stderr):
    m = re.search(r"^stackwatch: wrote .* \((?:\w+ mode, )?(\d+) samples of 1 thread(?:, \d+ failed reads of a stack)?\)$", stderr, re.M)
    assert m, stderr
    return int(m.group(1))


@pytest.mark.parametrize("name", ["out.pb.gz", "out.PPROF"])
@pytest.mark.timing
def test_cli_format_from_suffix(tmp_path, name):
    script = write(tmp_path / "prog.py", PROGRAM)
    r = run(["profile", "-o", name, script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    n = wrote_samples(r.stderr)
    prof = decode(tmp_path / name)
    assert sum(smp["vals"][0] for smp in prof["samples"]) == n > 10   # ~400 when the machine is idle
    if GO:
        shown, total, rows = top(tmp_path / name, "samples")
        assert shown == total == n
        # The program's frames, <module> included; none of stackwatch's.
        assert rows["<module>"][1] == n, rows
        assert not [f for f in rows if "stackwatch" in f or f in ("Program.run", "cmd_profile", "main")], rows
        # work() is 3/4 of the program's time and spin() nearly all of it
        # (the shares are held to the ground truth in the test above). The
        # bounds are far: spin() uses CPU time, so a sampler delayed while
        # the program waits for a CPU charges the delay to the function it
        # happened in, and only a delay straddling work()'s return (of 200
        # ms) or ending in the microseconds between calls (of 40 ms) could
        # break them. (Not sample counts: a busy machine delays the sampler
        # more in some phases than in others.)
        _, ns, rows = top(tmp_path / name, "wall")
        assert rows["<module>"][1] == ns
        assert rows["work"][1] >= 0.25 * ns and rows["spin"][1] >= 0.9 * ns, rows


def test_cli_format_option_and_default_name(tmp_path):
    script = write(tmp_path / "prog.py", PROGRAM)
    r = run(["profile", "-q", "--format", "pprof", script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    (out,) = glob.glob(str(tmp_path / "stackwatch-*.pb.gz"))
    assert decode(type(tmp_path)(out))["samples"]
    r = run(["profile", "-q", "--format", "pprof", "-o", "p.json", script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "p.json").read_bytes()[:2] == b"\x1f\x8b"   # --format wins over the suffix


@pytest.mark.parametrize("args, words", [
    (["--format", "svg"], "invalid choice: 'svg' (choose from 'collapsed', 'speedscope', 'html', 'pprof'"),
    (["--format", "pprof", "-o", "/nonexistent-dir/p.pb.gz"], "no such directory"),
    (["-o", "/nonexistent-dir/p.pb.gz"], "no such directory"),
    (["-o", "."], "it is a directory"),
])
def test_cli_bad_input_is_one_line(tmp_path, args, words):
    script = write(tmp_path / "prog.py", PROGRAM)
    r = run(["profile"] + args + [script], cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stackwatch: error: ") and words in lines[0], r.stderr


def test_cli_output_gone_by_the_end_is_one_line(tmp_path):
    """The output's directory vanishes while the program runs: writing
    fails at exit with one line, and the program's own status stands."""
    d = tmp_path / "out"
    d.mkdir()
    script = write(tmp_path / "prog.py", PROGRAM + f"import os\nos.rmdir({str(d)!r})\n")
    r = run(["profile", "-o", str(d / "p.pb.gz"), script], cwd=tmp_path)
    assert r.returncode == 0
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stackwatch: error: writing the profile to "), r.stderr
    assert not d.exists()


# ---- the API ----

def test_api_errors(tmp_path):
    with Profiler() as p:
        spin_until(time.perf_counter() + 0.02)
    with pytest.raises(ValueError, match=r"unknown profile format 'svg' \(choose from: collapsed, speedscope, html, pprof"):
        p.write(tmp_path / "x", "svg")
    with pytest.raises(ValueError, match=r"unknown format 'svg' \(choose from: collapsed, speedscope, pprof\)"):
        _native.render_trees("svg", [])
    with pytest.raises(FileNotFoundError):
        p.write(tmp_path / "missing" / "x.pb.gz", "pprof")
    with pytest.raises(IsADirectoryError):
        p.write(tmp_path, "pprof")
    assert not (tmp_path / "x").exists()


def test_write_while_running(tmp_path):
    """A snapshot written while sampling goes on is a valid profile whose
    totals are those of some moment of the run."""
    with Profiler(interval="500us") as p:
        spin_until(time.perf_counter() + 0.1)
        p.write(tmp_path / "live.pb.gz", "pprof")
        before = p.stats()["stored"]
        spin_until(time.perf_counter() + 0.05)
    prof = decode(tmp_path / "live.pb.gz")
    n = sum(smp["vals"][0] for smp in prof["samples"])
    assert 0 < n <= before <= p.stats()["stored"]
    assert prof["duration_nanos"] > 0


@pytest.mark.parametrize("mode", ["wall", "cpu"])
def test_mode_names_the_sample_type(tmp_path, mode):
    """--mode cpu weighs samples by CPU time: pprof says cpu (it said wall),
    in the sample types and the period type; go tool pprof -raw shows it."""
    script = write(tmp_path / "prog.py", "import time\nt = time.process_time()\n"
                   "while time.process_time() - t < 0.05:\n    pass\n")
    r = run(["profile", "--mode", mode, "-o", "p.pb.gz", script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # Also from a profile file, by stackwatch export.
    r = run(["profile", "--mode", mode, "-o", "p.swprof", script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run(["export", "p.swprof", "--format", "pprof", "-o", "e.pb.gz"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for name in ("p.pb.gz", "e.pb.gz"):
        prof = decode(tmp_path / name)
        s = prof["strings"]
        assert [(s[a], s[b]) for a, b in prof["sample_type"]] == [("samples", "count"), (mode, "nanoseconds")]
        assert (s[prof["period_type"][0]], s[prof["period_type"][1]]) == (mode, "nanoseconds")
    if GO:
        out = go_pprof("-raw", tmp_path / "p.pb.gz")
        assert f"PeriodType: {mode} nanoseconds" in out
        assert out.split("\nSamples:\n")[1].splitlines()[0].split() == ["samples/count", f"{mode}/nanoseconds"]
