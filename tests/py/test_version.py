"""The version has one source, meson.build's project(): the installed
distribution's metadata, `stackwatch --version`, stackwatch.__version__
and a trace's metadata all say it, and no other file of the package
spells it."""
import importlib.metadata
import os
import re

import stackwatch
from conftest import ROOT, run, write
from stackwatch import Trace


def _meson_version():
    text = open(os.path.join(ROOT, "meson.build"), encoding="utf-8").read()
    return re.search(r"project\('stackwatch'.*?version: '([^']+)'", text, re.S).group(1)


def test_one_version_everywhere(tmp):
    v = _meson_version()
    assert importlib.metadata.version("stackwatch") == v
    assert stackwatch.__version__ == v
    r = run(["--version"])
    assert r.returncode == 0 and r.stdout == f"stackwatch {v}\n", r.stdout + r.stderr
    prog = write(tmp / "p.py", "print('hi')\n")
    assert run(["run", "-q", "-o", str(tmp / "t.swt"), prog]).returncode == 0
    assert Trace(str(tmp / "t.swt")).meta["stackwatch_version"] == v


def test_no_other_copy_of_the_version():
    v = _meson_version()
    copies = []
    for top in ("src", "native", "pyproject.toml"):
        path = os.path.join(ROOT, top)
        files = [path] if os.path.isfile(path) else [
            os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith((".py", ".c", ".h", ".toml"))]
        copies += [os.path.relpath(f, ROOT) for f in files
                   if re.search(rf"['\"]{re.escape(v)}['\"]", open(f, encoding="utf-8").read())]
    assert not copies, copies
