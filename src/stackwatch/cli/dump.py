"""`stackwatch dump PID [--json]`: every thread's Python stack of a running
process, read from outside (its memory, through the native reader), with
no change to the process. Text as faulthandler prints it (innermost frame
first); --json: a list of threads."""
import json
import sys

from .. import _native
from ..profiler.session import thread_comm

NAME = "dump"


def add_parser(subparsers):
    """Adds the command to the CLI's subparsers; returns its parser."""
    p = subparsers.add_parser("dump", help="print every thread's Python stack of a running process")
    p.add_argument("pid", type=int, help="the process to read")
    p.add_argument("--json", action="store_true", help="a JSON list of threads (name: Python's, os_name: the "
                                                       "kernel's, native_id, gil, state, frames: function, "
                                                       "file, line; innermost first)")
    return p


def threads_of(pid):
    """The threads of process pid, each a dict as --json prints it."""
    dump = _native.dump_process(pid)
    out = []
    for t in dump["threads"]:
        os_name = thread_comm(pid, t["native_id"]) if t["native_id"] else None
        out.append({
            "thread_id": t["thread_id"],
            "native_id": t["native_id"] or None,
            # threading's name where it can be read (3.11+), else the kernel's
            "name": t.get("name") or os_name,
            "os_name": os_name,
            "gil": t["gil"],
            "state": t["state"],
            "failed": t["failed"],
            # faulthandler's function is the code's name, the last part of its qualified name
            "frames": [{"function": qualname.rsplit(".", 1)[-1], "qualname": qualname, "file": file, "line": line}
                       for qualname, file, line in t["frames"]],
        })
    return dump, out


def format_text(dump, threads):
    """faulthandler's layout, with what it cannot know added to each thread's line."""
    layout = {"own": "stackwatch's own", "generated": "generated", "debug_offsets": "from its debug offsets"}
    lines = [f"Process {dump['pid']}: Python {dump['version']} ({dump['python']}; layout "
             f"{layout.get(dump['layout'], dump['layout'])})"]
    for t in threads:
        about = [f"native id {t['native_id']}" if t["native_id"] else "native id unknown"]
        if t["name"]:
            about.append(f"name {t['name']!r}")
        if t["os_name"] and t["os_name"] != t["name"]:
            about.append(f"OS name {t['os_name']!r}")
        about.append(t["state"])
        if t["gil"]:
            about.append("holds the GIL")
        lines.append("")
        lines.append(f"Thread 0x{t['thread_id']:016x} ({', '.join(about)}) (most recent call first):")
        if t["failed"]:
            lines.append("  <the stack could not be read: it changed while read>")
        for f in t["frames"]:
            lines.append(f'  File "{f["file"]}", line {f["line"]} in {f["function"]}')
    return "\n".join(lines) + "\n"


def run(args):
    try:
        dump, threads = threads_of(args.pid)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"stackwatch: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        json.dump(threads, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_text(dump, threads))
    return 0
