"""The ways users start programs, under `stackwatch run` and `stackwatch
profile` as under python: `-c CODE`, `-` (the program on stdin) and a
console script found on PATH (pip's, or any Python script with a #! line).
Each is differential: the same program run plainly and under stackwatch
prints the same sys.argv, sys.path[0], __main__ attributes and tracebacks,
and exits with the same status. A name that is neither a file nor a
command on PATH, or a command that is no Python program, is one line and
exit status 2, with no output file left behind."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import missing, run, write
import stackwatch
from stackwatch import Trace

# How python starts a program (runpy, sys.path[0], __main__) moved across
# versions: the forms run on the oldest and the two newest.
pytestmark = pytest.mark.versions("3.9", "3.12", "3.13")

# What python's command line decides about the program, printed by it.
PROBE = '''\
import sys
import time
import __main__
def work(n):
    return n if n < 2 else work(n - 1) + work(n - 2)
t0 = time.process_time()
while time.process_time() - t0 < 0.2:     # CPU time: the profiles' samples come even under load
    work(10)
g = __main__.__dict__
print("argv", sys.argv)
print("path0", repr(sys.path[0]))
print("name", __name__, __main__ is sys.modules["__main__"])
print("file", repr(g.get("__file__")), "cached", repr(g.get("__cached__", "absent")))
print("spec", __spec__, "package", __package__)
loader = g["__loader__"]
print("loader", loader.__name__ if isinstance(loader, type) else type(loader).__name__,
      getattr(loader, "path", None))
print("dunders", sorted(k for k in g if k.startswith("__")))
sys.exit(int(sys.argv[-1]) if sys.argv[-1].isdigit() else 0)
'''

COMMANDS = {
    "run": lambda tmp: ["run", "-o", str(tmp / "out.swt")],
    "profile": lambda tmp: ["profile", "--interval", "200us", "-o", str(tmp / "out.collapsed.txt")],
}


def check_output_file(tmp, command, own="work"):
    """The trace or profile was written and holds the program's function;
    a profile's stacks start at the program's code (not stackwatch's)."""
    if command == "run":
        t = Trace(str(tmp / "out.swt"))
        assert t.complete and own in {c.qualname for c in t.codes.values()}
    else:
        stacks = [line.rsplit(" ", 1)[0].split(";")
                  for line in (tmp / "out.collapsed.txt").read_text().splitlines()]
        assert any(f.split(" (")[0].endswith(own) for s in stacks for f in s), stacks
        package = os.path.dirname(stackwatch.__file__)
        # (pytest loads stackwatch's pytest plugin through its entry point,
        # as it loads every installed plugin: that is the program's doing,
        # and so is the import of the plugin's package that it implies.)
        plugin = (os.path.join(package, "integrations", "pytest_plugin.py"),
                  os.path.join(package, "integrations", "__init__.py"))
        assert not [f for s in stacks for f in s
                    if (package in f and not any(p in f for p in plugin)) or "runpy" in f], stacks


def without_wrote(stderr):
    """The program's stderr: without stackwatch's last lines (the profile's
    summary table, the "wrote" line)."""
    stderr = stderr.split("\nstackwatch: top functions", 1)[0]
    return "".join(line for line in stderr.splitlines(keepends=True)
                   if not line.startswith("stackwatch: wrote "))


@pytest.mark.parametrize("command", list(COMMANDS))
def test_dash_c_as_python(tmp, command):
    plain = run(["python", "-c", PROBE, "a", "-q", "--x", "3"], cwd=tmp)
    got = run([*COMMANDS[command](tmp), "-c", PROBE, "a", "-q", "--x", "3"], cwd=tmp)
    assert plain.returncode == 3, plain.stderr
    assert "argv ['-c', 'a', '-q', '--x', '3']" in plain.stdout
    assert "path0 ''" in plain.stdout
    assert (got.returncode, got.stdout) == (plain.returncode, plain.stdout), got.stderr
    assert without_wrote(got.stderr) == plain.stderr
    check_output_file(tmp, command)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_stdin_as_python(tmp, command):
    plain = run(["python", "-", "x", "-y", "4"], cwd=tmp, input=PROBE)
    got = run([*COMMANDS[command](tmp), "-", "x", "-y", "4"], cwd=tmp, input=PROBE)
    assert plain.returncode == 4, plain.stderr
    assert "argv ['-', 'x', '-y', '4']" in plain.stdout and "file '<stdin>'" in plain.stdout
    assert (got.returncode, got.stdout) == (plain.returncode, plain.stdout), got.stderr
    assert without_wrote(got.stderr) == plain.stderr
    check_output_file(tmp, command)


@pytest.mark.parametrize("source", [
    "def f():\n    return 1 / 0\nf()\n",       # a traceback through the program's lines
    "x = 1\ny = = 2\n",                         # a SyntaxError: exit status 1
    "import sys; sys.exit('bye')\n",
])
@pytest.mark.parametrize("form", ["-c", "-"])
def test_code_errors_as_python(tmp, form, source):
    code_args = ["-c", source] if form == "-c" else ["-"]
    stdin = source if form == "-" else None
    plain = run(["python", *code_args], cwd=tmp, input=stdin)
    got = run(["run", "-o", str(tmp / "out.swt"), *code_args], cwd=tmp, input=stdin)
    assert plain.returncode == 1
    assert (got.returncode, got.stdout) == (plain.returncode, plain.stdout)
    assert without_wrote(got.stderr) == plain.stderr


def test_dash_c_options_after_code_are_the_programs(tmp):
    # Like python -c: every word after the code is the program's, even one
    # that is stackwatch's option.
    got = run(["run", "-q", "-o", str(tmp / "out.swt"), "-c", "import sys; print(sys.argv)",
               "-o", "x", "-m", "y"], cwd=tmp)
    assert got.returncode == 0, got.stderr
    assert got.stdout == "['-c', '-o', 'x', '-m', 'y']\n"
    assert got.stderr == ""


def _path_env(bindir):
    return {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}


def _plain_command(argv, cwd, env, input=None):
    e = dict(os.environ)
    for name in ("PYTHONPATH", "COVERAGE_CORE", "COVERAGE_PROCESS_START", "PYTEST_ADDOPTS"):
        e.pop(name, None)
    e.update(env)
    return subprocess.run(argv, cwd=cwd, env=e, capture_output=True, text=True, timeout=120,
                          input=input)


def _command(bindir, name, text):
    path = bindir / name
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


# The console scripts pip writes: a #! line naming the venv's python, or,
# where that path is too long or has spaces, a /bin/sh trampoline that
# execs python on the script itself.
SHEBANGS = {
    "python": f"#!{sys.executable}\n",
    "sh-trampoline": f"#!/bin/sh\n'''exec' '{sys.executable}' \"$0\" \"$@\"\n' '''\n",
}


@pytest.mark.parametrize("shebang", list(SHEBANGS))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_console_script_on_path_as_the_shell_runs_it(tmp, command, shebang):
    bindir = tmp / "bin"
    bindir.mkdir()
    path = _command(bindir, "probe-tool", SHEBANGS[shebang] + PROBE)
    work = tmp / "elsewhere"
    work.mkdir()
    env = _path_env(bindir)
    plain = _plain_command(["probe-tool", "a", "--flag", "5"], work, env)
    got = run([*COMMANDS[command](tmp), "probe-tool", "a", "--flag", "5"], cwd=work, env=env)
    assert plain.returncode == 5, plain.stderr
    assert f"argv ['{path}', 'a', '--flag', '5']" in plain.stdout
    assert f"path0 '{bindir}'" in plain.stdout
    assert (got.returncode, got.stdout) == (plain.returncode, plain.stdout), got.stderr
    assert without_wrote(got.stderr) == plain.stderr
    check_output_file(tmp, command)


def _pytest_script():
    path = os.path.join(os.path.dirname(sys.executable), "pytest")
    if not os.path.exists(path):
        missing(f"no pytest console script beside {sys.executable} (scripts/venv.sh installs pytest)")
    return path


@pytest.mark.parametrize("command", list(COMMANDS))
def test_pytest_console_script(tmp, command):
    """The venv's own pytest, a console script pip wrote: its conftest sees
    the same sys.argv, sys.path and __main__ as when the shell runs it,
    the tests the same outcomes."""
    script = _pytest_script()
    suite = tmp / "suite"
    suite.mkdir()
    write(suite / "pytest.ini", "[pytest]\n")
    write(suite / "conftest.py", (
        "import sys, __main__\n"
        "print('argv0', sys.argv[0], 'main', __main__.__file__, 'path', sys.path[:3], flush=True)\n"))
    write(suite / "test_some.py", (
        "import pytest\n"
        "def helper(n):\n    return n * 2\n"
        "def test_ok():\n    assert helper(2) == 4\n"
        "def test_fails():\n    assert helper(2) == 5\n"
        "@pytest.mark.skip(reason='no')\ndef test_skipped():\n    pass\n"))
    env = _path_env(os.path.dirname(script))
    argv = ["pytest", "-q", "-p", "no:cacheprovider", "-s", "test_some.py"]
    plain = _plain_command(argv, suite, env)
    got = run([*COMMANDS[command](tmp), *argv], cwd=suite, env=env)
    assert plain.returncode == 1, plain.stdout
    assert f"argv0 {script} main {script}" in plain.stdout
    assert os.path.dirname(script) in plain.stdout.split(" path ")[1].splitlines()[0]
    assert "1 failed, 1 passed, 1 skipped" in plain.stdout

    def stable(out):    # without the run's duration
        return [line.rsplit(" in ", 1)[0] for line in out.splitlines()]

    assert got.returncode == plain.returncode, got.stdout + got.stderr
    assert stable(got.stdout) == stable(plain.stdout)
    # (the test functions run too briefly to be sampled; pytest's main,
    # [_]console_main, is under most samples)
    check_output_file(tmp, command, own="helper" if command == "run" else "console_main")


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", ["missing", "elf", "shell", "no-shebang", "missing-path", "elf-path",
                                  "shell-path"])
def test_not_a_python_command_is_one_line(tmp, command, case):
    """A name on PATH, or a path to a file (./run.sh), that is no Python
    program: one line, exit status 2, nothing run."""
    bindir = tmp / "bin"
    bindir.mkdir()
    name = "sw-test-tool"
    if case in ("elf-path", "shell-path"):
        case = case[:-len("-path")]
        name = os.path.join("..", "bin", "tool.sh")   # from work/, as ./tool.sh
    if case == "elf":
        shutil.copy(shutil.which("true"), bindir / name)
    elif case == "shell":
        _command(bindir, name, "#!/bin/sh\necho hi\n")
    elif case == "no-shebang":
        _command(bindir, name, "echo hi\n")
    elif case == "missing-path":
        name = "./no-such-script.py"
    work = tmp / "work"
    work.mkdir()
    options = ["run"] if command == "run" else ["profile"]
    r = run([*options, name, "arg"], cwd=work, env=_path_env(bindir))
    err = r.stderr.splitlines()
    assert r.returncode == 2, r.stderr
    assert len(err) == 1 and err[0].startswith("stackwatch: error: "), r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    expected = {
        "missing": f"can't open file '{name}': No such file or directory (and no command of that "
                   "name on PATH)",
        "missing-path": f"can't open file '{name}': No such file or directory",
        "elf": "is not a Python program: it is an ELF executable",
        "shell": "is not a Python program: it is a script run by /bin/sh",
        "no-shebang": "is not a Python program: it is a file with no #! line naming python",
    }[case]
    assert expected in err[0]
    if case == "missing-path":
        assert "PATH" not in err[0]
    assert os.listdir(work) == [], "an output file was left"


def test_python_file_without_ending_runs(tmp):
    """A path to a file with no .py ending and no #! line is Python's to
    run, as `python FILE` runs it."""
    script = write(tmp / "tool", "import sys\nprint('ran', sys.argv[1:])\n")
    r = run(["run", "-o", str(tmp / "t.swt"), script, "x"], cwd=tmp)
    assert r.returncode == 0 and r.stdout == "ran ['x']\n", r.stderr
