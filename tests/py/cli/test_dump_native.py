"""`stackwatch dump PID --native` and `record --pid PID --native`: native
frames read from outside (each thread stopped with ptrace and unwound with
the CFI of the files mapped in the target) against gdb's backtrace of the
same parked threads: the same functions in the same order, each run of
the interpreter's C function standing where the Python frames it runs
are; and the target goes on unchanged. On 3.12 and 3.10 (the two frame
models: an interpreter activation per chain of Python calls, and one per
Python frame)."""
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import NO_GO, PROGRAMS, missing, needs, needs_sampler, run
from go_pprof import go_pprof
from native_ext import NO_BINUTILS, addr2line, build_extension, cxx_names, symbol_lines

pytestmark = [needs_sampler, pytest.mark.versions("3.12", "3.10"),
              pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64",
                                 reason="native frames from outside: Linux x86-64")]

EVAL = "_PyEval_EvalFrameDefault"
CLONE = re.compile(r"\.(constprop|isra|part|cold|lto_priv)\.?\d*")


def norm(name):
    """A function's name without gcc's clone suffixes (gdb names the
    function as its debug info does, the symbol table the clone)."""
    return CLONE.sub("", name or "??")


# x86-64 system calls the parked threads sleep in: time.sleep (3.11+:
# clock_nanosleep; before: select), select.select (glibc: pselect6)
SLEEPS = {"230", "35", "23", "270"}


class ParkedNative:
    """parked_native.py, its two threads blocked in their system calls."""

    def __init__(self):
        self.p = subprocess.Popen([sys.executable, os.path.join(PROGRAMS, "parked_native.py")],
                                  stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        assert line.startswith("ready "), line
        self.ids = json.loads(line[len("ready "):])
        # parked: each thread inside the system call it sleeps in (not in
        # the write of "ready", nor waiting for the GIL in a futex)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            calls = [self.syscall(tid).split(" ", 1)[0] for tid in self.ids.values()]
            if all(c in SLEEPS for c in calls):
                break
            time.sleep(0.01)
        else:
            raise AssertionError(f"threads not parked: {calls}")

    def syscall(self, tid):
        with open(f"/proc/{self.p.pid}/task/{tid}/syscall") as f:
            return f.read().strip()

    def stop(self):
        self.p.kill()
        self.p.wait(timeout=30)
        self.p.stdout.close()


@pytest.fixture
def parked():
    p = ParkedNative()
    yield p
    p.stop()


def gdb_frames(pid):
    """{lwp: [[name, pc, start]]} from gdb attached to pid."""
    gdb = shutil.which("gdb")
    if not gdb:
        missing("gdb not found (scripts/install-deps.sh installs it)")
    r = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-x", os.path.join(PROGRAMS, "gdb_native_frames.py")],
                       capture_output=True, text=True, timeout=120)
    lines = [line for line in r.stdout.splitlines() if line.startswith("frames ")]
    assert lines, r.stdout + r.stderr
    return {int(k): v for k, v in json.loads(lines[-1][len("frames "):]).items()}


def as_sequence(frames, per_frame):
    """Ours, as gdb would show the native stack: each run of Python frames
    (before 3.11 each Python frame) is one activation of the interpreter's
    C function."""
    seq = []
    for f in frames:
        if f.get("native"):
            seq.append(f)
        elif per_frame or not seq or seq[-1] is not EVAL:
            seq.append(EVAL)
    return seq


def test_dump_native_equals_gdb(parked):
    r = run(["dump", str(parked.p.pid), "--native", "--json"])
    assert r.returncode == 0, r.stderr
    threads = {t["native_id"]: t for t in json.loads(r.stdout)}
    truth = gdb_frames(parked.p.pid)
    per_frame = sys.version_info < (3, 11)
    for name, tid in parked.ids.items():
        ours = as_sequence(threads[tid]["frames"], per_frame)
        theirs = truth[tid]
        shown = "\n".join(f"{a if a is EVAL or a is None else (a['function'], hex(a['address']))!s:70} {b}"
                          for a, b in zip(ours + [None] * len(theirs), theirs + [None] * len(ours)) if a or b)
        assert len(ours) == len(theirs), f"{name}:\n{shown}"
        for a, (gname, pc, start) in zip(ours, theirs):
            if a is EVAL:
                assert norm(gname) == EVAL, f"{name}:\n{shown}"
            else:
                # the same function: the same start, or (gdb without a
                # symbol there) the same name
                assert a["address"] == start or norm(a["function"]) == norm(gname), f"{name}:\n{shown}"
                assert a["unwound"] == "cfi", a
        assert any(f.get("native") for f in threads[tid]["frames"])
    # the known chains, by name
    main = [norm(f["function"]) for f in threads[parked.ids["main"]]["frames"]]
    assert main.index("time_sleep") < main.index("leaf") < main.index("key") < main.index("list_sort_impl") \
        < main.index("builtin_sorted") < main.index("<module>") < main.index("Py_RunMain"), main
    waiter = [norm(f["function"]) for f in threads[parked.ids["waiter"]]["frames"]]
    assert "select_select_impl" in waiter and waiter.index("select_select_impl") < waiter.index("waiter"), waiter
    # libc's static functions (in no .dynsym) named as gdb names them, from
    # libc's separate debug file (libc6-dbg, found by its build id)
    for tid, ours in ((parked.ids["waiter"], waiter), (parked.ids["main"], main)):
        static = {"start_thread", "__libc_start_call_main"} & {norm(n) for n, _, _ in truth[tid]}
        assert static <= set(ours), (static, ours)
    # the text form: the same frames, one line each
    r = run(["dump", str(parked.p.pid), "--native"])
    assert r.returncode == 0 and 'in time_sleep' in r.stdout and 'Native "' in r.stdout, r.stdout + r.stderr
    # and the target runs on, in its sleep: never signalled or killed
    assert parked.p.poll() is None


def test_record_native_from_outside(parked, tmp):
    out = tmp / "prof.collapsed.txt"
    r = run(["record", "--pid", str(parked.p.pid), "--native", "--idle", "--duration", "1", "--rate", "100",
             "-o", str(out)])
    assert r.returncode == 0, r.stderr
    stacks = out.read_text().splitlines()
    # root first, ';'-joined: the main thread's whole chain, native and Python
    chain = ["builtin_sorted [native]", "list_sort_impl [native]", "key", "leaf", "time_sleep [native]"]
    assert any(all(c in line for c in chain) and line.index(chain[0]) < line.index(chain[-1]) for line in stacks), \
        stacks
    line = [x for x in r.stderr.splitlines() if "native frames in" in x]
    assert line and "us per sample" in line[0], r.stderr
    print(line[0])
    assert parked.p.poll() is None


@pytest.mark.versions("3.12")   # seconds (gcore); the unwinder is the live one's over a core's registers
def test_dump_core_native_equals_the_live_dump(parked, tmp):
    """`dump --core --native` of a gcore of the parked program unwinds each
    thread from the registers the core holds: the same frames, native and
    Python, as `dump PID --native` of the process."""
    from test_dump import gcore
    r = run(["dump", str(parked.p.pid), "--native", "--json"])
    assert r.returncode == 0, r.stderr
    live = json.loads(r.stdout)
    core = gcore(parked.p.pid, tmp / "core")
    r = run(["dump", "--core", str(core), "--native", "--json"])
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert [(t["thread_id"], t["frames"]) for t in got] == [(t["thread_id"], t["frames"]) for t in live]
    assert all(sum(f.get("native", False) for f in t["frames"]) > 5 for t in got), got


@pytest.mark.versions("3.12")
def test_a_thread_traced_already_keeps_its_python_frames(parked):
    """A thread that another tracer holds (strace) cannot be stopped: it
    is shown with its Python frames only, the other thread with its
    native ones, and one line on stderr says why; exit status 0."""
    strace = shutil.which("strace")
    if not strace:
        missing("strace not found (scripts/install-deps.sh installs it)")
    main = parked.ids["main"]
    tracer = subprocess.Popen([strace, "-p", str(main), "-o", os.devnull], stderr=subprocess.PIPE, text=True)
    try:
        assert "attached" in tracer.stderr.readline()
        r = run(["dump", str(parked.p.pid), "--native", "--json"])
    finally:
        tracer.terminate()
        tracer.wait(timeout=30)
    assert r.returncode == 0, r.stderr
    threads = {t["native_id"]: t for t in json.loads(r.stdout)}
    assert not any(f.get("native") for f in threads[main]["frames"])
    assert [f["function"] for f in threads[main]["frames"]] == ["leaf", "key", "<module>"]
    assert any(f.get("native") for f in threads[parked.ids["waiter"]]["frames"])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "native frames not shown" in lines[0] and "traced already" in lines[0], r.stderr
    assert parked.p.poll() is None


STRIPPED_C = r"""
#include <unistd.h>
static volatile int after;
__attribute__((noinline, noclone)) static void parked_static_leaf(void) { pause(); after++; }
void parked_enter(void) { parked_static_leaf(); after++; }
"""


@contextlib.contextmanager
def parked_in(code, syscalls):
    """A process running `python -c code`, which prints "ready" and then
    blocks in one of the system calls `syscalls` (numbers, as
    /proc/PID/syscall gives them); killed at the end."""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 30
        while open(f"/proc/{p.pid}/syscall").read().split(" ", 1)[0] not in syscalls:
            assert time.monotonic() < deadline, f"not parked in system call {syscalls}"
            time.sleep(0.01)
        yield p
    finally:
        p.kill()
        p.wait(timeout=30)
        p.stdout.close()


@pytest.mark.versions("3.12")   # (the symbol reader is the same on every version)
def test_dump_native_names_a_stripped_librarys_static_function(tmp):
    """A library stripped of its .symtab, with no build id, whose symbols
    went to a separate debug file named by its .gnu_debuglink (in .debug/
    beside it, one of gdb's places; its CRC checked): its static function,
    where a thread is blocked, is named from that file, as gdb names it."""
    tools = [shutil.which(t) for t in ("gcc", "objcopy", "strip")]
    if not all(tools):
        missing("gcc, objcopy or strip not found (Debian: gcc, binutils)")
    gcc, objcopy, strip = tools
    (tmp / "parked.c").write_text(STRIPPED_C)
    lib, debug = tmp / "libparked.so", tmp / "libparked.so.debug"
    for cmd in ([gcc, "-O1", "-g", "-shared", "-fPIC", "-Wl,--build-id=none", "-o", lib, tmp / "parked.c"],
                [objcopy, "--only-keep-debug", lib, debug], [strip, "--strip-all", lib],
                [objcopy, f"--add-gnu-debuglink={debug}", lib]):
        subprocess.run([str(c) for c in cmd], check=True, capture_output=True, timeout=60)
    (tmp / ".debug").mkdir()
    debug.rename(tmp / ".debug" / debug.name)
    code = f"import ctypes; lib = ctypes.CDLL({str(lib)!r}); print('ready', flush=True); lib.parked_enter()"
    with parked_in(code, {"34"}) as p:   # pause
        r = run(["dump", str(p.pid), "--native", "--json"])
        truth = gdb_frames(p.pid)[p.pid]
    assert r.returncode == 0, r.stderr
    frames = [(f["function"], f["library"]) for f in json.loads(r.stdout)[-1]["frames"] if f.get("native")]
    ours = [name for name, library in frames if library == str(lib)]
    assert ours == ["parked_static_leaf", "parked_enter"], frames
    theirs = [norm(name) for name, _, _ in truth]
    assert theirs[theirs.index("parked_enter") - 1] == "parked_static_leaf", truth


def parked_native_frames(code, library):
    """The native frames' functions of `library` (innermost first) in the
    main thread of `python -c code`, read by `dump --native --json` once it
    is parked in sleeper() (defined before code runs, with time imported)."""
    code = "import time\ndef sleeper(): print('ready', flush=True); time.sleep(3600)\n" + code
    with parked_in(code, SLEEPS) as p:
        r = run(["dump", str(p.pid), "--native", "--json"])
    assert r.returncode == 0, r.stderr
    return [f["function"] for f in json.loads(r.stdout)[-1]["frames"] if f.get("native") and f["library"] == library]


@pytest.mark.versions("3.12")   # (the symbol reader is the same on every version)
@needs(NO_BINUTILS)
def test_dump_native_demangles_cxx_frames():
    """A C++ extension (tests/programs/native/cxxthrow.cpp, g++) whose
    park() calls back into Python, which sleeps, from C++ frames (a class
    template's static method, two overloads): read from outside, they are
    named as c++filt names their symbols, innermost first."""
    folder, so = build_extension(source="cxxthrow.cpp")
    frames = parked_native_frames(f"import sys; sys.path.insert(0, {folder!r}); import cxxthrow\n"
                                  "cxxthrow.park(sleeper)\n", so)
    cxx = cxx_names(so)
    # park -> Holder<PyObject *>::hold -> call(f) -> call(f, 0), innermost first
    symbols = ["_ZN8cxxthrowL4callEP7_objecti", "_ZN8cxxthrowL4callEP7_object", "_ZN8cxxthrow6HolderIP7_objectE4holdES2_",
               "_ZN8cxxthrowL4parkEP7_objectS1_"]
    assert set(symbols) <= set(cxx), cxx
    assert frames == [cxx[s] for s in symbols], (frames, cxx)
    assert cxx[symbols[2]] == "cxxthrow::Holder<_object*>::hold(_object*)"


def rust_names(so):
    """{symbol: name} for each v0 Rust symbol ("_R...") of so (nm), its name
    as c++filt prints it less what stackwatch leaves out (procmem/
    demangle_rust.h): the crates' disambiguators ("core[c1f1a4ba060b9bfa]")
    and the constants' types ("4: usize")."""
    return {symbol: re.sub(r"(?<=[0-9a-z]): (?:[iu](?:8|16|32|64|128|size)|bool|char)\b", "",
                           re.sub(r"(?<=\w)\[[0-9a-f]{1,16}\]", "", name))
            for symbol, name in cxx_names(so, prefix="_R").items()}


@pytest.mark.versions("3.12")   # (the symbol reader is the same on every version)
@needs(NO_BINUTILS)
def test_dump_native_demangles_rust_v0_frames(tmp):
    """A Rust library (tests/programs/native/parker.rs, rustc with
    -C symbol-mangling-version=v0) whose rs_park calls back into Python,
    which sleeps, from a generic function instantiated with a closure of
    a trait impl's method of a generic struct: read from outside, its frames
    are named as c++filt names their symbols (less the crates'
    disambiguators), innermost first."""
    rustc = shutil.which("rustc") or shutil.which(os.path.expanduser("~/.cargo/bin/rustc"))
    if not rustc:
        missing("rustc not found (Debian: rustc; make deps installs it)")
    lib = tmp / "libparker.so"
    subprocess.run([rustc, "--crate-type", "cdylib", "-C", "opt-level=1", "-C", "force-frame-pointers=yes",
                    "-C", "symbol-mangling-version=v0", "-o", str(lib), os.path.join(PROGRAMS, "native", "parker.rs")],
                   check=True, capture_output=True, timeout=120)
    frames = parked_native_frames(f"import ctypes; lib = ctypes.CDLL({str(lib)!r})\n"
                                  "cb = ctypes.CFUNCTYPE(None)(sleeper)\n"
                                  "lib.rs_park(cb)\n", str(lib))
    names = rust_names(lib)
    # run::<{closure}> -> <Parker<u32> as Visit>::visit -> rs_park, innermost first
    visit = "<parker::Parker<u32> as parker::Visit>::visit"
    run_ = "parker::run::<<parker::Parker<u32> as parker::Visit>::visit::{closure#0}>"
    assert {visit, run_} <= set(names.values()), names   # (c++filt's names, less the disambiguators)
    assert frames == [run_, visit, "rs_park"], (frames, names)


SOURCE_TARGET = """
import sys, threading, time
sys.path.insert(0, {folder!r})
import cgraph

def spin():
    while True:
        cgraph.fib(20)

def callback():
    print("ready", flush=True)
    time.sleep(1000)

threading.Thread(target=spin, daemon=True, name="spinner").start()
cgraph.run(2, callback)
"""


def load_base(pid, so):
    """Where so is mapped in process pid: the start of its mapping at file
    offset 0 (its first PT_LOAD, at file address 0)."""
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == so and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16)
    raise AssertionError(f"{so} is not mapped in {pid}")


@pytest.mark.versions("3.12")   # (the line tables are the library's, not Python's)
@needs(NO_BINUTILS)
@needs(NO_GO)
def test_native_frames_have_their_source_lines(tmp):
    """A C extension built with -g (cgraph.c) in a process read from
    outside: `dump --native --json` gives each of its frames the file and
    line addr2line gives for the frame's address (its instruction; before
    a return address, the call), its library beside; the text names them;
    `record --pid --native` names each of its functions by the file and
    line addr2line gives for the function's start, in the collapsed stacks,
    speedscope's frames and pprof's functions (go tool pprof -raw)."""
    folder, so = build_extension(debug=True)
    prog = tmp / "target.py"
    prog.write_text(SOURCE_TARGET.format(folder=folder))
    p = subprocess.Popen([sys.executable, str(prog)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 30
        while open(f"/proc/{p.pid}/syscall").read().split(" ", 1)[0] not in SLEEPS:
            assert time.monotonic() < deadline, "the main thread is not in its sleep"
            time.sleep(0.01)
        base = load_base(p.pid, so)
        r = run(["dump", str(p.pid), "--native", "--json"])
        text = run(["dump", str(p.pid), "--native"])
        prof = tmp / "p.swprof"
        rec = run(["record", "--pid", str(p.pid), "--native", "--duration", "1", "-o", str(prof)])
    finally:
        p.kill()
        p.wait(timeout=30)
        p.stdout.close()
    assert r.returncode == 0 and text.returncode == 0 and rec.returncode == 0, r.stderr + text.stderr + rec.stderr
    ours, addresses = [], []
    for t in json.loads(r.stdout):
        for i, f in enumerate(t["frames"]):
            # (its functions; the stubs of stackwatch's archive have no lines)
            if f.get("native") and f["library"] == so and f["file"] != so:
                ours.append((f["function"], os.path.normpath(f["file"]), f["line"]))
                addresses.append(f["pc"] - base - (i > 0))   # a return address: the call before it
    assert {"run", "fib"} <= {name for name, _, _ in ours}, r.stdout
    assert [(f, n) for _, f, n in ours] == addr2line(so, addresses), (ours, r.stdout)
    assert all(f.endswith("cgraph.c") for _, f, _ in ours), ours
    run_line = next(n for name, _, n in ours if name == "run")
    assert re.search(rf'^  Native "{re.escape(so)}" in run \(\S*cgraph\.c:{run_line}\)$', text.stdout, re.M), \
        text.stdout
    # The profile's functions: each one's file and first line, addr2line's for its symbol.
    theirs = symbol_lines(so, ("fib", "cfib"))
    shown = {}
    for fmt, suffix in (("collapsed", "txt"), ("speedscope", "json"), ("pprof", "pb.gz")):
        out = tmp / f"p.{suffix}"
        e = run(["export", str(prof), "--format", fmt, "-o", str(out)])
        assert e.returncode == 0, e.stderr
        if fmt == "collapsed":
            rows = re.findall(r"(?:^|;)(c?fib) \[native\] \((\S+):(\d+)\)", out.read_text(), re.M)
        elif fmt == "speedscope":
            rows = [(f["name"][:-len(" [native]")], f["file"], f["line"])
                    for f in json.loads(out.read_text())["shared"]["frames"] if f["name"] in ("fib [native]",
                                                                                              "cfib [native]")]
        else:
            rows = re.findall(r" (c?fib) \[native\] (\S+):\d+ s=(\d+)", go_pprof("-raw", out))
        shown[fmt] = {n: (os.path.normpath(f), int(line)) for n, f, line in rows}
    assert shown == {fmt: theirs for fmt in shown}, (shown, theirs, rec.stderr)
