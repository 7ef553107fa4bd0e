"""`stackwatch run --lttng`: the Python calls and returns emitted live to the
LTTng-UST tracepoints stackwatch:function_entry / function_exit, recorded
by a real LTTng session (Debian lttng-tools 2.13: lttng-sessiond, `lttng
create / enable-event -u / add-context / start / stop`) and read back with
babeltrace2: on every thread the same sequence of entries and exits, of
the same functions, as stackwatch's own trace of the same run (an
__init__ in a hot loop too: on 3.13 it takes the tracer's second path).
A second program, with a C extension built with -finstrument-functions
(test_native_frames.py's cgraph) and asyncio tasks, run with `--events
tasks`: its native functions and task events reach the session too, as
often per thread as the trace records them. In the same session, LTTng's
own liblttng-ust-cyg-profile records a C program: the CTF export's
function events follow its conventions.
3.12 and 3.13 run it (3.13: its __init__ frames pushed inline reach LTTng
through the tracer's second path, init_gap.c; STACKWATCH_ALL_VERSIONS=1
runs it on each)."""
import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections import Counter

import pytest

from conftest import missing, needs, run, run_traced
from native_ext import build_extension

# The consumer is the same C on every Python; 3.13 also hands it events
# from its second path (init_gap.c).
pytestmark = pytest.mark.versions("3.12", "3.13")
from stackwatch import Trace
from stackwatch.tracer.tracefile import ENTER_KINDS, EXIT_KINDS, KIND_NAMES, RECORD_KINDS

NO_LTTNG = None
for tool, package in (("lttng", "lttng-tools"), ("lttng-sessiond", "lttng-tools"), ("babeltrace2", "babeltrace2"),
                      ("babeltrace", "babeltrace")):
    if not shutil.which(tool) and not NO_LTTNG:
        NO_LTTNG = f"{tool} is not installed (Debian package {package}; scripts/install-deps.sh installs it)"
# LTTng's Python agent, for the system's python3 (Debian python3-lttngust).
AGENT_PYTHON = "/usr/bin/python3"
if not NO_LTTNG and subprocess.run([AGENT_PYTHON, "-c", "import lttngust.agent"], capture_output=True).returncode:
    NO_LTTNG = ("LTTng's Python agent is not installed (Debian package python3-lttngust; scripts/install-deps.sh "
                "installs it)")
AGENT_LOGGER = "stackwatch-test-agent"

PROGRAM = """
import threading

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def gen(n):
    for i in range(n):
        yield fib(i)

def fails():
    raise ValueError

class Point:
    def __init__(self, x):
        self.x = x

def work():
    sum(gen(12))
    for i in range(50):
        Point(i)
    try:
        fails()
    except ValueError:
        pass

t = threading.Thread(target=work)
t.start()
work()
t.join()
"""


def lttng(*args, check=True):
    r = subprocess.run(["lttng", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 or not check, (args, r.stdout, r.stderr)
    return r


@pytest.fixture(scope="module")
def sessiond():
    """A session daemon: the one running, else one started here (in the
    foreground, stopped at the end). Root has one session daemon per
    machine, so this module's runs take turns (a lock file): make test
    runs it on two Pythons, maybe at once in its two lanes, and one's end
    would stop the other's daemon."""
    if NO_LTTNG:
        yield None
        return
    with open(os.path.join(tempfile.gettempdir(), "stackwatch-lttng-tests.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield from _sessiond()


def _sessiond():
    if lttng("list", check=False).returncode == 0:
        yield None
        return
    d = subprocess.Popen(["lttng-sessiond", "--no-kernel"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    end = time.monotonic() + 20
    while lttng("list", check=False).returncode != 0:
        if d.poll() is not None or time.monotonic() > end:
            d.kill()
            # (the tool is here but its daemon cannot run: skipped even under CI)
            pytest.skip(f"lttng-sessiond cannot run here: {d.stderr.read().decode(errors='replace')[-300:]}")
        time.sleep(0.1)
    yield d
    d.terminate()
    d.wait(timeout=30)


FULL_PROGRAM = """
import asyncio
import sys
import threading

sys.path.insert(0, sys.argv[1])
import cgraph


def callback():
    return 1


async def produce(q):
    for i in range(5):
        await q.put(i)


async def consume(q):
    for i in range(5):
        await q.get()
        await asyncio.sleep(0)


async def both():
    q = asyncio.Queue(1)
    await asyncio.gather(produce(q), consume(q))


worker = threading.Thread(target=cgraph.run, args=(2, callback), name="worker")
worker.start()
worker.join()
cgraph.run(3, callback)
asyncio.run(both())
"""

CYG_PROGRAM = """
static int leaf(int x) { return x + 1; }
int main(void) { int s = 0; for (int i = 0; i < 3; i++) s += leaf(i); return s == 6 ? 0 : 1; }
"""


@pytest.fixture(scope="module")
def recorded(sessiond, tmp_path_factory):
    """One LTTng session (stackwatch:*, lttng_ust_cyg_profile:* and a Python
    logger with the vpid, vtid and procname contexts) over four programs:
    PROGRAM run with --lttng --cpu, FULL_PROGRAM with --lttng --events
    tasks --kernel=syscalls,sched,faults, a C program built with -finstrument-functions run with LTTng's
    own liblttng-ust-cyg-profile and a Python program logging through
    LTTng's Python agent. (stackwatch's trace path, the session's output
    folder, babeltrace2's text of it, the folder, FULL_PROGRAM's trace
    path.)"""
    folder = tmp_path_factory.mktemp("lttng")
    native, _ = build_extension()
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler"
    (folder / "cyg.c").write_text(CYG_PROGRAM)
    subprocess.run([cc, "-O0", "-finstrument-functions", "cyg.c", "-o", "cyg"], cwd=folder, check=True)
    name = f"stackwatch-test-{uuid.uuid4().hex[:12]}"
    out = folder / "lttng"
    lttng("create", name, f"--output={out}")
    try:
        lttng("enable-event", "-u", "-s", name, "stackwatch:*,lttng_ust_cyg_profile:*")
        lttng("enable-event", "--python", "-s", name, AGENT_LOGGER)
        lttng("add-context", "-u", "-s", name, "-t", "vpid", "-t", "vtid", "-t", "procname")
        lttng("start", name)
        path, r = run_traced(folder, PROGRAM, "--lttng", "--cpu")
        full, _ = run_traced(folder, FULL_PROGRAM, "--lttng", "--events", "tasks", "--kernel=syscalls,sched,faults",
                             name="full.py",
                             trace="full.swt", args=(native,))
        c = subprocess.run(["./cyg"], cwd=folder, env={"LD_PRELOAD": "liblttng-ust-cyg-profile.so"},
                           capture_output=True, text=True, timeout=60)
        agent = subprocess.run([AGENT_PYTHON, "-c", "import lttngust, logging\n"
                                f"logging.getLogger({AGENT_LOGGER!r}).warning('hello')"],
                               capture_output=True, text=True, timeout=60)
        lttng("stop", name)
    finally:
        lttng("destroy", name, check=False)
    assert r.returncode == 0, r.stderr
    assert c.returncode == 0, c.stderr
    assert agent.returncode == 0, agent.stderr
    b = subprocess.run(["babeltrace2", str(out)], capture_output=True, text=True, timeout=120)
    assert b.returncode == 0, b.stderr[-2000:]
    return path, out, b.stdout, folder, full


@needs(NO_LTTNG)
def test_lttng_session_records_the_traces_calls(recorded):
    path, _, output, _, _ = recorded
    t = Trace(path)
    line = re.compile(r'stackwatch:function_(entry|exit): \{ cpu_id = \d+ \}, \{ vpid = (\d+), vtid = (\d+), '
                      r'procname = "[^"]*" \}, \{ function = "([^"]*)", file = "([^"]*)", line = (-?\d+) \}$')
    theirs = {}
    for text in output.splitlines():
        if " stackwatch:" not in text or f"vpid = {t.meta['pid']}," not in text:
            continue
        m = line.search(text)
        assert m, text
        theirs.setdefault(int(m[3]), []).append((m[1], m[4], m[5]))
    entry = {"call", "resume"}
    ours = {}
    for pos, th in enumerate(t.threads):
        seq = [("entry" if KIND_NAMES[e.kind] in entry else "exit", t.codes[e.code].qualname,
                t.codes[e.code].filename) for e in t.events(pos)]
        if seq:
            ours[th["native_tid"]] = seq
    assert theirs == ours
    # Both threads ran work(): fib's calls, the generator's resumptions and
    # the unwind out of fails() are all there, on each.
    assert len(ours) == 2
    for seq in ours.values():
        assert sum(1 for kind, fn, _ in seq if kind == "entry" and fn == "fib") == sum(
            calls(n) for n in range(12))
        assert sum(1 for kind, fn, _ in seq if kind == "entry" and fn == "gen") == 13
        assert sum(1 for kind, fn, _ in seq if fn == "fails") == 2
        assert sum(1 for kind, fn, file in seq if kind == "entry" and fn.endswith("__init__")
                   and file.endswith("prog.py")) == 50


@needs(NO_LTTNG)
def test_lttng_session_records_native_functions_and_task_events(recorded):
    """FULL_PROGRAM: on each thread (its tasks' tracks together), the
    session's stackwatch:function_*, native_* and task_* events are, per
    kind, function and (tasks) first field, as many as the trace's own
    records: a native exit named by its entry, as the trace's replay pairs
    them (a longjmp's frames included). On the main thread, from the
    program's start (its module's frame): the trace also records what
    stackwatch's start ran after the tracer was on (the task hooks'
    imports), before --lttng was."""
    _, _, output, _, full = recorded
    t = Trace(full)
    pid = t.meta["pid"]
    event = re.compile(r'stackwatch:(\w+): \{ cpu_id = \d+ \}, \{ vpid = (\d+), vtid = (\d+), '
                       r'procname = "[^"]*" \}, \{ function = "([^"]*)", file = "([^"]*)", line = -?\d+'
                       r'(?:, addr = 0x[0-9A-Fa-f]+|, a = (-?\d+), .*)? \}$')
    theirs = Counter()
    started = set()
    for text in output.splitlines():
        if f"vpid = {pid}," not in text or KERNEL_EVENT.search(text):
            continue
        m = event.search(text)
        assert m, text
        tid, kind = int(m[3]), m[1].replace("function_", "").replace("native_", "native ")
        if tid == pid and tid not in started:
            if (kind, m[4]) != ("entry", "<module>") or not m[5].endswith("full.py"):
                continue
            started.add(tid)
        theirs[(tid, kind, m[4] if not kind.startswith("task_") else int(m[6]))] += 1
    ours = Counter()
    tid_of = {th["index"]: th["native_tid"] for th in t.threads if not th["task"]}
    for pos, th in enumerate(t.threads):
        stack = []
        tid = tid_of[th["thread"]] if th["task"] else th["native_tid"]
        on = tid != pid or th["task"]
        for e in t.events(pos):
            code = t.codes[e.code] if e.kind in ENTER_KINDS else stack.pop()
            native = "native " if code.kind == 2 else ""
            if e.kind in ENTER_KINDS:
                stack.append(code)
            on = on or (code.qualname == "<module>" and code.filename.endswith("full.py"))
            if on:
                ours[(tid, native + ("entry" if e.kind in ENTER_KINDS else "exit"), code.qualname)] += 1
    for pos, th in enumerate(t.threads):
        if th["task"]:
            continue
        for kind, _t_ns, _depth, _code, _line, data in t._t.ext_events(pos, TASK_MASK, True):
            row = RECORD_KINDS[kind]
            a = next(f.name for f in row.fields if f.slot == "a")
            ours[(th["native_tid"], row.name, data[a])] += 1
    assert theirs - ours == Counter() and ours - theirs == Counter(), (theirs - ours, ours - theirs)
    kinds = Counter(k for _, k, _ in ours.elements())
    assert kinds["native entry"] == kinds["native exit"] > 0
    assert kinds["task_switch"] > 0 and kinds["task_create"] >= 2 and kinds["task_block"] > 0, kinds
    assert len({tid for tid, _, _ in ours}) == 2


TASK_MASK = sum(1 << n for n, k in RECORD_KINDS.items() if k.name.startswith("task_"))
KERNEL_EVENT = re.compile(r" stackwatch:(syscall_entry|syscall_exit|off_cpu|on_cpu|wakeup|page_fault): .*"
                          r"\{ tid = (\d+), ts = (\d+), (.*) \}$")


@needs(NO_LTTNG)
def test_lttng_session_records_the_kernel_events(recorded):
    """FULL_PROGRAM (--kernel=syscalls,sched,faults): every kernel record of
    the trace is a stackwatch:<kind> event of the session, a system call an
    entry at its start and an exit at its end, with the thread it is about
    (tid) and its own time (ts, CLOCK_MONOTONIC ns: LTTng dates the event
    when stackwatch's reader emits it, later) and the same fields: per
    thread of the trace, the same events, none missing and none more.
    Read with babeltrace 1: babeltrace2 2.0.4 (Debian 12's) prints an empty
    string field now and then as a string an earlier event had (a name
    "" of a task not seen, as on_cpu's prev_comm, came out as
    "lttng-consumerd"; efficios/babeltrace#116 reports it), which
    babeltrace 1 reads as written."""
    _, out, _, _, full = recorded
    b = subprocess.run(["babeltrace", str(out)], capture_output=True, text=True, timeout=120)
    assert b.returncode == 0, b.stderr[-2000:]
    output = b.stdout
    t = Trace(full)
    pid, mono0 = t.meta["pid"], t.meta["mono0_ns"]
    tids = {th["native_tid"] for th in t.threads if not th["task"]}
    theirs = Counter()
    for text in output.splitlines():
        m = KERNEL_EVENT.search(text)
        if m and f"vpid = {pid}," in text and int(m[2]) in tids:
            fields = dict(re.findall(r"(\w+) = (\"[^\"]*\"|[^,]+)", m[4]))
            theirs[(m[1], int(m[2]), int(m[3]), tuple(sorted(fields.items())))] += 1
    key = {"syscall": ("name", "ret"), "off_cpu": ("cpu", "reason", "state", "next_tid", "next_comm"),
           "on_cpu": ("next_cpu", "waker", "woken_ns", "prev_tid", "prev_comm"), "wakeup": ("cpu", "tid", "comm"),
           "page_fault": ("cpu", "address")}
    ours = Counter()
    for pos, th in enumerate(t.threads):
        if th["task"]:
            continue
        tid = th["native_tid"]
        for e in t.ext_events(thread=pos, kinds=list(key)):
            d, at = e.data, mono0 + e.t_ns
            if e.kind == "syscall":
                name = f'"{d["name"]}"'
                ours[("syscall_entry", tid, at, (("id", str(d["nr"])), ("name", name)))] += 1
                ours[("syscall_exit", tid, at + d["duration"],
                      (("id", str(d["nr"])), ("name", name), ("ret", str(d["ret"]))))] += 1
            elif e.kind == "off_cpu":
                ours[(e.kind, tid, at, tuple(sorted({"cpu": str(d["cpu"]), "reason": f'"{d["reason"]}"',
                                                     "state": str(d["state"]), "next_tid": str(d["next_tid"]),
                                                     "next_comm": f'"{d["next_comm"]}"'}.items())))] += 1
            elif e.kind == "on_cpu":
                ours[(e.kind, tid, at, tuple(sorted({"cpu": str(d["next_cpu"]), "waker": str(d["waker"]),
                                                     "woken_ns": str(d["woken_ns"]), "prev_tid": str(d["prev_tid"]),
                                                     "prev_comm": f'"{d["prev_comm"]}"'}.items())))] += 1
            elif e.kind == "wakeup":
                ours[(e.kind, tid, at, tuple(sorted({"cpu": str(d["cpu"]), "wakee": str(d["tid"]),
                                                     "comm": f'"{d["comm"]}"'}.items())))] += 1
            else:
                ours[(e.kind, tid, at, tuple(sorted({"cpu": str(d["cpu"]),
                                                     "address": f'0x{d["address"]:X}'}.items())))] += 1
    assert theirs - ours == Counter() and ours - theirs == Counter(), (list((theirs - ours).items())[:3],
                                                                      list((ours - theirs).items())[:3])
    kinds = Counter(k for k, _, _, _ in ours.elements())
    assert all(kinds[k] > 0 for k in ("syscall_entry", "off_cpu", "on_cpu", "wakeup", "page_fault")), kinds


def shapes(text):
    """{event name: (its contexts' keys, its payload's keys)} of
    babeltrace2's text (the packet context, when printed, left out)."""
    out = {}
    for line in text.splitlines():
        m = re.search(r" (\S+): (.*)$", line)
        groups = [re.findall(r"(\w+) = ", g) for g in re.findall(r"\{([^{}]*)\}", m[2])]
        if groups and groups[0] == ["cpu_id"]:
            groups = groups[1:]
        out.setdefault(m[1], (tuple(groups[0]), tuple(groups[-1])))
    return out


def env(directory):
    r = subprocess.run(["babeltrace2", "--output-format=ctf-metadata", str(directory)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    block = re.search(r"^env \{(.*?)^\};", r.stdout, re.S | re.M)[1]
    return dict(re.findall(r"^\s*(\w+) = \"?([^\";]*)\"?;", block, re.M))


@needs(NO_LTTNG)
def test_ctf_export_follows_lttngs_own_cyg_profile_trace(recorded):
    """The CTF export's function events against LTTng's own: a C program
    built with -finstrument-functions run with liblttng-ust-cyg-profile
    under a session with the vpid, vtid and procname contexts (what Trace
    Compass's LTTng-UST call-stack view reads): the same event names and
    contexts, the payload's addr, and the env that makes it an LTTng-UST
    trace (domain, tracer). LTTng's call_site is not written."""
    path, out, text, folder, _ = recorded
    theirs = shapes("\n".join(t for t in text.splitlines() if " lttng_ust_cyg_profile:" in t))
    assert set(theirs) == {"lttng_ust_cyg_profile:func_entry", "lttng_ust_cyg_profile:func_exit"}, theirs
    ctf = folder / "t.ctf"
    r = run(["export", path, "--format", "ctf", "-o", str(ctf)])
    assert r.returncode == 0, r.stderr
    b = subprocess.run(["babeltrace2", str(ctf)], capture_output=True, text=True, timeout=60)
    assert b.returncode == 0, b.stderr
    ours = shapes(b.stdout)
    for event, (context, payload) in theirs.items():
        assert ours[event][0] == context, event
        assert set(payload) - {"call_site"} <= set(ours[event][1]), (event, payload, ours[event][1])
    mine, lttngs = env(ctf / "ust"), env(next(p.parent for p in out.rglob("metadata")))
    for key in ("domain", "tracer_name", "tracer_major", "tracer_minor", "hostname"):
        assert mine[key] == lttngs[key], key


def metadata(directory):
    """A CTF trace's TSDL metadata (as babeltrace2 prints it), field by
    field: {"env": {key: value}, "packet": [(field, type)], "context":
    [(field, type)], "events": {name: [(field, type)]}, "clock_uuid"}, fields named
    without their leading "_", a type ("integer", bits, signed,
    encoding, array length or None) or ("string",) or ("enum", its
    integer type), type aliases resolved."""
    r = subprocess.run(["babeltrace2", "--output-format=ctf-metadata", str(directory)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    text = r.stdout

    def integer(body):
        a = dict(re.findall(r"(\w+) = ([^;]+);", body))
        return "integer", int(a["size"]), a.get("signed", "false").lower() in ("true", "1"), \
            a.get("encoding", "none").upper()
    aliases = {name.strip(): integer(body)
               for body, name in re.findall(r"typealias integer \{([^}]*)\}\s*:=\s*([^;]+);", text)}

    def fields(body):
        out = []
        for line in body.strip().splitlines():
            m = re.match(r"\s*(.*?)\s+_?(\w+)(?:\[(\d+)\])?;$", line)
            assert m, line
            kind, name, length = m[1], m[2], int(m[3]) if m[3] else None
            if kind.startswith("integer {"):
                t = integer(kind)
            elif kind == "string":
                t = ("string",)
            elif kind.startswith("enum : "):
                t = ("enum", aliases[kind[7:].split("{")[0].strip()])
            else:
                t = aliases[kind]
            out.append((name, t + (length,) if t[0] == "integer" else t))
        return out
    named = dict(re.findall(r"^struct (\w+) \{(.*?)^\}", text, re.S | re.M))

    def stream_struct(key):
        m = re.search(key + r" := struct (?:(\w+);|\{(.*?)\n\t\};)", text, re.S)
        return fields(named[m[1]] if m[1] else m[2])
    env = dict(re.findall(r"^\s*(\w+) = \"?([^\";]*)\"?;", re.search(r"^env \{(.*?)^\};", text, re.S | re.M)[1],
                          re.M))
    events = {name: fields(body) for name, body in
              re.findall(r"event \{\s*name = \"([^\"]+)\";.*?fields := struct \{(.*?)\n\t\};", text, re.S)}
    clock = re.search(r"^clock \{(.*?)^\};", text, re.S | re.M)[1]
    uuid = re.search(r'^\s*uuid = "([^"]*)";', clock, re.M)
    return {"env": env, "packet": stream_struct(r"packet\.context"), "context": stream_struct(r"event\.context"),
            "events": events, "clock_uuid": uuid and uuid[1]}


@needs(NO_LTTNG)
def test_ctf_metadata_is_an_lttng_sessions_field_by_field(recorded):
    """The CTF export's metadata against a real LTTng 2.13 UST session's
    (the recorded one: stackwatch's provider, liblttng-ust-cyg-profile and
    the Python agent), field by field: every env key LTTng writes, the
    values that say what the trace is (domain, tracer, version, host, word
    size) and the clock's uuid (the host's id for Trace Compass); the packet context (cpu_id included: with --cpu the CPU of the
    packet's events, each entry's as the trace's CPU records say) and the
    event contexts with their types; the function events' fields typed as
    LTTng's (cyg-profile's addr, the Python agent's funcName and lineno for
    the name and line). The kernel trace (no lttng-modules here to compare
    with): the same packet context, and lttng-modules' pid, tid and
    procname[16] contexts."""
    path, out, _, folder, full = recorded
    theirs = metadata(next(p.parent for p in out.rglob("metadata")))
    ctf = folder / "meta.ctf"
    r = run(["export", path, "--format", "ctf", "-o", str(ctf)])
    assert r.returncode == 0, r.stderr
    ours = metadata(ctf / "ust")
    assert set(theirs["env"]) <= set(ours["env"]), set(theirs["env"]) - set(ours["env"])
    for key in ("domain", "tracer_name", "tracer_major", "tracer_minor", "hostname", "architecture_bit_width"):
        assert ours["env"][key] == theirs["env"][key], key
    # Trace Compass's host id (CtfTmfTrace.getHostId): the clock's uuid,
    # LTTng's boot id; the same puts the export and the session on one host.
    assert ours["clock_uuid"] == theirs["clock_uuid"] and ours["clock_uuid"]
    assert ours["packet"] == theirs["packet"]
    assert ours["context"] == theirs["context"]
    agent = dict(theirs["events"]["lttng_python:event"])
    entry = dict(ours["events"]["lttng_ust_cyg_profile:func_entry"])
    assert (entry["name"], entry["line"]) == (agent["funcName"], agent["lineno"])
    assert dict(theirs["events"]["stackwatch:function_entry"])["function"] == agent["funcName"]
    for event in ("lttng_ust_cyg_profile:func_entry", "lttng_ust_cyg_profile:func_exit"):
        assert dict(ours["events"][event])["addr"] == dict(theirs["events"][event])["addr"], event
    # The packets' CPU: with --cpu, each entry's is the trace's.
    t = Trace(path)
    expected = {}
    for pos, th in enumerate(t.threads):
        cpus = sorted((e.t_ns, e.data["cpu"]) for e in t.ext_events(thread=pos, kinds=["cpu"]))
        assert cpus, "no CPU record (--cpu)"
        seq = expected.setdefault(th["native_tid"], [])
        for e in t.events(pos):
            if e.kind in ENTER_KINDS:
                seq.append(max(c for c in cpus if c[0] <= e.t_ns)[1])
    b = subprocess.run(["babeltrace2", str(ctf / "ust")], capture_output=True, text=True, timeout=60)
    assert b.returncode == 0, b.stderr
    got = {}
    for line in b.stdout.splitlines():
        m = re.search(r"lttng_ust_cyg_profile:func_entry: \{ cpu_id = (\d+) \}, \{ vpid = \d+, vtid = (\d+),", line)
        if m:
            got.setdefault(int(m[2]), []).append(int(m[1]))
    assert got == expected
    # The kernel trace's metadata (FULL_PROGRAM's switches: --kernel=sched).
    r = run(["export", full, "--format", "ctf", "-o", str(folder / "full.ctf")])
    assert r.returncode == 0, r.stderr
    kernel = metadata(folder / "full.ctf" / "kernel")
    assert (kernel["env"]["domain"], kernel["env"]["tracer_name"]) == ("kernel", "lttng-modules")
    assert kernel["clock_uuid"] == theirs["clock_uuid"]
    assert kernel["packet"] == theirs["packet"]
    comm = ("integer", 8, False, "UTF8", 16)
    assert kernel["context"] == [("pid", ("integer", 32, True, "NONE", None)),
                                 ("tid", ("integer", 32, True, "NONE", None)), ("procname", comm)]
    switch = dict(kernel["events"]["sched_switch"])
    assert (switch["prev_comm"], switch["next_comm"], switch["prev_tid"][:3]) == (comm, comm, ("integer", 32, True))


def test_probes_lists_the_tracepoints():
    """`stackwatch probes` lists them, with the provider library, where the
    build made it (everywhere lttng-ust's headers are: scripts/venv.sh's
    builds here)."""
    import stackwatch
    provider = os.path.join(os.path.dirname(stackwatch.__file__), "libstackwatch_lttng.so")
    r = run(["probes"])
    assert r.returncode == 0, r.stderr
    if not os.path.exists(provider):
        assert "LTTng-UST tracepoints: not built" in r.stdout
        missing("stackwatch was built without lttng-ust (Debian liblttng-ust-dev; scripts/install-deps.sh "
                "installs it)")
    assert f"LTTng-UST tracepoints (provider library {provider}):" in r.stdout
    assert "  stackwatch:function_entry { function, file, line }\n  stackwatch:function_exit { function, file, " \
           "line }\n  stackwatch:native_entry { function, file, line, addr }\n  stackwatch:native_exit { function, " \
           "file, line, addr }\n  stackwatch:task_switch ... task_woken (9) { function, file, line, a, b, c, s1, " \
           "s2 }\n  stackwatch:syscall_entry { tid, ts, id, name }\n" in r.stdout
    # (the kernel events' fields: the session's own events, test_lttng_session_records_the_kernel_events)
    listed = dict(re.findall(r"^  stackwatch:(\w+) \{ tid, ts, (.*) \}$", r.stdout, re.M))
    assert listed == {"syscall_entry": "id, name", "syscall_exit": "id, name, ret",
                      "off_cpu": "cpu, reason, state, next_tid, next_comm",
                      "on_cpu": "cpu, waker, woken_ns, prev_tid, prev_comm", "wakeup": "cpu, wakee, comm",
                      "page_fault": "cpu, address"}


def calls(n):
    """fib(n)'s number of calls."""
    return 1 if n < 2 else 1 + calls(n - 1) + calls(n - 2)
