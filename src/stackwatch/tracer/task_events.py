"""The task events of a trace (`--events tasks`, issue 22) as one
JSON-ready document: every task (threads, greenlets, asyncio tasks) and
every task event in time order. The one reader of them: `stackwatch tasks`,
the sequence diagram and the exports' flows read this document only.

    read_task_events(path_or_trace) -> {"tasks": [...], "events": [...]}

tasks: {"id" (0: a thread's own task), "name" (unique in the document:
"name #2" for a second one), "group", "kind" ("thread", "greenlet",
"asyncio", "trio"), "thread" (native thread id), "created_by", "created_t_ns",
"creation_stack" (the creator's open frames then, innermost first, each
{"function", "file", "line"}: a line only at the program's frame that made
it; for the tasks of creators beyond the CREATION_REPLAYS busiest, that
frame alone; in a trace without calls, format 1.20, the TASK_STACK
written with its creation), "exit_t_ns", "outcome" ("result", "exception", "cancelled"),
"result" (a repr), "result_unknown" (True: a greenlet that ended with a
result no switch() of ours returned: one that began before task events,
ending into a parent that waits in greenlet's own switch), "at_start" (a thread alive as task events started:
{"state": "running", "runnable" or "blocked", "waits_on": what it waited
on or None}, from META `tasks_at_start`; else None: asyncio tasks alive
then block at the start instead)}.
events: {"kind" ("create", "switch", "block", "wake", "send", "receive",
"exit"), "task" (the task it happened to; a create's: the new task; a
switch's: the task switched to; a wake of a thread another thread made
(a notify, a thread's end): the task that thread ran as it blocked, an
asyncio task or greenlet waiting in threading's code too), "task_id", "other" (a create's creator;
a switch's: the task switched away from; a wake's waker (the task itself
when it gave up waiting: a timeout; null when no task woke it: its
reason says what did, "io" for I/O readiness); a send's
receiver and a receive's sender, paired by channel and value), "channel",
"value", "reason" (a block's: what it waits on; a wake's: what ended the
wait when no task did, "io", else null), "t_ns" (the trace's clock, like Trace
events), "thread" (native thread id), "function", "file", "line" (where it
happened: a switch's, the innermost frame of the task switched away
from)}.
"""
import json

from ..events.task_hooks import OUTCOMES, REASONS, TASK_KINDS
from .tracefile import KIND_MASKS, RECORD_KINDS, Trace

# How many creators' tracks are replayed for the creation stacks.
CREATION_REPLAYS = 64
# The record kinds this module reads (records.h), by name.
_KINDS = ("task_switch", "task_create", "task_exit", "task_block", "task_wake", "task_send", "task_receive",
          "task_name", "task_woken", "task_stack")


def _kind_of(name):
    """The task kind of a track named `name` as TASK chunks name them (a
    greenlet "greenlet ...", an asyncio task "Task-N coroutine")."""
    return "greenlet" if name == "greenlet" or name.startswith("greenlet ") else "asyncio"


def _unique(name, taken):
    """name, or "name #2", "name #3", ... when it is taken."""
    if name not in taken:
        return name
    n = 2
    while f"{name} #{n}" in taken:
        n += 1
    return f"{name} #{n}"


def _task(tid, name, kind, thread):
    return {"id": tid, "name": name, "group": None, "kind": kind, "thread": thread, "created_by": None,
            "created_t_ns": None, "creation_stack": [], "exit_t_ns": None, "outcome": None, "result": None,
            "result_unknown": False, "at_start": None}


def read_task_events(trace):
    """The task document of a trace (a path or a stackwatch.Trace)."""
    t = trace if isinstance(trace, Trace) else Trace(trace)
    # Tasks by key: (thread index, task id); a thread is (its index, 0).
    tasks = {}
    by_index = {th["index"]: th for th in t.threads if not th["task"]}
    by_tid = {th["native_tid"]: th["index"] for th in t.threads if not th["task"] and th["native_tid"]}
    pos_of = {}   # key -> the track's position
    for pos, th in enumerate(t.threads):
        owner = th if not th["task"] else by_index.get(th["thread"])
        if owner is not None:
            pos_of[(owner["index"], th["task"])] = pos
            name = th["name"] or ("thread" if not th["task"] else "task")
            tasks[(owner["index"], th["task"])] = _task(th["task"], name, "thread" if not th["task"]
                                                        else _kind_of(name), owner["native_tid"])

    def task_at(key):
        if key not in tasks:   # met only in events (its definition lost, or a thread that recorded nothing)
            index, tid = key
            owner = by_index.get(index, {})
            tasks[key] = _task(tid, f"task {tid}" if tid else f"thread {owner.get('native_tid') or index}",
                               "thread" if not tid else "greenlet", owner.get("native_tid"))
        return key

    def thread_key(native_id, index):
        """The task of the thread `native_id` (0: the one at `index`)."""
        if not native_id:
            return task_at((index, 0))
        return task_at((by_tid.get(native_id, -native_id), 0))

    mask = 0
    for k in _KINDS:
        mask |= KIND_MASKS[k]   # (every number of the name: format 1.16's and the older)
    raw = []   # events with tasks as keys, named at the end (a TASK_NAME may come later)
    creations = {}   # creator's key -> [(t_ns, the task's record, where)]
    stacks = {}   # key -> its creation stack, from TASK_STACK (a trace without calls, format 1.20)
    for pos, th in enumerate(t.threads):
        if th["task"]:
            continue
        index, tid = th["index"], th["native_tid"]
        running, switched_in = task_at((index, 0)), None
        for kind, t_ns, _depth, code, line, data in t._t.ext_events(pos, mask, True):
            if data.get("malformed"):
                continue
            # Nowhere: code None (format 1.14), or code 0 and line 0 (before).
            c = t.codes.get(code) if code is not None and line != 0 else None
            ev = {"kind": None, "task": running, "other": None, "channel": data.get("channel") or None,
                  "value": data.get("value"), "reason": None, "t_ns": t_ns, "thread": tid,
                  "function": c.qualname if c else None, "file": c.filename if c else None, "line": line}
            name = RECORD_KINDS[kind].name
            if name == "task_switch":
                ev.update(kind="switch", task=task_at((index, data["task"])), other=task_at((index, data["origin"])))
                running = ev["task"]
                switched_in = t_ns
            elif name == "task_create":
                kind_name = TASK_KINDS[data["kind"]] if data["kind"] < len(TASK_KINDS) else None
                if kind_name == "thread":   # written by the new thread; made by a task of thread native_id
                    new = task_at((index, 0))
                    by = task_at((by_tid.get(data["native_id"], -data["native_id"]), data["task"]))
                else:
                    new, by = task_at((index, data["task"])), running
                ev.update(kind="create", task=new, other=by)
                rec = tasks[new]
                where = {k: ev[k] for k in ("function", "file", "line")} if c else None
                rec.update(created_by=by, created_t_ns=t_ns, creation_stack=[where] if where else [])
                creations.setdefault(by, []).append((t_ns, rec, where))
                if kind_name:
                    rec["kind"] = kind_name
                if kind_name == "thread" and new[0] in by_index and not by_index[new[0]]["name"] and data.get("name"):
                    rec["name"] = data["name"]   # (a thread threading named only after its last record: no calls)
            elif name == "task_exit":
                key = task_at((index, data["task"]))
                outcome = OUTCOMES[data["outcome"]] if data["outcome"] < len(OUTCOMES) else None
                ev.update(kind="exit", task=key, value=None)
                # A greenlet's exit without a result: one no switch of ours returned (it ended into a
                # parent that waits in greenlet's own switch): not known, not None.
                unknown = not data.get("result") and tasks[key]["kind"] == "greenlet" and outcome != "cancelled"
                tasks[key].update(exit_t_ns=t_ns, outcome=outcome, result=data.get("result") or None,
                                  result_unknown=unknown)
            elif name == "task_block":
                ev.update(kind="block", reason=REASONS[data["reason"]] if data["reason"] < len(REASONS) else None)
            elif name == "task_wake":   # (cause: by what, when no task woke it; format 1.19)
                cause = data.get("cause") or 0
                ev.update(kind="wake", other=None if cause else running,
                          reason=REASONS[cause - 1] if 0 < cause <= len(REASONS) else None,
                          task=thread_key(data["native_id"], index) if data["native_id"]
                          else task_at((index, data["task"])), in_thread=bool(data["native_id"]))
            elif name == "task_woken":   # written by the woken task: its waker's release came `ago` ns before
                # (and before the switch that runs it, when one does: two clocks' reads apart)
                woke = t_ns - min(data.get("ago") or 0, t_ns)
                if running[1] and switched_in is not None and woke >= switched_in:
                    woke = switched_in - 1
                ev.update(kind="wake", t_ns=woke,
                          other=task_at((by_tid.get(data["native_id"], -data["native_id"]), data["task"])))
            elif name in ("task_send", "task_receive"):
                peer = task_at((index, data["peer"] - 1)) if data["peer"] else None
                ev.update(kind="send" if name == "task_send" else "receive", other=peer)
            elif name == "task_stack":   # the stack that made a task, in a trace without calls
                key = thread_key(data["native_id"], index) if data["native_id"] else task_at((index, data["task"]))
                stacks[key] = _stack_of(t, data.get("frames") or "")
                continue
            elif name == "task_name":
                key = thread_key(data["native_id"], index) if data["native_id"] else task_at((index, data["task"]))
                tasks[key]["name"] = data["name"] or tasks[key]["name"]
                tasks[key]["group"] = data.get("group") or None
                continue
            raw.append(ev)
    for th in json.loads(t.meta.get("tasks_at_start") or "[]"):   # the threads alive at the start
        if not th["thread"]:
            continue
        key = thread_key(th["thread"], None)
        if th["thread"] not in by_tid:   # (it recorded nothing: no track names it)
            tasks[key].update(name=th["name"], thread=th["thread"])
        tasks[key]["at_start"] = {"state": th["state"], "waits_on": th["waits_on"]}
    # Each creator's track is replayed once (a task's replay reads its
    # thread's whole stream): the CREATION_REPLAYS that made the most tasks;
    # the others' tasks keep the frame that made them only.
    for by, made in sorted(creations.items(), key=lambda kv: -len(kv[1]))[:CREATION_REPLAYS]:
        if by in pos_of and not stacks:   # (a trace without calls has no frames to replay)
            _creation_stacks(t, pos_of[by], made)
    for key, frames in stacks.items():
        tasks[key]["creation_stack"] = frames
    raw.sort(key=lambda e: e["t_ns"])   # stable: a thread's own order is kept at equal times
    _woken_as_running(raw)
    _pair_messages(raw)
    # Names unique in the document, in the order of the tracks.
    names, taken = {}, set()
    for key, rec in tasks.items():
        names[key] = _unique(rec["name"], taken)
        taken.add(names[key])
    out = []
    for key, rec in tasks.items():
        rec["name"] = names[key]
        if rec["created_by"] is not None:
            rec["created_by"] = names[rec["created_by"]]
        out.append(rec)
    for ev in raw:
        ev["task_id"] = tasks[ev["task"]]["id"]
        ev["task"] = names[ev["task"]]
        ev["other"] = names[ev["other"]] if ev["other"] is not None else None
    return {"tasks": out, "events": raw}


def _creation_stacks(t, pos, made):
    """Sets the creation_stack of each task made by the task of track pos
    (made: [(t_ns, record, where)] in time order) to the frames the
    creator had open then, innermost first (a line only at `where`, the
    program's code that made it)."""
    stack, k = [], 0
    enter, leave = (0, 2, 5), (1, 3, 4, 6)   # CALL, RESUME, C_CALL; RETURN, YIELD, UNWIND, C_RETURN
    for kind, t_ns, code, _depth, _syn in t._t.events(pos):
        while k < len(made) and t_ns > made[k][0]:
            _set_stack(t, stack, *made[k])
            k += 1
        if k == len(made):
            break
        if kind in enter:
            stack.append(code)
        elif kind in leave and stack:
            stack.pop()
    for m in made[k:]:
        _set_stack(t, stack, *m)


def _stack_of(t, text):
    """The frames of a TASK_STACK record's text (code ids innermost first,
    the innermost with its line: "12:40 7 3"), as creation_stack has them."""
    frames = []
    for word in text.split():
        code, _, line = word.partition(":")
        c = t.codes.get(int(code)) if code.isdigit() else None
        frames.append({"function": c.qualname if c else "?", "file": c.filename if c else None,
                       "line": int(line) if line.isdigit() else None})
    return frames


def _set_stack(t, stack, _t_ns, rec, where):
    frames = []
    for code in reversed(stack):
        c = t.codes.get(code)
        frames.append({"function": c.qualname if c else "?", "file": c.filename if c else None, "line": None})
    # The program's frame that made it (where) gets its line: the innermost
    # frame of its code (the library frames inside it are kept).
    at = next((i for i, f in enumerate(frames) if where and (f["function"], f["file"]) ==
               (where["function"], where["file"])), None)
    if at is not None:
        frames[at] = where
    elif where:
        frames.insert(0, where)
    rec["creation_stack"] = frames


def _woken_as_running(events):
    """A wake of a thread by its native id (a Condition's notify, a
    thread's end: the waker knows the thread only) ends the wait of the
    task that thread ran as it blocked, and still runs (its thread waits
    in threading's code): an asyncio task or a greenlet that called it, or
    the thread itself. (events: in time order; their in_thread flag goes.)"""
    running = {}   # thread index -> the key of the task it runs
    for ev in events:
        if ev["kind"] == "switch":
            running[ev["task"][0]] = ev["task"]
        elif ev.pop("in_thread", False):
            ev["task"] = running.get(ev["task"][0], ev["task"])


def _pair_messages(events):
    """A receive whose sender is not recorded gets the task of the earliest
    send of the same value on the same channel not yet received, and that
    send its receiver (a queue's put and get)."""
    waiting = {}
    for ev in events:
        if ev["kind"] == "send" and ev["channel"] is not None:
            waiting.setdefault((ev["channel"], ev["value"]), []).append(ev)
        elif ev["kind"] == "receive" and ev["channel"] is not None:
            sends = waiting.get((ev["channel"], ev["value"]))
            if sends:
                send = sends.pop(0)
                if ev["other"] is None:
                    ev["other"] = send["task"]
                if send["other"] is None:
                    send["other"] = ev["task"]
