"""`stackwatch tasks`: per task of a trace recorded with `--events tasks`
(threads, asyncio tasks, greenlets), the time it spent running, runnable
and blocked by reason; the blocking profile (the call sites that made
tasks wait, and how long in total) and the longest waits with who ended
them (stackwatch.taskviews.analysis over read_task_events' document).

    stackwatch tasks FILE [--json] [-n 10]

--json prints the document of read_task_events ({"tasks": [...],
"events": [...]}) with the analysis under the key "analysis".
"""
import json
import os
import sys

from ..taskviews import analysis, flows, report
from ..tracer.task_events import read_task_events
from ..tracer.tracefile import Trace
from . import files
from .program import UsageError

NAME = "tasks"
RECORD_HINT = "record them with: stackwatch run --events tasks -o FILE.swt PROGRAM"


def add_parser(subparsers):
    """Adds the command to the CLI's subparsers; returns its parser."""
    s = subparsers.add_parser("tasks", help="per task of a trace (threads, asyncio tasks, greenlets): time "
                              "running, runnable and blocked by reason, the blocking profile, the longest waits")
    s.add_argument("file")
    s.add_argument("--json", action="store_true", help="the task events and the analysis as one JSON document")
    s.add_argument("-n", "--limit", type=int, default=10, help="longest waits listed (default 10)")
    return s


def load(path):
    """(the Trace, its task-events document) of the trace at `path`;
    UsageError naming the file when it is missing, not a trace, or has no
    task events (and how to record them)."""
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a trace")
    if files.kind_of(path) != "trace":
        raise UsageError(f"{path}: a profile file, not a trace (task events are in traces; {RECORD_HINT})")
    t = Trace(path)
    doc = read_task_events(t)
    if not doc["events"]:
        raise UsageError(f"{path}: the trace has no task events ({RECORD_HINT})")
    return t, doc


def flows_of(t, flt, fmt):
    """The flows between the tasks of trace t (taskviews.flows) that the
    export in format `fmt` draws (in the filter's window), or None: the
    timelines that draw them are Perfetto's and Chrome's."""
    if fmt not in ("perfetto", "chrome"):
        return None
    doc = read_task_events(t)
    if not doc["events"]:
        return None
    return flows.task_flows(doc, t.threads, flt.start_ns if flt else None, flt.stop_ns if flt else None) or None


def run(args):
    if args.limit <= 0:
        raise UsageError("--limit must be positive")
    t, doc = load(args.file)
    end = t.end_ns if t.end_ns >= 0 else None
    analyzed = analysis.analyze(doc, end_ns=end, longest=max(args.limit, 20))
    if args.json:
        json.dump({**doc, "analysis": analyzed}, sys.stdout)
        sys.stdout.write("\n")
    else:
        report.write(print, doc, analyzed, os.path.basename(args.file), longest=args.limit)
    return files.trace_damaged(args.file, t)
