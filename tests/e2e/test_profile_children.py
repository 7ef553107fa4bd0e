"""`stackwatch profile` follows the processes the program starts
(tracer/follow_profile.py): each profiles itself into OUT.<pid>.swprof and
the first process merges them into its output, every stack under a frame
naming its process ("pid N NAME", profiler/processes.py).

Ground truth is the program's own log: each task returns the pid of the
worker that ran it, so the output must hold the worker function's samples
under exactly those processes (and never under the parent), each named by
multiprocessing's name for it, and the parent under its command line.
"""
import json
import os
import re
import sys

import pytest

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

if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    with ctx.Pool(2) as pool:      # __exit__ terminates the workers (SIGTERM)
        in_pool = pool.map(crunch_in_worker, [0.05] * 4, chunksize=1)
    with ProcessPoolExecutor(2, mp_context=ctx) as ex:     # its workers end normally
        in_executor = list(ex.map(crunch_in_worker, [0.05] * 4))
    print(json.dumps({"parent": os.getpid(), "pool": sorted(set(in_pool)),
                      "executor": sorted(set(in_executor))}))
'''

ROOT = re.compile(r"pid (\d+) (.*) \(<process>:0\)")


def _by_process(collapsed):
    """{pid: (name, {function: own samples})} of a collapsed profile whose
    stacks start at process frames."""
    out = {}
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        m = ROOT.fullmatch(frames[0])
        assert m, line
        name, own = out.setdefault(int(m.group(1)), (m.group(2), {}))
        assert name == m.group(2), line
        leaf = frames[-1].partition(" (")[0]
        own[leaf] = own.get(leaf, 0) + int(count)
    return out


@needs_sampler
@pytest.mark.parametrize("method, pool_name, executor_name", [
    ("spawn", "SpawnPoolWorker", "SpawnProcess"),
    ("fork", "ForkPoolWorker", "ForkProcess"),
])
def test_workers_are_in_the_profile_under_their_process(tmp_path, method, pool_name, executor_name):
    prog = tmp_path / "workers.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "p.collapsed.txt"
    r = run(["profile", "-o", str(out), str(prog), method], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    log = json.loads(r.stdout)
    procs = _by_process(out.read_text())
    assert procs[log["parent"]][0] == f"workers.py {method}"     # the command line, the script by its name
    assert "crunch_in_worker" not in procs[log["parent"]][1]
    workers = {pid: pool_name for pid in log["pool"]}
    workers.update({pid: executor_name for pid in log["executor"]})
    for pid, name in workers.items():
        assert re.fullmatch(name + r"-\d+", procs[pid][0]), (pid, procs[pid][0])
        assert procs[pid][1].get("crunch_in_worker", 0) >= 1, (pid, procs[pid])
    # The worker function only where the program says it ran.
    assert {pid for pid, (_, own) in procs.items() if "crunch_in_worker" in own} == set(workers)
    _, rows, wrote = profile_summary(r.stderr)
    assert any(row[4].startswith("crunch_in_worker ") for row in rows), r.stderr
    merged = int(re.search(r"; (\d+) more process(?:es)? merged", wrote).group(1))
    assert merged == len(procs) - 1 >= len(workers)
    # The processes' own files were merged and removed; only the output is left.
    assert sorted(os.listdir(tmp_path)) == ["p.collapsed.txt", "workers.py"]


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
