#!/usr/bin/env python3
"""Writes native/procmem/asyncio_generated.h: where asyncio's C Task and
Future objects (private to each version's Modules/_asynciomodule.c, which
is not installed) and the objects the task tree is read through keep their
fields, for every CPython 3.9-3.13 installed by pyenv, so that `stackwatch
dump` reads the asyncio tasks of a process of those versions. Each table is
found by running scripts/asyncio_probe.py under that interpreter: it makes
objects whose fields hold known values and finds those values in their
memory (two probes that must agree); never typed by hand.

    scripts/gen-asyncio-layouts.py            (then commit the header)
    scripts/gen-asyncio-layouts.py --check    (exit 1 if the committed
                                               header differs from what the
                                               installed releases give, 2 if
                                               other releases are installed;
                                               tests/c/run.sh runs it)
"""
import importlib.util
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "native", "procmem", "asyncio_generated.h")
PROBE = os.path.join(ROOT, "scripts", "asyncio_probe.py")

# the fields of sw_asyncio_layout (asyncio_layout.h), in its order
NUMBERS = ["version_hex", "pointer_size", "task_size", "future_size", "coro_size", "fut_loop", "fut_callback0",
           "fut_state", "fut_state_pending", "fut_state_cancelled", "fut_state_finished", "fut_dict", "task_coro",
           "task_name", "task_fut_waiter", "coro_frame_kind", "coro_frame", "coro_localsplus", "frame_stack_kind",
           "frame_stack_top", "frame_stack_base", "set_mask", "set_table", "set_entry_size", "set_entry_key",
           "list_size", "list_items", "weakref_object", "method_self", "type_base", "fut_callbacks",
           "tuple_size", "tuple_items", "partial_args", "function_closure", "cell_ref", "module_dict", "keys_size",
           "keys_nentries", "keys_indices", "entry_size", "entry_key", "entry_value"]
NAMES = ["task", "future", "coroutine", "set", "list", "weakref", "method", "tuple", "partial", "function", "cell"]


def gen_layouts():
    """scripts/gen-layouts.py, whose list of interpreters and header writer serve here too."""
    spec = importlib.util.spec_from_file_location("gen_layouts", os.path.join(ROOT, "scripts", "gen-layouts.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def table_of(version, prefix):
    exe = os.path.join(prefix, "bin", "python3")
    run = subprocess.run([exe, "-I", PROBE], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"gen-asyncio-layouts: {'.'.join(map(str, version))}: {run.stdout}{run.stderr}".strip())
    found = json.loads(run.stdout)
    lines = ["    {"]
    lines += [f"        .{k} = {found[k]:#x}u," for k in NUMBERS]
    lines += [f'        .{k}_type = "{found["tp_names"][k]}",' for k in NAMES]
    lines.append("    },")
    return "\n".join(lines)


def main():
    gen = gen_layouts()
    found = gen.interpreters()
    if not found:
        sys.exit("gen-asyncio-layouts: no pyenv CPython 3.9-3.13 found")
    names = ", ".join(".".join(map(str, v)) for v, _ in found)
    if "--check" in sys.argv[1:]:
        with open(OUT) as f:
            if f"({names})" not in f.read(400):
                print(f"gen-asyncio-layouts: cannot check: the releases installed here ({names}) are not those of "
                      "the header")
                sys.exit(2)
    tables = [(v, table_of(v, prefix)) for v, prefix in found]
    sys.exit(0 if gen.write(OUT, "sw_asyncio_layout", "sw_asyncio_generated", "asyncio_layout.c", tables, names,
                            by="scripts/gen-asyncio-layouts.py", how="probing each release's objects") else 1)


if __name__ == "__main__":
    main()
