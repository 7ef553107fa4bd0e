"""The HTML sequence diagram of a trace's task events (`stackwatch export
FILE --format sequence -o out.html`, issue 22): one self-contained page
(sequence.html, package data: inline script and style, no network), a
lifeline per task, arrows for create / switch / send / receive / wake,
marks for block and exit, tasks coloured by their creation stack; hover
for stacks, values and waits; zoom and pan; lanes filtered by group or
name. The page draws only the events of the time window in view, and when
there are too many of them to draw, how many fell in each band of each
lane (so a million events stay usable).

    write(put, doc, title)      # the page, a piece at a time, to put(str)
    write_file(path, doc, title=None)

doc is read_task_events' document (stackwatch.tracer.task_events), which
this room does not import: the command line reads it and the registry
(formats.py, takes TASKS) hands it here.

The embedded data (version 1), JSON in a <script type="application/json">
block, escaped by flamegraph.embed_json so that no name ends the block:

    {"version": 1, "title": str, "kinds": ["create", "switch", ...],
     "strings": [str, ...],                 # channels, values, reasons, functions, files
     "sites": [[function, file, line], ...],  # string indexes (-1: none), line or 0
     "stacks": [[site, ...], ...],          # the distinct creation stacks, innermost first
     "tasks": [{"name", "group", "kind", "thread", "created_by", "created_t_ns",
                "exit_t_ns", "outcome", "result", "stack": index into stacks}],
     "events": {"dt": [...],                # t_ns, each as the difference from the one before
                "kind": [...], "task": [...], "other": [...],     # indexes (-1: none)
                "channel": [...], "value": [...], "reason": [...],  # string indexes (-1: none)
                "site": [...],              # index into sites (-1: none)
                "wait": [...],              # block: ns its task was blocked (-1: not a block,
                                            # or no wait), as `stackwatch tasks` counts it
                "wait_from": [...]}}        # block: ns from it to the wait's start (its
                                            # task's switch out after it; 0 for a thread)
"""
import os

from .flamegraph import embed_json, page_around_data

KINDS = ("create", "switch", "block", "wake", "send", "receive", "exit")


def _interned():
    """(index_of, values): index_of(value) is the index of `value` among the
    distinct values met so far, in the order first met (None: -1); values()
    lists them in that order. Fast: one dict lookup per value."""
    index = {None: -1}

    def index_of(value):
        return index.setdefault(value, len(index) - 1)
    return index_of, lambda: list(index)[1:]


def _waits(events):
    """(wait, wait_from) for each event: for a block event, the ns its task
    was blocked and the ns from the block to the wait's start (as
    stackwatch tasks counts it: a task that is switched waits from its
    switch out after the block, a thread from the block, until its wake,
    its switch back in or its exit; a switched task woken before it was
    switched out did not wait); else (-1, 0)."""
    wait, wait_from = [-1] * len(events), [0] * len(events)
    switched = {e.get("task") for e in events if e["kind"] == "switch"}
    switched |= {e.get("other") for e in events if e["kind"] == "switch"}
    pending = {}          # task -> [index of its block, when its wait began or None]
    for i, e in enumerate(events):
        k, me = e["kind"], e.get("task")
        if k == "switch" and e.get("other") in pending and pending[e["other"]][1] is None:
            pending[e["other"]][1] = e["t_ns"]          # switched out after its block
        if k == "block":
            pending[me] = [i, None if me in switched else e["t_ns"]]
        elif k in ("wake", "switch", "exit") and me in pending:
            j, began = pending.pop(me)
            if began is not None:
                wait[j], wait_from[j] = e["t_ns"] - began, began - events[j]["t_ns"]
    return wait, wait_from


def data(doc, title):
    """The embedded data (see the module's docstring) of a document."""
    string, strings = _interned()
    site, sites = _interned()      # (function, file, line) first, string indexes at the end
    stack_of, stacks = _interned()
    tasks, task_index = [], {None: -1}
    blank = {"group": None, "kind": None, "created_by": None, "created_t_ns": None, "exit_t_ns": None,
             "outcome": None, "result": None}
    for t in doc.get("tasks") or []:
        task_index[t["name"]] = len(tasks)
        frames = tuple(site((f.get("function"), f.get("file"), f.get("line") or 0))
                       for f in t.get("creation_stack") or ())
        tasks.append({**blank, **{k: t.get(k) for k in blank}, "name": t["name"], "thread": t.get("thread"),
                      "stack": stack_of(frames)})
        if t.get("result_unknown"):   # (shown as text: a repr is never bare words in parentheses)
            tasks[-1]["result"] = "(result not known)"
    events = doc.get("events") or []
    for e in events:       # tasks named only by events
        for n in (e.get("task"), e.get("other")):
            if n not in task_index:
                task_index[n] = len(tasks)
                tasks.append({**blank, "name": n, "thread": e.get("thread"), "stack": stack_of(())})
    kind_index = {k: i for i, k in enumerate(KINDS)}
    times = [e["t_ns"] for e in events]
    cols = {"dt": [b - a for a, b in zip([0] + times, times)],
            "kind": [kind_index.get(e["kind"], -1) for e in events],
            "task": [task_index[e.get("task")] for e in events],
            "other": [task_index[e.get("other")] for e in events],
            "channel": [string(e.get("channel")) for e in events],
            "value": [string(e.get("value")) for e in events],
            "reason": [string(e.get("reason")) for e in events],
            "site": [site((e.get("function"), e.get("file"), e.get("line") or 0))
                     if e.get("function") is not None or e.get("file") is not None else -1 for e in events]}
    cols["wait"], cols["wait_from"] = _waits(events)
    site_rows = [[string(f), string(file), int(line)] for f, file, line in sites()]
    return {"version": 1, "title": str(title), "kinds": list(KINDS), "strings": strings(),
            "sites": site_rows, "stacks": [list(x) for x in stacks()], "tasks": tasks, "events": cols}


def write(put, doc, title):
    """The whole page for a document, given to put(str) a piece at a time."""
    before, after = page_around_data("sequence.html", title)
    put(before)
    put(embed_json(data(doc, title)))
    put(after)


def write_file(path, doc, title=None):
    """The page written to path (title: the file's name when None)."""
    path = os.fspath(path)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        write(f.write, doc, os.path.basename(path) if title is None else title)
