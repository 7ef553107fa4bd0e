"""`stackwatch run` follows every Python process the program starts
(tracer/follow.py): each writes a trace of its own, `OUT.<pid>.swt`, and
the summary line lists them.

Ground truth is the programs themselves: every process counts its own
calls of a known function and reports the count to the parent (a pool's
result, a pipe, a child's stdout), and each process's trace must hold
exactly that many calls. The program's output and exit status must be
those of a plain run.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from stackwatch import Trace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from conftest import chrome_slices, perfetto_decode, run  # noqa: E402  (tests/py/conftest.py, also alone)

pytestmark = pytest.mark.slow

PROGRAM = r'''
import json, multiprocessing as mp, os, subprocess, sys
from concurrent.futures import ProcessPoolExecutor

COUNT = 0

def sw_probe():
    global COUNT
    COUNT += 1

def task(n):
    for _ in range(n):
        sw_probe()
    return os.getpid(), COUNT

CHILD = """
import json, os, sys
def sw_probe():
    pass
n = int(sys.argv[1])
for _ in range(n):
    sw_probe()
print(json.dumps([os.getpid(), n]))
sys.exit(3)
"""

def main(out):
    seen = {}   # pid -> the calls of sw_probe that process counted itself
    def note(pairs):
        for pid, c in pairs:
            seen[pid] = max(seen.get(pid, 0), c)
    r = subprocess.run([sys.executable, "-c", CHILD, "1000"], capture_output=True, text=True)
    note([json.loads(r.stdout)])
    print("subprocess", r.returncode)
    for method in ("spawn", "forkserver", "fork"):
        pool = mp.get_context(method).Pool(2)
        note(pool.map(task, range(1, 9)))
        pool.close()   # workers end normally (Pool.__exit__ would terminate them)
        pool.join()
        print("pool", method)
    for method in ("spawn", "fork"):
        with ProcessPoolExecutor(2, mp_context=mp.get_context(method)) as ex:
            note(ex.map(task, range(1, 9)))
        print("executor", method)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        global COUNT
        COUNT = 0
        os.write(wfd, json.dumps(task(11)).encode())
        os._exit(5)
    os.close(wfd)
    note([json.loads(os.read(rfd, 1000))])
    print("fork", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) if hasattr(os, "waitstatus_to_exitcode")
          else os.waitpid(pid, 0)[1] >> 8)
    note([task(4)])
    with open(out, "w") as f:
        json.dump(seen, f)
    sys.exit(2)

if __name__ == "__main__":
    main(sys.argv[1])
'''

EXPECTED = ("subprocess 3\npool spawn\npool forkserver\npool fork\nexecutor spawn\nexecutor fork\n"
            "fork 5\n")


def _probe_calls(path):
    t = Trace(str(path))
    assert t.damage is None, (path, t.damage)
    return t.meta["pid"], sum(r.calls for r in t.stats() if t.codes[r.code].name == "sw_probe")


def _stackwatch_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("stackwatch:")]


@pytest.fixture(scope="module")
def followed(tmp_path_factory):
    """PROGRAM run plainly and under `stackwatch run` (traces in their own
    directory): (directory, plain run, traced run, {pid: calls counted})."""
    tmp_path = tmp_path_factory.mktemp("followed")
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    plain = run(["python", str(prog), str(tmp_path / "plain.json")], cwd=tmp_path)
    (tmp_path / "traces").mkdir()
    traced = run(["run", "-o", str(tmp_path / "traces" / "out.swt"), str(prog), str(tmp_path / "seen.json")],
                 cwd=tmp_path)
    seen = {int(k): v for k, v in json.loads((tmp_path / "seen.json").read_text()).items()}
    return tmp_path / "traces", plain, traced, seen


def test_each_process_traces_what_it_counted(followed):
    tmp_path, plain, traced, seen = followed
    assert (plain.returncode, plain.stdout) == (2, EXPECTED), plain.stderr
    assert (traced.returncode, traced.stdout) == (2, EXPECTED), traced.stderr

    children = sorted(p.name for p in tmp_path.glob("out.*.swt"))
    assert all(re.fullmatch(r"out\.\d+\.swt", name) for name in children), children
    counted = dict(_probe_calls(tmp_path / name) for name in children)
    pid, own = _probe_calls(tmp_path / "out.swt")
    counted[pid] = own
    # Every process that called sw_probe has a trace with exactly its own
    # count; the others (resource tracker, fork server) have none.
    assert {p: c for p, c in counted.items() if c} == seen
    # The program, its subprocess and fork, and a worker of each pool and
    # executor at least.
    assert len(seen) >= 8 and len(children) >= len(seen) - 1

    # One line lists them all.
    lines = _stackwatch_lines(traced.stderr)
    assert len(lines) == 1, traced.stderr
    assert f"{len(children)} child processes: " in lines[0]
    assert set(re.findall(r"out\.\d+\.swt", lines[0])) == set(children)

    # Each child says who started it, how and when (docs/format.md).
    parents = {}
    for name in children:
        m = Trace(str(tmp_path / name)).meta
        parents[m["pid"]] = m["parent_pid"]
        assert m["spawn"] in ("spawn", "fork", "exec", "env"), m
        if m["spawn"] in ("spawn", "fork"):
            assert m["spawn_mono_ns"] > 0 and m["spawn_tid"] > 0
    for p in seen:
        if p != pid:   # every process that worked descends from the program's
            chain = [p]
            while chain[-1] in parents:
                chain.append(parents[chain[-1]])
            assert chain[-1] == pid, chain


def _all_processes_row(stdout, name):
    """calls of `name` in the table of all processes of `stackwatch stats`."""
    table = stdout.split("\nall processes", 1)[1].split("\n\n", 1)[0]
    rows = [line.split() for line in table.splitlines()[2:]]
    return sum(int(r[0]) for r in rows if r[3] == name)


def test_stats_of_several_traces(followed):
    """`stackwatch stats DIR` and `stackwatch stats A B ...`: the table of
    all processes sums each function over them (here: what the processes
    counted), then each process's own statistics."""
    tmp_path, _, _, seen = followed
    names = sorted(p.name for p in tmp_path.glob("*.swt"))
    for args in ([str(tmp_path)], [str(tmp_path / n) for n in names]):
        r = run(["stats", "-n", "1000"] + args)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"{len(names)} processes:\n"), r.stdout[:300]
        assert _all_processes_row(r.stdout, "sw_probe") == sum(seen.values())
        sections = re.findall(r"^== process (\d+): (.*) ==$", r.stdout, re.M)
        assert sorted(os.path.basename(path) for _, path in sections) == names
        for pid, path in sections:
            own = r.stdout.split(f"== process {pid}: {path} ==", 1)[1].split("\n== process", 1)[0]
            assert f"{path}: " in own and "all threads" in own
    bad = run(["stats", str(tmp_path / "out.swt"), str(tmp_path.parent / "prog.py")])
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "prog.py" in bad.stderr, bad.stderr
    for cmd in (["stats", str(tmp_path), "--thread", "MainThread"],
                ["export", str(tmp_path), "-o", str(tmp_path.parent / "x.pftrace"), "--start", "1ms"]):
        bad = run(cmd)
        assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "one trace" in bad.stderr, bad.stderr
    empty = tmp_path.parent / "empty"
    empty.mkdir()
    bad = run(["stats", str(empty)])
    assert bad.returncode != 0 and "no stackwatch trace" in bad.stderr, bad.stderr


@pytest.mark.versions("3.11")    # the merge is C over trace files
def test_merged_perfetto_export(followed, tmp_path):
    """`stackwatch export DIR -o x.pftrace`, decoded with Perfetto's own
    protos: a process track per process (its pid) holding its threads, and
    for each child a flow from the parent's slice open on the thread that
    started it at that moment (the call that started it) to the child's
    first slice."""
    traces_dir, _, _, seen = followed
    subprocess_child = next(pid for pid, n in seen.items() if n == 1000)
    out = tmp_path / "m.pftrace"
    r = run(["export", str(traces_dir), "-o", str(out)])
    assert r.returncode == 0, r.stderr
    tl = perfetto_decode(out)
    traces = [Trace(str(p)) for p in sorted(traces_dir.glob("*.swt"))]
    by_pid = {t.meta["pid"]: t for t in traces}
    procs = {u: td.process.pid for u, td in tl.tracks.items() if td.HasField("process")}
    assert sorted(procs.values()) == sorted(by_pid)            # one process per trace, by pid
    pid_of = {}
    for u, td in tl.tracks.items():
        if td.HasField("thread"):
            assert procs[td.parent_uuid] == td.thread.pid
            pid_of[u] = td.thread.pid
    starts = {}   # flow id -> (pid, timestamp, slice name) of the slice it starts in
    ends = {}     # flow id -> (pid, timestamp) of the slice it ends at
    first = {}    # pid -> its first slice's (timestamp, flow ids it ends)
    for name, ts, track, te in tl.begins:
        pid = pid_of[track]
        first.setdefault(pid, list(te.terminating_flow_ids))
        for f in te.flow_ids:
            assert f not in starts
            starts[f] = (pid, ts, name)
        for f in te.terminating_flow_ids:
            assert f not in ends
            ends[f] = (pid, ts)
    children = [t for t in traces if "parent_pid" in t.meta]
    assert len(starts) == len(ends) == len(children) > 0
    ends_at = {pid: f for f, (pid, _) in ends.items()}
    slices = {(track, b): (name, e) for name, b, e, track, _ in tl.slices}
    for t in children:
        m = t.meta
        f = ends_at[m["pid"]]
        assert first[m["pid"]] == [f]                          # the child's first slice
        parent_pid, begin, name = starts[f]
        assert parent_pid == m["parent_pid"]
        parent = by_pid[parent_pid]
        spawn = m["spawn_mono_ns"] - parent.meta["mono0_ns"] + parent.meta["boot0_ns"]
        track = next(track for (track, b), (n, e) in slices.items()
                     if b == begin and n == name and pid_of[track] == parent_pid)
        end = slices[(track, begin)][1]
        assert begin <= spawn <= end, (name, begin, spawn, end)   # open when the child started
        tid = next(th["native_tid"] for th in parent.threads
                   if tl.tracks[track].thread.tid == th["native_tid"])
        assert tid == m["spawn_tid"]
        if m["pid"] == subprocess_child:
            assert name.split(".")[-1] in ("_execute_child", "_posix_spawn"), name   # (3.9: no qualname)

    doc_path = tmp_path / "m.json"
    r = run(["export", str(traces_dir), "-o", str(doc_path), "--format", "chrome"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(doc_path.read_text())
    chrome_slices(doc)   # balanced per thread
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert sorted(names) == sorted(by_pid)
    s = {e["id"]: e["pid"] for e in doc["traceEvents"] if e["ph"] == "s"}
    f = {e["id"]: e["pid"] for e in doc["traceEvents"] if e["ph"] == "f"}
    assert sorted((by_pid[f[i]].meta["parent_pid"], f[i]) for i in f) == \
        sorted((s[i], f[i]) for i in s) == sorted((t.meta["parent_pid"], t.meta["pid"]) for t in children)


@pytest.mark.versions("3.11")
def test_run_format_perfetto_merges_the_children(tmp_path):
    """`stackwatch run --format perfetto` writes one file with every
    process in it, and leaves no trace behind."""
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "all.pftrace"
    r = run(["run", "--format", "perfetto", "-o", str(out), str(prog), str(tmp_path / "seen.json")],
            cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, EXPECTED), r.stderr
    seen = json.loads((tmp_path / "seen.json").read_text())
    tl = perfetto_decode(out)
    pids = {td.process.pid for td in tl.tracks.values() if td.HasField("process")}
    assert {int(p) for p in seen} <= pids
    lines = _stackwatch_lines(r.stderr)
    assert len(lines) == 1 and f"; {len(pids)} processes merged" in lines[0], r.stderr
    assert not list(tmp_path.glob("*.swt"))


def test_no_follow_leaves_only_the_parents_trace(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    r = run(["run", "--no-follow", "-o", str(tmp_path / "out.swt"), str(prog), str(tmp_path / "seen.json")],
            cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, EXPECTED), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".swt") == ["out.swt"]
    lines = _stackwatch_lines(r.stderr)
    assert len(lines) == 1 and "child" not in lines[0], r.stderr


# A child that reports what it sees of itself: what a bootstrap could
# change. USER_SITE is set by the user's own sitecustomize (on the
# PYTHONPATH the parent gives it), which must still run.
VIEW = r"""
import builtins, json, os, sys
print(json.dumps({"path": sys.path, "argv": sys.argv, "pythonpath": os.environ.get("PYTHONPATH"),
                  "stackwatch_env": sorted(k for k in os.environ if k.startswith("STACKWATCH")),
                  "user_site": getattr(builtins, "USER_SITE", None), "modules_main": __name__,
                  "version": sys.version_info[:2]}))
sys.stdout.flush()
sys.exit(4)
"""

PARENT = r"""
import os, subprocess, sys
interpreters = sys.argv[1:]
env = dict(os.environ, PYTHONPATH=os.path.abspath("usp"))
for exe in interpreters:
    r = subprocess.run([exe, "view.py", "a", "b"], env=env, capture_output=True, text=True)
    print(r.returncode, r.stdout.strip(), r.stderr.strip())
os.environ["PYTHONPATH"] = os.path.abspath("usp")
print(os.system(sys.executable + " view.py from-system") >> 8)
sys.stdout.flush()
os.execv(sys.executable, [sys.executable, "view.py", "exec"])
"""


def _other_python():
    """A Python of another version, without stackwatch."""
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for v in ("3.9", "3.13", "3.12", "3.11", "3.10"):
        if v == here:
            continue
        p = subprocess.run([os.path.join(root, "scripts", "find-python.sh"), v], capture_output=True,
                           text=True).stdout.strip()
        if p and subprocess.run([p, "-c", "import stackwatch"], capture_output=True).returncode != 0:
            return p
    return None


def test_children_see_what_they_would_see_plainly(tmp_path):
    """sys.path, sys.argv, os.environ, the user's sitecustomize, output and
    exit status of a followed child are those of a plain run; a Python of
    another version, and this version's interpreter outside the venv (both
    without stackwatch), run normally and untraced."""
    (tmp_path / "view.py").write_text(VIEW)
    (tmp_path / "usp").mkdir()
    (tmp_path / "usp" / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE = 'ran'\n")
    (tmp_path / "parent.py").write_text(PARENT)
    base = getattr(sys, "_base_executable", None)
    interpreters = [sys.executable] + [p for p in (_other_python(), base) if p and p != sys.executable]
    plain = run(["python", "parent.py"] + interpreters, cwd=tmp_path)
    traced = run(["run", "-o", "out.swt", "parent.py"] + interpreters, cwd=tmp_path)
    assert plain.returncode == 4, plain.stderr
    assert traced.returncode == plain.returncode, traced.stderr
    assert traced.stdout.splitlines() == plain.stdout.splitlines(), traced.stderr
    assert plain.stdout.count('"user_site": "ran"') == len(interpreters) + 2
    # Traced: the venv's child, the one from os.system, and the program
    # itself after its exec; never the interpreters without stackwatch.
    children = sorted(tmp_path.glob("out.*.swt"))
    how = sorted(Trace(str(p)).meta["spawn"] for p in children)
    assert how == ["exec", "spawn", "spawn"], (how, traced.stderr)
    assert not re.search(r"stackwatch: (warning|error|not tracing)", traced.stderr), traced.stderr
