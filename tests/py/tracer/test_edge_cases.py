"""Programs that stress the tracer's assumptions: deep recursion, frames
unwound by RecursionError, daemon threads alive at exit, fork-based
multiprocessing, signal handlers, a program that changes directory."""
import os
import re
import sys

import pytest

from conftest import calls_by_name, run, write
from stackwatch import Trace


def test_deep_recursion_and_recursion_error(tmp):
    script = write(tmp / "p.py", '''
import sys
sys.setrecursionlimit(20000)
def down(n):
    return 0 if n == 0 else 1 + down(n - 1)
def forever(n):
    return forever(n + 1)
print(down(8000))
try:
    forever(0)
except RecursionError:
    print("recursion error")
''')
    r = run(["run", "-o", "o.swt", "--buffer-size", "16K", script], cwd=tmp)
    assert r.returncode == 0, r.stderr
    assert "8000\nrecursion error" in r.stdout
    t = Trace(str(tmp / "o.swt"))
    assert t.damage is None and t.dropped() == 0
    c = calls_by_name(t)
    assert c["down"] == 8001
    assert c["forever"] > 1000
    main = 0
    events = t.events(main)
    assert max(e.depth for e in events) >= 8000
    # balanced: every frame closed by a real event, none synthetic
    assert not any(e.synthetic for e in events if t.codes.get(e.code) and
                   t.codes[e.code].qualname in ("down", "forever"))


def test_daemon_thread_running_at_exit(tmp):
    script = write(tmp / "p.py", '''
import threading
ran = threading.Event()
def spin():
    def f(n):
        return n
    calls = 0
    while True:
        f(1)
        calls += 1
        if calls == 1000:
            ran.set()
threading.Thread(target=spin, daemon=True, name="spinner").start()
ran.wait(60)   # (still spinning when main ends, however busy the machine)
print("main done")
''')
    r = run(["run", "-o", "o.swt", script], cwd=tmp)
    assert r.returncode == 0, r.stderr
    t = Trace(str(tmp / "o.swt"))
    assert t.complete and t.damage is None
    name = "spin.<locals>.f" if sys.version_info >= (3, 11) else "f"
    assert calls_by_name(t)[name] > 100
    assert "spinner" in {th["name"] for th in t.threads}


def test_multiprocessing_fork_children_trace_into_own_files(tmp):
    script = write(tmp / "p.py", '''
import multiprocessing as mp
def square(x):
    return x * x
if __name__ == "__main__":
    ctx = mp.get_context("fork")
    pool = ctx.Pool(2)
    print(sum(pool.map(square, range(20))))
    pool.close()  # workers exit normally (Pool.__exit__ would SIGTERM them)
    pool.join()
''')
    r = run(["run", "-o", "o.swt", script], cwd=tmp)
    assert r.returncode == 0, r.stderr
    assert "2470" in r.stdout
    children = [p for p in os.listdir(tmp) if re.fullmatch(r"o\.\d+\.swt", p)]
    assert len(children) >= 2
    squares = 0
    for p in children:
        t = Trace(str(tmp / p))
        assert t.damage is None
        squares += calls_by_name(t).get("square", 0)
    assert squares == 20
    assert "square" not in calls_by_name(Trace(str(tmp / "o.swt")))


def test_signal_handler_is_traced(tmp):
    script = write(tmp / "p.py", '''
import os, signal
hits = []
def handler(signum, frame):
    hits.append(signum)
signal.signal(signal.SIGUSR1, handler)
for _ in range(3):
    os.kill(os.getpid(), signal.SIGUSR1)
print(len(hits))
''')
    r = run(["run", "-o", "o.swt", script], cwd=tmp)
    assert r.returncode == 0 and r.stdout.strip() == "3", r.stderr
    assert calls_by_name(Trace(str(tmp / "o.swt")))["handler"] == 3


def test_program_changing_directory(tmp):
    sub = tmp / "elsewhere"
    sub.mkdir()
    script = write(tmp / "p.py", f'''
import os
os.chdir({str(sub)!r})
def f():
    return 1
f()
''')
    r = run(["run", "-o", "o.pftrace", "--format", "perfetto", script], cwd=tmp)
    assert r.returncode == 0, r.stderr
    assert (tmp / "o.pftrace").exists() and not (sub / "o.pftrace").exists()


def test_recursion_to_the_default_limit(tmp):
    """3.12 spends two C-recursion levels per hooked call; without the bonus
    a traced program could only recurse ~750 deep (limit 1000)."""
    script = write(tmp / "p.py", '''
import sys
def down(n):
    return 0 if n == 0 else 1 + down(n - 1)
print(down(sys.getrecursionlimit() - 20))
''')
    r = run(["run", "-o", "o.swt", script], cwd=tmp)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "980"


@pytest.mark.parametrize("consumer", ["file", "handler"])
def test_exhausted_c_stack_raises_instead_of_crashing(tmp, consumer):
    """Every hooked call uses C stack; near the end of the thread's stack the
    hook raises RecursionError rather than letting the process crash. Also
    under a handler alone (it crashed 3.11), which keeps running."""
    script = write(tmp / "p.py", '''
import sys, threading
sys.setrecursionlimit(200000)
HANDLER = sys.argv[1] == "handler"
calls = [0]
def on(ev):
    calls[0] += 1
def down(n):
    return 0 if n == 0 else 1 + down(n - 1)
def attempt():
    try:
        down(150000)
        print("no error")
    except RecursionError as e:
        print("RecursionError")
if HANDLER:
    import stackwatch
    h = stackwatch.add_handler(on, events="calls")
attempt()
threading.stack_size(4 << 20)
t = threading.Thread(target=attempt)
t.start(); t.join()
if HANDLER:
    n = calls[0]
    down(10)
    print(calls[0] > n)
''')
    if consumer == "file":
        r = run(["run", "-o", "o.swt", script, "file"], cwd=tmp)
    else:
        r = run(["python", script, "handler"], cwd=tmp)
    assert r.returncode == 0, (r.returncode, r.stderr[-800:])
    if consumer == "file":
        assert r.stdout.split() == ["RecursionError", "RecursionError"]
        assert Trace(str(tmp / "o.swt")).complete
    else:
        assert "was removed" not in r.stderr, r.stderr
        assert r.stdout.split() == ["RecursionError", "RecursionError", "True"], r.stdout


@pytest.mark.timing
def test_sigkill_keeps_events_up_to_the_last_background_flush(tmp):
    """Killed by SIGKILL (no atexit, no stop; SIGTERM writes everything,
    tests/py/cli/test_signals.py): the background flusher has written what
    the program recorded before it went idle."""
    import signal
    import subprocess
    import time
    script = write(tmp / "p.py", '''
import time
def work(n):
    return n if n < 2 else work(n - 1) + work(n - 2)
work(15)
print("ready", flush=True)
time.sleep(30)
''')
    p = subprocess.Popen([sys.executable, "-m", "stackwatch", "run", "-o", str(tmp / "o.swt"),
                          "--flush-interval", "100ms", script], stdout=subprocess.PIPE, cwd=tmp)
    assert p.stdout.readline().strip() == b"ready"
    # Until the flusher has written them (not for a time: a loaded machine
    # may run it late); only the flusher writes while the program sleeps.
    give_up = time.monotonic() + 30
    while time.monotonic() < give_up:
        try:
            if calls_by_name(Trace(str(tmp / "o.swt"))).get("work") == 1973:
                break
        except Exception:      # read while a chunk is being written
            pass
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    t = Trace(str(tmp / "o.swt"))
    assert not t.complete
    assert calls_by_name(t)["work"] == 1973
