"""A task-events document made by hand, as read_task_events gives one
(the contract of issue 22), whose analysis is worked out below by hand:
the main greenlet of a thread creates "worker a" and a task with a
hostile name, waits on a join; a waits on a queue that the other fills;
a second thread waits on a lock its main thread releases.

    t   0    main runs (alive at the start); T2 runs
        5    T2 blocks on a lock (at lock_it)
       10    main creates a                 15   main wakes T2 (T2 blocked 10 ns)
       20    main creates HOSTILE           25   main blocks (join, at driver)
       30    switch main -> a (main blocked from here)
       40    a sends 1 to HOSTILE on q      45   a blocks (queue, at consumer)
       50    switch a -> HOSTILE (a blocked from here)
       60    HOSTILE receives 1 from a      70   HOSTILE wakes a (at put)
       80    HOSTILE exits; switch HOSTILE -> a
      100    a exits; switch a -> main (main's wait ends: 70 ns)
      120    end of the trace
"""
HOSTILE = "</script><b>bold</b>"
END_NS = 120


def _task(tid, name, kind, thread, created_by=None, created=None, stack=(), exit_t=None, outcome=None, result=None,
          group=None):
    return {"id": tid, "name": name, "group": group, "kind": kind, "thread": thread, "created_by": created_by,
            "created_t_ns": created, "creation_stack": [dict(function=f, file="prog.py", line=l) for f, l in stack],
            "exit_t_ns": exit_t, "outcome": outcome, "result": result}


def _ev(kind, task, t, other=None, channel=None, value=None, reason=None, where=None, thread=1, tid=0):
    f, line = where if where else (None, None)
    return {"kind": kind, "task": task, "task_id": tid, "other": other, "channel": channel, "value": value,
            "reason": reason, "t_ns": t, "thread": thread, "function": f, "file": "prog.py" if f else None,
            "line": line}


DOC = {
    "tasks": [
        _task(0, "main", "thread", 1),
        _task(0, "T2", "thread", 2),
        _task(1, "worker a", "greenlet", 1, "main", 10, [("spawn", 7), ("driver", 30)], 100, "result", "'done'",
              group="workers"),
        _task(2, HOSTILE, "greenlet", 1, "main", 20, [("spawn", 7), ("<module>", 40)], 80, "exception",
              "ValueError('<i>x</i>')", group="workers"),
    ],
    "events": [
        _ev("block", "T2", 5, reason="lock", where=("lock_it", 12), thread=2),
        _ev("create", "worker a", 10, other="main", where=("spawn", 7), tid=1),
        _ev("wake", "T2", 15, other="main", where=("release", 14), thread=2),
        _ev("create", HOSTILE, 20, other="main", where=("spawn", 7), tid=2),
        _ev("block", "main", 25, reason="join", where=("driver", 31)),
        _ev("switch", "worker a", 30, other="main", where=("driver", 31), tid=1),
        _ev("send", "worker a", 40, other=HOSTILE, channel="q", value="1", where=("producer", 50), tid=1),
        _ev("block", "worker a", 45, reason="queue", where=("consumer", 60), tid=1),
        _ev("switch", HOSTILE, 50, other="worker a", where=("consumer", 60), tid=2),
        _ev("receive", HOSTILE, 60, other="worker a", channel="q", value="1", where=("get", 70), tid=2),
        _ev("wake", "worker a", 70, other=HOSTILE, where=("put", 71), tid=1),
        _ev("exit", HOSTILE, 80, tid=2),
        _ev("switch", "worker a", 80, other=HOSTILE, tid=1),
        _ev("exit", "worker a", 100, tid=1),
        _ev("switch", "main", 100, other="worker a", where=("finish", 90)),
    ],
}

# What each task did, worked out by hand from the timeline above.
EXPECTED = {
    "main": {"running_ns": 30 + 20, "runnable_ns": 0, "blocked_by_reason": {"join": 70}},
    "T2": {"running_ns": 5 + 105, "runnable_ns": 0, "blocked_by_reason": {"lock": 10}},
    "worker a": {"running_ns": 20 + 20, "runnable_ns": 20 + 10, "blocked_by_reason": {"queue": 20}},
    HOSTILE: {"running_ns": 30, "runnable_ns": 30, "blocked_by_reason": {}},
}
