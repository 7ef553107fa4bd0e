"""`stackwatch dump PID`: every thread's stack read from outside equals
what faulthandler writes inside the target at the same parked point (same
threads in the same order, same frames), and with --locals each frame's
variables equal what the target saw of its own (repr, type, id); every
bad input is one line and a non-zero exit."""
import glob
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import sysconfig
import time

import pytest

from conftest import PROGRAMS, missing, needs_sampler, run

FH_THREAD = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-f]+) \(most recent call first\):$")
FH_FRAME = re.compile(r'^  File "(.*)", line (\d+) in (.*)$')


def parse_faulthandler(text):
    """[(thread id, [(function, file, line)] innermost first)] in its order."""
    threads = []
    for line in text.splitlines():
        m = FH_THREAD.match(line)
        if m:
            threads.append((int(m.group(1), 16), []))
            continue
        m = FH_FRAME.match(line)
        if m:
            threads[-1][1].append((m.group(3), m.group(1), int(m.group(2))))
    return threads


class Parked:
    """The parked_threads.py program, running until stop()."""

    def __init__(self, python, tmp, env=None, prelude=None, wrap=()):
        self.fh = tmp / "faulthandler.txt"
        args = [python, os.path.join(PROGRAMS, "parked_threads.py"), str(self.fh)]
        if prelude:
            args = [python, "-c", prelude + "; import runpy, sys; sys.argv = sys.argv[1:]; "
                    "runpy.run_path(sys.argv[0], run_name='__main__')"] + args[1:]
        args = list(wrap) + args
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        line = self.p.stdout.readline()
        assert line.startswith("names "), line
        _, minor, names = line.split(" ", 2)
        self.minor, self.names = int(minor), {int(k): v for k, v in json.loads(names).items()}
        line = self.p.stdout.readline()
        assert line.startswith("locals "), line
        self.locals = json.loads(line[len("locals "):])
        line = self.p.stdout.readline()
        assert line.startswith("ready "), line
        self.native_ids = {int(k): v for k, v in json.loads(line[len("ready "):]).items()}
        self.pid = self.p.pid

    def faulthandler(self):
        """Has the target dump its threads (SIGUSR1) and returns the dump."""
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = self.fh.read_text()
            if text.endswith("in <module>\n"):   # the main thread, the oldest, comes last
                return text
            time.sleep(0.02)
        raise AssertionError(f"no complete faulthandler dump: {self.fh.read_text()!r}")

    def stop(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)
        self.p.stdout.close()


@pytest.fixture
def parked(tmp):
    p = Parked(sys.executable, tmp)
    yield p
    p.stop()


def pyenv_pythons(minors):
    """{version: python} of the pyenv CPythons of those minor versions."""
    found = {}
    for path in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*.*/bin/python3"))):
        version = os.path.basename(os.path.dirname(os.path.dirname(path)))
        if version.count(".") == 2 and version.split(".")[1] in minors:
            found[version] = path
    return found


SIMPLE = {"NoneType", "bool", "int", "float", "str", "bytes"}
LOCALS_REPR_MAX = 200   # stackwatch.cli.dump's


def check_locals(parked, threads):
    """Each parked function's variables, as `dump --locals` read them, equal
    the target's own view of them as it parked: the same names, the repr
    of simple values (cut as dump cuts it), the type and id of others."""
    program = os.path.join(PROGRAMS, "parked_threads.py")
    checked = set()
    for t in threads:
        for f in t["frames"]:
            if f["file"] != program:
                continue
            if f["function"] == "<module>":
                assert f["locals"] == []   # its variables are the module's dict, not read
                continue
            own = parked.locals[f["function"]]
            got = {v["name"]: v for v in f["locals"]}
            assert set(got) == set(own), f["function"]
            for name, (type_name, ident, text) in own.items():
                v = got[name]
                assert v["type"].rsplit(".", 1)[-1] == type_name, (name, v)
                assert v["address"] == ident, (name, v)
                if type_name in SIMPLE:
                    cut = text if len(text) <= LOCALS_REPR_MAX else text[:LOCALS_REPR_MAX] + "..."
                    assert v["repr"] == cut, name
                else:
                    assert v["repr"] == f"<{v['type']} object at {ident:#x}>"
            checked.add(f["function"])
    assert checked == set(parked.locals), checked


def check_dump_equals_faulthandler(parked):
    """`dump --json --locals` and the text form against the target's
    faulthandler dump, at the same parked point, and the variables against
    the target's own view of them; returns the threads."""
    expected = parse_faulthandler(parked.faulthandler())
    assert len(expected) == 4 and all(frames for _, frames in expected)
    r = run(["dump", str(parked.pid), "--json", "--locals"])
    assert r.returncode == 0, r.stderr
    threads = json.loads(r.stdout)
    got = [(t["thread_id"], [(f["function"], f["file"], f["line"]) for f in t["frames"]]) for t in threads]
    assert got == expected
    for t in threads:
        assert t["native_id"] == parked.native_ids[t["thread_id"]]
        assert t["os_name"] == open(f"/proc/{parked.pid}/task/{t['native_id']}/comm").read().strip()
        # Python's names, read from threading._active in the target's memory (the
        # parked program names its threads unlike the kernel: a fallback fails)
        assert t["name"] == parked.names[t["thread_id"]] != t["os_name"]
        assert t["state"] == "idle" and t["gil"] is False and t["failed"] is False   # all parked, GIL released
    check_locals(parked, threads)
    text = run(["dump", str(parked.pid)])
    assert text.returncode == 0, text.stderr
    assert [line for line in text.stdout.splitlines() if line.startswith("  File ")] == \
        [line for line in parked.fh.read_text().splitlines() if line.startswith("  File ")]
    return threads


@needs_sampler
def test_dump_equals_faulthandler(parked):
    threads = check_dump_equals_faulthandler(parked)
    # The method's, the generator's and the nested function's frames, by
    # their qualified names where the version has them (3.11+: co_qualname).
    quals = {f["qualname"] for t in threads for f in t["frames"]}
    if sys.version_info >= (3, 11):
        assert {"Worker.run", "gen", "outer.<locals>.inner", "main", "<module>"} <= quals
    else:
        assert {"run", "gen", "inner", "main", "<module>"} <= quals


# Every other release the generated layouts know, read by this one.
OTHERS = {v: p for v, p in pyenv_pythons(("9", "10", "11", "12", "13")).items()
          if not v.startswith("%d.%d." % sys.version_info[:2])}


# Targets of every other version, read by one stackwatch (3.12): the
# reader is the same C on every host, the target's version picks the layout;
# each host reads a target of its own version in test_dump_equals_faulthandler.
@needs_sampler
@pytest.mark.versions("3.12")
@pytest.mark.parametrize("version", sorted(OTHERS) or ["none"])
def test_dump_other_version_equals_faulthandler(tmp, version):
    """... and `dump --core` of a gcore of that target equals its live dump
    (test_dump_core_equals_dump_of_the_process: a 3.12 target's, and more)."""
    if version == "none":
        missing("no pyenv CPython 3.9-3.13 of another version")
    p = Parked(OTHERS[version], tmp)
    try:
        live = check_dump_equals_faulthandler(p)
        r = run(["dump", "--core", str(gcore(p.pid, tmp / "core")), "--json", "--locals"])
        assert r.returncode == 0, r.stderr
        assert comparable(json.loads(r.stdout)) == comparable(live)
    finally:
        p.stop()


@needs_sampler
def test_dump_313_through_its_debug_offsets(tmp):
    """A 3.13 target read through the _Py_DebugOffsets in its memory (the
    path of a 3.13 release without a generated layout) equals faulthandler."""
    from stackwatch import _native
    pythons = pyenv_pythons(("13",))
    if not pythons:
        missing("no pyenv CPython 3.13")
    p = Parked(sorted(pythons.values())[-1], tmp)
    try:
        expected = parse_faulthandler(p.faulthandler())
        dump = _native.dump_process(p.pid, layout="debug_offsets", locals=True)
        assert dump["layout"] == "debug_offsets"
        got = [(t["thread_id"], [(q.rsplit(".", 1)[-1], f, line) for q, f, line, *_ in t["frames"]])
               for t in dump["threads"]]
        assert got == expected
        from stackwatch.cli.dump import frame_of   # its localsplus and co_localsplusnames offsets too
        check_locals(p, [{"frames": [frame_of(*f[:4], True) for f in t["frames"]]} for t in dump["threads"]])
        assert {t["native_id"] for t in dump["threads"]} == set(p.native_ids.values())
        assert {t["thread_id"]: t["name"] for t in dump["threads"]} == p.names   # its imports.modules offset too
    finally:
        p.stop()


@needs_sampler
@pytest.mark.root
def test_dump_target_in_its_own_mount_namespace(tmp):
    """As in a container: the target runs its Python from a path that exists
    only in its mount namespace (a bind mount made there), so its files are
    read through /proc/PID/root."""
    unshare = shutil.which("unshare")
    if unshare is None:
        missing("unshare is missing (util-linux)")
    inside = tmp / "inside"
    inside.mkdir()
    # sh -c SCRIPT sh PREFIX MOUNTPOINT python3 PROGRAM FILE
    script = 'src=$1 dst=$2; shift 3; mount --bind "$src" "$dst" && LD_LIBRARY_PATH="$dst/lib" exec "$dst/bin/python3" "$@"'
    wrap = [unshare, "--mount", "--propagation", "private", "sh", "-c", script, "sh", sys.base_prefix, str(inside)]
    p = Parked("python3", tmp, wrap=wrap)
    try:
        check_dump_equals_faulthandler(p)
        from stackwatch import _native
        python = _native.dump_process(p.pid)["python"]
        assert python.startswith(str(inside) + "/") and not os.path.exists(python)
    finally:
        p.stop()


def one_line_error(r, *words):
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stackwatch: error: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def test_dump_no_such_process():
    p = subprocess.Popen(["true"])
    p.wait()
    one_line_error(run(["dump", str(p.pid)]), f"no process with pid {p.pid}")


def test_dump_not_python():
    p = subprocess.Popen(["sleep", "60"])
    try:
        one_line_error(run(["dump", str(p.pid)]), f"process {p.pid} is not a Python process")
    finally:
        p.kill()
        p.wait()


# Every command that reads another process by pid, refused alike by the
# target's opening (procmem/target.c) for its own.
@pytest.mark.versions("3.12")
@pytest.mark.parametrize("command", [["dump"], ["record", "--pid"], ["top"], ["attach", "--trace"]])
def test_own_process_refused(command):
    stackwatch = [sys.executable, "-m", "stackwatch"] + command
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COVERAGE_PROCESS_START")}
    r = subprocess.run(["sh", "-c", 'exec "$@" $$', "sh"] + stackwatch, capture_output=True, text=True,
                       timeout=120, env=env)
    one_line_error(r, "stackwatch's own process")


def test_dump_unknown_version_named(tmp):
    """A release no layout is known for (3.8) is refused, naming it and the known ones."""
    old = pyenv_pythons(("8",))
    if not old:
        missing("no pyenv CPython 3.8")
    version, python = sorted(old.items())[-1]
    p = Parked(python, tmp)
    try:
        mine = "%d.%d.%d" % sys.version_info[:3]
        one_line_error(run(["dump", str(p.pid)]), f"runs Python {version}, which this stackwatch cannot read",
                       "3.9.", "3.13.", "any 3.13 through its debug offsets", mine)
    finally:
        p.stop()


def dynamic_symbol_offset(data, name):
    """The file offset of the dynamic symbol name's value in the ELF
    shared object data (64-bit little-endian), from its section headers."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    dynsym = next(sh for sh in sections if sh[1] == 11)   # SHT_DYNSYM; its sh_link is the string table
    strtab = sections[dynsym[6]]
    for at in range(dynsym[4], dynsym[4] + dynsym[5], 24):
        st_name, _, _, _, st_value, _ = struct.unpack_from("<IBBHQQ", data, at)
        end = data.index(b"\0", strtab[4] + st_name)
        if data[strtab[4] + st_name:end] == name.encode():
            sh = next(sh for sh in sections if sh[3] <= st_value < sh[3] + sh[5] and sh[1] != 8)   # not NOBITS
            return sh[4] + st_value - sh[3]
    raise AssertionError(f"no dynamic symbol {name}")


@needs_sampler
@pytest.mark.versions("3.12")
def test_dump_build_the_layout_does_not_describe_refused(tmp):
    """A build the layout does not describe is refused naming what differs,
    simulated with a copy of this release's libpython: a debug build of it
    (the copy defines the debug build's mark: an unused exported function
    renamed _Py_NegativeRefcount, of the same length), and another patch
    release (Py_Version says 3.12.99), which is not read even where its type
    sizes agree with the known release's layout, and says what differs from
    it where they do not (again the debug mark)."""
    libpython = f"libpython{sys.version_info[0]}.{sys.version_info[1]}.so.1.0"
    real = os.path.join(sys.base_prefix, "lib", libpython)
    if not os.path.exists(real):
        missing(f"no shared {libpython} next to this Python")
    data = open(real, "rb").read()
    old, mark = b"\0PyCodec_StreamWriter\0", b"\0_Py_NegativeRefcount\0"
    assert data.count(old) >= 1 and mark not in data
    debug = data.replace(old, mark)
    at = dynamic_symbol_offset(data, "Py_Version")
    assert struct.unpack_from("<I", data, at)[0] >> 8 == sys.hexversion >> 8
    patch = bytearray(data)
    struct.pack_into("<I", patch, at, (sys.hexversion & ~0xFF00) | (99 << 8))
    mine, other = "%d.%d.%d" % sys.version_info[:3], "%d.%d.99" % sys.version_info[:2]
    cases = [
        (debug, f"runs a build of Python {mine} that its layout does not describe: a debug build (it defines "
                "_Py_NegativeRefcount: Py_REF_DEBUG)"),
        (bytes(patch), f"runs Python {other}, whose layout this stackwatch does not have (it has {mine}'s); its "
                       "type sizes agree with that layout, but a patch release may move fields"),
        (bytes(patch).replace(old, mark), f"runs Python {other}, whose layout this stackwatch does not have (it has "
                                          f"{mine}'s); against that layout its build differs: a debug build"),
    ]
    for i, (lib_bytes, words) in enumerate(cases):
        lib = tmp / f"lib{i}"
        lib.mkdir()
        (lib / libpython).write_bytes(lib_bytes)
        p = Parked(sys.executable, tmp, env=dict(os.environ, LD_LIBRARY_PATH=str(lib)))
        try:
            assert any(str(lib) in line for line in open(f"/proc/{p.pid}/maps"))
            one_line_error(run(["dump", str(p.pid)]), f"process {p.pid} {words}")
        finally:
            p.stop()


@pytest.mark.root
def test_dump_permission_explained(tmp):
    """A non-dumpable target read without CAP_SYS_PTRACE (as in a container)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        missing("setpriv is missing (util-linux)")
    p = Parked(sys.executable, tmp, prelude="import ctypes; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)")
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COVERAGE_PROCESS_START")}
        r = subprocess.run([setpriv, "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace", sys.executable, "-m",
                            "stackwatch", "dump", str(p.pid)], capture_output=True, text=True, timeout=120, env=env)
        one_line_error(r, f"permission denied reading process {p.pid}", "CAP_SYS_PTRACE", "non-dumpable")
    finally:
        p.stop()


SPINNER = """
import sys, threading
started = threading.Event()
def spin():
    started.set()
    while True:
        pass
threading.Thread(target=spin, name="spinner", daemon=True).start()
started.wait()
print("ready", threading.get_native_id(), flush=True)
sys.stdin.read()
"""


@needs_sampler
def test_dump_running_thread_holds_the_gil():
    """A thread spinning in Python runs and holds the GIL (the other one,
    parked in a read, waits for neither)."""
    p = subprocess.Popen([sys.executable, "-c", SPINNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        main_tid = int(p.stdout.readline().split()[1])
        for _ in range(5):   # until the main thread, which printed "ready", is parked in its read
            r = run(["dump", str(p.pid), "--json"])
            assert r.returncode == 0, r.stderr
            threads = {t["native_id"]: t for t in json.loads(r.stdout)}
            if threads[main_tid]["frames"][0]["line"] == 11 and threads[main_tid]["state"] == "idle":
                break
        assert len(threads) == 2
        main = threads.pop(main_tid)
        (spinner,) = threads.values()
        assert spinner["frames"][0]["function"] == "spin" and spinner["frames"][0]["line"] in (6, 7)
        assert spinner["state"] == "running" and spinner["gil"] is True
        assert main["state"] == "idle" and main["gil"] is False
        assert [f["function"] for f in main["frames"]] == ["<module>"]
    finally:
        p.stdin.close()
        p.kill()
        p.wait()
        p.stdout.close()


def gcore(pid, prefix):
    """A core file of the running process pid, written by gdb's gcore."""
    tool = shutil.which("gcore")
    if tool is None:
        missing("gcore is missing (gdb: scripts/install-deps.sh installs it)")
    r = subprocess.run([tool, "-o", str(prefix), str(pid)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return prefix.with_name(f"{prefix.name}.{pid}")


def comparable(threads):
    """Threads without what only a live process has (the kernel's view of
    each thread: its state, whether it holds the GIL, its OS name)."""
    return [{k: v for k, v in t.items() if k not in ("state", "gil", "os_name")} for t in threads]


@needs_sampler
@pytest.mark.versions("3.12")   # seconds (gcore); the core reader is the live one's over other bytes
def test_dump_core_equals_dump_of_the_process(tmp):
    """`dump --core` of a gcore of the parked program equals `dump PID` of
    it (threads, frames, variables), and so faulthandler's dump. Its
    libpython is a copy in a folder of its own; replaced after the core
    was written, the core names what differs and asks for --exe, which
    then finds the Python that ran (its ../lib) by build id."""
    libpython = f"libpython{sys.version_info[0]}.{sys.version_info[1]}.so.1.0"
    real = os.path.join(sys.base_prefix, "lib", libpython)
    if not os.path.exists(real):
        missing(f"no shared {libpython} next to this Python")
    lib = tmp / "lib"
    lib.mkdir()
    shutil.copy(real, lib / libpython)
    p = Parked(sys.executable, tmp, env=dict(os.environ, LD_LIBRARY_PATH=str(lib)))
    try:
        check_dump_equals_faulthandler(p)
        live = run(["dump", str(p.pid), "--json", "--locals"])
        assert live.returncode == 0, live.stderr
        core = gcore(p.pid, tmp / "core")
        r = run(["dump", "--core", str(core), "--json", "--locals"])
        assert r.returncode == 0, r.stderr
        threads = json.loads(r.stdout)
        assert comparable(threads) == comparable(json.loads(live.stdout))
        assert all(t["state"] == "unknown" and t["os_name"] is None for t in threads)
        text = run(["dump", "--core", str(core), "--locals"])
        assert text.returncode == 0, text.stderr
        assert text.stdout.startswith(f"Process {p.pid} (core file {core}): Python ")
        assert [line for line in text.stdout.splitlines() if line.startswith("  File ")] == \
            [line for line in p.fh.read_text().splitlines() if line.startswith("  File ")]
        # the text form: each variable under its frame, "name = repr"
        after = re.split(r'parked_threads\.py", line \d+ in run\n', text.stdout)[1]
        run_frame = after.split("  File ", 1)[0].splitlines()
        assert "    count = 42" in run_frame and f"    text = {p.locals['run']['text'][2]}" in run_frame
        # The library is replaced (a new file: the process keeps the old one's pages).
        os.unlink(lib / libpython)
        shutil.copy(shutil.which("true"), lib / libpython)
        line = one_line_error(run(["dump", "--core", str(core)]), f"the core's {lib / libpython} (build id ",
                              "is not the file here", "name the Python that ran with --exe")
        exe = os.path.join(sys.base_prefix, "bin", os.path.basename(os.path.realpath(sys.executable)))
        again = run(["dump", "--core", str(core), "--exe", exe, "--json", "--locals"])
        assert again.returncode == 0, (line, again.stderr)
        assert comparable(json.loads(again.stdout)) == comparable(threads)
    finally:
        p.stop()


@pytest.mark.versions("3.12")
def test_dump_core_bad_input(tmp):
    """Not a core file, no such file, or a pid and --core both: one line."""
    one_line_error(run(["dump", "--core", sys.executable]), "not a core file")
    text = tmp / "notes.txt"
    text.write_text("not an ELF file at all\n")
    one_line_error(run(["dump", "--core", str(text)]), "not an ELF file")
    one_line_error(run(["dump", "--core", str(tmp / "missing")]), "No such file")
    r = run(["dump", "1", "--core", str(text)])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


# gdb's script for test_a_run_half_made_is_not_read_as_a_root: stops the
# program where a run of the interpreter that resumes a generator is half
# made (STOP: the instruction after the store of the generator frame's
# link to the run's shim frame), writes a core of that instant, then puts
# in the words the run has not set yet what stale stack memory may hold
# there (the _PyCFrame's current frame: the generator frame, freed and made
# again at the same address; the shim's link: NULL), and writes another.
HALF_MADE_GDB = """\
set pagination off
set confirm off
set breakpoint pending on
tbreak Py_RunMain
run
set $hits = 0
break *{stop} if ((struct _PyInterpreterFrame *)$rsi)->owner == FRAME_OWNED_BY_GENERATOR
commands
silent
set $hits = $hits + 1
if $hits == 300
  gcore {real}
  set ((PyThreadState *)$rdi)->cframe->current_frame = (struct _PyInterpreterFrame *)$rsi
  set ((struct _PyInterpreterFrame *)$rsi)->previous->previous = 0
  gcore {half}
  kill
  quit
end
continue
end
continue
"""


@needs_sampler
@pytest.mark.versions("3.12")   # seconds (gdb, two cores)
def test_a_run_half_made_is_not_read_as_a_root(tmp):
    """3.12 begins a run of the interpreter by pointing tstate->cframe at
    the run's _PyCFrame, then links the frame to its shim frame, the shim
    to its caller, and only then sets the _PyCFrame's current frame and
    previous (pystack.c "Runs half made"): a thread parked in between has
    a current frame and a shim link of stale stack memory. With the
    generator frame as that current frame and the shim's link NULL, the
    walker stored the generator as the thread's outermost frame, its
    callers gone (issue 20: a genexpr resumed by all(), seen under `run
    --sample` with parking ahead); now that read is torn. The same instant
    as the interpreter left it reads whole."""
    gdb = shutil.which("gdb")
    if gdb is None:
        missing("gdb is missing (scripts/install-deps.sh installs it)")
    exe = os.path.join(sys.base_prefix, "bin", os.path.basename(os.path.realpath(sys.executable)))
    # The store of frame->previous (the frame, the second argument, in %rsi)
    # among the function's first instructions (in libpython, or the
    # executable when it has none).
    lib = os.path.join(sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME") or "-")
    r = subprocess.run([gdb, "-q", "-batch", "-ex", "x/60i _PyEval_EvalFrameDefault",
                        lib if os.path.exists(lib) else exe], capture_output=True, text=True, timeout=60)
    lines = re.findall(r"<_PyEval_EvalFrameDefault\+(\d+)>:\s+(.*)", r.stdout)
    at = next((i for i, (_, ins) in enumerate(lines) if re.search(r"\bmov\s+%r\w+,0x8\(%rsi\)", ins)), None)
    if at is None or at + 1 == len(lines):
        pytest.skip("this build's _PyEval_EvalFrameDefault does not link the frame early: " + r.stdout[-300:])
    stop = f"((char *)_PyEval_EvalFrameDefault + {lines[at + 1][0]})"
    real, half = tmp / "real.core", tmp / "half.core"
    script = tmp / "half_made.gdb"
    script.write_text(HALF_MADE_GDB.format(stop=stop, real=real, half=half))
    r = subprocess.run([gdb, "-q", "-batch", "-x", str(script), "--args", exe,
                        os.path.join(PROGRAMS, "resumed_by_c.py"), "100000"],
                       capture_output=True, text=True, timeout=240)
    assert half.exists(), r.stdout[-2000:] + r.stderr[-2000:]

    def frames(core):
        d = run(["dump", "--core", str(core), "--exe", exe, "--json"])
        assert d.returncode == 0, d.stderr
        (thread,) = json.loads(d.stdout)
        return [f["function"] for f in thread["frames"]], thread

    whole, _ = frames(real)
    # (the run not made yet: its caller's stack; or made: the generator on it)
    assert whole[0] in ("consume", "<genexpr>") and whole[-2:] == ["main", "<module>"], whole
    torn, thread = frames(half)
    assert torn == [], (torn, thread)


GREENLET_SPIN = """\
import greenlet, sys
def spin():
    print("ready", flush=True)
    while sys.stdin.readline() == "":
        pass
def worker():
    spin()
greenlet.greenlet(worker).switch()
"""


@needs_sampler
def test_a_greenlets_stack_is_read_to_its_run_function(tmp):
    """A greenlet's stack begins on a _PyCFrame of greenlet's own (3.11/
    3.12: its previous the thread's root_cframe, its current frame NULL),
    not the thread's root: read from outside, its first run's NULL link is
    its root, not a run half made (pystack.c "Runs half made"), and the
    stack ends at its run function."""
    try:
        import greenlet  # noqa: F401
    except ImportError:
        missing("greenlet is not installed (scripts/venv.sh installs it)")
    prog = tmp / "spin.py"
    prog.write_text(GREENLET_SPIN)
    p = subprocess.Popen([sys.executable, str(prog)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        r = run(["dump", str(p.pid), "--json"])
        assert r.returncode == 0, r.stderr
        (thread,) = json.loads(r.stdout)
        assert [f["function"] for f in thread["frames"]] == ["spin", "worker"], thread
    finally:
        p.stdin.write("go\n")
        p.stdin.close()
        p.wait()
        p.stdout.close()
