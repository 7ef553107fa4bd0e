"""The per-task analysis of a trace's task events: how long each task was
running, runnable and blocked (by reason), the blocking profile (the call
sites that made tasks wait, and for how long in total) and the longest
waits with who ended them. It reads only the document of
read_task_events (stackwatch.tracer.task_events):

    doc = read_task_events("t.swt")
    a = analyze(doc)     # JSON-ready: a["tasks"], a["blocking_profile"], a["longest_waits"]

What a task is doing at each instant, from its events in time order (the
model of Go's execution tracer):

    running    from a switch to it until a switch away from it (or its
               exit); a task that is never switched (a thread's own task)
               runs whenever it is not blocked;
    blocked    from a block event until the wake that ends it; a task
               switched out after a block event and before any wake is
               blocked from the switch out (its block's reason and call
               site) until a wake, else until the next switch to it;
    runnable   switched out without a block, or woken but not yet switched
               back in.

A task's time starts at its creation (runnable until first switched in);
for a task with no creation in the document, at 0 when it was running
then (its first event is a switch away from it, or it is never switched),
else at its first event; and ends at its exit or at the last event of the
document (end_ns when given and later).
"""

RUNNING, RUNNABLE, BLOCKED = "running", "runnable", "blocked"


def _site(e):
    """The call site of an event: {"function", "file", "line"} (None where
    unknown)."""
    return {"function": e.get("function"), "file": e.get("file"), "line": e.get("line")}


class _Task:
    """One task's state while the events are replayed."""

    def __init__(self, name, switched):
        self.name = name
        self.switched = switched        # it has switch events: running only while switched in
        self.state = None               # RUNNING, RUNNABLE, BLOCKED; None before it begins
        self.since = 0
        self.block = None               # the block event of the current or coming wait
        self.wait_start = None
        self.ended = False
        self.running = self.runnable = 0
        self.blocked = {}
        self.switches_in = 0
        self.waits = []
        self.created = self.start = self.end = None

    def move(self, state, t):
        """Ends the current state at t and begins `state`."""
        if self.start is None:
            self.start = t
        if self.state is not None and not self.ended:
            d = max(0, t - self.since)
            if self.state == RUNNING:
                self.running += d
            elif self.state == RUNNABLE:
                self.runnable += d
            else:
                reason = (self.block or {}).get("reason") or "unknown"
                self.blocked[reason] = self.blocked.get(reason, 0) + d
        self.state, self.since = state, t

    def begin_wait(self, t):
        self.move(BLOCKED, t)
        self.wait_start = t

    def end_wait(self, t, ended_by, e, how, state):
        """Ends the current wait at t, the task then in `state`: ended by
        task `ended_by` through event e (a wake, or the switch back in when
        no wake was recorded)."""
        if self.state == BLOCKED and self.wait_start is not None:
            b = self.block or {}
            self.waits.append({"task": self.name, "reason": b.get("reason") or "unknown", "on": b.get("channel"),
                               "start_ns": self.wait_start, "duration_ns": max(0, t - self.wait_start),
                               "site": _site(b), "ended_by": ended_by, "ended_how": how,
                               "ended_reason": e.get("reason") if e and how == "wake" and ended_by is None else None,
                               "end_site": _site(e) if e else None})
        self.move(state, t)
        self.block, self.wait_start = None, None


def _first_state(name, events, created):
    """The state a task is in when its time begins."""
    if created is not None:
        return RUNNABLE
    for e in events:
        if e["kind"] == "switch" and e["task"] == name:
            return RUNNABLE
        if e["kind"] == "switch" and e.get("other") == name:
            return RUNNING
    return RUNNING


def analyze(doc, end_ns=None, longest=20):
    """The analysis of a task-events document: {"tasks": {name: {"kind",
    "running_ns", "runnable_ns", "blocked_ns", "blocked_by_reason",
    "switches_in", "waits", "start_ns", "end_ns"}}, "blocking_profile":
    [{"reason", "function", "file", "line", "waits", "total_ns",
    "max_ns"}] (most total time first), "longest_waits": [the `longest`
    longest waits: {"task", "reason", "on" (what it waited on: its block's
    channel, for a join the task or tasks awaited; None), "start_ns", "duration_ns", "site",
    "ended_by", "ended_how" ("wake" or "switch"), "ended_reason" (what
    ended it when no task did: "io"; else None), "end_site"}],
    "span_ns": the time covered}."""
    events = doc.get("events") or []
    infos = {t["name"]: t for t in doc.get("tasks") or []}
    names = list(infos)
    for e in events:
        for n in (e.get("task"), e.get("other")):
            if n is not None and n not in infos:
                infos[n] = {"name": n, "kind": None}
                names.append(n)
    last = max([e["t_ns"] for e in events] + [end_ns or 0] + [0])
    switched = {e["task"] for e in events if e["kind"] == "switch"}
    switched |= {e.get("other") for e in events if e["kind"] == "switch"}
    tasks = {n: _Task(n, n in switched) for n in names}
    by_task = {}
    for e in events:
        by_task.setdefault(e.get("task"), []).append(e)
        if e.get("other") is not None:
            by_task.setdefault(e["other"], []).append(e)
    for n, task in tasks.items():
        created = infos[n].get("created_t_ns")
        if created is None and by_task.get(n) and by_task[n][0]["kind"] == "create" and by_task[n][0]["task"] == n:
            created = by_task[n][0]["t_ns"]
        task.created = created
    # Tasks running when the trace began start at 0; the others at their
    # creation, or (never created in the trace) at their first event.
    for n, task in tasks.items():
        if task.created is None and _first_state(n, by_task.get(n, ()), None) == RUNNING:
            task.move(RUNNING, 0)
    for e in events:
        t, kind, me = e["t_ns"], e["kind"], tasks.get(e.get("task"))
        if me is None:
            continue
        if me.state is None and kind != "create":
            me.move(_first_state(me.name, [e], me.created), me.created if me.created is not None else t)
        if kind == "create":
            if me.state is None:
                me.move(RUNNABLE if me.switched else RUNNING, t)
        elif kind == "switch":
            away = tasks.get(e.get("other"))
            if away is not None and not away.ended and away.name != me.name:
                away.switched = True
                if away.block is not None:
                    away.begin_wait(t)
                else:
                    away.move(RUNNABLE, t)
            if me.state == BLOCKED:
                me.end_wait(t, e.get("other"), e, "switch", RUNNING)
            me.move(RUNNING, t)
            me.switches_in += 1
        elif kind == "block":
            me.block = e
            if not me.switched:
                me.begin_wait(t)
        elif kind == "wake":
            if me.state == BLOCKED:
                me.end_wait(t, e.get("other"), e, "wake", RUNNABLE if me.switched else RUNNING)
            else:
                me.block = None   # woken before it was switched out: it never waited
        elif kind == "exit":
            if me.state == BLOCKED:
                me.end_wait(t, None, e, "exit", BLOCKED)
            me.move(me.state, t)
            me.ended, me.end = True, t
        elif kind in ("receive", "send") and not me.switched and me.state == BLOCKED:
            # A thread's get or put returned without a wake recorded: its
            # wait ended there.
            me.end_wait(t, e.get("other"), e, kind, RUNNING)
    out, waits = {}, []
    for n, task in tasks.items():
        if not task.ended:
            if task.state == BLOCKED:
                task.end_wait(last, None, None, "trace end", BLOCKED)
            task.move(task.state, last)
            task.end = last
        out[n] = {"kind": infos[n].get("kind"), "start_ns": task.start if task.start is not None else task.end,
                  "end_ns": task.end,
                  "running_ns": task.running, "runnable_ns": task.runnable,
                  "blocked_ns": sum(task.blocked.values()),
                  "blocked_by_reason": dict(sorted(task.blocked.items(), key=lambda kv: -kv[1])),
                  "switches_in": task.switches_in, "waits": len(task.waits)}
        waits.extend(task.waits)
    profile = {}
    for w in waits:
        s = w["site"]
        key = (w["reason"], s["function"], s["file"], s["line"])
        p = profile.setdefault(key, {"reason": key[0], "function": key[1], "file": key[2], "line": key[3],
                                     "waits": 0, "total_ns": 0, "max_ns": 0})
        p["waits"] += 1
        p["total_ns"] += w["duration_ns"]
        p["max_ns"] = max(p["max_ns"], w["duration_ns"])
    ranked = sorted(profile.values(), key=lambda p: (-p["total_ns"], -p["waits"], p["reason"]))
    longest_waits = sorted(waits, key=lambda w: (-w["duration_ns"], w["start_ns"], w["task"]))[:longest]
    return {"tasks": out, "blocking_profile": ranked, "longest_waits": longest_waits, "span_ns": last}
