"""Following the processes a profiled program starts (`stackwatch
profile`): every Python process of the run profiles itself and writes a
profile file (.swprof) beside the first output, `STEM.<pid>.swprof`,
which the first process merges into its output at its end (cli/profile.py,
profiler/processes.py). The ways in are follow.py's (the environment and
the wrapped spawning functions; the after-fork hook here for os.fork and
multiprocessing's fork); this module is each process's own side:

- begin(): the first process, once its profiler runs, follows the
  processes it starts from then on (end() stops that).
- start(): a followed child (bootstrap, or fork) starts its profiler
  before its program runs, follows its own children in turn, and writes
  its profile file however it ends: at exit, os._exit (multiprocessing's
  forked workers), os.exec* (before the new program, which is followed
  as a process of its own), or a fatal signal (SIGTERM: a Pool's
  terminate()). A child writes only into the file it claimed at its start
  (follow.child_path): when the first process has finished and removed a
  still-running child's empty file, that child writes nothing.
"""
import atexit
import os
import sys

from .. import _native
from ..profiler import Profiler, processes
from . import follow, signals
from .session import exec_wrappers

SUFFIX = ".swprof"
MAX_NAME = 120        # characters of a process's name kept

_root = None          # (stem, options, wrapper) while this process follows: for its forks
_child = None         # this process's own followed profile: {"profiler", "path", "pid", "followed"}


def options_of(prof):
    """The options a child's profiler takes from the first process's
    (JSON-able: they travel in the environment)."""
    return {"interval_ns": prof.interval_ns, "mode": prof.mode, "max_depth": prof.max_depth,
            "cycle_ns": prof.cycle_ns, "lines": prof.lines, "native": prof.native}


def begin(stem, prof):
    """The first process (the CLI), its profiler `prof` running: from now
    on every Python process it starts (and their own, forked or not)
    profiles itself into stem.<pid>.swprof; earlier runs' files of that
    name go. The children's stacks leave out the wrapper that `prof`
    leaves out (forks start inside it)."""
    global _root
    follow.remove_stale(stem + SUFFIX)
    options = options_of(prof)
    _root = (stem, options, prof._wrapper())
    follow.begin("profile", stem, SUFFIX, options)


def end():
    """Processes started from now on run unprofiled."""
    global _root
    _root = None
    follow.stopped()


def process_name(argv, command=None):
    """How outputs name a process: multiprocessing's name for one of its
    processes (SpawnPoolWorker-1, ForkProcess-2, ...), else its command
    line (`command`, or the script's file name, and its arguments), at
    most MAX_NAME characters."""
    mp = sys.modules.get("multiprocessing.process")
    if mp is not None:
        try:
            name = mp.current_process().name
        except Exception:
            name = None
        if isinstance(name, str) and name and name != "MainProcess":
            return name[:MAX_NAME]
    argv = [str(a) for a in argv or ()]
    first = command or (os.path.basename(argv[0]) if argv and argv[0] else "python")
    words = " ".join([first] + argv[1:]).replace("\0", " ")
    return words if len(words) <= MAX_NAME else words[:MAX_NAME - 3] + "..."


# ---- a followed child ----

def start(path, _followed=None, interval_ns=1_000_000, mode="wall", max_depth=1024, cycle_ns=2_000_000_000,
          lines=False, native=False, _wrapper=None):
    """Profiles this process (a child of a profiled run) into `path` (the
    file it claimed, named after the run's stem), from now until it ends,
    following its own children. Raises what Profiler raises."""
    global _child, _root
    followed = _followed or {}
    prof = Profiler(interval=f"{interval_ns}ns", mode=mode, max_depth=max_depth, cycle=f"{cycle_ns}ns",
                    lines=lines, native=native, maxlen=None)
    if _wrapper:
        prof._set_wrapper(*_wrapper)
    prof.start()
    _child = {"profiler": prof, "path": path, "pid": os.getpid(), "followed": followed}
    _root = (followed["stem"], options_of(prof), _wrapper)
    follow.begin("profile", followed["stem"], SUFFIX, _root[1])
    atexit.register(_finish)
    signals.add(_finish)
    real_exit = os._exit

    def exit_after_writing(status):
        _finish()
        real_exit(status)

    os._exit = exit_after_writing
    # The program that replaces this one is followed as a process of its own.
    os.execv, os.execve = exec_wrappers(lambda program: _finish(keep_following=True))


def _finish(keep_following=False):
    """Once, in the process that started the profile: stops following
    (unless it execs) and profiling, and writes the profile file (if the
    file is still there). A fatal signal meanwhile waits for the file; one
    that comes before that block runs this function itself (a process
    that ends normally while its pool terminates it gets both at once)."""
    global _child
    with signals.deferred():
        me = _child
        if me is None or me["pid"] != os.getpid():
            return
        _child = None
        _native.unrecorded(_write, me, keep_following)


def _write(me, keep_following):
    if not keep_following:
        end()
    prof = me["profiler"]
    try:
        if prof.running:
            prof.stop()
        if not os.path.exists(me["path"]):
            return          # the first process finished without this one: nobody reads it
        followed = me["followed"]
        command = (followed.get("describe") or {}).get("command")
        prof.save(me["path"], process={"pid": os.getpid(), "parent_pid": followed.get("parent", 0),
                                       "process": process_name(sys.argv, command)})
    except Exception as e:
        print(f"stackwatch: process {os.getpid()}: writing its profile {me['path']} failed: {e}",
              file=sys.stderr)
    finally:
        signals.remove(_finish)


def _after_fork_in_child():
    """A process that follows forks: the forked child profiles itself (the
    parent's profiler, whose thread is the parent's, is never touched)."""
    global _child
    if _root is None:
        return
    stem, options, wrapper = _root
    _child = None
    follow.forget_in_child()
    follow.forked_child(stem, SUFFIX, dict(options, _wrapper=wrapper), start)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ---- the first process's end ----

def collect(stem):
    """At the first process's end (after end()): the profile files its
    followed processes wrote, stem.<pid>.swprof, as ([(path, Process)],
    unread): `unread` lists (pid, path, why) for the files that could not
    be read, and for the processes still running or killed before they
    wrote (their file is empty: it is removed, so that a running one
    writes nothing later)."""
    read, unread = [], []
    for pid, path in follow.child_traces(stem + SUFFIX):
        try:
            if os.path.getsize(path) == 0:
                os.unlink(path)
                unread.append((pid, path, f"still running{_command_of(pid)}" if _running(pid)
                               else "it ended without writing its profile (killed)"))
                continue
            read.append((path, processes.of_file(path)))
        except (OSError, ValueError) as e:
            unread.append((pid, path, str(e)))
    return read, unread


def _running(pid):
    """False for a process that is gone or a zombie (Linux /proc; True
    where that cannot be told)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[:1] != [b"Z"]
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _command_of(pid):
    """" (NAME)" of a running process (command_name), "" if unknown."""
    name = command_name(pid)
    return f" ({name})" if name else ""


def command_name(pid):
    """The name of another running process from its command line
    (multiprocessing's processes by their kind: "multiprocessing spawn",
    "multiprocessing resource_tracker"), "" if unknown."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [os.fsdecode(w) for w in f.read().split(b"\0") if w]
    except OSError:
        return ""
    code = argv[argv.index("-c") + 1] if "-c" in argv[:-1] else ""
    for module, name in follow.KNOWN_C:
        if module in code:
            return name
    return process_name(argv[1:]) if len(argv) > 1 else ""
