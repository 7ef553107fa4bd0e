"""`stackwatch dump PID [--json]`: every thread's Python stack of a running
process, read from outside (its memory, through the native reader), with
no change to the process. Text as faulthandler prints it (innermost frame
first); --json: a list of threads. --locals: each frame's local variables,
read from memory without running code in the process: the repr of simple
values (None, bool, int, float, str, bytes; cut to LOCALS_REPR_MAX
characters), the type and address of others. --core CORE [--exe PYTHON]:
the same read from a core file (gdb's gcore, or a crash's) instead of a
running process. --native: each thread's native (C) frames merged with its
Python ones, as `profile --native` does: each thread is stopped with
ptrace (no signal) while it is read, its C stack unwound from outside with
the .eh_frame CFI of the files mapped in the process, then let go (a core
file's threads: unwound from the registers the core holds). --blocking:
every thread of the process stopped with ptrace while the stacks (and
variables) are read, so that all are of one instant.

After the threads, the asyncio tasks of each event loop, read from memory
too (asyncio.all_tasks()' tasks: name, coroutine stack innermost first,
what each awaits), as a tree: a task is shown under each task that
awaits it (directly, through gather, asyncio.wait_for, wait or shield, or
as its TaskGroup's parent task), after the first time as "(shown above)";
the roots are tasks no task awaits. --json gives each thread the tasks of the
loop it runs ("asyncio"; docs/format.md, "dump --json")."""
import json
import sys

from .. import _native
from ..profiler.session import thread_comm

NAME = "dump"

LOCALS_REPR_MAX = 200   # characters of a value's repr shown; a longer one is cut and ends with "..."


def add_parser(subparsers):
    """Adds the command to the CLI's subparsers; returns its parser."""
    p = subparsers.add_parser("dump", help="print every thread's Python stack of a running process")
    p.add_argument("pid", type=int, nargs="?", help="the process to read (or --core)")
    p.add_argument("--json", action="store_true", help="a JSON list of threads (name: Python's, os_name: the "
                                                       "kernel's, native_id, gil, state, frames: function, "
                                                       "file, line; innermost first)")
    p.add_argument("--locals", action="store_true", help="each frame's local variables, read from memory (the "
                                                         "repr of None, bool, int, float, str and bytes values, "
                                                         "the type and address of others)")
    p.add_argument("--native", action="store_true", help="merge each thread's native (C) frames in, as profile "
                                                         "--native does (each thread stopped with ptrace while "
                                                         "read; with --core: from the core's registers; Linux x86-64; not with --locals)")
    p.add_argument("--blocking", action="store_true", help="stop every thread of the process with ptrace while "
                   "the stacks are read, so that all are of one instant (as record --pid --blocking does a round)")
    p.add_argument("--core", metavar="CORE", help="read the process of this core file (gdb's gcore, or a crash's "
                                                  "core) instead of a running one")
    p.add_argument("--exe", metavar="PYTHON", help="with --core: the python executable that ran (its folder and "
                                                   "../lib hold its libpython), for a core whose files here "
                                                   "differ (another machine, a rebuild)")
    return p


def local_of(name, kind, type_name, address, value, truncated):
    """One variable as --json prints it: name, type, address, repr."""
    if kind == "value":
        text = repr(value)
        if truncated or len(text) > LOCALS_REPR_MAX:
            text = text[:LOCALS_REPR_MAX] + "..."
    elif kind == "other":
        text = f"<{type_name} object at {address:#x}>"
    else:
        text = f"<unreadable object at {address:#x}>"
    return {"name": name, "type": type_name, "address": address, "repr": text}


NATIVE_SUFFIX = " [native]"          # a native frame's name ends so (base/sample.h)
FP_MARK = " (no CFI: caller by frame pointer)"   # ... and so before it where its caller was found by
                                                 # frame pointers (procmem/unwind.h)


def frame_of(qualname, file, line, local_vars, with_locals, address=None, library=None, pc=None):
    """One frame as --json prints it (address: a native frame's symbol's
    start; library: its shared object where file is its source, else
    None; pc: its instruction, or return address)."""
    if qualname.endswith(NATIVE_SUFFIX):
        # a C function: its symbol, its library and, where the library has
        # line tables, its source file and the line it is at; how its
        # caller was found
        name = qualname[:-len(NATIVE_SUFFIX)]
        by_fp = name.endswith(FP_MARK)
        name = name[:-len(FP_MARK)] if by_fp else name
        return {"function": name, "qualname": name, "file": file,
                "line": (line or None) if library else None, "native": True, "library": library or file,
                "address": address, "pc": pc, "unwound": "frame pointer" if by_fp else "cfi"}
    # faulthandler's function is the code's name, the last part of its qualified name
    f = {"function": qualname.rsplit(".", 1)[-1], "qualname": qualname, "file": file, "line": line}
    if with_locals:
        # None: the frame's variables could not be read
        f["locals"] = None if local_vars is None else [local_of(*v) for v in local_vars]
    return f


def tasks_of(dump):
    """The asyncio tasks of the dump as --json prints them, each with the
    tasks awaiting it (parents, the first also as parent) and those it
    awaits (children), by loop: {loop: [task]} in the order read, and
    {loop: thread id running it, or None}."""
    raw = dump.get("asyncio") or []
    by_addr = {t["address"]: t for t in raw}
    parents = {}   # a task -> the tasks awaiting it, each once, in the order found

    def link(child, p):
        if child in by_addr and child != p and p not in parents.setdefault(child, []):
            parents[child].append(p)
    # a future that a task's done callback releases when the task ends
    # (asyncio.wait_for before 3.12, wait, shield): who awaits it awaits that task
    released_by = {}
    for t in raw:
        for ref in t.get("callback_refs", ()):
            released_by.setdefault(ref, []).append(t["address"])
    for t in raw:
        if t["awaits"] == "task":
            link(t["waiter"], t["address"])
        elif t["awaits"] == "gather":
            for c in t["children"]:
                link(c, t["address"])
        elif t["awaits"] == "future":
            for c in released_by.get(t["waiter"], ()):
                link(c, t["address"])
    for t in raw:
        if t["group_parent"] in by_addr:
            link(t["address"], t["group_parent"])
    children = {}
    for child, ps in parents.items():
        for p in ps:
            children.setdefault(p, []).append(child)
    loops, threads = {}, {}
    for t in raw:
        awaits = {"kind": t["awaits"]}
        if t["awaits"] != "nothing":
            awaits.update(address=t["waiter"], type=t["waiter_type"])
        if t["awaits"] == "gather":
            awaits["children"] = t["children"]
        if t["awaits"] == "future" and released_by.get(t["waiter"]):
            awaits["released_by"] = released_by[t["waiter"]]
        loops.setdefault(t["loop"], []).append({
            "name": t["name"],
            "address": t["address"],
            "loop": t["loop"],
            "frames": [frame_of(*f, None, False) for f in t["frames"]],
            "running": t["running"],
            "awaits": awaits,
            "parent": (parents.get(t["address"]) or [None])[0],
            "parents": parents.get(t["address"], []),
            "children": children.get(t["address"], []),
        })
        threads[t["loop"]] = t["loop_thread"] or None
    return loops, threads


def threads_of(pid, with_locals=False, core=None, exe=None, native=False, blocking=False):
    """The threads of process pid (or of the core file core), each a dict as
    --json prints it, with the asyncio tasks of the loop each runs (tasks of
    a loop that runs on no thread go with the last thread, the oldest)."""
    dump = _native.dump_process(pid or 0, locals=with_locals, core=core, exe=exe, native=native, blocking=blocking)
    dump["core"] = core
    out = []
    for t in dump["threads"]:
        # (a core's process is gone: its OS names are not known)
        os_name = thread_comm(pid, t["native_id"]) if t["native_id"] and not core else None
        out.append({
            "thread_id": t["thread_id"],
            "native_id": t["native_id"] or None,
            # threading's name where it can be read, else the kernel's
            "name": t.get("name") or os_name,
            "os_name": os_name,
            "gil": t["gil"],
            "state": t["state"],
            "failed": t["failed"],
            "frames": [frame_of(*f[:4], with_locals, *f[4:]) for f in t["frames"]],
            "asyncio": [],
        })
    loops, loop_threads = tasks_of(dump)
    for loop, tasks in loops.items():
        home = [t for t in out if t["thread_id"] == loop_threads[loop]] or out[-1:]
        for t in home[:1]:
            t["asyncio"].extend(tasks)
    return dump, out


def format_text(dump, threads):
    """faulthandler's layout, with what it cannot know added to each thread's line."""
    layout = {"own": "stackwatch's own", "generated": "generated", "debug_offsets": "from its debug offsets"}
    of = f" (core file {dump['core']})" if dump.get("core") else ""
    lines = [f"Process {dump['pid']}{of}: Python {dump['version']} ({dump['python']}; layout "
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
            if f.get("native"):
                how = " (no CFI: its caller found by frame pointer)" if f["unwound"] == "frame pointer" else ""
                where = f' ({f["file"]}:{f["line"] or "?"})' if f["file"] != f["library"] else ""
                lines.append(f'  Native "{f["library"]}" in {f["function"]}{where}{how}')
                continue
            lines.append(f'  File "{f["file"]}", line {f["line"]} in {f["function"]}')
            if f.get("locals") is None and "locals" in f:
                lines.append("    <its variables could not be read>")
            for v in f.get("locals") or ():
                lines.append(f"    {v['name']} = {v['repr']}")
    lines += format_tasks(threads)
    return "\n".join(lines) + "\n"


def format_tasks(threads):
    """The asyncio tasks of each loop as a tree, after the threads."""
    lines = []
    for t in threads:
        loops = {}
        for task in t["asyncio"]:
            loops.setdefault(task["loop"], []).append(task)
        for loop, tasks in loops.items():
            by_addr = {x["address"]: x for x in tasks}
            lines.append("")
            lines.append(f"Asyncio loop 0x{loop:x} (thread 0x{t['thread_id']:016x}, {len(tasks)} tasks; each under the "
                         f"task awaiting it, coroutines innermost first):")
            shown = set()
            roots = [x for x in tasks if not any(p in by_addr for p in x["parents"])]
            roots += [x for x in tasks if x not in roots]   # (only a cycle leaves these unshown)
            for root in roots:
                if root["address"] in shown:
                    continue
                todo = [(root, 0)]   # (a stack, not recursion: a chain of tasks may be long)
                while todo:
                    task, depth = todo.pop()
                    pad = "  " + "    " * depth
                    head = f"{pad}Task {task['name']!r} (0x{task['address']:x})"
                    if task["address"] in shown:   # under another task awaiting it too (or a cycle)
                        lines.append(f"{head} (shown above)")
                        continue
                    shown.add(task["address"])
                    lines.append(f"{head}{awaits_text(task, by_addr)}")
                    for f in task["frames"]:
                        lines.append(f'{pad}    File "{f["file"]}", line {f["line"]} in {f["function"]}')
                    todo += [(by_addr[c], depth + 1) for c in reversed(task["children"]) if c in by_addr]
    return lines


def awaits_text(task, by_addr):
    a = task["awaits"]
    if a["kind"] == "task":
        other = by_addr.get(a["address"])
        return f" awaits Task {other['name']!r}" if other else f" awaits a Task (0x{a['address']:x})"
    if a["kind"] == "gather":
        return f" awaits gather of {len(a['children'])}"
    if a["kind"] == "future":
        by = [f"Task {by_addr[r]['name']!r}" if r in by_addr else f"0x{r:x}" for r in a.get("released_by", ())]
        ending = f", released when {' or '.join(by)} ends" if by else ""
        return f" awaits {a['type']} (0x{a['address']:x}{ending})"
    if task["running"]:
        return " running (its frames on its thread: the stack above)"
    return ""


def run(args):
    if (args.pid is None) == (args.core is None) or (args.exe and not args.core):
        print("stackwatch: error: dump needs a PID or --core CORE (one of them; --exe goes with --core)",
              file=sys.stderr)
        return 2
    if args.blocking and (args.core or args.native):
        print("stackwatch: error: dump --blocking is for a running process, and not with --native (which stops each "
              "thread while its stacks are read)", file=sys.stderr)
        return 2
    if args.native and args.locals:
        print("stackwatch: error: dump --native and --locals do not go together (a merged stack's frames are not "
              "read for their variables)", file=sys.stderr)
        return 2
    try:
        dump, threads = threads_of(args.pid, args.locals, args.core, args.exe, args.native, args.blocking)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"stackwatch: error: {e}", file=sys.stderr)
        return 1
    if dump.get("asyncio_error"):
        some = "some " if dump.get("asyncio") else ""
        print(f"stackwatch: {some}asyncio tasks not shown: {dump['asyncio_error']}", file=sys.stderr)
    if dump.get("native_error"):
        # the dump itself is whole: those threads are shown with their Python frames only
        print(f"stackwatch: native frames not shown for some threads: {dump['native_error']}", file=sys.stderr)
    if args.json:
        json.dump(threads, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_text(dump, threads))
    return 0
