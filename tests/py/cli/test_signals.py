"""A traced or profiled process that receives SIGTERM, SIGINT, SIGHUP or
SIGQUIT writes what it recorded, then ends exactly as it would have under
plain python: same signal, same wait status, the program's own handlers
first (issue 14). The ground truth is the same program run by python;
what was recorded is checked against what the program did (its own count
of calls)."""
import glob
import os
import resource
import signal
import subprocess
import sys

import pytest

from conftest import SAMPLER, calls_by_name, write

FATAL = ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"]


def _as_a_shell():
    """In the child before exec: no core files, and these signals' default
    actions, as an interactive shell starts a program. An ignored signal
    stays ignored across exec, and the test suite itself may have been
    started with some ignored (nohup: SIGHUP; a background job of a script:
    SIGINT and SIGQUIT): the programs would then never die of them."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


def run_both(tmp, program, *options, command="run"):
    """The program run by python and by `stackwatch COMMAND OPTIONS`, no core
    files: (plain, got) CompletedProcess."""
    path = write(tmp / "prog.py", program)

    def go(cmd):
        return subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=120, preexec_fn=_as_a_shell)
    plain = go([sys.executable, path])
    got = go([sys.executable, "-m", "stackwatch", command, *options, path])
    return plain, got


def wrote_line(got, path):
    lines = [x for x in got.stderr.splitlines() if x.startswith("stackwatch: wrote ")]
    assert len(lines) == 1 and lines[0].startswith(f"stackwatch: wrote {path} "), got.stderr
    return lines[0]


# The program does 50 calls of work(), then the signal comes (to itself:
# no timing involved); SIGINT with its default action, as a program that
# wants Ctrl-C to kill it at once sets.
SELF = '''
import os, signal
def work(i):
    return i * 2
for i in range(50):
    work(i)
print("before", flush=True)
signal.signal(signal.SIG{sig}, signal.SIG_DFL)
os.kill(os.getpid(), signal.SIG{sig})
print("never")
'''


@pytest.mark.parametrize("sig", FATAL)
def test_main_process_writes_then_dies_of_the_signal(tmp, sig):
    plain, got = run_both(tmp, SELF.replace("{sig}", sig[3:]), "-o", str(tmp / "o.swt"))
    assert plain.returncode == -getattr(signal, sig) and plain.stdout == "before\n"
    assert got.returncode == plain.returncode and got.stdout == plain.stdout, got.stderr
    wrote_line(got, tmp / "o.swt")
    assert calls_by_name(tmp / "o.swt")["work"] == 50


HANDLER = '''
import os, signal, sys
def work(i):
    return i * 2
def handler(sig, frame):
    print("own handler", sig, signal.getsignal(sig) is handler, flush=True)
    print("previous", signal.signal(sig, signal.SIG_DFL) is handler, flush=True)
    os.kill(os.getpid(), sig)
print("default before", signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
print("replaced", signal.signal(signal.SIGTERM, handler) == signal.SIG_DFL, flush=True)
for i in range(30):
    work(i)
os.kill(os.getpid(), signal.SIGTERM)
print("never")
'''


def test_program_handler_runs_first(tmp):
    """The program's handler runs first and sees what it would see; when it
    restores the default action and sends the signal again, the process
    dies of it after writing."""
    plain, got = run_both(tmp, HANDLER, "-o", str(tmp / "o.swt"))
    assert plain.returncode == -signal.SIGTERM
    assert plain.stdout == "default before True\nreplaced True\nown handler 15 True\nprevious True\n"
    assert got.returncode == plain.returncode and got.stdout == plain.stdout, got.stderr
    wrote_line(got, tmp / "o.swt")
    assert calls_by_name(tmp / "o.swt")["work"] == 30


def test_handler_that_exits_normally(tmp):
    """A handler that raises SystemExit ends the program through the exit
    paths, as under python."""
    program = ("import os, signal, sys\n"
               "def work(): pass\n"
               "signal.signal(signal.SIGTERM, lambda s, f: sys.exit(3))\n"
               "for i in range(7): work()\n"
               "os.kill(os.getpid(), signal.SIGTERM)\n")
    plain, got = run_both(tmp, program, "-o", str(tmp / "o.swt"))
    assert plain.returncode == got.returncode == 3, got.stderr
    wrote_line(got, tmp / "o.swt")
    assert calls_by_name(tmp / "o.swt")["work"] == 7


# A forked child works for 0.2 s, then its parent sends it SIGTERM; the
# parent prints the child's wait status and how many calls it had made
# (the child tells it through a pipe after every call).
CHILD = '''
import os, signal, time
def work():
    os.write(w, b"x")
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    while True:
        work()
        time.sleep(0.001)
os.close(w)
time.sleep(0.2)
os.kill(pid, signal.SIG{sig})
_, status = os.waitpid(pid, 0)
n = 0
while True:
    b = os.read(r, 65536)
    if not b:
        break
    n += len(b)
print("signaled", os.WIFSIGNALED(status), os.WTERMSIG(status) if os.WIFSIGNALED(status) else None)
print("child", pid, n)
'''


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGQUIT"])
@pytest.mark.versions("3.9", "3.13")   # a forked child's signal handling: the same on every version
def test_forked_child_killed_after_work_keeps_its_events(tmp, sig):
    plain, got = run_both(tmp, CHILD.replace("{sig}", sig[3:]), "-q", "-o", str(tmp / "o.swt"))
    status = f"signaled True {getattr(signal, sig).value}\n"
    assert plain.returncode == 0 and plain.stdout.startswith(status), plain.stderr
    assert got.returncode == 0 and got.stdout.startswith(status), got.stderr
    pid, n = map(int, got.stdout.split()[-2:])
    assert n > 0
    # Every call the child finished is in its trace (one more may have
    # begun: its write went through before the signal ended it).
    assert calls_by_name(tmp / f"o.{pid}.swt")["work"] in (n, n + 1)


POOL = '''
import multiprocessing
def work(i):
    return i * i
if __name__ == "__main__":
    with multiprocessing.get_context("fork").Pool(4) as p:
        print(sum(p.map(work, range(16), chunksize=1)))
'''


def test_fork_pool_terminated_workers_keep_their_events(tmp):
    """The pool's __exit__ terminates its workers with SIGTERM: every call
    of work() is in one of their traces."""
    plain, got = run_both(tmp, POOL, "-q", "-o", str(tmp / "o.swt"))
    assert plain.stdout == got.stdout == "1240\n" and got.returncode == 0, got.stderr
    children = glob.glob(str(tmp / "o.[0-9]*.swt"))
    assert len(children) == 4
    assert sum(calls_by_name(c).get("work", 0) for c in children) == 16


@pytest.mark.skipif(not SAMPLER, reason="the sampling profiler does not support this Python")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_profile_writes_then_dies_of_the_signal(tmp, sig):
    # (0.1 s of its own CPU time: on a busy machine the sampler, as starved
    # as it, still gets rounds in; 200,000 calls once gave it none at load 14.
    # Counted from the program's start: the thread's time before it, the
    # CLI's start-up, passed 0.1 s at load 12 and the loop ran no round)
    program = SELF.replace("{sig}", sig[3:]).replace(
        "for i in range(50):\n    work(i)",
        "import time\nt0 = time.thread_time()\nwhile time.thread_time() - t0 < 0.1:\n    work(1)")
    out = tmp / "p.collapsed.txt"
    plain, got = run_both(tmp, program, "-o", str(out), "--interval", "100us", command="profile")
    assert got.returncode == plain.returncode == -getattr(signal, sig), got.stderr
    assert got.stdout == plain.stdout
    wrote_line(got, out)
    assert os.path.getsize(out) > 0
