"""The profiles of several processes of one run merged into one output
(`stackwatch profile` of a program that starts processes of its own:
tracer/follow_profile.py). Each process keeps its threads apart: a thread
is labelled "pid N NAME: thread" (the flame graph's selector, speedscope's
profiles, pprof's `thread` label; pprof's numeric `pid` label too), and every stack starts at a frame
naming its process, "pid N NAME" (file "<process>"), so that the views
that merge threads (collapsed stacks, the flame graph's "all threads",
pprof's and pstats' functions) keep the processes apart too.

    procs = [Process(os.getpid(), "black src/", prof._trees()), of_file("out.4242.swprof")]
    formats.FORMATS["html"].write("out.html", merged(procs))
"""
from collections import namedtuple

from .. import _native
from ..render import formats
from .history import as_trees
from .profile_file import load_profile

PROCESS_FILE = "<process>"

Process = namedtuple("Process", "pid name trees threads", defaults=(None,))
Process.__doc__ = """One process of a run: its pid, its name (a command
line, or multiprocessing's process name), its trees (a formats.Trees:
labelled threads, interval, times, counters) and its threads as
Profiler.threads() lists them (with their "states" where known), or
None."""


def of_file(path):
    """The Process of a profile file a followed process wrote (ValueError if
    it is no readable profile file). Its pid and name are the file's
    (format 1.1); a file without them is named after its path."""
    h = load_profile(path)
    info = h.info()
    return Process(info.get("pid") or 0, info.get("process") or path, as_trees(h.thread_trees(), info), h.threads())


def frame_name(pid, name):
    """The root frame of a process's stacks: "pid N NAME"."""
    return f"pid {pid} {name}" if name else f"pid {pid}"


def merged(processes):
    """A formats.Trees of every thread of every process, each thread's
    tree under its process's frame and labelled with it; the interval, mode
    and time span are the first process's (the one that started the
    others), the counters summed."""
    first = processes[0].trees
    threads, stats, pids = [], {}, []
    for p in processes:
        frame = frame_name(p.pid, p.name)
        for label, tid, tree in p.trees.threads:
            t = _native.CallTree()
            t.graft(tree, frame, PROCESS_FILE)
            threads.append((f"{frame}: {label or 'all threads'}", tid, t))
            pids.append(p.pid)
        for k, v in (p.trees.stats or {}).items():
            stats[k] = stats.get(k, 0) + v
    return formats.Trees(threads, first.title, first.interval_ns, first.time_ns, first.duration_ns, stats,
                         exact=first.exact, mode=first.mode, pids=pids)
