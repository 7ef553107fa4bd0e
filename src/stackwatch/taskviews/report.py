"""The text report of `stackwatch tasks FILE`: one line per task (running,
runnable and blocked time, blocked by reason, how it ended), the blocking
profile and the longest waits with who ended them, from the document of
read_task_events and its analysis (analysis.analyze).

    write(print_line, doc, analyzed, title)
"""
from ..common.units import format_ns as fmt_ns


def _where(site):
    """function (file:line), or "?" when the event had no code location."""
    if not site or not site.get("function"):
        return "?"
    if site.get("file"):
        return f"{site['function']} ({site['file']}:{site.get('line') or '?'})"
    return site["function"]


def _table(put, header, rows):
    """Columns as wide as their widest cell; numbers (every cell but the
    last two of a row that are text) right-aligned: each row is (right
    cells, left cells)."""
    nr = len(header[0])
    widths = [max(len(str(r[0][i])) for r in [header] + rows) for i in range(nr)]
    lwidths = [max(len(str(r[1][i])) for r in [header] + rows) for i in range(len(header[1]))]
    for right, left in [header] + rows:
        cells = [f"{c!s:>{w}}" for c, w in zip(right, widths)]
        text = [f"{c!s:<{w}}" for c, w in zip(left[:-1], lwidths)] + [str(left[-1])] if left else []
        put((" ".join(cells) + "  " + " ".join(text)).rstrip())


def write(put, doc, analyzed, title, longest=10):
    """The report, a line at a time to put(str)."""
    tasks, events = doc["tasks"], doc["events"]
    per = analyzed["tasks"]
    put(f"{title}: {len(per)} tasks, {len(events)} task events over {fmt_ns(analyzed['span_ns'])}")
    put("")
    put("per task: time running, runnable (switched out or woken, not running yet) and blocked, by reason")
    info = {t["name"]: t for t in tasks}
    rows = []
    for name, a in per.items():
        t = info.get(name, {})
        reasons = ", ".join(f"{r} {fmt_ns(ns)}" for r, ns in a["blocked_by_reason"].items())
        end = t.get("outcome") or ("exited" if t.get("exit_t_ns") is not None else "")
        rows.append(((fmt_ns(a["running_ns"]), fmt_ns(a["runnable_ns"]), fmt_ns(a["blocked_ns"]),
                      a["switches_in"], a["waits"]),
                     (name, (a["kind"] or "?") + (f" ({t['group']})" if t.get("group") else ""), end, reasons)))
    _table(put, (("running", "runnable", "blocked", "switches", "waits"), ("task", "kind", "exit", "blocked by")),
           rows)
    put("")
    profile = analyzed["blocking_profile"]
    if profile:
        put("blocking profile (where tasks waited; most total time first)")
        _table(put, (("total", "waits", "longest"), ("reason", "where")),
               [((fmt_ns(p["total_ns"]), p["waits"], fmt_ns(p["max_ns"])), (p["reason"], _where(p)))
                for p in profile])
    else:
        put("blocking profile: no task waited (no block events)")
    put("")
    waits = analyzed["longest_waits"][:longest]
    if waits:
        put(f"longest waits (the {len(waits)} longest, and who ended them)")
        rows = []
        for w in waits:
            by = w["ended_by"] or w.get("ended_reason") or "-"
            how = w["ended_how"] + (f" at {_where(w['end_site'])}" if w.get("end_site") and
                                    w["end_site"].get("function") else "")
            rows.append(((fmt_ns(w["duration_ns"]), fmt_ns(w["start_ns"])),
                         (w["task"], w["reason"] + (f" {w['on']}" if w.get("on") else ""), _where(w["site"]),
                          f"{by} ({how})")))
        _table(put, (("waited", "at"), ("task", "waited on", "where", "ended by")), rows)
