"""`stackwatch run` and `stackwatch profile` run a program exactly as
python runs it (issue 14, "It must run exactly as python runs"): what the
program can see of how it was started, how it ends. The ground truth is
python itself, run on the same program."""
import os

import pytest

from conftest import SAMPLER, run, write
from stackwatch import Trace

COMMANDS = ["run", "profile"] if SAMPLER else ["run"]

# What a program can see of how it was started.
SHOW = r'''
import os, sys, traceback
print("argv", sys.argv)
print("path0", repr(sys.path[0]))
print("name", __name__)
print("file", __file__)
print("cached", globals().get("__cached__", "(none)"))
print("spec", __spec__)
print("co_filename", sys._getframe().f_code.co_filename)
print("main is me", sys.modules["__main__"].__dict__ is globals())
print("loader", type(__loader__).__name__, getattr(__loader__, "path", None))
print("builtins", type(__builtins__).__name__)
def where():
    return traceback.extract_stack()[-1].filename
print("traceback path", where())
'''


def options(command, tmp):
    """The options that keep a command's output out of the way."""
    return ["-q", "-o", str(tmp / ("o.swt" if command == "run" else "o.txt"))]


def same_as_python(plain, got):
    assert got.returncode == plain.returncode, got.stderr
    assert got.stdout == plain.stdout
    assert got.stderr == plain.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_script_paths_are_absolute(tmp, command):
    """python makes __main__.__file__, co_filename and traceback paths
    absolute (3.9+); sys.argv[0] stays as typed."""
    (tmp / "sub").mkdir()
    write(tmp / "sub" / "prog.py", SHOW + "raise SystemExit(5)\n")
    plain = run(["python", "sub/prog.py", "a"], cwd=tmp)
    got = run([command] + options(command, tmp) + ["sub/prog.py", "a"], cwd=tmp)
    assert plain.returncode == 5
    assert f"file {tmp}/sub/prog.py" in plain.stdout and "argv ['sub/prog.py', 'a']" in plain.stdout
    same_as_python(plain, got)


@pytest.mark.parametrize("command", COMMANDS)
def test_script_reading_data_next_to_it_after_chdir(tmp, command):
    """The program of the issue: it finds its data through __file__ after
    changing directory."""
    write(tmp / "data.txt", "the data\n")
    write(tmp / "prog.py", (
        "import os\n"
        "here = os.path.dirname(__file__)\n"
        "os.chdir('/')\n"
        "print(open(os.path.join(here, 'data.txt')).read(), end='')\n"))
    plain = run(["python", "prog.py"], cwd=tmp)
    got = run([command] + options(command, tmp) + ["prog.py"], cwd=tmp)
    assert plain.stdout == "the data\n"
    same_as_python(plain, got)


@pytest.mark.parametrize("command", COMMANDS)
def test_uncaught_exception_traceback_as_python(tmp, command):
    write(tmp / "boom.py", "def f():\n    raise ValueError('boom')\nf()\n")
    plain = run(["python", "boom.py"], cwd=tmp)
    got = run([command] + options(command, tmp) + ["boom.py"], cwd=tmp)
    assert f'File "{tmp}/boom.py", line 3' in plain.stderr
    same_as_python(plain, got)


def test_lines_glob_matches_the_absolute_path(tmp):
    """--lines '*/prog.py' matches the script given as a relative path."""
    write(tmp / "prog.py", "def f():\n    x = 1\n    return x\nf()\n")
    r = run(["run", "-q", "-o", "o.swt", "--lines", "*/prog.py", "prog.py"], cwd=tmp)
    assert r.returncode == 0, r.stderr
    t = Trace(str(tmp / "o.swt"))
    assert {c.filename for c in t.codes.values() if c.name == "f"} == {f"{tmp}/prog.py"}
    assert t.ext_summary()["counts"].get("line", 0) >= 3


@pytest.mark.parametrize("trace", [True, False])
@pytest.mark.parametrize("n", [3, 30000])
def test_log_file_keeps_every_line(tmp, n, trace):
    """--log FILE is flushed at exit: every call and return of f() is a
    line, for a small program (the file was empty) and a big one (its tail
    was lost)."""
    write(tmp / "prog.py", f"def f(i):\n    return i\nfor i in range({n}):\n    f(i)\nprint('done')\n")
    out = ["-o", str(tmp / "o.swt")] if trace else ["--no-trace"]
    r = run(["run", "-q", "--log", str(tmp / "log.txt")] + out + ["prog.py"], cwd=tmp)
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    lines = (tmp / "log.txt").read_text().splitlines()
    assert sum(1 for x in lines if x.split()[3:5] == ["call", "f"]) == n
    assert sum(1 for x in lines if x.split()[3:5] == ["return", "f"]) == n


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("fmt", [[], ["--format", "chrome"]])
def test_missing_module_exits_1_and_leaves_no_file(tmp, command, fmt):
    if fmt and command == "profile":
        pytest.skip("--format chrome is run's")
    plain = run(["python", "-m", "no_such_module_xyz"], cwd=tmp)
    tmpdir = tmp / "tmpdir"
    tmpdir.mkdir()
    got = run([command, "-o", str(tmp / ("out.swt" if command == "run" else "out.txt"))] + fmt
              + ["-m", "no_such_module_xyz"], cwd=tmp, env={"TMPDIR": str(tmpdir)})
    assert plain.returncode == got.returncode == 1
    assert plain.stderr.endswith(": No module named no_such_module_xyz\n")
    assert got.stderr.splitlines() == ["stackwatch: error: No module named no_such_module_xyz"], got.stderr
    assert sorted(os.listdir(tmp)) == ["tmpdir"] and os.listdir(tmpdir) == []


@pytest.mark.skipif(not SAMPLER, reason="the sampling profiler does not support this Python")
def test_empty_profile_is_one_warning_line(tmp):
    """A warning beside the summary line (-q leaves both out)."""
    write(tmp / "prog.py", "pass\n")
    r = run(["profile", "--interval", "60s", "-o", "p.txt", "prog.py"], cwd=tmp)
    assert r.returncode == 0 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and lines[1].startswith("stackwatch: wrote "), r.stderr
    assert lines[0] == ("stackwatch: warning: the profile is empty: no sample was taken (the program ran for "
                        "less than the interval of 60000 ms, or --mode cpu found it never on a CPU)")
    r = run(["profile", "-q", "--interval", "60s", "-o", "p.txt", "prog.py"], cwd=tmp)
    assert r.returncode == 0 and r.stdout == r.stderr == ""
