"""`stackwatch attach PID --trace`: the exact tracer started inside a
running server-like program (server.py) and stopped again. The calls the
trace holds equal those the program's own log says it made (every complete
iteration, in order), its output is unchanged, it keeps running after the
detach, ten attaches in a row work, and every refusal is one line."""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import missing, run

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "server.py")
LOGGED = {"handle", "parse", "work", "square", "respond"}


def server_args(log, iterations=None, profile=None):
    """server.py's command line, with warnings shown (-W default): a
    warning the attach caused would be printed into the program's stderr."""
    return ([sys.executable, "-W", "default", SERVER, str(log)] + ([str(iterations)] if iterations else []) +
            ([str(profile)] if profile else []))


def start_server(tmp, iterations=None, profile=None, cwd=None, env=None):
    """server.py started (env: added to the environment); (process, its log)."""
    log = tmp / "calls.log"
    p = subprocess.Popen(server_args(log, iterations, profile), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=cwd, env=dict(os.environ, **env) if env else None)
    assert p.stdout.readline() == "iteration 0\n"
    return p, log


def log_iterations(log):
    """[(n, t_ns, [calls])] of the program's own log, complete iterations only."""
    its = []
    for line in log.read_text().splitlines():
        words = line.split()
        if words[0] == "handle":
            its.append((int(words[1]), int(words[2]), ["handle"]))
        elif its:
            its[-1][2].append(words[0])
    return its[:-1]


def trace_iterations(path):
    """The trace's calls of the logged functions, cut into iterations at
    each call of handle: complete iterations only (the first and the last
    may have been entered before the start or left after the stop)."""
    from stackwatch import Trace
    t = Trace(str(path))
    assert len(t.threads) == 1
    its, seen = [], []
    for e in t.events(0):
        if e.kind in (0, 2, 5):
            name = t.codes[e.code].name
            seen.append(name)
            if name == "handle":
                its.append([])
            if name in LOGGED and its:
                its[-1].append(name)
    return its[:-1], seen


ENTRIES, EXITS = (0, 2), (1, 3, 4)   # call, resumption; return, yield, unwind (as sys.setprofile's call, return)


def cut_at_handle(calls):
    """[("call"|"return", name)] cut into iterations, each from a call of
    handle to the next; what comes before the first is left out."""
    its = []
    for c in calls:
        if c == ("call", "handle"):
            its.append([])
        if its:
            its[-1].append(c)
    return its


def trace_calls(path):
    """The trace's Python calls and returns in complete iterations (as
    trace_iterations)."""
    from stackwatch import Trace
    t = Trace(str(path))
    return cut_at_handle([("call" if e.kind in ENTRIES else "return", t.codes[e.code].name) for e in t.events(0)
                          if e.kind in ENTRIES + EXITS])[:-1]


def place(traced, logged, unique=True):
    """The iterations of the log that the traced ones equal, in order: the
    one run of consecutive iterations whose calls are the traced calls (a
    short run may have several places: unique=False takes the first)."""
    calls = [c for _, _, c in logged]
    found = [i for i in range(len(calls) - len(traced) + 1) if calls[i:i + len(traced)] == traced]
    assert found, "the traced iterations are no run of the program's own"
    assert len(found) == 1 or not unique, f"the traced iterations are {len(found)} runs of the program's own"
    return logged[found[0]:found[0] + len(traced)]


def test_trace_equals_the_programs_log_and_setprofile_and_output_is_unchanged(tmp_path):
    """The trace's complete iterations are a run of those the program
    logged, equal, call for call and return for return, to what its own
    sys.setprofile function saw of them; its stdout and stderr (warnings
    shown) and the names bound in its __main__ (printed at its end) are
    those of a run without the attach; -o is relative to the attaching
    command's directory, not the target's."""
    # (the plain run alongside: both mostly sleep, 1 ms an iteration)
    plain = subprocess.Popen(server_args(tmp_path / "plain.log", 1500, tmp_path / "plain.prof"), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    p, log = start_server(tmp_path, 1500, tmp_path / "calls.prof", cwd=there)
    t0 = time.monotonic_ns()
    r = run(["attach", str(p.pid), "--trace", "--duration", "1", "-o", "t.swt"], cwd=here)
    t1 = time.monotonic_ns()
    assert r.returncode == 0, r.stderr
    out = here / "t.swt"
    assert f"wrote {out}" in r.stderr and not (there / "t.swt").exists()
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 0
    plain_out = plain.communicate(timeout=120)
    assert plain.returncode == 0
    assert ("iteration 0\n" + stdout, stderr) == plain_out   # unchanged by the attach
    assert (tmp_path / "plain.log").read_text().count("square") == log.read_text().count("square")
    traced, seen = trace_iterations(out)
    assert len(traced) >= 100   # ~1 s of iterations of ~1 ms
    placed = place(traced, log_iterations(log))
    # The window: the placed iterations ran while the attach command ran.
    assert t0 <= placed[0][1] and placed[-1][1] <= t1
    # sys.setprofile's view of the same iterations (its i-th is iteration
    # i), which never shows its own function (record) that the trace holds.
    profiled = cut_at_handle([tuple(line.split()) for line in (tmp_path / "calls.prof").read_text().splitlines()])
    first = placed[0][0]
    assert [[c for c in it if c[1] != "record"] for it in trace_calls(out)] == profiled[first:first + len(placed)]
    # Nothing of the attach itself: only the program's functions.
    assert set(seen) <= LOGGED | {"record", "<genexpr>", "<listcomp>"}, set(seen) - LOGGED


# Repeated attaches and a blocked main thread: once on each side of 3.12,
# where the pending calls moved from the runtime to each interpreter and
# from the main thread only to any thread.
@pytest.mark.versions("3.9", "3.12")
def test_ten_attaches_in_a_row_and_the_program_runs_on(tmp_path):
    p, log = start_server(tmp_path)
    try:
        for i in range(10):
            out = tmp_path / f"t{i}.swt"
            r = run(["attach", str(p.pid), "--trace", "--duration", "0.2", "-o", str(out)])
            assert r.returncode == 0, (i, r.stderr)
            traced, seen = trace_iterations(out)
            assert "handle" in seen
            place(traced, log_iterations(log), unique=False)   # 0.2 s: a short run
        before = len(log_iterations(log))
        time.sleep(0.5)
        assert p.poll() is None
        # still iterating (at its speed: bench/outside.py measures the attach's
        # end to full speed; 0.5 s at load 14 gave 82 iterations, not 100)
        assert len(log_iterations(log)) > before + 10
    finally:
        p.terminate()
        _, stderr = p.communicate(timeout=60)
    assert stderr == "" or "Terminated" not in stderr and "Traceback" not in stderr, stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.versions("3.9", "3.12")   # both pending-call eras (before 3.12 the main thread only)
def test_ctrl_c_or_sigterm_stops_the_tracing(tmp_path, sig):
    p, log = start_server(tmp_path)
    out = tmp_path / "t.swt"
    a = subprocess.Popen([sys.executable, "-m", "stackwatch", "attach", str(p.pid), "--trace", "-o", str(out)],
                         stderr=subprocess.PIPE, text=True)
    try:
        assert "tracing process" in a.stderr.readline()
        time.sleep(0.3)
        a.send_signal(sig)
        try:
            a.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the attach did not end within 60 s of the signal; " + hung_report(a, p))
        assert a.returncode == 0, a.stderr.read()
        assert f"wrote {out}" in a.stderr.read()
        traced, _ = trace_iterations(out)
        place(traced, log_iterations(log), unique=False)
        assert p.poll() is None
    finally:
        a.kill()
        p.terminate()
        p.communicate(timeout=60)


# A target that handles Ctrl-C (KeyboardInterrupt) and logs it, and whose
# hooks widen the attach's start-up and stop: the import of the attach's
# module in it logs "attach starts" and takes 1.5 s, the opening of the
# stop's report (an audit event) logs "attach stops" and takes 1 s.
INTERRUPTED = """
import signal
import sys
import time

log = open(sys.argv[1], "w", buffering=1)


class SlowAttach:
    def find_spec(self, name, path=None, target=None):
        if name == "stackwatch.tracer.attached":
            log.write("attach starts\\n")
            time.sleep(1.5)
        return None


sys.meta_path.insert(0, SlowAttach())


def slow_stop(event, args):
    if event == "open" and str(args[0]).endswith("stopped.json.tmp"):
        log.write("attach stops\\n")
        time.sleep(1.0)


sys.addaudithook(slow_stop)


def work(n):
    return n * n


n = interrupts = 0
print("ready", flush=True)
while interrupts < 3 and n < 30000:   # (the test sends three)
    try:
        while n < 30000:
            work(n)
            time.sleep(0.001)
            n += 1
    except KeyboardInterrupt:
        log.write(f"KeyboardInterrupt {n}\\n")
        interrupts += 1
print("done", signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)   # the stop's stand-in gone too
"""


@pytest.mark.versions("3.9", "3.12")   # both pending-call eras (before 3.12 the main thread only)
def test_ctrl_c_during_the_attachs_start_and_stop_reaches_the_target(tmp_path):
    """A SIGINT that reaches the target while the attach's start-up code
    runs there raises the target's own KeyboardInterrupt, once, where the
    program handles it (the start-up does not swallow it), and so does one
    during the stop; the attach goes on and traces, and a later Ctrl-C
    raises it again (the target's handler is back; SIGTERM's is the
    default again)."""
    prog = tmp_path / "interrupted.py"
    prog.write_text(INTERRUPTED)
    log = tmp_path / "calls.log"
    p = subprocess.Popen([sys.executable, str(prog), str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    out = tmp_path / "t.swt"
    try:
        assert p.stdout.readline() == "ready\n"
        a = subprocess.Popen([sys.executable, "-m", "stackwatch", "attach", str(p.pid), "--trace", "--duration", "0.5",
                              "--audit-hooks-ok", "-o", str(out)], stderr=subprocess.PIPE, text=True)
        for stage in ("attach starts", "attach stops"):
            deadline = time.monotonic() + 30
            while stage not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.01)
            p.send_signal(signal.SIGINT)   # in the middle of the stage's 1.5 s or 1 s
        _, err = a.communicate(timeout=60)
        assert a.returncode == 0, err
        lines = [w.split()[0] if w.startswith("Key") else w for w in log.read_text().splitlines()]
        assert lines == ["attach starts", "KeyboardInterrupt", "attach stops", "KeyboardInterrupt"], lines
        from stackwatch import Trace
        t = Trace(str(out))
        assert any(t.codes[e.code].name == "work" for e in t.events(0) if e.kind == 0)
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=60)
        assert (p.returncode, stdout, stderr) == (0, "done True\n", ""), (p.returncode, stdout, stderr)
        assert log.read_text().count("KeyboardInterrupt") == 3
    finally:
        p.kill()
        p.communicate(timeout=60)


def hung_report(a, p):
    """What the attaching command and its target were doing, on one line
    (CI shows only the failure's first line): their Python stacks, the
    target's with its native frames, and the attach's stderr."""
    def stacks(pid, *opts):
        r = run(["dump", str(pid), "--json", *opts], timeout=60)
        if r.returncode:
            return r.stderr.strip()
        import json
        return " | ".join(f"{t['name']}: " + " < ".join(f["function"] for f in t["frames"][:12])
                          for t in json.loads(r.stdout))
    where = f"attach: {stacks(a.pid)}; target: {stacks(p.pid, '--native')}"
    a.kill()
    return where + f"; attach's stderr: {a.stderr.read().strip()!r}"


def one_line_error(r, *words):
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stackwatch: error: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_refusals(tmp_path):
    one_line_error(run(["attach", "999999999", "--trace"]), "999999999")
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        one_line_error(run(["attach", str(sleeper.pid), "--trace"]), "Python")
    finally:
        sleeper.kill()
        sleeper.wait()
    # A program already tracing: stackwatch run traces it.
    traced = subprocess.Popen([sys.executable, "-m", "stackwatch", "run", "-o", str(tmp_path / "own.swt"), SERVER,
                               str(tmp_path / "own.log")], stdout=subprocess.PIPE, text=True)
    try:
        assert traced.stdout.readline() == "iteration 0\n"
        one_line_error(run(["attach", str(traced.pid), "--trace", "-o", str(tmp_path / "x.swt")]),
                       "already tracing")
        assert traced.poll() is None
    finally:
        traced.terminate()
        traced.communicate(timeout=60)


# A program whose audit hooks refuse compile and exec, as a hardened
# service's may: a Python one (sys.addaudithook) or one in C
# (PySys_AddAuditHook, through ctypes: a hook of the runtime). It prints
# "ready", then works until its stdin closes, logging every event it
# refuses, and prints its count of work done. Usage: LOG python|c.
REFUSES = """
import ctypes, os, sys

log = open(sys.argv[1], "w", buffering=1)


def refuse(event):
    if event in ("compile", "exec"):
        log.write(event + "\\n")
        return True
    return False


def python_hook(event, args):
    if refuse(event):
        raise RuntimeError(event + " is not allowed here")


@ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.py_object, ctypes.c_void_p)
def c_hook(event, args, data):
    return -1 if refuse(event.decode()) and not ctypes.pythonapi.PyErr_SetString(
        ctypes.py_object(RuntimeError), b"not allowed here") else 0


if sys.argv[2] == "python":
    sys.addaudithook(python_hook)
else:
    ctypes.pythonapi.PySys_AddAuditHook.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
    ctypes.pythonapi.PySys_AddAuditHook(ctypes.cast(c_hook, ctypes.c_void_p), None)
ctypes.pythonapi.PyErr_SetString.argtypes = (ctypes.py_object, ctypes.c_char_p)
print("ready", flush=True)
n = 0
for line in sys.stdin:
    n += 1
print("worked", n, flush=True)
os._exit(0)   # (the runtime calls its C hooks while it finalizes, ctypes' callback gone by then)
"""


@pytest.mark.parametrize("hook", ["python", "c"])
def test_refuses_a_process_with_audit_hooks(tmp_path, hook):
    """A process with audit hooks is refused in one line that names them
    and --audit-hooks-ok, nothing pushed into it: the attach's start-up is
    compiled and run there, and a hook that refused that made the code the
    program ran then fail (SystemError: error return without exception
    set; the program died). The program runs on, its hook never asked
    about a compile or an exec, its output unchanged."""
    prog, log = tmp_path / "refuses.py", tmp_path / "refused.log"
    prog.write_text(REFUSES)
    p = subprocess.Popen([sys.executable, str(prog), str(log), hook], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        p.stdin.write("a\n")
        p.stdin.flush()
        which = "sys.addaudithook" if hook == "python" else "PySys_AddAuditHook"
        one_line_error(run(["attach", str(p.pid), "--trace", "-o", str(tmp_path / "t.swt")]),
                       f"process {p.pid} has audit hooks ({which})", "--audit-hooks-ok")
        assert p.poll() is None
        stdout, stderr = p.communicate("b\n", timeout=60)
    finally:
        p.kill()
        p.wait()
    assert (p.returncode, stdout, stderr, log.read_text()) == (0, "worked 2\n", "", "")
    assert not (tmp_path / "t.swt").exists()


def other_python():
    """A CPython 3.9-3.13 of another minor version than this one, or None."""
    for exe in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3"))):
        minor = os.path.basename(os.path.dirname(os.path.dirname(exe))).split(".")[:2]
        if minor[1].isdigit() and 9 <= int(minor[1]) <= 13 and int(minor[1]) != sys.version_info[1]:
            return exe, f"3.{minor[1]}"
    return None


def test_refuses_another_python_version(tmp_path):
    other = other_python()
    if other is None:
        missing("another CPython 3.9-3.13 (pyenv) for a target of another version")
    exe, minor = other
    p = subprocess.Popen([exe, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
        one_line_error(run(["attach", str(p.pid), "--trace"]), f"runs Python {minor}.", f"runs on {mine}")
    finally:
        p.kill()
        p.wait()


@pytest.mark.versions("3.9", "3.12")
def test_blocked_target_times_out_and_the_call_is_taken_back(tmp_path):
    # (its main thread blocked in a read until the attach has given up)
    code = ("import sys; print('ready', flush=True); sys.stdin.readline(); "
            "print(sorted(m for m in sys.modules if m.startswith('stackwatch')), flush=True)")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        r = run(["attach", str(p.pid), "--trace", "--timeout", "1", "-o", str(tmp_path / "t.swt")])
        one_line_error(r, "no safe point", "taken back")
        stdout, stderr = p.communicate("go\n", timeout=60)
    finally:
        p.kill()
    assert (stdout, stderr, p.returncode) == ("[]\n", "", 0)   # the call never ran
    assert not (tmp_path / "t.swt").exists()


# An asyncio program whose loop runs on its main thread while attached: a
# getter waits on a queue, a ticker sleeps in turns, the main task awaits
# the ticker; its stdin closed ends them (read by a thread; another waits
# on an Event, a third until the ticker sees the attach's task events). It
# prints its own view of them and of its threads. (No thread but the main
# one runs Python while it waits: the attach runs on the main thread.) At
# its end it prints the functions it called, as its sys.setprofile function
# saw them (on every thread), but those called under the attach's own
# entry points (stackwatch/tracer/attached.py: the start, with the listing
# of the tasks alive, and the stop).
ASYNCIO_TARGET = r'''
import asyncio, json, sys, threading, time
seen = set()
def profile(frame, event, arg):
    if event == "call":
        f = frame
        while f is not None:
            if f.f_code.co_filename.endswith("/stackwatch/tracer/attached.py"):
                return
            f = f.f_back
        seen.add(frame.f_code.co_qualname)
sys.setprofile(profile)
threading.setprofile(profile)
async def getter(q):
    return await q.get()
async def ticker(done):
    while not done.is_set():
        if threading.Thread._delete is not plain:
            attached.set()
        await asyncio.sleep(0.005)
plain, attached = threading.Thread._delete, threading.Event()
def brief():   # ends once task events are recorded (threading wrapped by the attach: the ticker sees it)
    attached.wait()
    print(json.dumps({"ended": threading.current_thread().name}), flush=True)
async def main():
    loop, q, done = asyncio.get_running_loop(), asyncio.Queue(), asyncio.Event()
    g, t = asyncio.create_task(getter(q)), asyncio.create_task(ticker(done))
    name = lambda t: f"{t.get_name()} {t.get_coro().__qualname__}"
    threading.Thread(target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(done.set)), name="stdin",
                     daemon=True).start()
    idle = threading.Event()
    threading.Thread(target=idle.wait, name="idle", daemon=True).start()
    threading.Thread(target=brief, name="brief", daemon=True).start()
    while not idle._cond._waiters:
        time.sleep(0.001)
    print(json.dumps({"getter": name(g), "ticker": name(t), "main": name(asyncio.current_task()),
                      "queue": f"Queue {id(q):#x}", "idle": f"Event {id(idle):#x}",
                      "threads": {t.name: t.native_id for t in threading.enumerate()}}), flush=True)
    await t
    await q.put(1)
    assert await g == 1
asyncio.run(main())
sys.setprofile(None)
print(json.dumps(sorted(seen)), flush=True)
'''


def _attached_for_tasks(tmp_path, program):
    """Runs program, attaches with --trace --events tasks for 0.3 s once it
    printed its first line, then closes its stdin. Returns (that line read
    as JSON, the trace's task events document, (its stdout, stderr, exit
    status), its pid)."""
    from stackwatch.tracer.task_events import read_task_events
    prog = tmp_path / "p.py"
    prog.write_text(program)
    p = subprocess.Popen([sys.executable, "-W", "default", str(prog)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        own = json.loads(p.stdout.readline())
        out = tmp_path / "t.swt"
        r = run(["attach", str(p.pid), "--trace", "--events", "tasks", "--duration", "0.3", "-o", str(out)])
        assert r.returncode == 0, r.stderr
        stdout, stderr = p.communicate("", timeout=60)
    finally:
        p.kill()
    return own, read_task_events(str(out)), (stdout, stderr, p.returncode), p.pid


@pytest.mark.versions("3.11", "3.12")   # (3.11: the listing on the main thread, the only one that runs pending calls)
def test_events_tasks_lists_the_tasks_alive_at_the_attach(tmp_path):
    """attach --events tasks: the asyncio tasks alive when it attaches are
    listed with their state then, as the program sees them: the getter
    blocked on its queue, the main task on the ticker (a join); and so are
    its threads (META tasks_at_start): the ones the program lists, the
    idle one blocked on its Event, and the exit of the one that ends while
    attached; the program ends as without the attach, and every call in
    the trace is one it made itself (its sys.setprofile's ground truth):
    none of the listing's (WeakSet's iteration, BaseEventLoop.is_running)."""
    from stackwatch import Trace
    own, doc, (stdout, stderr, status), pid = _attached_for_tasks(tmp_path, ASYNCIO_TARGET)
    brief, seen = stdout.splitlines()
    assert (brief, stderr, status) == ('{"ended": "brief"}', "", 0)
    t = Trace(str(tmp_path / "t.swt"))
    traced = {t.codes[e.code].qualname for i in range(len(t.threads)) for e in t.events(i) if e.kind in (0, 2)}
    traced.discard("profile")   # (the ground truth's own function)
    assert "ticker" in traced and traced <= set(json.loads(seen)), traced - set(json.loads(seen))
    assert {own["getter"], own["ticker"], own["main"]} <= {t["name"] for t in doc["tasks"]}, doc["tasks"]
    def first(task, kind):
        return next(((e["reason"], e["channel"]) for e in doc["events"] if e["task"] == task and e["kind"] == kind),
                    None)
    assert first(own["getter"], "block") == ("queue", own["queue"])
    assert first(own["main"], "block") == ("join", own["ticker"])
    assert not [e for e in doc["events"] if e["task"] == own["getter"] and e["kind"] == "wake"]   # waits on
    threads = {t["name"]: t for t in doc["tasks"] if t["at_start"]}
    assert {n: t["thread"] for n, t in threads.items()} == own["threads"], threads
    assert threads["idle"]["at_start"] == {"state": "blocked", "waits_on": f"event {own['idle']}"}
    assert threads["stdin"]["at_start"]["state"] == "runnable"   # (in a read: no wait of threading's)
    assert threads["MainThread"]["at_start"] == {"state": "running", "waits_on": None}   # (running the attach)
    # The thread that ended while attached (as its own line says) exited
    # then, the only one: its run began long before the attach.
    assert [(e["task"], threads[e["task"]]["outcome"]) for e in doc["events"]
            if e["kind"] == "exit" and e["task"] in threads] == [("brief", "result")]
    one_line_error(run(["attach", str(pid), "--sample", "--events", "tasks"]), "--events needs --trace")
    one_line_error(run(["attach", str(pid), "--trace", "--events", "tasks,nonsense"]), "--events: ",
                   "'nonsense'")


# An asyncio program whose loop runs in a thread of its own ("loop") while
# its main thread is busy in Python (with no call: nothing to trace): a
# getter waits on a queue, the main task on an Event that a line on its
# stdin (or its end) sets (read by a thread, which notes when). The loop
# waits in epoll, so the attach (3.12+: a pending call, run by whichever
# thread runs Python next) starts on the main thread. Until that line the
# program makes no call. It prints what main returned and when the line
# came, then waits for its stdin's end (busy, in no call).
LOOP_THREAD_TARGET = r'''
import asyncio, json, sys, threading, time
async def getter(q):
    return await q.get()
async def main(ready):
    loop, q, stop = asyncio.get_running_loop(), asyncio.Queue(), asyncio.Event()
    g = asyncio.create_task(getter(q))
    def wake():
        sys.stdin.readline()
        woke.append(time.monotonic_ns())
        loop.call_soon_threadsafe(stop.set)
        sys.stdin.read()
        woke.append(0)
    threading.Thread(target=wake, name="stdin", daemon=True).start()
    await asyncio.sleep(0)
    name = lambda t: f"{t.get_name()} {t.get_coro().__qualname__}"
    ready.append({"getter": name(g), "main": name(asyncio.current_task()), "queue": f"Queue {id(q):#x}",
                  "stop": f"Event {id(stop):#x}", "loop": threading.get_native_id()})
    await stop.wait()
    await q.put(1)
    return await g
ready, ended, woke = [], [], []
t = threading.Thread(target=lambda: ended.append(asyncio.run(main(ready))), name="loop")
t.start()
while not ready:
    pass
print(json.dumps(ready[0]), flush=True)
while not ended:   # busy, in no call
    pass
t.join()
print(json.dumps([ended, woke[0]]), flush=True)
while len(woke) < 2:   # (its stdin's end; busy, in no call)
    pass
'''


@pytest.mark.versions("3.12")
def test_events_tasks_lists_the_tasks_of_a_loop_in_another_thread(tmp_path):
    """attach --events tasks that starts on a thread other than the event
    loop's (the busy main thread) lists the loop's tasks alive then, as the
    program sees them (the getter blocked on its queue, the main task on
    its Event), on the loop's thread: every event of theirs is that
    thread's; the program ends as without the attach."""
    own, doc, (stdout, stderr, status), _ = _attached_for_tasks(tmp_path, LOOP_THREAD_TARGET)
    assert (json.loads(stdout)[0], stderr, status) == ([1], "", 0)
    threads = {t["name"]: t for t in doc["tasks"] if t["at_start"]}
    assert threads["MainThread"]["at_start"]["state"] == "running"   # (the attach ran there, not on the loop's)
    assert threads["loop"]["thread"] == own["loop"]
    tasks = {t["name"]: t for t in doc["tasks"]}
    assert tasks[own["getter"]]["thread"] == tasks[own["main"]]["thread"] == own["loop"], doc["tasks"]
    mine = [(e["task"], e["kind"], e["reason"], e["channel"], e["thread"]) for e in doc["events"]
            if e["task"] in (own["getter"], own["main"]) and e["kind"] != "switch"]
    assert sorted(mine) == [(own["main"], "block", "event", own["stop"], own["loop"]),
                            (own["getter"], "block", "queue", own["queue"], own["loop"])], mine
    assert {e["thread"] for e in doc["events"] if own["getter"] in (e["task"], e["other"])} == {own["loop"]}


@pytest.mark.versions("3.12")
def test_events_tasks_records_no_call_of_the_listing_on_the_loops_thread(tmp_path):
    """The listing of a loop's tasks from its own thread (3.12+) wakes the
    loop, idle in its selector: neither the listing nor the pass of the
    loop that it woke is the program's, and not one call is recorded
    before the program's own first call (a line on its stdin, sent 0.3 s
    into the attach: it makes none before, its main thread busy in no call
    and its loop waiting). Its calls after it are, from the pass that the
    line wakes on: main and the getter resume, and, when the listing ran
    before the line came, that pass's first calls (the selector's
    _key_from_fd before 3.13, _process_events) are the loop thread's first. (Before, the listing's own
    calls and its pass were recorded on the loop's thread: WeakSet's
    iteration, Handle._run, _read_from_self, _run_once, select.)"""
    from stackwatch import Trace
    from stackwatch.tracer.task_events import read_task_events
    prog = tmp_path / "p.py"
    prog.write_text(LOOP_THREAD_TARGET)
    out = tmp_path / "t.swt"
    p = subprocess.Popen([sys.executable, "-W", "default", str(prog)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    a = None
    try:
        own = json.loads(p.stdout.readline())
        a = subprocess.Popen([sys.executable, "-m", "stackwatch", "attach", str(p.pid), "--trace", "--events", "tasks",
                              "--duration", "1", "-o", str(out)], stderr=subprocess.PIPE, text=True)
        assert "tracing process" in a.stderr.readline()
        time.sleep(0.3)
        p.stdin.write("go\n")
        p.stdin.flush()
        ended, woke = json.loads(p.stdout.readline())   # (while attached: main's end)
        assert a.wait(timeout=60) == 0, a.stderr.read()
        stdout, stderr = p.communicate("", timeout=60)
    finally:
        for q in (a, p):
            if q is not None:
                q.kill()
    assert (ended, stdout, stderr, p.returncode) == ([1], "", "", 0)
    t = Trace(str(out))
    woke_ns = woke - t.meta["mono0_ns"]   # (the trace's clock)
    loop = next(i for i, th in enumerate(t.threads) if th["native_tid"] == own["loop"])
    calls = {i: [(e.t_ns, t.codes[e.code]) for e in t.events(i) if e.kind in (0, 2)] for i in range(len(t.threads))}
    # (the trace's clock agrees with CLOCK_MONOTONIC to ~1e-4 of the time since its start)
    early = [(c.qualname, c.filename, woke_ns - t_ns) for th in calls.values() for t_ns, c in th if t_ns < woke_ns - 50e6]
    assert not early, early
    assert not [c.filename for th in calls.values() for _, c in th if "/stackwatch/" in c.filename]
    named = {th["name"]: [c.qualname for _, c in calls[i]] for i, th in enumerate(t.threads)}   # (a task's: its track)
    assert "main" in named[own["main"]] and "getter" in named[own["getter"]], named
    listed = [e["t_ns"] for e in read_task_events(str(out))["events"] if e["task"] == own["getter"] and
              e["kind"] == "block"]
    assert len(listed) == 1
    if listed[0] < woke_ns - 50e6:   # (listed before the line: else that pass was the listing's too)
        pass_begins = ["_BaseSelectorImpl._key_from_fd", "BaseSelectorEventLoop._process_events"][
            sys.version_info >= (3, 13):]   # (3.13's select looks the key up itself)
        assert [c.qualname for _, c in calls[loop][:len(pass_begins)]] == pass_begins, calls[loop][:3]


# A target whose attach reports do not come: the start's waits (in an
# audit hook on its opening) until the attaching command has given up on
# it (claimed it or removed its directory), the stop's is lost (the hook raises). It calls work(n) in a loop,
# logging each n, until the file END exists, then prints whether
# stackwatch still traces in it. Usage: LOG started|stopped END.
LOSES_A_REPORT = """
import os, sys, time

log = open(sys.argv[1], "w", buffering=1)


def late_or_lost(event, args):
    if event == "open" and str(args[0]).endswith(sys.argv[2] + ".json.tmp"):
        if sys.argv[2] == "stopped":
            log.write("stop's report lost\\n")
            raise OSError("lost")
        claimed = str(args[0])[:-len(".tmp")]   # the attaching command gave up: it claimed the
        deadline = time.monotonic() + 30         # report, then removed its directory
        while os.path.isdir(os.path.dirname(claimed)) and not os.path.exists(claimed) and time.monotonic() < deadline:
            time.sleep(0.01)


sys.addaudithook(late_or_lost)


def work(n):
    log.write(f"work {n}\\n")
    return n * n


n = 0
print("ready", flush=True)
while not os.path.exists(sys.argv[3]):
    work(n)
    time.sleep(0.001)
    n += 1
native = sys.modules.get("stackwatch._native")
print("done, tracing:", bool(native and native.is_tracing()))
"""


@pytest.mark.parametrize("report", ["started", "stopped"])
@pytest.mark.versions("3.12")
def test_a_report_that_never_comes_ends_the_attach_within_its_bound(tmp_path, report):
    """The attaching command waits for the target's report of the start
    (or of the stop) within its bound only (twice --timeout; the stop's
    plus the time attached), then says in one line what did not answer
    and what the target does now, and exits 1. The target runs on, its
    output unchanged, and is not tracing at its end: a start that reports
    after the command gave up stops again at once; the stop whose report
    was lost wrote the trace, as the line says."""
    prog, log, end, out = tmp_path / "p.py", tmp_path / "calls.log", tmp_path / "end", tmp_path / "t.swt"
    prog.write_text(LOSES_A_REPORT)
    p = subprocess.Popen([sys.executable, str(prog), str(log), report, str(end)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        t0 = time.monotonic()
        a = subprocess.Popen([sys.executable, "-m", "stackwatch", "attach", str(p.pid), "--trace", "--duration", "0.3",
                              "--timeout", "1", "--audit-hooks-ok", "-o", str(out)], stderr=subprocess.PIPE, text=True)
        if report == "stopped":
            assert "tracing process" in a.stderr.readline()
            t0 = time.monotonic()
        try:
            a.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the attach did not end within 60 s; " + hung_report(a, p))
        waited = time.monotonic() - t0
        lines = a.stderr.read().strip().splitlines()
        assert a.returncode == 1 and len(lines) == 1 and lines[0].startswith("stackwatch: error: "), lines
        if report == "started":
            assert "did not report its start within 2 s" in lines[0] and "stops again at once" in lines[0], lines
            assert 2 <= waited < 2 + 20   # (+ the command's own start-up, under load)
        else:
            bound = float(re.search(r"did not report its end within (\S+) s", lines[0]).group(1))
            assert f"it stops tracing and writes {out} when that call returns" in lines[0], lines
            assert 2.3 <= bound <= waited < bound + 5
        before = log.read_text().count("work")
        time.sleep(0.3)
        assert log.read_text().count("work") > before   # running on
        end.touch()
        stdout, stderr = p.communicate(timeout=60)
    finally:
        p.kill()
        p.communicate(timeout=60)
    assert (stdout, stderr, p.returncode) == ("done, tracing: False\n", "", 0)
    ns = [int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("work")]
    assert ns == list(range(len(ns)))
    if report == "stopped":
        from stackwatch import Trace
        t = Trace(str(out))
        assert any(t.codes[e.code].name == "work" for e in t.events(0) if e.kind == 0)


@pytest.mark.versions("3.12")
def test_interrupted_while_the_stop_is_awaited_one_line(tmp_path):
    """A Ctrl-C (or SIGTERM) while the command waits for the stop's report
    ends it with one line, not a traceback: the stop call runs on."""
    prog, log, end, out = tmp_path / "p.py", tmp_path / "calls.log", tmp_path / "end", tmp_path / "t.swt"
    prog.write_text(LOSES_A_REPORT)
    p = subprocess.Popen([sys.executable, str(prog), str(log), "stopped", str(end)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    a = None
    try:
        assert p.stdout.readline() == "ready\n"
        a = subprocess.Popen([sys.executable, "-m", "stackwatch", "attach", str(p.pid), "--trace", "--duration", "0.2",
                              "--audit-hooks-ok", "-o", str(out)], stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while "report lost" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.01)
        a.send_signal(signal.SIGINT)
        _, err = a.communicate(timeout=60)
        lines = err.strip().splitlines()
        assert a.returncode == 1 and len(lines) == 2, lines
        assert lines[1] == (f"stackwatch: error: interrupted while process {p.pid} stops: it stops tracing and "
                            f"writes {out} once its stop call has run"), lines
        end.touch()
        stdout, stderr = p.communicate(timeout=60)
    finally:
        if a:
            a.kill()
        p.kill()
        p.communicate(timeout=60)
    assert (stdout, stderr, p.returncode) == ("done, tracing: False\n", "", 0)


@pytest.mark.versions("3.9")   # (before 3.12 only the main thread runs pending calls: a sleep there blocks them)
def test_a_stop_that_finds_no_safe_point_stays_queued(tmp_path):
    """A target whose main thread waits in C (a read) once the attach has started
    reaches no safe point within the stop's bound: the command says so in
    one line and exits 1, its stop call queued again; the target stops
    tracing and writes the trace when the read returns, and is not tracing
    at its end."""
    code = ("import sys, time\n"
            "def work(): return sum(range(10))\n"
            "print('ready', flush=True)\n"
            "while 'stackwatch.tracer.attached' not in sys.modules:\n"
            "    time.sleep(0.001)\n"
            "work()\n"
            "sys.stdin.readline()\n"   # (blocked in C until the attach has given up)
            "native = sys.modules['stackwatch._native']\n"
            "print('done, tracing:', native.is_tracing(), flush=True)\n")
    out = tmp_path / "t.swt"
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        r = run(["attach", str(p.pid), "--trace", "--duration", "0.3", "--timeout", "0.5", "-o", str(out)], timeout=60)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(lines) == 2 and lines[1].startswith("stackwatch: error: "), lines
        assert "reached no safe point within" in lines[1], lines
        assert f"it is still tracing: the stop call stays queued, it stops tracing and writes {out} at its next " \
            "safe point" in lines[1], lines
        stdout, stderr = p.communicate("go\n", timeout=60)
    finally:
        p.kill()
        p.communicate(timeout=60)
    assert (stdout, stderr, p.returncode) == ("done, tracing: False\n", "", 0)
    from stackwatch import Trace
    t = Trace(str(out))
    assert any(t.codes[e.code].name == "work" for e in t.events(0) if e.kind == 0)
