"""What `stackwatch profile` leaves a person: with no -o, the HTML flame
graph (stackwatch-PID.flamegraph.html) and a short table of the top
functions (own and total samples, and their shares) on stderr; an -o whose
ending names no format is one line listing the endings that do, before the
program runs. The table is checked against the samples themselves (the
collapsed stacks of the same run)."""
import collections
import os
import re

import pytest

from conftest import needs_sampler, page_data, profile_summary, run, write

PROGRAM = '''\
import time
def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
def hot():
    spin(0.15)
def cold():
    spin(0.05)
def main():
    hot()
    cold()
main()
print("done")
'''


@needs_sampler
def test_default_output_is_the_flame_graph_and_a_summary(tmp_path):
    script = write(tmp_path / "prog.py", PROGRAM)
    r = run(["profile", "--interval", "500us", script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    made = sorted(set(os.listdir(tmp_path)) - {"prog.py"})
    assert len(made) == 1 and re.fullmatch(r"stackwatch-\d+\.flamegraph\.html", made[0]), made
    program_stderr, rows, wrote = profile_summary(r.stderr)
    assert program_stderr == ""
    m = re.fullmatch(r"stackwatch: wrote (.+) \(wall mode, (\d+) samples of 1 thread.*\)\n", wrote)
    assert m and m.group(1) == str(tmp_path / made[0]), wrote
    data = page_data((tmp_path / made[0]).read_text(encoding="utf-8"))
    assert sum(t["samples"] for t in data["threads"]) == int(m.group(2))
    # The program's own functions are on top: spin runs under every sample
    # but the few taken at its start and end.
    assert 0 < len(rows) <= 10
    assert rows[0][4] == f"spin  ({script}:2)"
    assert rows[0][0] >= 0.9 * int(m.group(2))
    # Every function of the program listed is named with its own line.
    lines = {"<module>": 1, "spin": 2, "hot": 6, "cold": 8, "main": 10}
    mine = [row[4] for row in rows if f"({script}:" in row[4]]
    assert mine and all(f == f"{f.split()[0]}  ({script}:{lines[f.split()[0]]})" for f in mine), mine


def collapsed_functions(text):
    """{function: [own, total]} and the number of samples, from collapsed
    stacks (a function counted once per stack for its total)."""
    out = collections.defaultdict(lambda: [0, 0])
    n = 0
    for line in text.splitlines():
        stack, count = line.rsplit(" ", 1)
        frames = stack.split(";")
        n += int(count)
        out[frames[-1]][0] += int(count)
        for f in set(frames):
            out[f][1] += int(count)
    return out, n


@needs_sampler
def test_summary_counts_are_the_samples(tmp_path):
    script = write(tmp_path / "prog.py", PROGRAM)
    r = run(["profile", "--interval", "500us", "-o", "p.txt", script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    _, rows, _ = profile_summary(r.stderr)
    functions, n = collapsed_functions((tmp_path / "p.txt").read_text())
    assert rows
    for own, own_pct, total, total_pct, function in rows:
        name, where = function.split("  ", 1)
        assert functions[f"{name} {where}"] == [own, total], function
        assert own_pct == f"{100 * own / n:.1f}%" and total_pct == f"{100 * total / n:.1f}%"
    # Sorted by own samples; the ten with the most own samples are there.
    assert [row[0] for row in rows] == sorted((row[0] for row in rows), reverse=True)
    assert rows[-1][0] >= sorted((v[0] for v in functions.values()), reverse=True)[len(rows) - 1]


def test_quiet_prints_nothing(tmp_path):
    script = write(tmp_path / "prog.py", PROGRAM)
    r = run(["profile", "-q", "-o", "p.txt", script], cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, "done\n", "")


@pytest.mark.parametrize("output", ["out.dat", "out", "p.svg", "t.pftrace", "t.swt"])
def test_an_ending_that_names_no_format_is_one_line(tmp_path, output):
    script = write(tmp_path / "prog.py", PROGRAM)
    r = run(["profile", "-o", output, script], cwd=tmp_path)
    assert r.returncode == 2
    assert r.stdout == "", "the program ran"
    assert os.listdir(tmp_path) == ["prog.py"]
    err = r.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith(f"stackwatch: error: '{output}': its ending names no "
                                               "known format (known: "), r.stderr
    for known in (".flamegraph.html (html)", ".collapsed.txt (collapsed)", ".speedscope.json (speedscope)",
                  ".pb.gz (pprof)", ".swprof (stackwatch)"):
        assert known in err[0]
    assert "--format" in err[0]


def test_format_given_takes_any_ending(tmp_path):
    script = write(tmp_path / "prog.py", PROGRAM)
    r = run(["profile", "-q", "--format", "collapsed", "-o", "out.dat", script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.dat").exists()


IDLE_POOL = '''\
import threading, time
from concurrent.futures import ThreadPoolExecutor
def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
go = threading.Event()
with ThreadPoolExecutor(3) as pool:
    for _ in range(3):
        pool.submit(go.wait)
    while len(go._cond._waiters) < 3:   # until the pool's threads all wait on the condition
        time.sleep(0.001)
    time.sleep(0.02)
    print(sorted(t.name for t in threading.enumerate() if t is not threading.main_thread()))
    spin(1.0)
    go.set()
'''


@needs_sampler
@pytest.mark.versions("3.12")   # (the summary's rule: the same on every version)
def test_summary_leaves_out_the_threads_that_only_waited(tmp_path):
    # (The pool threads run for a moment after go.set(), waiting for the
    # GIL and a CPU: under load that can pass 1% of a 0.5 s run, and a
    # thread that ran that long is not left out; 1 s of work halves it.)
    # Three pool threads idle for the whole run would fill the table with
    # Condition.wait; the summary shows the main thread's work and names
    # the threads it left out (the program's own list of its pool).
    script = write(tmp_path / "idle.py", IDLE_POOL)
    r = run(["profile", "-o", str(tmp_path / "p.txt"), script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pool = eval(r.stdout)
    _, rows, _ = profile_summary(r.stderr)
    assert rows[0][4].startswith("spin "), r.stderr
    m = re.search(r"^stackwatch: 3 threads that only waited \(idle in 99% of their samples or more\) "
                  r"left out: (.*)$", r.stderr, re.M)
    assert m, r.stderr
    assert sorted(re.sub(r" \(\d+\)$", "", n) for n in m.group(1).split(", ")) == pool


@needs_sampler
@pytest.mark.versions("3.12")   # (the counting and its display: the same on every version)
def test_failed_reads_are_counted_and_shown(tmp_path):
    """Every 4th stack read failed on purpose (STACKWATCH_TEST_FAIL_EVERY,
    as a walk still torn after its retries): the summary line says how
    many, and the flame graph page's data and the profile file carry the
    same count; the stacks that were read are the program's."""
    script = write(tmp_path / "prog.py", PROGRAM)
    counts = {}
    for out in ("p.html", "p.swprof"):
        r = run(["profile", "--interval", "500us", "-o", out, script], cwd=tmp_path,
                env={"STACKWATCH_TEST_FAIL_EVERY": "4"})
        assert r.returncode == 0 and r.stdout == "done\n", r.stderr
        _, rows, wrote = profile_summary(r.stderr)
        m = re.search(r"\((?:\w+) mode, (\d+) samples of \d+ threads?, (\d+) failed reads of a stack\)", wrote)
        assert m, wrote
        stored, failed = int(m.group(1)), int(m.group(2))
        # one read in 4 failed (the failed ones are never stored); a read may also fail by itself
        assert failed >= (stored + failed) // 4 >= 50, wrote
        assert rows[0][4].startswith("spin "), rows
        counts[out] = failed
    assert page_data((tmp_path / "p.html").read_text())["stats"]["failed"] == counts["p.html"]
    from stackwatch import load_profile
    assert load_profile(str(tmp_path / "p.swprof")).info()["failed"] == counts["p.swprof"]
