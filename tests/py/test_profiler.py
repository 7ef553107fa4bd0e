"""The statistical profiler (stackwatch.profiler): measured shares match
the ground truth, threads are kept apart, the outputs are valid, bad
arguments are refused, and sampling survives stacks and threads that change
or vanish while they are read."""
import json
import os
import re
import sys
import threading
import time

import pytest

import stackwatch

from conftest import run, write
import mixed_workload as mixed_workload_module
from mixed_workload import count_of, f10, f30, f60, mixed_workload, spin_until

# Frames of stackwatch itself (its CLI, profiler, program runner) never appear.
STACKWATCH_DIR = os.path.dirname(stackwatch.__file__) + os.sep
from stackwatch import _native

SUPPORTED = bool(getattr(_native, "SAMPLER_SUPPORTED", 0))
pytestmark = pytest.mark.skipif(
    not SUPPORTED, reason=f"the sampling profiler does not support CPython {sys.version.split()[0]} "
    "(it supports 3.9 to 3.13 with the GIL)")

if SUPPORTED:
    from stackwatch.profiler import Profiler


# ---- helpers ----

def nodes(tree):
    yield tree
    for c in tree["children"]:
        yield from nodes(c)


# ---- ground truth ----

def measure_shares():
    """(problems, stats): profiles the 60/30/10 workload for 1.5 s at 1 kHz
    and compares each function's share of the sampled wall time with the
    share of wall time it really spent (measured with perf_counter)."""
    with Profiler(interval="1ms") as p:
        spent = mixed_workload(1.5)
    tree = p.tree()
    st = p.stats()
    times = {k: count_of(tree, k, "time_ns") for k in spent}
    counts = {k: count_of(tree, k) for k in spent}
    assert sum(counts.values()) >= 300, f"too few samples to judge: {counts}, stats {st}"
    truth = {k: v / sum(spent.values()) for k, v in spent.items()}
    problems = []
    for k in spent:
        share = times[k] / sum(times.values())
        if abs(share - truth[k]) > 0.03:
            problems.append(f"{k}: measured {share:.3f}, true {truth[k]:.3f} (samples {counts}, stats {st})")
    return problems, st


def test_shares_match_ground_truth():
    problems, st = measure_shares()
    if problems and st["missed"] > st["ticks"] // 5:
        # The machine was so busy that the sampler missed over a fifth of
        # its ticks: such a run judges the machine, not the profiler; one
        # more try.
        problems, st = measure_shares()
    assert not problems, problems
    assert st["failed"] <= st["samples"] // 100, st


def test_rate_is_about_right():
    with Profiler(rate=1000) as p:
        spin_until(time.perf_counter() + 0.5)
    st = p.stats()
    # A loaded machine delays the sampler (missed ticks are skipped, not
    # bunched), so only a loose bound below; never more than one per tick.
    assert 100 <= st["ticks"] <= 520, st
    assert st["ticks"] + st["missed"] <= 520, st


def test_fast_interval_50us():
    with Profiler(interval="50us") as p:
        spin_until(time.perf_counter() + 0.3)
    st = p.stats()
    assert st["ticks"] > 500, st
    assert st["failed"] <= st["samples"] // 100, st


# ---- threads ----

def compute_forever(stop):
    x = 0
    while not stop.is_set():
        x += 1
    return x


def sleep_forever(stop):
    while not stop.is_set():
        time.sleep(0.01)


def test_computing_and_sleeping_threads():
    stop = threading.Event()
    a = threading.Thread(target=compute_forever, args=(stop,), name="computer")
    b = threading.Thread(target=sleep_forever, args=(stop,), name="sleeper")
    with Profiler(interval="1ms") as p:
        a.start()
        b.start()
        time.sleep(0.6)
        stop.set()
        a.join()
        b.join()
    by_id = {t["thread_id"]: t for t in p.threads()}
    assert a.ident in by_id and b.ident in by_id, by_id
    assert threading.main_thread().ident in by_id
    assert by_id[a.ident]["name"] == "computer"
    assert by_id[a.ident]["native_id"] == a.native_id
    ta, tb = p.tree(a.ident), p.tree(b.ident)
    assert ta["count"] == by_id[a.ident]["samples"] > 50
    assert count_of(ta, "compute_forever") >= 0.9 * ta["count"], ta
    assert count_of(ta, "sleep_forever") == 0
    assert count_of(tb, "sleep_forever") >= 0.9 * tb["count"], tb
    assert count_of(tb, "compute_forever") == 0
    merged = p.tree()
    assert merged["count"] == sum(t["samples"] for t in by_id.values())


def test_unknown_thread_is_key_error():
    with Profiler() as p:
        spin_until(time.perf_counter() + 0.05)
    with pytest.raises(KeyError):
        p.tree(thread_id=12345)


# ---- stack shapes ----

def recurse(n, seconds):
    if n <= 1:
        spin_until(time.perf_counter() + seconds)
        return 0
    return recurse(n - 1, seconds) + 1


def depth_of_leaf(tree, leaf):
    best = 0
    stack = [(tree, 0)]
    while stack:
        n, d = stack.pop()
        if n["name"] == leaf:
            best = max(best, d)
        stack.extend((c, d + 1) for c in n["children"])
    return best


def test_deep_stack_is_read_whole():
    with Profiler(interval="200us") as p:
        recurse(50, 0.3)
    tree = p.tree()
    # Samples of the 50-deep stack show all 50 recurse frames in a row.
    chain = 0
    stack = [(tree, 0)]
    while stack:
        n, run_len = stack.pop()
        run_len = run_len + 1 if n["name"] == "recurse" else 0
        chain = max(chain, run_len)
        stack.extend((c, run_len) for c in n["children"])
    assert chain == 50
    assert depth_of_leaf(tree, "spin_until") > 50


def test_truncated_stacks_keep_the_leaf():
    with Profiler(interval="500us", max_depth=10) as p:
        recurse(40, 0.2)
    st = p.stats()
    assert st["truncated"] > 0, st
    tree = p.tree()
    roots = {c["name"] for c in tree["children"]}
    assert "<truncated>" in roots
    trunc = [c for c in tree["children"] if c["name"] == "<truncated>"][0]
    assert count_of(trunc, "spin_until") > 0
    assert depth_of_leaf(tree, "spin_until") <= 11


def busy_generator(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        yield 1


def consume():
    return sum(busy_generator(0.3))


def test_generator_frames_are_on_the_stack():
    with Profiler(interval="500us") as p:
        consume()
    tree = p.tree()
    for n in nodes(tree):
        if n["name"] == "consume":
            assert count_of(n, "busy_generator") > 0.5 * n["count"]
            break
    else:
        pytest.fail("consume() never sampled")


def test_names_files_and_lines():
    with Profiler(interval="500us") as p:
        f60(0.2)
    found = [n for n in nodes(p.tree()) if n["name"] == "f60"]
    assert found
    n = found[0]
    assert n["filename"] == mixed_workload_module.__file__   # where f60 is defined
    assert n["line"] == f60.__code__.co_firstlineno
    if sys.version_info >= (3, 11):
        # qualified names where the interpreter has them
        class K:
            def meth(self):
                spin_until(time.perf_counter() + 0.1)
        with Profiler(interval="500us") as p2:
            K().meth()
        names = {x["name"] for x in nodes(p2.tree())}
        assert any(s.endswith("K.meth") for s in names), names


# ---- outputs ----

def test_collapsed_output(tmp_path):
    with Profiler(interval="500us") as p:
        mixed_workload(0.3)
    out = tmp_path / "p.txt"
    p.write(out, "collapsed")
    total = 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines
    for line in lines:
        m = re.fullmatch(r"(.+) (\d+)", line)
        assert m, line
        frames = m.group(1).split(";")
        assert all(re.fullmatch(r".+ \(.*:\d+\)", f) for f in frames), line
        total += int(m.group(2))
    st = p.stats()
    assert total == st["stored"] == p.tree()["count"]
    assert any("f60 (" in line for line in lines)


def test_speedscope_output(tmp_path):
    stop = threading.Event()
    t = threading.Thread(target=compute_forever, args=(stop,), name="worker")
    with Profiler(interval="500us") as p:
        t.start()
        mixed_workload(0.3)
        stop.set()
        t.join()
    out = tmp_path / "p.json"
    p.write(out, "speedscope")
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    assert frames and all(isinstance(f["name"], str) for f in frames)
    assert len(doc["profiles"]) == len(p.threads()) >= 2
    names = [prof["name"] for prof in doc["profiles"]]
    assert any(n.startswith("worker") for n in names), names
    total = 0
    for prof in doc["profiles"]:
        for key in ("type", "name", "unit", "startValue", "endValue", "samples", "weights"):
            assert key in prof, key
        assert prof["type"] == "sampled"
        assert prof["unit"] in ("none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes")
        assert len(prof["samples"]) == len(prof["weights"])
        assert all(0 <= i < len(frames) for s in prof["samples"] for i in s)
        assert sum(prof["weights"]) == prof["endValue"] - prof["startValue"]
        total += len(prof["samples"])
    assert total > 0
    used = {frames[i]["name"] for prof in doc["profiles"] for s in prof["samples"] for i in s}
    assert {"f60", "f30", "f10", "compute_forever"} <= used


def test_outputs_escape_odd_names(tmp_path):
    src = "def odd():\n    import time\n    e = time.perf_counter() + 0.1\n    while time.perf_counter() < e: pass\n"
    ns = {}
    exec(compile(src, 'we"ird;\\näme\n.py', "exec"), ns)
    with Profiler(interval="500us") as p:
        ns["odd"]()
    p.write(tmp_path / "o.json", "speedscope")
    doc = json.loads((tmp_path / "o.json").read_text(encoding="utf-8"))
    assert 'we"ird;\\näme\n.py' in {f.get("file") for f in doc["shared"]["frames"]}
    p.write(tmp_path / "o.txt", "collapsed")
    for line in (tmp_path / "o.txt").read_text(encoding="utf-8").splitlines():
        assert re.fullmatch(r"[^\n]+ \d+", line)


# ---- bad arguments and states ----

@pytest.mark.parametrize("kwargs, words", [
    (dict(interval="10us"), "below the minimum of 20us"),
    (dict(interval="19us"), "below the minimum"),
    (dict(interval="0"), "below the minimum"),
    (dict(interval="fast"), "invalid duration"),
    (dict(interval="-1ms"), "invalid duration"),
    (dict(interval="2min"), "invalid duration"),
    (dict(interval="61s"), "above the maximum"),
    (dict(rate=0), "must be positive"),
    (dict(rate=-10), "must be positive"),
    (dict(rate=100_000), "above the maximum"),
    (dict(rate="many"), "invalid sampling rate"),
    (dict(interval="1ms", rate=100), "not both"),
    (dict(max_depth=0), "max_depth"),
    (dict(max_threads=0), "max_threads"),
])
def test_bad_arguments_raise_value_error(kwargs, words):
    with pytest.raises(ValueError, match=words):
        Profiler(**kwargs)


def test_interval_forms():
    assert Profiler().interval_ns == 1_000_000
    assert Profiler(interval="50us").interval_ns == 50_000
    assert Profiler(interval="20us").interval_ns == 20_000
    assert Profiler(rate=1000).interval_ns == 1_000_000
    assert Profiler(rate="250").interval_ns == 4_000_000


def test_unknown_format(tmp_path):
    with Profiler() as p:
        pass
    with pytest.raises(ValueError, match="unknown profile format 'svg'"):
        p.write(tmp_path / "x", "svg")


def test_states():
    p = Profiler()
    with pytest.raises(RuntimeError, match="not been started"):
        p.tree()
    with pytest.raises(RuntimeError, match="not running"):
        p.stop()
    p.start()
    with pytest.raises(RuntimeError, match="already been started"):
        p.start()
    assert p.running
    spin_until(time.perf_counter() + 0.02)
    live = p.tree()        # a snapshot while running
    assert live["name"] == "<root>"
    p.stop()
    with pytest.raises(RuntimeError):
        p.start()
    assert not p.running


# ---- robustness ----

def test_thread_churn_never_crashes():
    """Threads appear and vanish while the sampler reads their states and
    frames; failed reads are counted, nothing crashes."""
    def short():
        sum(range(2000))

    with Profiler(interval="50us") as p:
        end = time.perf_counter() + 0.8
        while time.perf_counter() < end:
            ts = [threading.Thread(target=short) for _ in range(8)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
    st = p.stats()
    assert st["ticks"] > 100, st
    assert st["samples"] > 0


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def test_stacks_changing_fast_never_crash():
    with Profiler(interval="20us") as p:
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            fib(15)
    st = p.stats()
    assert st["samples"] > 100, st
    # A stack that changes under the reader can fail to read: rarely from
    # 3.11 (the frame stack is copied at once); before 3.11 frames are read
    # one by one (a walk takes ~64 us) and such walks are retried, so many
    # still fail: 14-60% measured on this 2-core machine, depending on its
    # load. What must hold: the program never crashes and most rounds on a
    # stable stack succeed (test_shares_* check that failures do not bias).
    limit = st["samples"] // 20 if sys.version_info >= (3, 11) else st["samples"] * 2 // 3
    assert st["failed"] <= max(5, limit), st


def churn(seconds):
    t0 = time.perf_counter()
    while time.perf_counter() < t0 + seconds:
        fib(12)
    return time.perf_counter() - t0


def calm(seconds):
    t0 = time.perf_counter()
    spin_until(t0 + seconds)
    return time.perf_counter() - t0


def test_call_heavy_code_is_not_undersampled():
    """Stacks that change all the time are as visible as stable ones:
    failed reads must not bias the shares."""
    spent = {"churn": 0.0, "calm": 0.0}
    with Profiler(interval="250us") as p:
        end = time.perf_counter() + 1.5
        while time.perf_counter() < end:
            spent["churn"] += churn(0.005)
            spent["calm"] += calm(0.005)
    tree = p.tree()
    times = {k: count_of(tree, k, "time_ns") for k in spent}
    share = times["churn"] / sum(times.values())
    truth = spent["churn"] / sum(spent.values())
    assert abs(share - truth) <= 0.03, (share, truth, p.stats())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_fork_while_sampling():
    """A child forked while the profiler runs goes on unharmed; the
    profiler is unusable there (its thread exists only in the parent)."""
    with Profiler(interval="100us") as p:
        spin_until(time.perf_counter() + 0.05)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                spin_until(time.perf_counter() + 0.05)
                try:
                    p.tree()
                    code = 3
                except RuntimeError:
                    pass
            finally:
                os._exit(code)
        spin_until(time.perf_counter() + 0.05)
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert p.tree()["count"] > 0


# ---- command line ----

PROGRAM = '''
import sys, time
def work(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
print("argv", sys.argv[1:], __name__)
work(0.3)
'''


def test_cli_profile_writes_both_formats(tmp_path):
    script = write(tmp_path / "prog.py", PROGRAM)
    r = run(["profile", "-o", str(tmp_path / "p.txt"), script, "x"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "argv ['x'] __main__" in r.stdout
    assert r.stderr.startswith(f"stackwatch: wrote {tmp_path / 'p.txt'} (")
    lines = (tmp_path / "p.txt").read_text().splitlines()
    # The program's stacks start at its own module, not in stackwatch (the
    # interpreter's shutdown, e.g. threading._shutdown, may follow).
    assert lines and all(line.startswith("<module> (") for line in lines if "prog.py" in line), lines
    assert any(";work (" in line for line in lines)
    assert not any(STACKWATCH_DIR in line for line in lines), lines
    r = run(["profile", "--rate", "500", "-o", str(tmp_path / "p.json"), script],
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    json.loads((tmp_path / "p.json").read_text())


def test_cli_profile_leaves_out_the_interpreter_joining_threads_at_exit(tmp_path):
    # The main thread ends the program while a non-daemon thread still
    # works: the interpreter's exit joins it (threading._shutdown). That
    # wait is not the program's; the thread's own samples are.
    script = write(tmp_path / "late.py", (
        "import threading, time\n"
        "def late():\n"
        "    end = time.perf_counter() + 0.3\n"
        "    while time.perf_counter() < end:\n"
        "        pass\n"
        "threading.Thread(target=late).start()\n"))
    r = run(["profile", "-q", "--mode", "wall", "-o", str(tmp_path / "p.txt"), script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = (tmp_path / "p.txt").read_text().splitlines()
    assert sum(int(l.rsplit(" ", 1)[1]) for l in lines if ";late (" in l) >= 100, lines
    assert not any("_shutdown (" in l for l in lines), lines


def test_cli_profile_module(tmp_path):
    write(tmp_path / "progmod.py", PROGRAM)
    r = run(["profile", "-q", "--format", "collapsed", "-o", "m.txt", "-m",
             "progmod", "y"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    lines = (tmp_path / "m.txt").read_text().splitlines()
    # Finding and compiling the module (runpy, importlib) is part of the
    # run; stackwatch's own frames are not.
    assert any(line.startswith("<module> (") and ";work (" in line for line in lines), lines
    assert not any(STACKWATCH_DIR in line for line in lines), lines


def test_cli_profile_module_gets_every_word_after_its_name(tmp_path):
    write(tmp_path / "argmod.py", "import sys\nprint(sys.argv[1:])\n")
    r = run(["profile", "-o", "m.txt", "-m", "argmod", "-q", "--rate", "5", "-o", "x"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "['-q', '--rate', '5', '-o', 'x']" in r.stdout
    assert (tmp_path / "m.txt").exists() and not (tmp_path / "x").exists()


def test_cli_profile_exit_status(tmp_path):
    script = write(tmp_path / "fail.py", "import sys\nsys.exit(3)\n")
    r = run(["profile", "-q", "-o", "f.txt", script], cwd=tmp_path)
    assert r.returncode == 3
    assert (tmp_path / "f.txt").exists()


EXEC_TAIL = """
import os
os.execv(sys.executable, [sys.executable, "-c", "print('replaced')"])
"""


def test_cli_profile_written_before_exec(tmp_path):
    """A program that replaces itself (os.exec*): the profile up to the exec
    is written first (the exit handler never runs)."""
    script = write(tmp_path / "ex.py", PROGRAM + EXEC_TAIL)
    r = run(["profile", "-o", "e.txt", script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "replaced" in r.stdout
    assert "stackwatch: wrote" in r.stderr
    lines = (tmp_path / "e.txt").read_text().splitlines()
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines if ";work (" in line) >= 100


@pytest.mark.parametrize("args, words", [
    (["--rate", "0"], "sampling rate must be positive"),
    (["--interval", "10us"], "below the minimum of 20us"),
    (["--format", "svg"], "invalid choice: 'svg'"),
    (["--rate", "10", "--interval", "1ms"], "not allowed with"),
    (["-o", "/nonexistent-dir/p.txt"], "no such directory"),
])
def test_cli_profile_bad_input_is_one_line(tmp_path, args, words):
    script = write(tmp_path / "prog.py", PROGRAM)
    r = run(["profile"] + args + [script], cwd=tmp_path)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stackwatch: error: ") and words in lines[0], r.stderr


def _leaf_a():
    spin_until(time.perf_counter() + 20e-6)


def _mid_a():
    _leaf_a()


def _other():
    spin_until(time.perf_counter() + 20e-6)


def _strays_of_leaf_a(seconds):
    """Samples of _leaf_a under anything but _mid_a: a stack that never was."""
    import stackwatch
    with stackwatch.Profiler(interval="200us") as p:
        end = time.time() + seconds
        while time.time() < end:
            _mid_a()
            _other()
    found = {}

    def walk(node, parent):
        if node["name"] == "_leaf_a":
            found[parent] = found.get(parent, 0) + node["count"]
        for c in node["children"]:
            walk(c, node["name"])
    walk(p.tree(), None)
    return found


@pytest.mark.skipif(sys.version_info < (3, 11), reason="before 3.11 frames are objects, walked one by one")
def test_a_returned_frame_is_not_joined_to_its_callers_next_call():
    # _mid_a returns and _other takes its slot on the frame stack while
    # _leaf_a's stale frame still points there: without the re-check in
    # pystack.c about one sample in 4,000 shows _leaf_a under _other.
    # A returned-and-called-again mix inside one copy can still slip
    # through, so one clean run of two is asked.
    runs = [_strays_of_leaf_a(1.5) for _ in range(2)]
    assert any(set(found) == {"_mid_a"} and found["_mid_a"] > 500 for found in runs), runs
