"""The flows between tasks that the Perfetto and Chrome exports draw
(issue 22), from read_task_events' document: a task's creation to its
first run, a wake to the woken task's next run, and a message sent to its
receipt; as the ends the exporters take (Trace.export(task_flows=...):
native/trace/export_walk.h, sw_export_task_flow).

    ends = task_flows(doc, trace.threads)   # [(id, track, t_ns, ends, name)]
    trace.export("perfetto", "t.pftrace", task_flows=ends)

Where each end is:
    create   from the creator's track at the creation, to the new task's
             track when it next runs: its first switch in after it, else
             its first event of its own after it (a thread's), else the
             creation's time;
    wake     from the waker's track at the wake, to the woken task's track
             when it next runs (the same way);
    send     from the sender's track at the send, to the receiver's track
             at the receive that took the message: per channel, the first
             receive of an equal value after it that no earlier send took
             (queues are first in, first out).
A task is matched to its track by its thread's native id and its task id
(the document's "thread" and "id"; a track's own, or its thread's).
"""
import bisect


def tracks_of(doc, threads):
    """{task name: track position} for the document's tasks, from the
    trace's thread list (Trace.threads: a track per thread and per task)."""
    owner = {th["index"]: th for th in threads if not th["task"]}
    free = {}
    for pos, th in enumerate(threads):
        o = th if not th["task"] else owner.get(th["thread"])
        if o is not None:
            free.setdefault((o["native_tid"], th["task"]), []).append(pos)
    out = {}
    for t in doc.get("tasks") or []:
        left = free.get((t.get("thread"), t.get("id")))
        if left:
            out[t["name"]] = left.pop(0)
    return out


class _Runs:
    """When each task next runs after an event: its next switch in, else
    its next event of its own (by position in the document, found by
    bisection)."""

    def __init__(self, events):
        self.events, self.switches, self.own = events, {}, {}
        for i, e in enumerate(events):
            (self.switches if e["kind"] == "switch" else self.own).setdefault(e["task"], []).append(i)

    def after(self, i, name):
        """The time task `name` next runs after event i, or None."""
        for table in (self.switches, self.own):
            at = table.get(name, [])
            k = bisect.bisect_right(at, i)
            if k < len(at):
                return self.events[at[k]]["t_ns"]
        return None


def task_flows(doc, threads, start_ns=None, stop_ns=None):
    """The ends of the flows of a document, sorted by track then time, for
    Trace.export(task_flows=...); only flows whose two ends are in the
    window start_ns .. stop_ns (None: open) when one is given."""
    track = tracks_of(doc, threads)
    events = doc.get("events") or []
    runs = _Runs(events)
    pending = {}          # channel -> [index of a send no receive took yet]
    ends, fid = [], 0

    def flow(src, t_src, dst, t_dst, names):
        nonlocal fid
        t_dst = max(t_src, t_dst)
        if start_ns is not None and t_src < start_ns or stop_ns is not None and t_dst > stop_ns:
            return
        if src in track and dst in track:
            fid += 1
            ends.append((fid, track[src], t_src, False, names[0]))
            ends.append((fid, track[dst], t_dst, True, names[1]))

    for i, e in enumerate(events):
        kind, me, other = e["kind"], e["task"], e.get("other")
        if kind in ("create", "wake") and other is not None:
            later = runs.after(i, me)
            flow(other, e["t_ns"], me, e["t_ns"] if later is None else later,
                 ("create", "created") if kind == "create" else ("wake", "woken"))
        elif kind == "send" and e.get("channel") is not None:
            pending.setdefault(e["channel"], []).append(i)
        elif kind == "receive" and e.get("channel") is not None:
            waiting = pending.get(e["channel"], [])
            j = next((k for k, s in enumerate(waiting) if events[s]["value"] == e.get("value")), None)
            if j is not None:
                s = events[waiting.pop(j)]
                flow(s["task"], s["t_ns"], me, e["t_ns"], ("send", "receive"))
    ends.sort(key=lambda x: (x[1], x[2]))
    return ends
