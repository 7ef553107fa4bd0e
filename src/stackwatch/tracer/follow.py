"""Following the processes a traced or profiled program starts: every
Python process of the run writes a trace (or a profile file: the "kind"
of the run, follow_profile.py) of its own beside the first one, named so
that they sort together (`out.swt`, then `out.<pid>.swt` for each child).

Two ways in:

- A forked child (os.fork, multiprocessing's "fork" context, a
  ProcessPoolExecutor on fork) starts its session in the after-fork hook
  (session.py calls forked_child()).
- Any other Python program started while following (subprocess,
  multiprocessing's "spawn" and "forkserver", os.system, a shell script
  that runs python, the process replacing itself by os.exec*) is found
  through its environment. While a session follows, the process's C
  environment (what children inherit) holds STACKWATCH_FOLLOW (the
  kind of the run, the session's options, the first file's name and the
  parent's pid, as JSON) and PYTHONPATH with BOOT_DIR first. Python imports
  BOOT_DIR/sitecustomize.py at start; it takes BOOT_DIR off sys.path
  again, calls bootstrap() (which starts the child's session before its
  program runs) and chains to the sitecustomize the child would have
  imported without it. os.environ, the program's view, never shows these
  variables, in the parent or in the child. A Python that cannot import
  stackwatch, a non-Python child, or `python -I`/`-E`/`-S` (which ignore
  PYTHONPATH or site) runs untraced and unchanged.

The spawning functions (_posixsubprocess.fork_exec, behind subprocess and
multiprocessing; os.posix_spawn[p]; os.system; os.execv/execve) are
wrapped while following: each gives its child STACKWATCH_SPAWN (the
parent's pid, thread and CLOCK_MONOTONIC time of the call), adds the
variables above to an environment the program passes explicitly, and
puts them back into the C environment if the program replaced them. The
child's META then says who started it, from which thread and when
(docs/format.md, "Followed processes"); the exports draw that as a flow
from the parent's call to the child's first slice.
"""
import json
import os
import sys
import threading
import time

from .. import _native

FOLLOW_ENV = "STACKWATCH_FOLLOW"
SPAWN_ENV = "STACKWATCH_SPAWN"
VERSION = 2      # 2: the config names the kind of the run ("trace" or "profile")
PROFILE_MAGIC = b"\x89SWP\r\n\x1a\n"
BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot")

_lock = threading.Lock()   # one spawn at a time changes the C environment
_wrapped = {}              # (owner, name) -> the function replaced
_follow = None             # {"kind", "stem", "ext", "options"} while this process follows processes
_fork_spawn = None         # the parent's side of the current fork: "pid:tid:mono_ns"


# ---- names ----

def child_path(stem, ext, pid):
    """The trace file of process `pid` of the run whose first trace is
    stem + ext, created empty and so claimed: `stem.<pid>ext`, or
    `stem.<pid>.<n>ext` when a process of that pid already has one (it
    replaced itself by exec)."""
    for n in range(1000):
        path = f"{stem}.{pid}{ext}" if n == 0 else f"{stem}.{pid}.{n}{ext}"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            return path
        except FileExistsError:
            continue
    raise OSError(f"cannot name a trace for process {pid} beside {stem}{ext}")


def _child_number(entry, base, ext):
    """(pid, n) when `entry` is the name of a child trace, base.PID[.N]ext,
    else None. (String methods, not a regular expression: tracing starts
    without importing re, which the program may never import.)"""
    if not (entry.startswith(base + ".") and entry.endswith(ext)) or len(entry) <= len(base) + 1 + len(ext):
        return None
    parts = entry[len(base) + 1:len(entry) - len(ext)].split(".")
    if len(parts) > 2 or not all(p.isdigit() and p.isascii() for p in parts):
        return None
    return int(parts[0]), int(parts[1]) if len(parts) == 2 else 0


def child_traces(path):
    """The traces of the child processes of the run whose first trace is
    `path`: [(pid, path)] in the order of their pids (then of their execs)."""
    stem, ext = os.path.splitext(os.path.abspath(path))
    base, ext = os.path.basename(stem), ext or ".swt"
    d = os.path.dirname(stem)
    try:
        entries = os.listdir(d)
    except OSError:
        return []
    found = [(k, e) for e in entries for k in [_child_number(e, base, ext)] if k]
    return [(k[0], os.path.join(d, e)) for k, e in sorted(found)]


def remove_stale(path):
    """A new run replaces the child traces (or profile files) an earlier
    run of the same name left (only files that are stackwatch's)."""
    for _, p in child_traces(path):
        try:
            with open(p, "rb") as f:
                head = f.read(8)
            if head in (b"", b"\x89SWT\r\n\x1a\n", PROFILE_MAGIC):
                os.unlink(p)
        except OSError:
            pass


# ---- the session's side ----

def meta(followed):
    """META entries of a followed child's trace (docs/format.md)."""
    if not followed:
        return {}
    m = {"parent_pid": followed["parent"], "spawn": followed["how"]}
    if followed.get("spawn_tid"):
        m["spawn_tid"] = followed["spawn_tid"]
        m["spawn_mono_ns"] = followed["spawn_mono_ns"]
    m.update(followed.get("describe") or {})
    return m


def started(session, followed):
    """Called by session.start() once tracing runs: names the session's
    children after its file (a child of a followed run keeps the first
    trace's name), and with follow=True sets the environment and the
    wrappers up."""
    global _follow
    if followed:
        stem, ext = followed["stem"], followed["ext"]
    else:
        stem, ext = os.path.splitext(os.path.abspath(session["path"]))
        ext = ext or ".swt"
        if session["follow"] or session["follow_fork"]:
            remove_stale(stem + ext)
    session["_root"] = (stem, ext)
    if session["follow"]:
        begin("trace", stem, ext, {k: v for k, v in session.items() if k in OPTIONS})


def begin(kind, stem, ext, options):
    """From now on, every Python process this one starts runs a session
    of `kind` ("trace": session.start; "profile": follow_profile.start)
    with these options (JSON-able), writing into stem.<pid>ext."""
    global _follow
    _follow = {"kind": kind, "stem": stem, "ext": ext, "options": options}
    _install()
    _rest_env()


def stopped():
    """Called by session.stop(): children started from now on run untraced."""
    global _follow
    if _follow is None:
        return
    _follow = None
    _uninstall()
    for key in (FOLLOW_ENV, "PYTHONPATH", SPAWN_ENV):
        _set_c_env(key, os.environ.get(key))


# Options a child's session takes from its parent's (session.start's
# parameters; "meta" is the user's).
OPTIONS = ("buffer_size", "ring", "max_depth", "include", "exclude", "follow_fork", "follow", "meta",
            "allow_tsc", "c_calls", "cython", "native_include", "native_exclude", "flush_interval", "events", "lines", "sample", "sample_native",
            "sample_lines", "kernel", "cpu", "calls")


def note_fork():
    """Before os.fork() (registered first, so run after the other before-fork
    hooks, whose frames the parent records): when and where the parent
    forks, for the child's META."""
    global _fork_spawn
    _fork_spawn = _spawn_value()


def forget_in_child():
    """In a forked child, before anything else: the parent's wrappers and
    environment are not this process's (forked_child() sets its own up)."""
    global _lock
    _lock = threading.Lock()   # another thread of the parent may have held it
    stopped()


def forked_child(stem, ext, opts, start):
    """In a forked child of a session that follows forks: start(path,
    **opts) the child's own session, its file named after stem + ext.
    Returns nothing; the child runs on untraced if that fails."""
    try:
        followed = dict(stem=stem, ext=ext, how="fork", **_parse_spawn(_fork_spawn))
        start(child_path(stem, ext, os.getpid()), _followed=followed, **opts)
    except Exception as e:
        print(f"stackwatch: not following forked child {os.getpid()}: {e}", file=sys.stderr)
        return


def _spawn_value():
    return f"{os.getpid()}:{threading.get_native_id()}:{time.monotonic_ns()}"


def _parse_spawn(value):
    """{"parent", "spawn_tid", "spawn_mono_ns"} from a STACKWATCH_SPAWN
    value ("pid:tid:mono_ns"); {} if it is not one."""
    try:
        pid, tid, mono = (int(x) for x in value.split(":"))
    except (AttributeError, ValueError):
        return {}
    return {"parent": pid, "spawn_tid": tid, "spawn_mono_ns": mono}


# ---- the environment ----

def _additions(pythonpath, spawn=None):
    """What a child's environment gets, given the PYTHONPATH the program
    means it to have (None: unset)."""
    cfg = dict(_follow, v=VERSION, parent=os.getpid(), pythonpath=pythonpath)
    add = {FOLLOW_ENV: json.dumps(cfg, separators=(",", ":")),
           "PYTHONPATH": BOOT_DIR + (os.pathsep + pythonpath if pythonpath else "")}
    if spawn:
        add[SPAWN_ENV] = spawn
    return add


def _set_c_env(key, value):
    """The C environment only (what children inherit): os.environ, the
    program's view, is left as it is."""
    try:
        if value is None:
            os.unsetenv(key)
        else:
            os.putenv(key, value)
    except (OSError, ValueError):
        pass


def _rest_env():
    """The C environment between spawns: os.environ plus the follow
    variables (for the children started by what is not wrapped: C code,
    a shell's own children)."""
    for key, value in _additions(os.environ.get("PYTHONPATH")).items():
        _set_c_env(key, value)
    _set_c_env(SPAWN_ENV, None)


class _SpawnEnv:
    """Around one spawn whose child inherits the C environment: the follow
    variables and this spawn's STACKWATCH_SPAWN in it, then back."""

    def __init__(self):
        self.value = _spawn_value()

    def __enter__(self):
        _lock.acquire()
        for key, value in _additions(os.environ.get("PYTHONPATH"), self.value).items():
            _set_c_env(key, value)

    def __exit__(self, *exc):
        try:
            if _follow is not None:
                _rest_env()
            else:
                for key in (FOLLOW_ENV, "PYTHONPATH", SPAWN_ENV):
                    _set_c_env(key, os.environ.get(key))
        finally:
            _lock.release()


def _env_with(env, spawn):
    """A copy of an explicit environment (a mapping of str or bytes, or
    fork_exec's list of b"KEY=VALUE") with the follow variables added."""
    if isinstance(env, (list, tuple)):
        items = dict(e.split(b"=", 1) if b"=" in e else (e, b"") for e in env)
        pp = items.get(b"PYTHONPATH")
        add = _additions(os.fsdecode(pp) if pp is not None else None, spawn)
        items.update((os.fsencode(k), os.fsencode(v)) for k, v in add.items())
        return [k + b"=" + v for k, v in items.items()]
    out = dict(env)
    as_bytes = any(isinstance(k, bytes) for k in out)
    pp = out.get(b"PYTHONPATH" if as_bytes else "PYTHONPATH")
    add = _additions(os.fsdecode(pp) if pp is not None else None, spawn)
    out.update((os.fsencode(k), os.fsencode(v)) if as_bytes else (k, v) for k, v in add.items())
    return out


# ---- the wrappers of the spawning functions ----

def _wrap_fork_exec(real):
    def fork_exec(*args, **kwargs):
        # fork_exec(args, executable_list, close_fds, pass_fds, cwd, env, ...)
        # on every version from 3.9 to 3.13: the environment is the 6th.
        if _follow is None or len(args) < 6:
            return real(*args, **kwargs)
        if args[5] is None:
            with _SpawnEnv():
                return real(*args, **kwargs)
        args = args[:5] + (_env_with(args[5], _spawn_value()),) + args[6:]
        return real(*args, **kwargs)
    return fork_exec


def _wrap_posix_spawn(real):
    def posix_spawn(path, argv, env, *args, **kwargs):
        if _follow is None:
            return real(path, argv, env, *args, **kwargs)
        if env is None:
            with _SpawnEnv():
                return real(path, argv, env, *args, **kwargs)
        return real(path, argv, _env_with(env, _spawn_value()), *args, **kwargs)
    return posix_spawn


def _wrap_system(real):
    def system(command):
        if _follow is None:
            return real(command)
        with _SpawnEnv():
            return real(command)
    return system


def _wrap_execv(real):
    def execv(path, argv):
        if _follow is None:
            return real(path, argv)
        with _SpawnEnv():   # if the exec fails, the environment is put back
            return real(path, argv)
    return execv


def _wrap_execve(real):
    def execve(path, argv, env):
        if _follow is None:
            return real(path, argv, env)
        return real(path, argv, _env_with(env, _spawn_value()))
    return execve


def _targets():
    """(owner, name, wrapper maker) of every function wrapped."""
    out = []
    try:
        import _posixsubprocess
        out.append((_posixsubprocess, "fork_exec", _wrap_fork_exec))
    except ImportError:
        pass
    # subprocess (3.11+) keeps its own reference, taken at its import.
    sub = sys.modules.get("subprocess")
    if sub is not None and hasattr(sub, "_fork_exec"):
        out.append((sub, "_fork_exec", _wrap_fork_exec))
    for name in ("posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            out.append((os, name, _wrap_posix_spawn))
    out += [(os, "system", _wrap_system), (os, "execv", _wrap_execv), (os, "execve", _wrap_execve)]
    return out


def _install():
    for owner, name, make in _targets():
        if (owner, name) not in _wrapped:
            real = getattr(owner, name)
            _wrapped[(owner, name)] = real
            setattr(owner, name, make(real))


def _uninstall():
    for (owner, name), real in list(_wrapped.items()):
        setattr(owner, name, real)
    _wrapped.clear()


# ---- the child's side ----

def bootstrap(start, raw, spawn):
    """Run by BOOT_DIR/sitecustomize.py at the start of a Python process
    whose environment says to follow it (raw: its STACKWATCH_FOLLOW, spawn:
    its STACKWATCH_SPAWN; the sitecustomize already took them out of
    os.environ): start(path, **options) (the session's of the run's kind,
    which the sitecustomize chose by kind_of(raw)) starts its session
    before its program runs. Never raises; prints one line if tracing
    cannot start."""
    try:
        cfg = json.loads(raw)
        if cfg.get("v") != VERSION:
            return
        stem, ext, parent = cfg["stem"], cfg["ext"], int(cfg["parent"])
    except (TypeError, ValueError, KeyError, AttributeError):
        return
    if cfg.get("kind") == "trace" and _native.is_tracing():
        return
    s = _parse_spawn(spawn)
    followed = dict(stem=stem, ext=ext, how="spawn" if s else "env", parent=parent, describe=_describe())
    if s.get("parent") == os.getpid():
        followed["how"] = "exec"      # this process replaced itself
    followed.update(s)
    try:
        start(child_path(stem, ext, os.getpid()), _followed=followed, **cfg["options"])
    except Exception as e:
        print(f"stackwatch: not following process {os.getpid()} (started by {parent}): {e}", file=sys.stderr)
        return


# What a program started by python -c is, by the code it was given (the
# process names of multiprocessing's helpers).
KNOWN_C = (("multiprocessing.spawn", "multiprocessing spawn"),
            ("multiprocessing.forkserver", "multiprocessing forkserver"),
            ("multiprocessing.resource_tracker", "multiprocessing resource_tracker"),
            ("multiprocessing.semaphore_tracker", "multiprocessing semaphore_tracker"))


def _describe():
    """META argv and command of a process started by exec (sys.argv is not
    final yet when site runs: "-m" for a module): the whole command line
    where Python keeps it (3.10+), and a name for the command."""
    argv = list(sys.argv)
    first = argv[0] if argv else ""
    command = os.path.basename(first) if first not in ("", "-c", "-m") else "python " + first
    orig = getattr(sys, "orig_argv", None)
    if orig:
        argv = list(orig)
        words = iter(orig[1:])
        for w in words:          # the interpreter's options, up to -c, -m or the script
            if w in ("-W", "-X"):
                next(words, None)
            elif w == "-m":
                command = next(words, command)
                break
            elif w == "-c":
                code = next(words, "")
                command = next((name for mod, name in KNOWN_C if mod in code), command)
                break
            elif not w.startswith("-"):
                break
    elif first == "-c" and "--multiprocessing-fork" in argv:
        command = "multiprocessing spawn"
    return {"argv": json.dumps(argv), "command": command}
