"""`stackwatch run --cython`: a Cython module compiled with profile=True
(real Cython from PyPI, built here) shows its functions as frames with
their .pyx file and line, nested among the Python frames exactly as its
pure-Python twin's (the same source run as Python) are. On every version:
each reaches stackwatch another way (the C profile function on 3.9-3.12,
sys.monitoring on 3.13). On 3.12 only: the same with linetrace=True, and
Cython nested between native frames built with stackwatch's hooks.

The module is compiled once per Python and Cython version (a few seconds)
and kept under build/cython/, so the test costs well under a second
afterwards."""
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig

import pytest

from conftest import PROGRAMS, built_once, missing, run

SOURCE = os.path.join(PROGRAMS, "cython")


def build_module():
    """The folder holding cyprog (compiled from tests/programs/cython/cyprog.pyx
    with profile=True), cyprog_twin.py (the same text) and driver.py."""
    try:
        import Cython
    except ImportError:
        missing("Cython is not installed (scripts/venv.sh installs it)")
    text = b""
    for source in ("cyprog.pyx", "driver.py"):
        with open(os.path.join(SOURCE, source), "rb") as f:
            text += f.read()

    def build(tmp, cc):
        shutil.copy(os.path.join(SOURCE, "cyprog.pyx"), tmp)
        subprocess.run([sys.executable, "-m", "cython", "-3", "cyprog.pyx", "-o", "cyprog.c"], cwd=tmp,
                       check=True, capture_output=True)
        subprocess.run([cc, "-shared", "-fPIC", "-O0", "-w", "-I" + sysconfig.get_paths()["include"],
                        "cyprog.c", "-o", "cyprog" + sysconfig.get_config_var("EXT_SUFFIX")],
                       cwd=tmp, check=True, capture_output=True)
        shutil.copy(os.path.join(SOURCE, "cyprog.pyx"), os.path.join(tmp, "cyprog_twin.py"))
        shutil.copy(os.path.join(SOURCE, "driver.py"), tmp)

    return built_once("cython", Cython.__version__ + "-" + hashlib.sha256(text).hexdigest()[:12], build)


def build_more():
    """The folder holding cyprog_lt (cyprog.pyx compiled with linetrace=True
    instead of profile=True, and CYTHON_TRACE=1, without which Cython leaves
    the line hooks out) and cynative (cynative.pyx, profile=True, linked
    with cnative.c built with `stackwatch config --cflags --ldflags`)."""
    folder = build_module()
    cflags, ldflags = (run(["config", which]) for which in ("--cflags", "--ldflags"))
    assert cflags.returncode == ldflags.returncode == 0, cflags.stderr + ldflags.stderr
    text = (cflags.stdout + ldflags.stdout).encode()
    for source in ("cyprog.pyx", "cynative.pyx", "cnative.c", "cnative.h"):
        with open(os.path.join(SOURCE, source), "rb") as f:
            text += f.read()
    ext = sysconfig.get_config_var("EXT_SUFFIX")
    include = "-I" + sysconfig.get_paths()["include"]

    def build(tmp, cc):
        with open(os.path.join(SOURCE, "cyprog.pyx")) as f:
            first, rest = f.read().split("\n", 1)
        assert first == "# cython: profile=True, language_level=3", first
        with open(os.path.join(tmp, "cyprog_lt.pyx"), "w") as f:
            f.write("# cython: linetrace=True, language_level=3\n" + rest)
        for source in ("cynative.pyx", "cnative.c", "cnative.h"):
            shutil.copy(os.path.join(SOURCE, source), tmp)
        for module in ("cyprog_lt", "cynative"):
            subprocess.run([sys.executable, "-m", "cython", "-3", module + ".pyx", "-o", module + ".c"], cwd=tmp,
                           check=True, capture_output=True)
        subprocess.run([cc, "-shared", "-fPIC", "-O0", "-w", "-DCYTHON_TRACE=1", include, "cyprog_lt.c",
                        "-o", "cyprog_lt" + ext], cwd=tmp, check=True, capture_output=True)
        # Only cnative.c has the hooks: Cython's own C is not instrumented.
        subprocess.run([cc, "-c", "-fPIC", "-O0", *shlex.split(cflags.stdout), "cnative.c", "-o", "cnative.o"],
                       cwd=tmp, check=True, capture_output=True)
        subprocess.run([cc, "-shared", "-fPIC", "-O0", "-w", include, "cynative.c", "cnative.o",
                        *shlex.split(ldflags.stdout), "-o", "cynative" + ext], cwd=tmp, check=True, capture_output=True)
        shutil.copy(os.path.join(folder, "cyprog_twin.py"), tmp)
        shutil.copy(os.path.join(SOURCE, "driver.py"), tmp)

    import Cython
    return built_once("cython-more", Cython.__version__ + "-" + hashlib.sha256(text).hexdigest()[:12], build)


def main_sequence(path):
    """The calls and exits under cyprog's main() (it included): [("call",
    depth below main, name, file's base name, first line) or ("exit",
    depth)]: a generator's resumption is a call (Cython reports each as
    one on 3.9-3.12), an exit whether it returned, yielded or unwound."""
    from stackwatch import Trace
    t = Trace(path)
    seq, base = [], None
    for e in t.events(0):
        if e.kind in (0, 2):   # a call, or a generator's resumption
            c = t.codes[e.code]
            if base is None and c.name == "main" and "cyprog" in c.filename:
                base = e.depth
            if base is not None:
                seq.append(("call", e.depth - base, c.name, os.path.basename(c.filename), c.firstlineno))
        elif e.kind in (1, 3, 4) and base is not None:   # a return, yield or unwind
            seq.append(("exit", e.depth - base))
            if e.depth == base:
                break
    return seq


def nest_as_the_twin(tmp_path, folder, args, pyx):
    """Runs driver.py `args` (a compiled cyprog) with --cython and without,
    and its pure-Python twin: the compiled module's calls must nest as the
    twin's, with the same first lines, from the file `pyx`; without
    --cython none is recorded."""
    traces = {}
    for name, options, argv in (("cython", ["--cython"], args), ("twin", [], ["twin"]), ("off", [], args)):
        out = str(tmp_path / (name + ".swt"))
        r = run(["run", "-q", *options, "-o", out, os.path.join(folder, "driver.py"), *argv], cwd=folder)
        assert r.returncode == 0, r.stderr
        assert ("cyprog_twin.py" in r.stdout) == (name == "twin"), r.stdout
        traces[name] = main_sequence(out)
    cy, twin = traces["cython"], traces["twin"]
    # fib(6) is 25 calls, gen_sum 1, squares 4 runs (3 yields and the
    # end) with leaf 3 times, guarded/fails/leaf 5 + 5 + 5, through 1 with
    # leaf and the Python callback 3 times each: 55 calls, and main.
    assert sum(1 for s in twin if s[0] == "call") == 56, twin
    assert [s if s[0] == "exit" else s[:3] + (s[4],) for s in cy] == \
           [s if s[0] == "exit" else s[:3] + (s[4],) for s in twin]
    files = {s[3] for s in cy if s[0] == "call"}
    assert files == {pyx, "driver.py"}, files   # driver.py: the Python callback
    assert traces["off"] == []   # without --cython no Cython function is recorded


def test_cython_functions_nest_as_their_pure_python_twin(tmp_path):
    nest_as_the_twin(tmp_path, build_module(), [], "cyprog.pyx")


@pytest.mark.versions("3.12")   # (one Python: how each version reports Cython is the test above)
def test_linetrace_functions_nest_as_their_pure_python_twin(tmp_path):
    """The same module compiled with linetrace=True (and CYTHON_TRACE=1):
    its functions still appear once per call with their .pyx file and
    first line, nested as the twin's; the line hooks add nothing."""
    nest_as_the_twin(tmp_path, build_more(), ["linetrace"], "cyprog_lt.pyx")


@pytest.mark.versions("3.12")
def test_cython_nests_between_native_frames(tmp_path):
    """cynative.pyx calls native functions built with the hooks, one of
    which calls a Cython function back: Python > Cython > native > Cython >
    native, nested as by construction (cynative.pyx)."""
    folder = build_more()
    out = str(tmp_path / "t.swt")
    code = "import cynative\ndef main(): return cynative.outer(2)\nprint(main())\n"
    r = run(["run", "-q", "--cython", "-o", out, "-c", code], cwd=folder)
    assert r.returncode == 0 and r.stdout == "10\n", r.stderr    # inner(1) + inner(2) = 4 + 6
    from stackwatch import Trace
    t = Trace(out)
    seq, base = [], None
    for e in t.events(0):
        if e.kind in (0, 5):   # a Python or Cython call, a native call
            c = t.codes[e.code]
            if base is None and c.name == "main":
                base = e.depth
            if base is not None:
                seq.append(("call", e.depth - base, c.name, os.path.basename(c.filename)))
        elif e.kind in (1, 4, 6) and base is not None:
            seq.append(("exit", e.depth - base))
            if e.depth == base:
                break
    so = "cynative" + sysconfig.get_config_var("EXT_SUFFIX")
    one = [("call", 2, "c_apply [native]", so), ("call", 3, "c_leaf [native]", so), ("exit", 3),
           ("call", 3, "inner", "cynative.pyx"), ("call", 4, "c_leaf [native]", so), ("exit", 4), ("exit", 3),
           ("exit", 2)]
    assert seq == [("call", 0, "main", "<string>"), ("call", 1, "outer", "cynative.pyx")] + one * 2 + \
        [("exit", 1), ("exit", 0)]
