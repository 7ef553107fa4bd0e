"""`stackwatch record --pid PID --subprocesses`: the target's descendants,
each Python one sampled from outside by a Profiler of its own (its
release read with its own layout, as the target's), found as they appear
by polling the kernel's lists of children (/proc/P/task/T/children,
recursively; a scan of every /proc/N/stat's parent where the kernel has
no such lists). At the end each is merged into the target's output as `stackwatch profile` merges the processes it follows.

A process is opened once it has been seen with the same command line on
two polls in a row (a fork about to exec still has its parent's), and
retried while its interpreter is not started yet, for up to OPEN_WITHIN_S;
one that never turns out to be Python is left out silently, any other
refusal (another release it cannot read, permission) is reported. A
process that execs (its command line changes) is a new process: the
program it ran before keeps its samples.
"""
import os
import time

from ..tracer.follow_profile import command_name

OPEN_WITHIN_S = 2.0    # how long a new process may take to become readable Python


def _ints(path):
    with open(path, "rb") as f:
        return [int(w) for w in f.read().split()]


def _children_scan():
    """{parent pid: [child pids]} of every process, from /proc/N/stat."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            out.setdefault(int(fields[1]), []).append(int(name))
    return out


def descendants(pid):
    """[(pid, parent pid)] of every descendant of process pid, parents
    before their children; [] if it has none or is gone."""
    out, todo, scan, known = [], [pid], None, {pid}
    while todo:
        parent = todo.pop(0)
        try:
            kids = []
            for tid in os.listdir(f"/proc/{parent}/task"):
                kids += _ints(f"/proc/{parent}/task/{tid}/children")
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{parent}"):
                continue
            scan = scan if scan is not None else _children_scan()   # a kernel without the lists
            kids = scan.get(parent, [])
        except (OSError, ValueError):
            continue
        for k in kids:
            if k not in known:
                known.add(k)
                out.append((k, parent))
                todo.append(k)
    return out


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return None


class Descendants:
    """The samplers of the target's descendants: poll() now and then while
    recording, stop() at the end, then sampled() and refused."""

    def __init__(self, pid, open_profiler, alive):
        self.pid = pid
        self._open = open_profiler      # pid -> a started Profiler (raises as Profiler does)
        self._alive = alive
        self._seen = {}                 # pid -> (cmdline, first seen) of candidates
        self._sampled = {}              # pid -> [Profiler, cmdline, name, parent]
        self._given_up = set()          # (pid, cmdline)
        self._done = []                 # [Profiler, cmdline, name, parent] of processes ended or exec'd
        self.refused = []               # (pid, name, why) of Python processes that could not be read

    def poll(self):
        now = time.monotonic()
        for pid, entry in list(self._sampled.items()):
            if not self._alive(pid) or _cmdline(pid) != entry[1]:
                self._end(pid)
            else:
                entry[0].refresh_names()
        for pid, parent in descendants(self.pid):
            cmd = _cmdline(pid)
            if pid in self._sampled or cmd is None or (pid, cmd) in self._given_up:
                continue
            seen = self._seen.get(pid)
            if seen is None or seen[0] != cmd:
                self._seen[pid] = (cmd, now)
                continue
            self._try(pid, parent, cmd, now - seen[1])

    def _try(self, pid, parent, cmd, age_s):
        name = command_name(pid)
        try:
            prof = self._open(pid)
        except (ProcessLookupError, PermissionError, RuntimeError, ValueError) as e:
            if isinstance(e, ProcessLookupError) or age_s < OPEN_WITHIN_S and not isinstance(e, PermissionError):
                return          # gone, or not started yet: the next poll tries again
            self._given_up.add((pid, cmd))
            if " is not a Python process" not in str(e):     # target.c's words for no interpreter mapped
                self.refused.append((pid, name, str(e)))
            return
        self._seen.pop(pid, None)
        self._sampled[pid] = [prof, cmd, name, parent]

    def _end(self, pid):
        entry = self._sampled.pop(pid)
        if entry[0].running:
            entry[0].stop()
        self._done.append(entry)

    def stop(self):
        for pid in list(self._sampled):
            self._end(pid)

    def sampled(self):
        """[(Profiler, name, parent pid)] of every descendant sampled that
        stored a sample, in the order they ended."""
        return [(prof, name, parent) for prof, _, name, parent in self._done if prof.stats()["stored"]]
