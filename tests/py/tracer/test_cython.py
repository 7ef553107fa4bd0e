"""`stackwatch run --cython`: a Cython module compiled with profile=True
(real Cython from PyPI, built here) shows its functions as frames with
their .pyx file and line, nested among the Python frames exactly as its
pure-Python twin's (the same source run as Python) are. On every version:
each reaches stackwatch another way (the C profile function on 3.9-3.12,
sys.monitoring on 3.13).

The module is compiled once per Python and Cython version (a few seconds)
and kept under build/cython/, so the test costs well under a second
afterwards."""
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig

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


def test_cython_functions_nest_as_their_pure_python_twin(tmp_path):
    folder = build_module()
    traces = {}
    for name, options, args in (("cython", ["--cython"], []), ("twin", [], ["twin"]), ("off", [], [])):
        out = str(tmp_path / (name + ".swt"))
        r = run(["run", "-q", *options, "-o", out, os.path.join(folder, "driver.py"), *args], cwd=folder)
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
    assert files == {"cyprog.pyx", "driver.py"}, files   # driver.py: the Python callback
    assert traces["off"] == []   # without --cython no Cython function is recorded
