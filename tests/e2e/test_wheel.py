"""What a user without a compiler gets: a wheel of stackwatch, built from
this tree and repaired by auditwheel to a manylinux tag as `make dist`
does, installs into a fresh venv whose PATH has no C compiler, and
`stackwatch run`, `stackwatch stats` and `stackwatch probes` work from it.

Runs on one Python (3.12) to keep `make test` affordable: what could go
wrong (a module or the page template missing from the wheel, a library the
extension needs that the wheel does not carry, pip wanting to compile) is
the same on every version; `make dist` builds the wheels of all of them.
The wheel is built with the incremental meson build of this venv's
interpreter (build/wheel-test-<version>), so a second run costs seconds.
"""
import glob
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, ".venv", "tools", "bin")
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
from conftest import missing  # noqa: E402  (tests/py/conftest.py)

pytestmark = [
    pytest.mark.skipif(sys.version_info[:2] != (3, 12), reason="the wheel install test runs on Python 3.12"),
]


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert r.returncode == 0, f"{cmd} -> {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def test_wheel_installs_and_runs_without_a_compiler(tmp_path):
    if not os.path.exists(os.path.join(TOOLS, "auditwheel")):
        missing("auditwheel is not in .venv/tools (make deps installs it)")
    ver = "%d.%d.%d" % sys.version_info[:3]
    build_dir = os.path.join(ROOT, "build", f"wheel-test-{ver}")
    # A build folder configured before meson.options changed cannot take a
    # new option on the command line (meson: "Unknown option"): made anew.
    coredata = os.path.join(build_dir, "meson-private", "coredata.dat")
    if os.path.exists(coredata) and os.path.getmtime(coredata) < os.path.getmtime(os.path.join(ROOT, "meson.options")):
        shutil.rmtree(build_dir)
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    sh([sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "--no-build-isolation",
        "--no-deps", f"-Cbuild-dir={build_dir}", "-Csetup-args=-Dlttng=disabled", "-w", str(tmp_path / "raw"),
        ROOT], env=env)   # (without the LTTng provider library, as make dist: scripts/dist.sh says why)
    raw = glob.glob(str(tmp_path / "raw" / "stackwatch-*.whl"))
    assert len(raw) == 1, raw
    sh([os.path.join(TOOLS, "auditwheel"), "repair", "--wheel-dir", str(tmp_path / "wheel"), raw[0]],
       env=dict(os.environ, PATH=TOOLS + os.pathsep + os.environ["PATH"]))
    wheel, = glob.glob(str(tmp_path / "wheel" / "stackwatch-*manylinux*.whl"))

    venv = tmp_path / "venv"
    sh([sys.executable, "-m", "venv", str(venv)])
    # The user's shell: the venv first, then only a folder of the few
    # commands pip and the program may call - no cc, gcc, clang or ld.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sh", "uname", "ls", "cat"):
        path = shutil.which(name)
        if path:
            os.symlink(path, bin_dir / name)
    user_env = {"PATH": f"{venv / 'bin'}{os.pathsep}{bin_dir}", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    for compiler in ("cc", "gcc", "clang", "ld"):
        assert shutil.which(compiler, path=user_env["PATH"]) is None, compiler
    py = str(venv / "bin" / "python")
    sh([py, "-m", "pip", "install", "--disable-pip-version-check", "--no-index", "--only-binary", ":all:",
        wheel], env=user_env)

    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""\
        def leaf(i):
            return i * 2

        def work():
            return sum(leaf(i) for i in range(1000))

        print("result", work())
        """))
    r = sh([str(venv / "bin" / "stackwatch"), "run", "-o", str(tmp_path / "t.swt"), str(prog)],
           env=user_env, cwd=tmp_path)
    assert r.stdout == "result 999000\n"
    r = sh([str(venv / "bin" / "stackwatch"), "stats", str(tmp_path / "t.swt")], env=user_env)
    leaf_rows = [line for line in r.stdout.splitlines() if " leaf " in f" {line} " and "prog.py" in line]
    assert leaf_rows and leaf_rows[0].split()[0] == "1000", r.stdout
    r = subprocess.run([str(venv / "bin" / "stackwatch"), "probes"], capture_output=True, text=True,
                       env=user_env, timeout=60)
    # Probes are compiled in where <sys/sdt.h> was found at build time;
    # either way the command answers in one clear line.
    if r.returncode == 0:
        assert "function__entry(file, function, line)" in r.stdout
        assert str(venv) in r.stdout.splitlines()[0]     # the installed library to attach to
        assert "LTTng-UST tracepoints: not built" in r.stdout   # (wheels leave lttng-ust to the system)
    else:
        assert r.stderr.startswith("stackwatch: USDT probes were not compiled in"), r.stderr
