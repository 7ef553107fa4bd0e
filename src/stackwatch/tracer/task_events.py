"""The task events of a trace (`--events tasks`, issue 22) as one
JSON-ready document: every task (threads, greenlets, asyncio tasks) and
every task event in time order. The one reader of them: `stackwatch tasks`,
the sequence diagram and the exports' flows read this document only.

    read_task_events(path_or_trace) -> {"tasks": [...], "events": [...]}

tasks: {"id" (0: a thread's own task), "name" (unique in the document),
"group", "kind" ("thread", "greenlet", "asyncio"), "thread" (native thread
id), "created_by", "created_t_ns", "creation_stack", "exit_t_ns",
"outcome", "result"}.
events: {"kind" ("create", "switch", "block", "wake", "send", "receive",
"exit"), "task" (the task it happened to; a switch's: the task switched
to), "task_id", "other" (a switch's: the task switched away from), "channel",
"value", "reason", "t_ns" (the trace's clock, like Trace events), "thread"
(native thread id), "function", "file", "line" (where it happened: a
switch's, the innermost frame of the task switched away from)}.
"""
from .tracefile import RECORD_KINDS, Trace

# The record kinds this module reads (records.h), by name.
_KINDS = ("task_switch",)
_NUMBERS = {k.name: n for n, k in RECORD_KINDS.items()}


def _kind_of(name):
    """The task kind of a track named `name` (TASK chunks name a greenlet
    "greenlet ...")."""
    return "greenlet" if name == "greenlet" or name.startswith("greenlet ") else "asyncio"


def _unique(name, taken):
    """name, or "name #2", "name #3", ... when it is taken."""
    if name not in taken:
        return name
    n = 2
    while f"{name} #{n}" in taken:
        n += 1
    return f"{name} #{n}"


def read_task_events(trace):
    """The task document of a trace (a path or a stackwatch.Trace)."""
    t = trace if isinstance(trace, Trace) else Trace(trace)
    tasks, names, taken = [], {}, set()
    by_index = {th["index"]: th for th in t.threads if not th["task"]}
    for th in t.threads:
        owner = th if not th["task"] else by_index.get(th["thread"])
        if owner is None:
            continue
        base = th["name"] or ("thread" if not th["task"] else "task")
        name = _unique(base, taken)
        taken.add(name)
        names[(owner["index"], th["task"])] = name
        tasks.append({"id": th["task"], "name": name, "group": None,
                      "kind": "thread" if not th["task"] else _kind_of(th["name"] or ""),
                      "thread": owner["native_tid"], "created_by": None, "created_t_ns": None,
                      "creation_stack": [], "exit_t_ns": None, "outcome": None, "result": None})
    mask = 0
    for k in _KINDS:
        mask |= 1 << _NUMBERS[k]
    events = []
    for pos, th in enumerate(t.threads):
        if th["task"]:
            continue
        index, tid = th["index"], th["native_tid"]

        def name_of(task):
            if (index, task) not in names:   # a task with no definition (a lost TASK chunk)
                names[(index, task)] = _unique(f"task {task}", taken)
                taken.add(names[(index, task)])
            return names[(index, task)]

        for kind, t_ns, _depth, code, line, data in t._t.ext_events(pos, mask, True):
            if data.get("malformed"):
                continue
            c = t.codes.get(code) if code is not None else None
            where = {"function": c.qualname if c else None, "file": c.filename if c else None, "line": line}
            name = RECORD_KINDS[kind].name
            if name == "task_switch":
                events.append({"kind": "switch", "task": name_of(data["task"]), "task_id": data["task"],
                               "other": name_of(data["origin"]), "channel": None, "value": None,
                               "reason": None, "t_ns": t_ns, "thread": tid, **where})
    events.sort(key=lambda e: e["t_ns"])   # stable: a thread's own order is kept at equal times
    # Tasks met only in events (no definition) are listed too.
    listed = {task["name"] for task in tasks}
    for (index, task), name in names.items():
        if name not in listed:
            owner = by_index.get(index, {})
            tasks.append({"id": task, "name": name, "group": None, "kind": "thread" if not task else "greenlet",
                          "thread": owner.get("native_tid"), "created_by": None, "created_t_ns": None,
                          "creation_stack": [], "exit_t_ns": None, "outcome": None, "result": None})
    return {"tasks": tasks, "events": events}
