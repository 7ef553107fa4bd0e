"""`stackwatch run` leaves the program's behaviour unchanged and always
leaves a readable trace; user errors are one line, never a traceback."""
import os
import signal
import subprocess
import sys

import pytest

from conftest import run, write
from stackwatch import Trace

PROGRAM = '''
import sys
def work(n):
    return n if n < 2 else work(n - 1) + work(n - 2)
print("argv", sys.argv)
print("name", __name__)
print("result", work(15))
print("to stderr", file=sys.stderr)
'''


def names(trace):
    return {c.qualname for c in trace.codes.values()}


def test_run_same_output_and_trace(tmp):
    script = write(tmp / "prog.py", PROGRAM)
    plain = run(["python", script, "a", "--b"], cwd=tmp)
    traced = run(["run", "-o", str(tmp / "o.swt"), script, "a", "--b"], cwd=tmp)
    assert traced.returncode == plain.returncode == 0
    assert traced.stdout == plain.stdout
    assert "name __main__" in traced.stdout
    assert f"argv ['{script}', 'a', '--b']" in traced.stdout
    lines = traced.stderr.splitlines()
    assert lines[0] == "to stderr"
    assert lines[1].startswith(f"stackwatch: wrote {tmp / 'o.swt'} (")
    t = Trace(str(tmp / "o.swt"))
    assert t.complete and t.damage is None
    assert "work" in names(t)
    calls = {t.codes[r.code].qualname: r.calls for r in t.stats()}
    assert calls["work"] == 1973  # fib(15) makes 1973 calls
    assert f"({t.event_count()} events, 1 thread)" in lines[1]


def test_run_module(tmp):
    pkg = tmp / "mypkg"
    pkg.mkdir()
    write(pkg / "__init__.py", "")
    write(pkg / "tool.py", PROGRAM)
    plain = run(["python", "-m", "mypkg.tool", "x"], cwd=tmp)
    traced = run(["run", "-o", "o.swt", "-m", "mypkg.tool", "x"], cwd=tmp)
    assert traced.returncode == plain.returncode == 0
    assert traced.stdout.replace(str(tmp), "") == plain.stdout.replace(str(tmp), "")
    assert "work" in names(Trace(str(tmp / "o.swt")))


def test_run_module_gets_every_word_after_its_name(tmp):
    # Like python: what follows -m MODULE is the module's, even words that
    # are stackwatch's own options (-q, -o, --sample) or unknown to it (-x).
    write(tmp / "argmod.py", PROGRAM)
    words = ["-q", "-x", "-o", "not-this.swt", "--sample", "--", "-m", "z"]
    plain = run(["python", "-m", "argmod"] + words, cwd=tmp)
    traced = run(["run", "--c-calls", "-o", "o.swt", "-m", "argmod"] + words, cwd=tmp)
    assert traced.returncode == plain.returncode == 0, traced.stderr
    assert traced.stdout.replace(str(tmp), "") == plain.stdout.replace(str(tmp), "")
    assert f"', {', '.join(repr(w) for w in words)}]" in traced.stdout
    assert "stackwatch: wrote" in traced.stderr  # stackwatch's -q was not taken
    assert (tmp / "o.swt").exists() and not (tmp / "not-this.swt").exists()
    attached = run(["run", "-o", "a.swt", "-margmod", "-q"], cwd=tmp)
    assert attached.returncode == 0, attached.stderr
    assert "'-q']" in attached.stdout and "stackwatch: wrote" in attached.stderr


@pytest.mark.parametrize("words,expect", [
    (["-m", "mod", "-q"], (["-m", "mod"], ["-q"])),
    (["--buffer-size=1M", "-o", "x", "-m", "mod", "-o", "y"], (["--buffer-size=1M", "-o", "x", "-m", "mod"], ["-o", "y"])),
    (["--buf", "1M", "-m", "mod", "a"], (["--buf", "1M", "-m", "mod"], ["a"])),
    (["-oout.swt", "-mmod", "-x"], (["-oout.swt", "-mmod"], ["-x"])),
    (["--sample", "-m", "mod", "-q"], (["--sample", "-m", "mod"], ["-q"])),
    (["--sample", "2ms", "-m", "mod", "-q"], (["--sample", "2ms", "-m", "mod"], ["-q"])),
    (["--sample", "script.py", "-m", "x"], None),          # the script's own -m
    (["script.py", "-m", "x"], None),
    (["--", "-m", "x"], None),
    (["-q", "-m"], None),                                    # argparse reports the missing module
])
def test_split_at_module(words, expect):
    from stackwatch import cli
    sub = cli.build_parser().program_parsers["run"]
    got = cli.split_at_module(sub, words)
    assert got == expect


@pytest.mark.parametrize("body,status", [
    ("import sys\ndef f():\n    sys.exit(3)\nf()\n", 3),
    ("import sys\nsys.exit('bye')\n", 1),
    ("def f():\n    raise ValueError('boom')\nf()\n", 1),
    ("import os, sys\ndef f():\n    print('x', flush=True)\n    os._exit(7)\nf()\n", 7),
])
def test_exit_paths_keep_status_output_and_trace(tmp, body, status):
    script = write(tmp / "p.py", body)
    plain = run(["python", script], cwd=tmp)
    traced = run(["run", "-o", "o.swt", script], cwd=tmp)
    assert plain.returncode == status
    assert traced.returncode == status
    assert traced.stdout == plain.stdout
    # stderr: the program's own output first (tracebacks show only its frames)
    plain_err = plain.stderr.replace(script, "S")
    traced_err = "\n".join(l for l in traced.stderr.splitlines() if not l.startswith("stackwatch:"))
    assert traced_err.strip() == plain_err.strip().replace("S", script).replace(script, script) or \
        traced_err.replace(script, "S").strip() == plain_err.strip()
    t = Trace(str(tmp / "o.swt"))
    assert t.damage is None and t.complete
    assert "f" in names(t) or "<module>" in names(t)


EXEC_PROGRAM = """
import os, sys, threading
def work(n):
    return n + 1
def in_thread():
    for i in range(30):
        work(i)
t = threading.Thread(target=in_thread)
t.start(); t.join()
for i in range(100):
    work(i)
print("before", flush=True)
try:
    os.CALL
except OSError:
    pass
print("exec failed")
for i in range(5):
    work(i)
"""


@pytest.mark.parametrize("call,replaced", [
    ("execv(sys.executable, [sys.executable, '-c', 'print(1 + 1)'])", True),
    ("execlp('sh', 'sh', '-c', 'echo replaced; exit 5')", True),
    ("execv('/nonexistent/prog', ['x'])", False),
], ids=["execv", "execlp", "failed"])
def test_exec_keeps_every_event(tmp, call, replaced):
    """A program that replaces itself (os.exec*): the exit handler never
    runs, so everything recorded is written first (the trace reads like
    that of a killed process, nothing lost) and stackwatch says where it
    is. If the exec fails, tracing goes on to a complete trace."""
    script = write(tmp / "p.py", EXEC_PROGRAM.replace("CALL", call))
    plain = run(["python", script], cwd=tmp)
    traced = run(["run", "-o", "o.swt", script], cwd=tmp)
    assert traced.returncode == plain.returncode, traced.stderr
    assert traced.stdout == plain.stdout
    t = Trace(str(tmp / "o.swt"))
    assert t.damage is None and t.dropped() == 0
    calls = {}
    for r in t.stats():
        calls[t.codes[r.code].name] = calls.get(t.codes[r.code].name, 0) + r.calls
    if replaced:
        assert "before" in traced.stdout and "exec failed" not in traced.stdout
        assert "stackwatch: the program execs" in traced.stderr and "o.swt" in traced.stderr
        assert not t.complete
        assert calls["work"] == 130 and calls["in_thread"] == 1
    else:
        assert "exec failed" in traced.stdout
        assert t.complete
        assert calls["work"] == 135


def test_exec_wrappers_only_while_tracing(tmp):
    import stackwatch
    real = os.execv, os.execve
    with stackwatch.trace(str(tmp / "a.swt")):
        assert os.execv is not real[0] and os.execve is not real[1]
    assert (os.execv, os.execve) == real


def test_keyboard_interrupt_same_as_python(tmp):
    script = write(tmp / "p.py", "def f():\n    raise KeyboardInterrupt\nf()\n")
    plain = run(["python", script], cwd=tmp)
    traced = run(["run", "-o", "o.swt", script], cwd=tmp)
    assert plain.returncode == traced.returncode == -signal.SIGINT
    assert "KeyboardInterrupt" in traced.stderr
    assert Trace(str(tmp / "o.swt")).complete


def test_sigkill_leaves_readable_trace(tmp):
    script = write(tmp / "p.py", (
        "import time\n"
        "def f(n):\n    return n if n < 2 else f(n-1) + f(n-2)\n"
        "while True:\n    f(18)\n    print('tick', flush=True)\n"))
    p = subprocess.Popen([sys.executable, "-m", "stackwatch", "run", "-o", str(tmp / "o.swt"),
                          "--buffer-size", "16K", script], stdout=subprocess.PIPE, cwd=tmp)
    for _ in range(3):
        p.stdout.readline()
    # (3 ticks are ~50,000 events: 16K buffers written many times over)
    p.kill()
    p.wait()
    t = Trace(str(tmp / "o.swt"))
    assert not t.complete
    assert t.event_count() > 1000
    assert any(r.calls > 100 for r in t.stats())


@pytest.mark.parametrize("args,needle", [
    (["run", "does_not_exist.py"], "can't open file 'does_not_exist.py'"),
    (["run"], "nothing to run"),
    (["run", "--bogus", "x.py"], "unrecognized arguments"),
    (["run", "--buffer-size", "lots", "PROG"], "invalid size"),
    (["run", "-o", "/nonexistent-dir/x.swt", "PROG"], "no such directory"),
    (["run", "--max-depth", "-1", "PROG"], "--max-depth"),
    (["stats", "missing.swt"], "missing.swt"),
    (["export", "T", "--format", "svg", "-o", "x"], "unknown format 'svg'"),
    (["frobnicate"], "invalid choice"),
])
@pytest.mark.versions("3.10", "3.13")   # argparse and the CLI's own checks: the interpreter's
def test_user_errors_are_one_line(tmp, args, needle):   # version does not change them
    prog = write(tmp / "prog.py", "print('hi')\n")
    good = tmp / "good.swt"
    run(["run", "-q", "-o", str(good), prog], cwd=tmp)
    args = [prog if a == "PROG" else str(good) if a == "T" else a for a in args]
    r = run(args, cwd=tmp)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    err = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(err) == 1, r.stderr
    assert err[0].startswith("stackwatch: error:")
    assert needle in err[0]


def test_unwritable_output(tmp):
    if os.geteuid() == 0:
        ro = "/proc/stackwatch-test.swt"
    else:
        d = tmp / "ro"
        d.mkdir()
        os.chmod(d, 0o500)
        ro = str(d / "x.swt")
    prog = write(tmp / "p.py", "print('hi')\n")
    r = run(["run", "-o", ro, prog], cwd=tmp)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "stackwatch: error:" in r.stderr


def test_stats_output(tmp):
    script = write(tmp / "prog.py", PROGRAM)
    run(["run", "-q", "-o", "o.swt", script], cwd=tmp)
    r = run(["stats", "o.swt", "--threads"], cwd=tmp)
    assert r.returncode == 0, r.stderr
    assert "work" in r.stdout and "1973" in r.stdout
    assert "MainThread" in r.stdout


def test_forked_child_exec_says_nothing(tmp):
    """A forked child that execs (the old fork-then-exec idiom) is quiet, as
    its exit is: only the process stackwatch started prints its line."""
    script = write(tmp / "p.py", (
        "import os\n"
        "def work():\n"
        "    return 1\n"
        "work()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.execv('/bin/sh', ['sh', '-c', 'exit 0'])\n"
        "os.waitpid(pid, 0)\n"
        "work()\n"))
    r = run(["run", "-o", "o.swt", script], cwd=tmp)
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("stackwatch:")]
    assert len(lines) == 1 and lines[0].startswith("stackwatch: wrote "), r.stderr
