"""USDT probes checked by the real consumer: bpftrace attaches to a known
program (tests/programs/probe_target.py) and counts the firings. Skipped
with the reason printed where bpftrace cannot run or attach.

No test waits for a time: the program waits for the test's "go", sent when
bpftrace's BEGIN probe prints (bpftrace runs it once every probe is
attached); an attach that fails (a kprobe this kernel cannot attach) ends
bpftrace at once, and the test with it."""
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

import stackwatch
from conftest import PROGRAMS, ROOT, missing, needs, run

TARGET = os.path.join(PROGRAMS, "probe_target.py")
OBJECTS = [os.path.join(PROGRAMS, "objects_target.py"), "probes"]


NO_PROBES = ("stackwatch was built without <sys/sdt.h> (Debian package systemtap-sdt-dev; "
             "scripts/install-deps.sh installs it)")


@pytest.fixture(scope="module")
def tracefs():
    # (without bpftrace or root the markers skip first: conftest.py)
    if not stackwatch.probes.available:
        missing(NO_PROBES)
    if not os.path.exists("/sys/kernel/tracing/uprobe_events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], capture_output=True)


def attaching(test):
    """Marks a test that attaches bpftrace: root and bpftrace (skipped, with
    the reason printed, where either is missing)."""
    for mark in (pytest.mark.root, pytest.mark.bpftrace, pytest.mark.usefixtures("tracefs")):
        test = mark(test)
    return test

ATTACHED = "stackwatch-test: attached"   # what the BEGIN probe the tests add prints
TIMEOUT = 60                             # a hung bpftrace or target, not a slow one


def lines_of(stream):
    """A queue that receives the stream's lines, then None at its end."""
    q = queue.Queue()

    def pump():
        for line in stream:
            q.put(line)
        q.put(None)
    threading.Thread(target=pump, daemon=True).start()
    return q


def drain(q, deadline):
    out = []
    while True:
        line = q.get(timeout=max(deadline - time.monotonic(), 0.001))
        if line is None:
            return "".join(out)
        out.append(line)


def attach(probes, program, extra_args=(), target=(TARGET,)):
    """Starts the target (argv after the interpreter's), attaches bpftrace
    with `program` (LIB replaced by the library) and tells the target to go
    once bpftrace's BEGIN probe has run, i.e. once every probe is attached;
    returns (bpftrace stdout, target's JSON). Skips at once if bpftrace
    exits before that (it could not attach)."""
    assert "BEGIN" not in program, "attach() adds the BEGIN probe"
    script = f'BEGIN {{ printf("{ATTACHED}\\n"); }} ' + program.replace("LIB", stackwatch.probes.library)
    deadline = time.monotonic() + TIMEOUT
    prog = subprocess.Popen([sys.executable, *extra_args, *target, ",".join(probes)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    bt = None
    try:
        assert prog.stdout.readline().strip() == "ready"
        bt = subprocess.Popen(["bpftrace", "-p", str(prog.pid), "-e", script],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out_q, err_q = lines_of(bt.stdout), lines_of(bt.stderr)
        head = []
        while not head or head[-1] not in (None, ATTACHED + "\n"):
            head.append(out_q.get(timeout=max(deadline - time.monotonic(), 0.001)))
        if head[-1] is None:                 # bpftrace ended: it could not attach
            bt.wait(timeout=TIMEOUT)
            reason = [l for l in drain(err_q, deadline).splitlines() if "rror" in l and "MEMLOCK" not in l]
            print(f"skipping: bpftrace could not attach: {reason}")
            pytest.skip(f"bpftrace could not attach: {reason[-2:]}")
        prog.stdin.write("go\n")
        prog.stdin.flush()
        out, _ = prog.communicate(timeout=TIMEOUT)
        bt_out = "".join(head) + drain(out_q, deadline)   # bpftrace -p ends with its target
        bt_err = drain(err_q, deadline)
        bt.wait(timeout=TIMEOUT)
    finally:
        prog.kill()
        if bt is not None and bt.poll() is None:
            bt.send_signal(signal.SIGINT)    # (it ignores SIGTERM while attached)
            bt.wait(timeout=TIMEOUT)
    info = json.loads(out.strip().splitlines()[-1])
    assert "error" not in info, (info, bt_err)
    return bt_out, info


def counts(text):
    """@name[key]: N lines -> {(name, key): N}."""
    out = {}
    for line in text.splitlines():
        if line.startswith("@") and ":" in line:
            k, v = line.rsplit(":", 1)
            out[k.strip()] = int(v)
    return out


@pytest.mark.parametrize("optimize", [False, True], ids=["plain", "-O"])
@attaching
def test_function_entry_and_return_counts(optimize):
    script = ('usdt:LIB:stackwatch:function__entry /str(arg1) == "leaf" || str(arg1) == "mid"/ '
              '{ @entry[str(arg1)] = count(); } '
              'usdt:LIB:stackwatch:function__return /str(arg1) == "leaf" || str(arg1) == "mid"/ '
              '{ @ret[str(arg1)] = count(); @retline[str(arg1), arg2] = count(); }')
    out, info = attach(["function__entry", "function__return"], script, ["-O"] if optimize else [])
    c = counts(out)
    assert c["@entry[mid]"] == 100 and c["@entry[leaf]"] == 200
    assert c["@ret[mid]"] == 100 and c["@ret[leaf]"] == 200
    # A return's line is the line being run (each function returns from
    # its second line), as CPython's own function__return gives it.
    assert c[f"@retline[leaf, {info['line_of_leaf']}]"] == 200, c
    assert c[f"@retline[mid, {info['line_of_mid']}]"] == 100, c
    assert info["optimize"] == (1 if optimize else 0)


@attaching
def test_gc_start_and_done():
    script = 'usdt:LIB:stackwatch:gc__start { @start = count(); } usdt:LIB:stackwatch:gc__done { @done = count(); }'
    out, _ = attach(["gc__start", "gc__done"], script)
    c = counts(out)
    assert c["@start"] >= 1 and c["@start"] == c["@done"]


@attaching
def test_line_events_and_unicode_names():
    script = ('usdt:LIB:stackwatch:line /str(arg1) == "leaf"/ { @line[arg2] = count(); } '
              'usdt:LIB:stackwatch:function__entry /str(arg1) == "ünïcode_fn"/ { @uni = count(); }')
    out, info = attach(["line", "function__entry"], script)
    c = counts(out)
    assert c[f"@line[{info['line_of_leaf']}]"] == 200
    assert c["@uni"] == 7


@attaching
def test_instance_new_and_delete_counts_per_class():
    """Counts per class against the known numbers of objects_target.py
    (a subclass, __slots__, __del__, a class made while attached, a
    namedtuple, a cascade, cycles)."""
    script = ('usdt:LIB:stackwatch:instance__new__start { @ns[str(arg0)] = count(); } '
              'usdt:LIB:stackwatch:instance__new__done { @nd[str(arg0)] = count(); } '
              'usdt:LIB:stackwatch:instance__delete__start { @ds[str(arg0)] = count(); } '
              'usdt:LIB:stackwatch:instance__delete__done { @dd[str(arg0)] = count(); '
              '@file[str(arg0), str(arg1)] = count(); }')
    probes = ["instance__new__start", "instance__new__done", "instance__delete__start",
              "instance__delete__done"]
    out, info = attach(probes, script, target=OBJECTS)
    c = counts(out)
    for cls, n in info["expected"].items():
        for m in ("ns", "nd", "ds", "dd"):
            assert c.get(f"@{m}[{cls}]") == n, (m, cls, out)
    # The second argument is the defining file (bpftrace cuts strings at 64 bytes).
    assert c.get(f"@file[SwPlain, {OBJECTS[0][:63]}]", c.get(f"@file[SwPlain, {OBJECTS[0]}]")) == 1010


@needs(None if stackwatch.probes.available else NO_PROBES)
def test_probes_command_lists_them():
    out = run(["probes"])
    assert out.returncode == 0, out.stderr
    assert stackwatch.probes.library in out.stdout
    for name in ("function__entry", "function__return", "line", "gc__start", "gc__done",
                 "instance__new__start", "instance__delete__done"):
        assert f"  {name}(" in out.stdout


EXAMPLES = os.path.join(ROOT, "examples", "bpftrace")


@pytest.mark.parametrize("name,probes,expect", [
    ("gc_time.bt", ["gc__start", "gc__done"], "@gc_us["),
    ("calls_per_function.bt", ["function__entry"], "mid]: 100"),
    ("connect_lines.bt", ["function__entry"], None),
    ("instances_per_class.bt", ["instance__new__done"], "@instances[SwPlain]: 1010"),
    ("delete_cascade.bt", ["instance__delete__start", "instance__delete__done"], "@cascade_us"),
])
@attaching
@pytest.mark.versions("3.10", "3.13")   # the shipped scripts; the probes are tested on every version
def test_examples_attach_and_report(name, probes, expect):
    with open(os.path.join(EXAMPLES, name)) as f:
        script = f.read()
    out, _ = attach(probes, script, target=OBJECTS if "instance" in probes[0] else (TARGET,))
    if expect:
        assert expect in out
