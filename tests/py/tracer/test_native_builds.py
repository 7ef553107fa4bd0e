"""README.md's recipes for building a C extension whose native functions
stackwatch records, run as the README writes them (its code blocks are
read from README.md here, so that the doc cannot drift from what is
tested): tests/programs/native/ext.c built with cc and `stackwatch config
--cflags --ldflags`, with setuptools (the README's setup.py, `python
setup.py build_ext --inplace`) and with meson (its meson.build, `meson
setup build && meson compile -C build`), each build kept under build/
(conftest.built_once). One traced run loads the three (each its own
`ext`) and calls each from a Python function of its own: ext's native
frames, its static functions too, nest as its call graph, known by
construction, under that caller. One Python (3.12): the recipes do not
depend on the version."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest

from conftest import ROOT, built_once, missing, run_traced, write
from native_ext import SOURCE, config_flags

pytestmark = pytest.mark.versions("3.12")

SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
BIN = os.path.dirname(sys.executable)   # the venv's python, meson and ninja


def readme_blocks():
    """The code blocks of README.md's paragraph on native functions, as
    [(language, text)], and that paragraph's words joined by spaces."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text[text.index("\nNative functions: "):text.index("\nEvents beyond calls: ")]
    return re.findall(r"^```(\w+)\n(.*?)^```$", section, re.S | re.M), " ".join(section.split())


def shell(command, cwd, bin=BIN):
    """Runs a recipe's shell text in cwd with a venv's commands first on
    PATH (by default its `python` is the one that runs the tests)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CFLAGS", "LDFLAGS")}
    env["PATH"] = bin + os.pathsep + env.get("PATH", "")
    r = subprocess.run(["sh", "-ec", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (command, r.stdout[-2000:], r.stderr[-2000:])


def build_by(recipe, files, command, so):
    """ext.c built in a folder of its own (kept under build/) holding files
    ({name: text}), by running command there; the path of the module it
    made, folder/so."""
    source = os.path.join(SOURCE, "ext.c")
    _, key = config_flags(source, text=(command + repr(sorted(files.items()))).encode())

    def build(tmp, cc):
        shutil.copy(source, tmp)
        for name, text in files.items():
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        shell(command, tmp)

    path = os.path.join(built_once("native-readme-" + recipe, key, build), so)
    assert os.path.isfile(path), path   # named as Python imports it
    return path


def built_extensions():
    """{recipe: the module's path} of ext built by README.md's cc,
    setuptools and meson recipes."""
    blocks, words = readme_blocks()
    kinds = [kind for kind, _ in blocks]
    assert kinds == ["sh", "sh", "python", "meson"], kinds   # cc, simplejson, setup.py, meson.build
    (_, cc), (_, setup_py), (_, meson_build) = blocks[0], blocks[2], blocks[3]
    setuptools_command = "python setup.py build_ext --inplace"
    meson_command = "meson setup build && meson compile -C build"
    for command in (setuptools_command, meson_command):
        assert command in words, command   # what the README says to run
    if not shutil.which("meson", path=BIN):
        missing("meson is not installed in the venv (scripts/venv.sh installs it)")
    if importlib.util.find_spec("setuptools") is None:
        missing("setuptools is not installed in the venv (scripts/venv.sh installs it)")
    return {"cc": build_by("cc", {}, cc, "ext" + SUFFIX),
            "setuptools": build_by("setuptools", {"setup.py": setup_py}, setuptools_command, "ext" + SUFFIX),
            "meson": build_by("meson", {"meson.build": meson_build}, meson_command,
                              os.path.join("build", "ext" + SUFFIX))}


PROGRAM = """
import importlib.util
import sys


def load(path):
    spec = importlib.util.spec_from_file_location("ext", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


by_cc, by_setuptools, by_meson = (load(path) for path in sys.argv[1:])


def via_cc():
    return by_cc.run(3)


def via_setuptools():
    return by_setuptools.run(4)


def via_meson():
    return by_meson.run(5)


print(via_cc(), via_setuptools(), via_meson())
"""

# ext.run(n)'s call graph (tests/programs/native/ext.c) under the Python
# caller, as (depth below the caller, function) at each entry.
CALLS = {"via_cc": 3, "via_setuptools": 4, "via_meson": 5}


def expected(caller, n):
    return [(0, caller), (1, "run [native]"), (2, "outer [native]")] + [(3, "inner [native]")] * n


def test_readmes_recipes_build_extensions_whose_functions_nest_under_the_caller(tmp_path):
    paths = built_extensions()
    out, r = run_traced(tmp_path, PROGRAM, "-q", args=[paths["cc"], paths["setuptools"], paths["meson"]])
    assert r.stdout.split() == [str(sum(i * i for i in range(n))) for n in CALLS.values()], r.stdout
    assert nested_calls(out) == {name: expected(name, n) for name, n in CALLS.items()}


def nested_calls(trace):
    """{caller: [(depth below it, function)]} of the trace's calls under
    each Python function named in CALLS."""
    from stackwatch import Trace
    from stackwatch.tracer.tracefile import ENTER_KINDS, EXIT_KINDS
    t = Trace(trace)
    seen = {}
    caller = base = None
    for e in t.events(0):
        if e.kind in ENTER_KINDS:
            code = t.codes[e.code]
            if caller is None and code.name in CALLS:
                caller, base = code.name, e.depth
                seen[caller] = []
            if caller is not None:
                seen[caller].append((e.depth - base, code.name))
                if code.name.endswith(" [native]"):
                    assert code.kind == 2, code   # a native function's code, in its object or source
                    assert code.filename.endswith(("/ext.c", SUFFIX)), code
        elif e.kind in EXIT_KINDS and caller is not None and e.depth == base:
            caller = None
    return seen


def test_readmes_cc_recipe_builds_in_a_venv_whose_path_has_a_space(tmp_path):
    """`config --cflags --ldflags` names the stubs' archive in stackwatch's
    folder: in a venv at a path with a space that word is quoted, and
    README.md's cc recipe, run with that venv's python, builds an ext whose
    functions that python's trace nests under the caller (the words were
    split at the space once)."""
    import stackwatch
    blocks, _ = readme_blocks()
    venv = tmp_path / "a venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    site = venv / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages"
    shutil.copytree(os.path.dirname(stackwatch.__file__), site / "stackwatch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    build = tmp_path / "build"
    build.mkdir()
    shutil.copy(os.path.join(SOURCE, "ext.c"), build)
    shell(blocks[0][1], build, bin=str(venv / "bin"))
    prog = write(tmp_path / "prog.py", "import sys\nsys.path.insert(0, sys.argv[1])\nimport ext\n\n\n"
                 "def via_cc():\n    return ext.run(3)\n\n\nprint(via_cc())\n")
    out = str(tmp_path / "t.swt")
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "stackwatch", "run", "-q", "-o", out, prog, str(build)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["5"], (r.stdout, r.stderr)
    assert nested_calls(out) == {"via_cc": expected("via_cc", 3)}
