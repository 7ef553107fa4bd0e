"""The native-function runtime: a C extension compiled with the flags of
`stackwatch config --cflags --ldflags` (tests/programs/native/cgraph.c,
built here with cc and kept under build/native/) records its functions
whenever a trace runs, and its native frames nest exactly as its call
graph, known by construction, under the Python caller, on the main
thread and on another that attaches and exits first: static functions
named from .symtab, the frames a longjmp left closed at the next return
below them, those a C++ exception unwound (cxxthrow.cpp, g++) closed before
the catcher's next call, C++ functions named as c++filt names them (in
every export too), a Python callback nested inside. Without stackwatch the
extension runs unchanged. One Python: nothing here depends on the
version."""
import json
import os
import re
import subprocess
from collections import Counter

import pytest

from conftest import NO_GO, missing, needs, needs_kernel_tracepoint, perfetto_timeline, run, thread_pos
from go_pprof import GO, go_pprof
from native_ext import NO_BINUTILS, build_extension, cxx_named, cxx_names
from test_export_ctf import NO_BABELTRACE, field, read_ctf

pytestmark = pytest.mark.versions("3.12")   # the runtime does not depend on the Python version

def expected(n, left_out=()):
    """cgraph.run(n)'s call graph under main(): ("call", depth, name) and
    ("exit", depth) as the trace must have them; a function left_out
    gives its place to its callees."""
    seq = []

    def call(depth, name, *children):
        if name in left_out:
            for child in children:
                child(depth)
            return
        seq.append(("call", depth, name))
        for child in children:
            child(depth + 1)
        seq.append(("exit", depth))

    def node(name, *children):
        return lambda depth: call(depth, name, *children)

    leaf = node("leaf [native]")
    branch = node("branch [native]", leaf, leaf)
    dives = node("dive [native]")
    for _ in range(3):
        dives = node("dive [native]", dives)
    call(0, "main", node("run [native]", node("walk [native]", *[branch] * n),
                         node("jumper [native]", dives), node("callback")))
    return seq


def test_native_frames_nest_as_the_c_call_graph(tmp_path):
    folder, so = build_extension()
    plain = run(["python", os.path.join(folder, "driver.py"), "4"], cwd=folder)
    assert plain.returncode == 0 and plain.stdout == "47\n", plain.stderr   # without stackwatch: unchanged
    out = str(tmp_path / "t.swt")
    r = run(["run", "-q", "-o", out, os.path.join(folder, "driver.py"), "4"], cwd=folder)
    assert r.returncode == 0 and r.stdout == "47\n", r.stderr
    from stackwatch import Trace
    t = Trace(out)
    # The worker thread attached (and exited) first: its own frames.
    assert main_sequence(t, thread_pos(t, "worker"), so) == expected(2)
    assert main_sequence(t, thread_pos(t, "MainThread"), so) == expected(4)
    # --native-exclude by symbol (a glob) and --native-include by object.
    r = run(["run", "-q", "-o", out, "--native-exclude", "lea?", "--native-exclude", "dive",
             "--native-include", os.path.basename(so), os.path.join(folder, "driver.py"), "4"], cwd=folder)
    assert r.returncode == 0, r.stderr
    t = Trace(out)
    assert main_sequence(t, thread_pos(t, "MainThread"), so) == expected(4, {"leaf [native]", "dive [native]"})


def main_sequence(t, pos, so):
    """The calls and exits under main() (it included) on the thread at
    pos, as expected() lists them; native frames checked to be so's."""
    seq, base = [], None
    for e in t.events(pos):
        if e.kind in (0, 5):
            c = t.codes[e.code]
            if base is None and c.name == "main":
                base = e.depth
            if base is not None:
                seq.append(("call", e.depth - base, c.name))
                if c.name.endswith(" [native]"):
                    assert (c.kind, c.filename) == (2, so), c
        elif e.kind in (1, 4, 6) and base is not None:
            seq.append(("exit", e.depth - base))
            if e.depth == base:
                break
    return seq


@needs(NO_BINUTILS)
def test_frames_a_cxx_exception_ended_are_closed(tmp_path):
    """tests/programs/native/cxxthrow.cpp, built with g++: the C frames a
    C++ exception unwound without their exit hooks are closed at the
    catcher's return, and the calls after it nest as by construction. Its
    C++ functions are named as c++filt names their symbols, in the trace
    (--native-include matching those names) and in every export
    (collapsed, speedscope, pprof read by go tool pprof, the flame graph
    page's data, Perfetto decoded with its schema, CTF read by babeltrace2
    and its functions.nm), where no mangled name is left."""
    folder, so = build_extension(source="cxxthrow.cpp")
    code = "import sys; sys.path.insert(0, %r); import cxxthrow\ndef main(): return cxxthrow.run(2)\nprint(main())\n"
    plain = run(["python", "-c", code % folder])
    assert plain.returncode == 0 and plain.stdout == "12\n", plain.stderr   # without stackwatch: unchanged
    out = str(tmp_path / "t.swt")
    r = run(["run", "-q", "-o", out, "-c", code % folder])
    assert r.returncode == 0 and r.stdout == "12\n", r.stderr
    from stackwatch import Trace
    t = Trace(out)
    cxx = cxx_names(so)
    assert all(name != symbol for symbol, name in cxx.items()), cxx   # (c++filt demangled each)
    run_, catcher, thrower, after = (cxx_named(cxx, f) for f in ("run", "catcher", "thrower", "after"))
    assert (catcher, after) == ("cxxthrow::Catcher::catcher() [native]", "int cxxthrow::after<int>(int) [native]")
    calls = [(run_, 1), (catcher, 2)] + [("through [native]", d) for d in range(3, 7)] + [(thrower, 7)]
    seq = [("call", 0, "main")] + [("call", depth, name) for name, depth in calls]
    seq += [("exit", d) for d in range(7, 1, -1)]       # at catcher's return at the latest
    seq += [("call", 2, after), ("exit", 2)] * 2 + [("exit", 1), ("exit", 0)]
    assert main_sequence(t, thread_pos(t, "MainThread"), so) == seq
    # --native-include matches the name shown.
    r = run(["run", "-q", "-o", str(tmp_path / "only.swt"), "--native-include", "int cxxthrow::after<*", "-c",
             code % folder])
    assert r.returncode == 0 and r.stdout == "12\n", r.stderr
    only = Trace(str(tmp_path / "only.swt"))
    assert main_sequence(only, thread_pos(only, "MainThread"), so) == \
        [("call", 0, "main")] + [("call", 1, after), ("exit", 1)] * 2 + [("exit", 0)]
    # The exports: the same names, none mangled.
    from stackwatch.render import formats
    mine = {run_, catcher, thrower, after}
    shown = {}
    for fmt, suffix in (("collapsed", "txt"), ("speedscope", "json"), ("html", "html"), ("pprof", "pb.gz")):
        path = tmp_path / f"t.{suffix}"
        formats.write_trace(fmt, str(path), t)
        if fmt == "collapsed":
            frames = [f for line in path.read_text().splitlines() for f in line.rpartition(" ")[0].split(";")]
            shown[fmt] = {f.rpartition(" (")[0] for f in frames}
        elif fmt == "speedscope":
            shown[fmt] = {f["name"] for f in json.loads(path.read_text())["shared"]["frames"]}
        elif fmt == "html":
            data = re.search(r'<script id="stackwatch-data"[^>]*>(.*?)</script>', path.read_text(), re.S)
            shown[fmt] = set(strings(json.loads(data.group(1))))
        elif GO:
            shown[fmt] = set(re.findall(r"^\s+\d+: 0x\w+ M=\d+ (.*? \[native\]) ", go_pprof("-raw", path), re.M))
    shown["perfetto"] = {name for name, *_ in perfetto_timeline(out, tmp_path / "t.pftrace").slices}
    if not NO_BABELTRACE:   # the CTF export's entry events (babeltrace2) and its name map
        t.export("ctf", str(tmp_path / "t.ctf"))
        shown["ctf"] = {field(p, "name") for _, name, _, p in read_ctf(tmp_path / "t.ctf")
                        if name == "lttng_ust_cyg_profile:func_entry"}
        shown["functions.nm"] = {line.split(" ", 2)[2] for line in
                                 (tmp_path / "t.ctf" / "functions.nm").read_text().splitlines()}
    for fmt, names in shown.items():
        assert mine <= names and not any(n.startswith("_Z") for n in names), (fmt, names)
    for reason in (NO_GO, NO_BABELTRACE):
        if reason:
            missing(reason)


def strings(data):
    """Every string in a JSON document."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, (list, dict)):
        for x in data.values() if isinstance(data, dict) else data:
            yield from strings(x)


def test_native_frames_only_while_a_trace_runs(tmp_path):
    """Started and stopped from Python: the calls before start() and after
    stop() run unrecorded (the runtime is loaded by then: its state of the
    thread stays set, for a session that is no longer live)."""
    folder, so = build_extension()
    out = str(tmp_path / "t.swt")
    code = ("import sys; sys.argv = ['driver.py', '1']; sys.path.insert(0, %r)\n"
            "import cgraph, stackwatch\n"
            "def main(n): return cgraph.run(n, int)\n"
            "main(2); stackwatch.start(%r); main(3); stackwatch.stop(); print(main(4))\n") % (folder, out)
    r = run(["python", "-c", code], cwd=folder)
    assert r.returncode == 0 and r.stdout == "47\n", r.stderr
    from stackwatch import Trace
    t = Trace(out)
    calls = {}
    for e in t.events(0):
        if e.kind == 5:
            name = t.codes[e.code].name
            calls[name] = calls.get(name, 0) + 1
    assert calls == {"run [native]": 1, "walk [native]": 1, "branch [native]": 3, "leaf [native]": 6,
                     "jumper [native]": 1, "dive [native]": 4}, calls


@needs(NO_BINUTILS)
def test_native_functions_have_their_source_file_and_line(tmp_path):
    """cgraph built with -g: each native function's file and line in the
    trace (and so in the Chrome export's args, the Perfetto export's source
    locations, the pprof export's functions and the CTF export's entry
    events) are what addr2line says
    for its symbol's address; built without -g (the other tests), the
    object's path and line 0."""
    folder, so = build_extension(debug=True)
    out = str(tmp_path / "t.swt")
    r = run(["run", "-q", "-o", out, os.path.join(folder, "driver.py"), "4"], cwd=folder)
    assert r.returncode == 0 and r.stdout == "47\n", r.stderr
    from stackwatch import Trace
    t = Trace(out)
    native = {c.name[:-len(" [native]")]: (c.filename, c.firstlineno) for c in t.codes.values()
              if c.kind == 2}
    assert set(native) >= {"run", "walk", "branch", "leaf", "jumper", "dive"}, native
    symbols = {}
    for text in subprocess.run(["nm", so], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = text.split()
        if len(parts) == 3 and parts[2] in native:
            symbols[parts[2]] = parts[0]
    assert set(symbols) == set(native)
    names = list(symbols)
    lines = subprocess.run(["addr2line", "-e", so] + ["0x" + symbols[n] for n in names], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    theirs = {}
    for name, text in zip(names, lines):
        file, _, line = text.rpartition(":")
        theirs[name] = (os.path.normpath(file), int(line.split()[0]))
    assert {n: (os.path.normpath(f), l) for n, (f, l) in native.items()} == theirs
    assert all(f.endswith("cgraph.c") and l > 0 for f, l in theirs.values()), theirs
    # The Chrome export's native slices carry them as args.
    r = run(["export", out, "--format", "chrome", "-o", str(tmp_path / "t.json")])
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "t.json") as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    shown = {e["name"][:-len(" [native]")]: (os.path.normpath(e["args"]["file"]), e["args"]["line"])
             for e in events if e.get("ph") == "B" and e.get("cat") == "c"}
    assert shown == theirs
    # The Perfetto export's source locations (decoded with the official schema).
    p = perfetto_timeline(out, tmp_path / "t.pftrace")
    shown = {name[:-len(" [native]")]: (os.path.normpath(info["source"][0]), info["source"][2])
             for (name, *_), info in zip(p.slices, p.slice_info) if name.endswith(" [native]")}
    assert shown == theirs
    # The CTF export's entry events (babeltrace2).
    if NO_BABELTRACE:
        missing(NO_BABELTRACE)
    r = run(["export", out, "--format", "ctf", "-o", str(tmp_path / "t.ctf")])
    assert r.returncode == 0, r.stderr
    shown = {field(p, "name")[:-len(" [native]")]: (os.path.normpath(field(p, "file")), int(field(p, "line")))
             for _, name, _, p in read_ctf(tmp_path / "t.ctf")
             if name == "lttng_ust_cyg_profile:func_entry" and field(p, "name").endswith(" [native]")}
    assert shown == theirs
    # The pprof export's functions (go tool pprof -raw: name file:line s=start line).
    if not GO:
        missing(NO_GO)
    r = run(["export", out, "--format", "pprof", "-o", str(tmp_path / "t.pb.gz")])
    assert r.returncode == 0, r.stderr
    rows = re.findall(r" (\S+) \[native\] (\S+):\d+ s=(\d+)", go_pprof("-raw", tmp_path / "t.pb.gz"))
    assert {n: (os.path.normpath(f), int(line)) for n, f, line in rows} == theirs


@pytest.mark.root
@needs(NO_BABELTRACE)
def test_ctf_holds_python_native_and_kernel_events(tmp_path):
    """One run with native functions and system calls (--kernel), exported
    as CTF and read by babeltrace2: Python entries, native entries and
    each system call's entry and exit, per thread, as many as the trace
    holds; the native ones named as the trace names them."""
    needs_kernel_tracepoint("raw_syscalls/sys_enter")
    folder, so = build_extension()
    out = str(tmp_path / "t.swt")
    r = run(["run", "-q", "--kernel", "-o", out, os.path.join(folder, "driver.py"), "4"], cwd=folder)
    assert r.returncode == 0 and r.stdout == "47\n", r.stderr
    r = run(["export", out, "--format", "ctf", "-o", str(tmp_path / "t.ctf")])
    assert r.returncode == 0, r.stderr
    from stackwatch import Trace
    from stackwatch.tracer.tracefile import KIND_NAMES
    t = Trace(out)
    tid = {pos: th["native_tid"] for pos, th in enumerate(t.threads)}
    entry_kind = {"call": "python", "c_call": "c", "resume": "resumed"}
    ours = Counter()
    for pos in range(len(t.threads)):
        for e in t.events(pos):
            kind = KIND_NAMES[e.kind]
            if kind in entry_kind:
                ours[(tid[pos], entry_kind[kind], t.codes[e.code].qualname)] += 1
    for e in t.ext_events(kinds="syscall"):
        ours[(tid[e.thread], "syscall_entry", e.data["name"])] += 1
        ours[(tid[e.thread], "syscall_exit", e.data["name"])] += 1
    theirs = Counter()
    for _, name, vtid, payload in read_ctf(tmp_path / "t.ctf"):
        if name == "lttng_ust_cyg_profile:func_entry":
            theirs[(vtid, re.search(r'kind = \( "(\w+)"', payload)[1], field(payload, "name"))] += 1
        for prefix in ("syscall_entry", "syscall_exit"):
            if name.startswith(prefix + "_"):
                theirs[(vtid, prefix, name[len(prefix) + 1:])] += 1
    assert theirs == ours
    kinds = Counter(kind for _, kind, _ in ours.elements())
    assert kinds["python"] > 0 and kinds["c"] > 0 and kinds["syscall_entry"] > 0, kinds
    # The program's print: a write by the main thread.
    assert ours[(tid[thread_pos(t, "MainThread")], "syscall_entry", "write")] >= 1


def test_config_needs_a_flag():
    r = run(["config"])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--cflags" in r.stderr, r.stderr
