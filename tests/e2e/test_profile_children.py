"""`stackwatch profile` follows the processes the program starts
(tracer/follow_profile.py): each profiles itself into OUT.<pid>.swprof and
the first process merges them into its output, every stack under a frame
naming its process ("pid N NAME", profiler/processes.py).

Ground truth is the program's own log: each task returns the pid of the
worker that ran it, so the output must hold the worker function's samples
under exactly those processes (and never under the parent), each named by
multiprocessing's name for it, and the parent under its command line.
The collapsed output is read as text; the pprof output by its real
consumer, `go tool pprof -raw` (each sample's `pid` label must be the
process of its root frame).
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import stackwatch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from conftest import needs_sampler, profile_summary, run  # noqa: E402  (tests/py/conftest.py)

PROGRAM = r'''
import json, multiprocessing as mp, os, sys, time
from concurrent.futures import ProcessPoolExecutor

def crunch_in_worker(seconds):
    end = time.process_time() + seconds     # CPU time: a loaded machine still samples it
    while time.process_time() < end:
        pass
    return os.getpid()

if __name__ == "__main__" and sys.argv[1] == "child":     # run by subprocess
    print(crunch_in_worker(0.05))
elif __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    with ctx.Pool(2) as pool:      # __exit__ terminates the workers (SIGTERM)
        in_pool = pool.map(crunch_in_worker, [0.05] * 4, chunksize=1)
    with ProcessPoolExecutor(2, mp_context=ctx) as ex:     # its workers end normally
        in_executor = list(ex.map(crunch_in_worker, [0.05] * 4))
    child = []
    if "subprocess" in sys.argv[2:]:
        import subprocess
        r = subprocess.run([sys.executable, sys.argv[0], "child"], capture_output=True, text=True, check=True)
        child = [int(r.stdout)]
    print(json.dumps({"parent": os.getpid(), "pool": sorted(set(in_pool)),
                      "executor": sorted(set(in_executor)), "subprocess": child}))
'''

ROOT = re.compile(r"pid (\d+) (.*)")
GO = shutil.which("go")
OWN = os.path.dirname(stackwatch.__file__) + os.sep     # the folder of every frame of stackwatch's own


def _add(out, root, leaf, count, label_pid=None, files=()):
    # stackwatch's own frames (its wrappers of the spawning functions, its
    # exit) are never in the profile of the program.
    assert not any(OWN in f for f in files), (root, leaf, files)
    m = ROOT.fullmatch(root)
    assert m, root
    pid = int(m.group(1))
    assert label_pid in (None, pid), (root, label_pid)
    name, own = out.setdefault(pid, (m.group(2), {}))
    assert name == m.group(2), root
    own[leaf] = own.get(leaf, 0) + count


def _collapsed_by_process(path):
    """{pid: (name, {function: own samples})} of a collapsed profile whose
    stacks start at process frames."""
    out = {}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [f.rpartition(" (") for f in stack.split(";")]
        assert stack.split(";")[0].endswith(" (<process>:0)"), line
        _add(out, frames[0][0], frames[-1][0], int(count), files=[f[2] for f in frames])
    return out


def _pprof_by_process(path):
    """The same of a pprof profile, from `go tool pprof -raw`: samples
    (count, location ids leaf first, then their label lines) and the
    locations' function names."""
    if not GO and os.environ.get("CI") != "true":
        pytest.skip("`go` is not installed (Debian package golang-go): go tool pprof cannot read the output")
    r = subprocess.run([GO, "tool", "pprof", "-raw", str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    samples_text, _, rest = r.stdout.partition("\nSamples:\n")[2].partition("\nLocations\n")
    names, files = {}, {}
    for m in re.finditer(r"^\s*(\d+): 0x0 M=\d+ (.*) (\S+):-?\d+ s=", rest.split("\nMappings\n")[0], re.M):
        names[int(m.group(1))], files[int(m.group(1))] = m.group(2), m.group(3)
    samples = []
    for line in samples_text.splitlines()[1:]:
        m = re.fullmatch(r"\s*(\d+)\s+\d+:((?: \d+)*) ?", line)
        if m:
            samples.append([int(m.group(1)), [int(i) for i in m.group(2).split()], None])
        elif line.strip().startswith("pid:["):
            samples[-1][2] = int(line.strip()[5:-1])
    out = {}
    for count, ids, pid in samples:
        assert pid is not None and ids, (count, ids)
        _add(out, names[ids[-1]], names[ids[0]], count, pid, [files[i] for i in ids])
    return out


@needs_sampler
@pytest.mark.parametrize("args, pool_name, executor_name, output, read", [
    (["spawn"], "SpawnPoolWorker", "SpawnProcess", "p.collapsed.txt", _collapsed_by_process),
    pytest.param(["fork"], "ForkPoolWorker", "ForkProcess", "p.pb.gz", _pprof_by_process,
                 marks=pytest.mark.versions("3.10", "3.13")),
    # The process started by subprocess is named by its command line.
    pytest.param(["forkserver", "subprocess"], "ForkServerPoolWorker", "ForkServerProcess", "p.collapsed.txt",
                 _collapsed_by_process, marks=pytest.mark.versions("3.12")),
])
def test_workers_are_in_the_profile_under_their_process(tmp_path, args, pool_name, executor_name, output, read):
    prog = tmp_path / "workers.py"
    prog.write_text(PROGRAM)
    out = tmp_path / output
    r = run(["profile", "-o", str(out), str(prog)] + args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    log = json.loads(r.stdout)
    procs = read(out)
    assert procs[log["parent"]][0] == " ".join(["workers.py"] + args)   # the command line, the script by its name
    assert "crunch_in_worker" not in procs[log["parent"]][1]
    workers = {pid: pool_name + r"-\d+" for pid in log["pool"]}
    workers.update({pid: executor_name + r"-\d+" for pid in log["executor"]})
    workers.update({pid: re.escape("workers.py child") for pid in log["subprocess"]})
    for pid, name in workers.items():
        assert re.fullmatch(name, procs[pid][0]), (pid, procs[pid][0])
        assert procs[pid][1].get("crunch_in_worker", 0) >= 1, (pid, procs[pid])
    # The worker function only where the program says it ran.
    assert {pid for pid, (_, own) in procs.items() if "crunch_in_worker" in own} == set(workers)
    _, rows, wrote = profile_summary(r.stderr)
    assert any(row[4].startswith("crunch_in_worker ") for row in rows), r.stderr
    merged = int(re.search(r"; (\d+) more process(?:es)? merged", wrote).group(1))
    assert merged == len(procs) - 1 >= len(workers)
    # The processes' own files were merged and removed; only the output is left.
    assert sorted(os.listdir(tmp_path)) == [output, "workers.py"]


@needs_sampler
def test_no_follow_profiles_the_program_only(tmp_path):
    prog = tmp_path / "workers.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "p.collapsed.txt"
    r = run(["profile", "--no-follow", "-o", str(out), str(prog), "fork"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "crunch_in_worker" not in text and "<process>" not in text
    assert "merged" not in r.stderr and sorted(os.listdir(tmp_path)) == ["p.collapsed.txt", "workers.py"]
