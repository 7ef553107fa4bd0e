"""The readable lines of task events (`stackwatch run --events tasks
--log`): who was created by whom, who sent what to whom and received it,
each switch from one task to another with every known task's state then,
blocks, wakes and exits, with tasks named as the trace names them.

TaskLog is used by handlers.verbose for the task_* kinds: it keeps, per
thread, the names of the tasks it has met (task ids are a thread's:
events/task_hooks.py, ext/tracer/tasks.c), the task running and each
task's state.
"""
import threading

from .task_hooks import OUTCOMES, REASONS, TASK_KINDS

STATES_SHOWN = 8   # tasks whose state a switch line lists; the others are counted


class TaskLog:
    def __init__(self, thread_name, thread_named):
        self._thread_name = thread_name   # ident -> the thread's name
        self._thread_named = thread_named   # (ident, name): a thread's name, from its creation
        self._names = {}                  # (ident, task id) -> name
        self._running = {}                # ident -> task id
        self._states = {}                 # (ident, task id) -> state
        self._natives = {}                # native id -> the name of a thread met (for one that ended since)

    def _name(self, ident, task):
        if not task:
            return self._thread_name(ident)
        return self._names.get((ident, task)) or f"task {task}"

    def _thread(self, native_id, ident):
        if not native_id:
            return self._thread_name(ident)
        for t in threading.enumerate():
            if t.native_id == native_id:
                return t.name
        return self._natives.get(native_id) or f"thread {native_id}"

    def describe(self, ev):
        """The words of a task event's line (after its time and thread)."""
        d, ident = ev.data or {}, ev.thread_id
        self._natives[threading.get_native_id()] = self._thread_name(ident)   # (the handler runs on ev's thread)
        me = self._name(ident, self._running.get(ident, 0))
        kind = ev.kind[5:]
        if kind == "switch":
            origin, task = d.get("origin", 0), d.get("task", 0)
            self._running[ident] = task
            if self._states.get((ident, origin)) == "running":
                self._states[(ident, origin)] = "runnable"
            self._states[(ident, task)] = "running"
            return f"{self._name(ident, origin)} -> {self._name(ident, task)}  [{self._state_list(ident)}]"
        if kind == "create":
            what = TASK_KINDS[d.get("kind", 0)] if d.get("kind", 0) < len(TASK_KINDS) else "task"
            if what == "thread":   # written by the new thread: its creator is task `task` of thread native_id
                if ev.name:
                    self._thread_named(ident, ev.name)
                return f"{self._thread_name(ident)} ({what}) created by {self._thread(d.get('native_id'), ident)}"
            key = (ident, d.get("task", 0))
            if ev.name:
                self._names[key] = ev.name
            self._states[key] = "runnable"
            return f"{self._name(*key)} ({what}) created by {me}"
        if kind == "exit":
            key = (ident, d.get("task", 0))
            self._states[key] = "exited"
            outcome = OUTCOMES[d["outcome"]] if d.get("outcome", 0) < len(OUTCOMES) else "?"
            return f"{self._name(*key)} exited: {outcome}" + (f" {ev.name}" if ev.name else "")
        if kind == "block":
            reason = REASONS[d["reason"]] if d.get("reason", 0) < len(REASONS) else "?"
            what = f"{reason} {ev.name}" if ev.name else reason
            self._states[(ident, self._running.get(ident, 0))] = f"blocked on {what}"
            return f"{me} blocks on {what}"
        if kind == "wake":
            woken = (self._thread(d.get("native_id"), ident) if d.get("native_id")
                     else self._name(ident, d.get("task", 0)))
            if not d.get("native_id"):
                self._states[(ident, d.get("task", 0))] = "runnable"
            return f"{woken} woken by {me}" + (f" ({ev.name})" if ev.name else "")
        if kind == "woken":   # written by the woken task
            self._states[(ident, self._running.get(ident, 0))] = "running"
            return f"{me} woken by {self._thread(d.get('native_id'), ident)}" + (f" ({ev.name})" if ev.name else "")
        if kind in ("send", "receive"):
            arrow = "to" if kind == "send" else "from"
            return f"{me} {kind}s {d.get('value')} {arrow} {ev.name}"
        if kind == "name":
            key = (ident, d.get("task", 0))
            was = self._thread(d["native_id"], ident) if d.get("native_id") else self._name(*key)
            if not d.get("native_id"):
                self._names[key] = ev.name
            group = d.get("group")
            return f"{was} named {ev.name}" + (f" (group {group})" if group else "")
        return ""

    def _state_list(self, ident):
        mine = sorted(((k, s) for k, s in self._states.items() if k[0] == ident and s != "exited"),
                      key=lambda ks: ks[1] != "running")   # the running one first
        shown = ", ".join(f"{self._name(*k)}: {s}" for k, s in mine[:STATES_SHOWN])
        return shown + (f", and {len(mine) - STATES_SHOWN} more" if len(mine) > STATES_SHOWN else "")
