#!/usr/bin/env python3
"""Checks the house: every C include and every Python import that crosses
from one room to another goes down the order of ROOMS (a room may use the
rooms listed before it, never one after it), so no two rooms form a circle.
Lazy imports inside functions count too. Python modules may not import
each other in a circle even inside one room. Also checks that every C file
and Python module opens with a comment or docstring saying its purpose,
that every .c file has its own header next to it, and that the core rooms
include another room only through its public header (PUBLIC_HEADERS).

    scripts/check-rooms.py          (make test runs it; exits 1 on a problem)

docs/architecture.md has the same table in words: its rows must list the
rooms in this order, and each row's last column ("uses today") the rooms
that room uses (checked too; `-v` lists every use).
"""
import ast
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Lower rooms first. A file belongs to the longest room path that holds it.
C_ROOMS = [
    "native/base",
    "native/elf",           # ELF files: symbols, build ids, segments
    "native/procmem",
    "native/profile",
    "native/kernel",        # kernel events of this process (perf_event_open), below trace
    "native/trace",
    "native/cyg",           # the native-function runtime (libstackwatch_cyg.so) and its stubs
    "native/lttng",         # the LTTng-UST tracepoint provider of run --lttng (libstackwatch_lttng.so)
    "native/ext/shared",
    "native/ext/tracefile",  # the Trace type: trace files read back (needs no tracer)
    "native/ext/dispatch",
    "native/ext/tracer",
    "native/ext/profile",    # the profile types: CallTree, ProfileFile, render_trees, trace_trees
    "native/ext/sampler",    # reading stacks of processes: Sampler, dump_process, pending_call
    "native/ext",           # module.c: the module, which adds every room's types
]
PY_ROOMS = [
    "src/stackwatch/common",
    "src/stackwatch/render",
    "src/stackwatch/events",
    "src/stackwatch/profiler",
    "src/stackwatch/tracer",
    "src/stackwatch/taskviews",      # the views of task events (read through tracer)
    "src/stackwatch/cli",
    "src/stackwatch/integrations",   # the pytest plugin, the IPython magics
    "src/stackwatch",       # the package's public API (__init__.py)
]
# .c files whose declarations live in another file's header, with the reason.
C_WITHOUT_HEADER = {
    "native/cyg/runtime.c": "the runtime library's entry points are declared in cyg.h, the room's public header",
    "native/cyg/stubs.c": "defines the compiler's __cyg_profile_func_enter/exit, which no header declares",
}
# A room's public header: the one file of it that other rooms include.
PUBLIC_HEADERS = {
    "native/base": "native/base/base.h",
    "native/elf": "native/elf/elf.h",
    "native/procmem": "native/procmem/procmem.h",
    "native/profile": "native/profile/profile.h",
    "native/kernel": "native/kernel/kernel.h",
    "native/trace": "native/trace/trace.h",
    "native/cyg": "native/cyg/cyg.h",
    "native/lttng": "native/lttng/lttng_provider.h",
}
# Every C room includes the rooms that have a public header through it.
PUBLIC_HEADERS_CHECKED = tuple(C_ROOMS)


def room_of(path, rooms):
    best = None
    for r in rooms:
        if path == r or path.startswith(r + "/"):
            if best is None or len(r) > len(best):
                best = r
    return best


def c_files():
    for d, _, files in os.walk(os.path.join(ROOT, "native")):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield os.path.relpath(os.path.join(d, f), ROOT)


def py_files():
    for d, dirs, files in os.walk(os.path.join(ROOT, "src", "stackwatch")):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in sorted(files):
            if f.endswith(".py"):
                yield os.path.relpath(os.path.join(d, f), ROOT)


def c_edges(problems):
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for path in c_files():
        text = open(os.path.join(ROOT, path), encoding="utf-8").read()
        if not text.lstrip().startswith("/*"):
            problems.append(f"{path}: does not open with a comment saying its purpose")
        if path.endswith(".c") and not os.path.exists(os.path.join(ROOT, path[:-2] + ".h")) \
                and path not in C_WITHOUT_HEADER and os.path.basename(path) != "module.c":
            problems.append(f"{path}: has no header of its own ({os.path.basename(path)[:-2]}.h)")
        for m in inc.finditer(text):
            name = m.group(1)
            here = os.path.normpath(os.path.join(os.path.dirname(path), name))
            target = here if os.path.exists(os.path.join(ROOT, here)) else os.path.normpath(os.path.join("native", name))
            if not os.path.exists(os.path.join(ROOT, target)):
                problems.append(f"{path}: includes {name!r}, which is not in native/")
                continue
            yield path, target, C_ROOMS


def _module_path(mod):
    base = os.path.join(ROOT, "src", *mod.split("."))
    for cand in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.exists(cand):
            return os.path.relpath(cand, ROOT)
    return None


def py_edges(problems):
    for path in py_files():
        text = open(os.path.join(ROOT, path), encoding="utf-8").read()
        tree = ast.parse(text, path)
        if not ast.get_docstring(tree) and path.split("/")[-1] != "__main__.py":
            problems.append(f"{path}: has no docstring saying its purpose")
        pkg = os.path.dirname(path)[len("src/"):].replace("/", ".")
        if not path.endswith("__init__.py"):
            pkg = pkg  # a module's package is its folder
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = pkg.split(".")
                    base = parts[:len(parts) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if not mod.startswith("stackwatch"):
                    continue
                for a in node.names:
                    sub = f"{mod}.{a.name}"
                    if sub == "stackwatch._native":
                        continue   # the extension: below every Python room
                    targets.append(sub if _module_path(sub) else mod)
            elif isinstance(node, ast.Import):
                targets += [a.name for a in node.names if a.name.startswith("stackwatch")]
            for t in targets:
                tp = _module_path(t)
                if tp and tp != path:
                    yield path, tp, PY_ROOMS


def py_module_circles():
    """Circles of imports between Python modules (lazy ones included)."""
    graph = {}
    for src, dst, _ in py_edges([]):
        graph.setdefault(src, set()).add(dst)
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append("modules import each other in a circle: " + ", ".join(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


DOC = os.path.join(ROOT, "docs", "architecture.md")
# Words of the doc's last column that name no room.
DOC_NOT_ROOMS = {"libc", "CPython", "nothing", "everything", "`_native`"}


def doc_rooms(rooms_seen, problems):
    """The rooms tables of docs/architecture.md against the rooms and the
    uses found: the same rooms in the same order, and each room's uses."""
    rows = re.findall(r"^\| `([^`]+)` \|.*\| ([^|]+) \|$", open(DOC, encoding="utf-8").read(), re.M)
    order = []
    for folder, uses in rows:
        room = folder.rstrip("/")
        if room.endswith(".py") or room.endswith(".c"):
            room = os.path.dirname(room)
        if room not in C_ROOMS + PY_ROOMS:
            continue
        order.append(room)
        if uses.strip() == "everything":
            continue
        prefix = "native/" if room.startswith("native") else "src/stackwatch/"
        said = {prefix + w.strip() for w in re.sub(r"\([^)]*\)", "", uses).split(",")
                if w.strip() and w.strip() not in DOC_NOT_ROOMS}
        found = {b for (a, b) in rooms_seen if a == room}
        if said != found:
            problems.append(f"docs/architecture.md: room {room} uses {', '.join(sorted(found)) or 'nothing'}, "
                            f"the table says {', '.join(sorted(said)) or 'nothing'}")
    if order != C_ROOMS + PY_ROOMS:
        problems.append(f"docs/architecture.md: the rooms tables list {order}, not the order of ROOMS")


def main():
    problems = []
    rooms_seen = {}
    for src, dst, rooms in list(c_edges(problems)) + list(py_edges(problems)):
        a, b = room_of(src, rooms), room_of(dst, rooms)
        if a is None or b is None:
            problems.append(f"{src} -> {dst}: a file outside every room")
            continue
        if a == b:
            continue
        rooms_seen.setdefault((a, b), []).append(f"{src} -> {dst}")
        if rooms.index(b) > rooms.index(a):
            problems.append(f"{src} uses {dst}: room {a} may not use {b}, which stands above it")
        elif a in PUBLIC_HEADERS_CHECKED and b in PUBLIC_HEADERS and dst != PUBLIC_HEADERS[b]:
            problems.append(f"{src} includes {dst}: another room is included through its public header, "
                            f"{PUBLIC_HEADERS[b]}")
    problems += py_module_circles()
    doc_rooms(rooms_seen, problems)
    if "-v" in sys.argv:
        for (a, b), why in sorted(rooms_seen.items()):
            print(f"{a} -> {b}  ({len(why)}: {why[0]}{' ...' if len(why) > 1 else ''})")
    for p in problems:
        print(f"check-rooms: {p}")
    if problems:
        print(f"check-rooms: {len(problems)} problem(s)")
        return 1
    print(f"check-rooms: {len(rooms_seen)} room-to-room uses, all downward; no circle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
