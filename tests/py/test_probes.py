"""USDT probes checked by the real consumer: bpftrace attaches to a known
program (tests/programs/probe_target.py) and counts the firings. Skipped
with the reason printed where bpftrace cannot run or attach."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import stackwatch
from conftest import PROGRAMS, run

TARGET = os.path.join(PROGRAMS, "probe_target.py")
OBJECTS = [os.path.join(PROGRAMS, "objects_target.py"), "probes"]


def _skip_reason():
    if not stackwatch.probes.available:
        return "stackwatch was built without <sys/sdt.h>"
    if not shutil.which("bpftrace"):
        return "bpftrace is not installed (scripts/install-deps.sh installs it)"
    if os.geteuid() != 0:
        return "bpftrace needs root"
    return None


@pytest.fixture(scope="module", autouse=True)
def tracefs():
    reason = _skip_reason()
    if reason:
        print(f"skipping USDT probe tests: {reason}")
        pytest.skip(reason)
    if not os.path.exists("/sys/kernel/tracing/uprobe_events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], capture_output=True)


def attach(probes, program, extra_args=(), target=(TARGET,)):
    """Starts the target (argv after the interpreter's), attaches bpftrace with `program` (probe names and
    LIB are substituted), lets the target run; returns (bpftrace stdout,
    target's JSON)."""
    lib = stackwatch.probes.library
    prog = subprocess.Popen([sys.executable, *extra_args, *target, ",".join(probes)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert prog.stdout.readline().strip() == "ready"
        bt = subprocess.Popen(["bpftrace", "-p", str(prog.pid), "-e", program.replace("LIB", lib)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, _ = prog.communicate(timeout=60)
        bt_out, bt_err = bt.communicate(timeout=60)
    finally:
        prog.kill()
    if "Attaching" not in bt_out or "Error attaching probe" in bt_err:
        reason = [l for l in bt_err.splitlines() if "rror" in l and "MEMLOCK" not in l]
        print(f"skipping: bpftrace could not attach: {reason}")
        pytest.skip(f"bpftrace could not attach: {reason[-2:]}")
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
def test_function_entry_and_return_counts(optimize):
    script = ('usdt:LIB:stackwatch:function__entry /str(arg1) == "leaf" || str(arg1) == "mid"/ '
              '{ @entry[str(arg1)] = count(); } '
              'usdt:LIB:stackwatch:function__return /str(arg1) == "leaf" || str(arg1) == "mid"/ '
              '{ @ret[str(arg1)] = count(); }')
    out, info = attach(["function__entry", "function__return"], script, ["-O"] if optimize else [])
    c = counts(out)
    assert c["@entry[mid]"] == 100 and c["@entry[leaf]"] == 200
    assert c["@ret[mid]"] == 100 and c["@ret[leaf]"] == 200
    assert info["optimize"] == (1 if optimize else 0)


def test_gc_start_and_done():
    script = 'usdt:LIB:stackwatch:gc__start { @start = count(); } usdt:LIB:stackwatch:gc__done { @done = count(); }'
    out, _ = attach(["gc__start", "gc__done"], script)
    c = counts(out)
    assert c["@start"] >= 1 and c["@start"] == c["@done"]


def test_line_events_and_unicode_names():
    script = ('usdt:LIB:stackwatch:line /str(arg1) == "leaf"/ { @line[arg2] = count(); } '
              'usdt:LIB:stackwatch:function__entry /str(arg1) == "ünïcode_fn"/ { @uni = count(); }')
    out, info = attach(["line", "function__entry"], script)
    c = counts(out)
    assert c[f"@line[{info['line_of_leaf']}]"] == 200
    assert c["@uni"] == 7


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


def test_probes_command_lists_them():
    out = run(["probes"])
    assert out.returncode == 0, out.stderr
    assert stackwatch.probes.library in out.stdout
    for name in ("function__entry", "function__return", "line", "gc__start", "gc__done",
                 "instance__new__start", "instance__delete__done"):
        assert f"  {name}(" in out.stdout


EXAMPLES = os.path.join(os.path.dirname(PROGRAMS), "..", "examples", "bpftrace")


@pytest.mark.parametrize("name,probes,expect", [
    ("gc_time.bt", ["gc__start", "gc__done"], "@gc_us["),
    ("calls_per_function.bt", ["function__entry"], "mid]: 100"),
    ("connect_lines.bt", ["function__entry"], None),
    ("instances_per_class.bt", ["instance__new__done"], "@instances[SwPlain]: 1010"),
    ("delete_cascade.bt", ["instance__delete__start", "instance__delete__done"], "@cascade_us"),
])
def test_examples_attach_and_report(name, probes, expect):
    with open(os.path.join(EXAMPLES, name)) as f:
        script = f.read()
    out, _ = attach(probes, script, target=OBJECTS if "instance" in probes[0] else (TARGET,))
    if expect:
        assert expect in out
