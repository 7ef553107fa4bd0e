"""Running the user's program as `python script.py`, `python -m module`,
`python -c code`, `python -` or a console script on PATH would: same
sys.argv, sys.path[0], __main__ module, exit status, and
tracebacks without stackwatch's frames; and the Finisher that ends the
command's recording once, however the program ends. Shared by `stackwatch
run` and `stackwatch profile`; UsageError, check_writable, writing and
error_text serve every command."""
import atexit
import builtins
import contextlib
import importlib.machinery
import importlib.util
import linecache
import os
import shutil
import signal
import sys
import traceback
import types

from .. import _native
from ..render import formats
from ..tracer import signals


class UsageError(Exception):
    """A mistake of the user's: reported as one line, exit status 2."""


def resolve(argv, module, code=None):
    """The Program the command's remaining arguments name, as python's
    command line would: -m MODULE, -c CODE, "-" (the program on stdin), a
    script file, or else a command on PATH (a console script such as
    `pytest`: a Python script with a #! line). UsageError for anything else."""
    if module is not None or code is not None:
        return Program(None, module, list(argv), code=code)
    rest = list(argv)
    if rest and rest[0] == "--":
        rest = rest[1:]
    if not rest:
        raise UsageError("nothing to run: give a script (stackwatch run script.py), -m module, "
                         "-c code, - (the program on stdin) or a command on PATH")
    script = rest[0]
    if script == "-":
        return Program(None, None, rest[1:], code=STDIN)
    if not os.path.exists(script):
        found = shutil.which(script) if os.sep not in script else None
        if found is None:
            raise UsageError(f"can't open file {script!r}: No such file or directory"
                             + ("" if os.sep in script else " (and no command of that name on PATH)"))
        _check_python_command(script, found)
        script = found
    elif os.path.isdir(script):
        raise UsageError(f"{script!r} is a directory, not a Python script")
    elif not script.endswith((".py", ".pyw")):
        # ./run.sh is refused as a command run.sh is; a file with no #!
        # line is Python's to compile, as `python FILE` would.
        _check_python_command(script, script, bare=True)
    return Program(script, None, rest[1:])


STDIN = object()   # Program(code=STDIN): the program is read from stdin ("-")


def _check_python_command(name, path, bare=False):
    """UsageError unless the command `path` (found on PATH for `name`, or
    a file named without a .py ending) is a Python script: a #! line naming
    python, or pip's /bin/sh trampoline that execs python on the script
    itself; bare=True: or a file that is neither an executable nor has a #!
    line."""
    if name != path:
        name = f"{name} ({path})"
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError as e:
        raise UsageError(f"can't open {name}: {e.strerror}")
    lines = head.split(b"\n")
    if head.startswith(b"#!") and (b"python" in lines[0]
                                   or (len(lines) > 1 and lines[1].startswith(b"'''exec'"))):
        return
    if bare and not head.startswith((b"#!", b"\x7fELF")):
        return
    if head.startswith(b"\x7fELF"):
        what = "an ELF executable"
    elif head.startswith(b"#!"):
        what = f"a script run by {os.fsdecode(lines[0][2:].strip()) or 'nothing'}"
    else:
        what = "a file with no #! line naming python"
    raise UsageError(f"{name} is not a Python program: it is {what}; stackwatch runs Python programs")


class Program:
    """A script, module or code string ready to run (code=STDIN: read from
    stdin). prepare() sets sys.argv and sys.path and compiles a script or
    code; it returns False after printing a SyntaxError as Python would (the
    caller exits with status 1)."""

    def __init__(self, script, module, args, code=None):
        self.script, self.module, self.args = script, module, args
        self.source = code
        self.code = self.main_module = None
        # As python (3.9+): __main__.__file__, co_filename and traceback
        # paths are absolute; sys.argv[0] stays as typed.
        self.path = os.path.abspath(script) if script else None

    def prepare(self):
        if self.module:
            sys.argv = [self.module] + self.args
            sys.path.insert(0, os.getcwd())
            # A module that does not exist at all: python's one line and
            # status 1, before anything is recorded (no file is left). Its
            # top-level package only: finding a submodule imports the
            # package, which the trace should see.
            top = self.module.partition(".")[0]
            if top and importlib.util.find_spec(top) is None:
                print(f"stackwatch: error: No module named {top}", file=sys.stderr)
                return False
            return True
        if self.source is not None:
            # python -c CODE / python -: sys.path[0] is "" (the current
            # directory, whatever it is at import time).
            sys.argv = ["-" if self.source is STDIN else "-c"] + self.args
            sys.path[0] = ""
            if self.source is STDIN:
                source, filename = sys.stdin.buffer.read(), "<stdin>"
            else:
                source, filename = self.source, "<string>"
                if sys.version_info >= (3, 13):
                    # As python -c does there: tracebacks show its lines.
                    lines = [line if line.endswith("\n") else line + "\n"
                             for line in source.splitlines(keepends=True)]
                    linecache.cache[filename] = (len(source), None, lines, filename)
            return self._compile(source, filename)
        sys.argv = [self.script] + self.args
        sys.path[0] = os.path.dirname(self.path)
        try:
            with open(self.path, "rb") as f:
                source = f.read()
        except OSError as e:
            raise UsageError(f"can't open file {self.script!r}: {e.strerror}")
        return self._compile(source, self.path)

    def _compile(self, source, filename):
        try:
            self.code = compile(source, filename, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):   # ValueError: null bytes (before 3.12)
            traceback.print_exc(limit=0)
            return False
        # Made here, not in run(): a profile's stacks start at the program.
        self.main_module = self._main_module()
        return True

    def _main_module(self):
        """The __main__ module python makes for a script, -c or stdin."""
        main_mod = types.ModuleType("__main__")
        main_mod.__builtins__ = builtins
        main_mod.__spec__ = None
        main_mod.__annotations__ = {}
        if self.source is None:
            main_mod.__file__ = self.path
            main_mod.__cached__ = None
            main_mod.__loader__ = importlib.machinery.SourceFileLoader("__main__", self.path)
        else:
            main_mod.__loader__ = importlib.machinery.BuiltinImporter
            if self.source is STDIN:
                main_mod.__file__ = "<stdin>"
                main_mod.__cached__ = None
        return main_mod

    def run(self, finish):
        """Runs the program and returns its exit status (SystemExit passes
        through). `finish` is called before the process kills itself with
        SIGINT on an uncaught KeyboardInterrupt, as Python does."""
        try:
            if self.module:
                import runpy
                runpy.run_module(self.module, run_name="__main__", alter_sys=True)
            else:
                main_mod = self.main_module
                sys.modules["__main__"] = main_mod
                exec(self.code, main_mod.__dict__)
        except SystemExit:
            raise
        except KeyboardInterrupt:
            print_user_exception()
            finish()
            sys.stdout.flush()
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
            return 130
        except BaseException:
            print_user_exception()
            return 1
        return 0


class Finisher:
    """Calls finish() once, and only in the process that made it (not in a
    child the program forked): once armed, at exit (atexit runs after the
    interpreter has joined the program's non-daemon threads) and before the
    process dies of SIGTERM, SIGINT, SIGHUP or SIGQUIT (common/signals.py);
    before the process kills itself on an uncaught Ctrl-C (Program.run);
    and wherever a command wraps os._exit or os.exec* to call it."""

    def __init__(self, finish):
        self.finish = finish
        self.pid = os.getpid()
        self.done = False

    def arm(self):
        atexit.register(self)
        signals.add(self)

    def __call__(self):
        # A fatal signal meanwhile waits for the output; one that comes
        # before the block calls this itself (and finishes).
        with signals.deferred():
            if self.done or os.getpid() != self.pid:
                return
            self.done = True
            try:
                # stackwatch's work, not the program's: none of it is recorded
                _native.unrecorded(self.finish)
            finally:
                signals.remove(self)


def print_user_exception():
    """Print the current exception as Python would: without stackwatch's
    frames (or runpy's). Python's own hook printing it is not recorded (the
    traceback module's calls are not the program's); a hook the program
    installed is."""
    if sys.excepthook is sys.__excepthook__:
        _native.unrecorded(_print_user_exception)
    else:
        _print_user_exception()


def _print_user_exception():
    etype, value, tb = sys.exc_info()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package
    while tb is not None and (os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(here)
                              or tb.tb_frame.f_code.co_filename.endswith(("runpy.py", "<frozen runpy>"))):
        tb = tb.tb_next
    if value is not None:
        value.__traceback__ = tb  # the default hook prints this, not its argument
    sys.excepthook(etype, value, tb)


def check_writable(path, what):
    """UsageError unless `path` can be created or overwritten."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise UsageError(f"cannot write the {what} to {path}: it is a directory")
    if not os.path.isdir(d):
        raise UsageError(f"cannot write the {what} to {path}: no such directory {d}")
    if not os.access(d, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise UsageError(f"cannot write the {what} to {path}: permission denied")


def check_directory(path, what):
    """UsageError unless `path` can be made a directory, or is an empty one
    (the output of a directory format: CTF)."""
    if os.path.isdir(path):
        if os.listdir(path):
            raise UsageError(f"cannot write the {what} to {path}: the directory is not empty")
        return
    check_writable(path, what)


def output_what(fmt):
    """What check_writable calls an output of format `fmt`: "trace" for
    the stackwatch trace, "chrome trace", "html output", ..."""
    if fmt == "swt":
        return "trace"
    return f"{fmt} trace" if fmt in formats.names_taking(formats.TRACES) else f"{fmt} output"


@contextlib.contextmanager
def writing(path):
    """Around the writing of `path`: an OSError that does not name its file
    (a failed write or close) is raised again naming `path`."""
    try:
        yield
    except OSError as e:
        if e.filename is not None or os.fspath(path) in str(e):
            raise
        raise OSError(e.errno, e.strerror or str(e), os.fspath(path)) from e


def error_text(e):
    """The one line of an error: an OSError as "FILE: reason"."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return str(e)
