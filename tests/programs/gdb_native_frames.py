"""Run by gdb (`gdb -p PID -batch -nx -x gdb_native_frames.py`): prints
one line "frames " and a JSON map of each thread's LWP to the frames on
its stack (not inlined, not inferred tail calls), innermost first, each [name, pc, start]: gdb's function
name (None where gdb has none), the frame's pc, and the start of the
function gdb places it in (its debug info's, else the minimal symbol's
from `info symbol`; None where gdb knows none). The ground truth of
tests/py/cli/test_dump_native.py."""
import json
import re

import gdb

INFO_SYMBOL = re.compile(r"^(\S+) \+ (\d+) in section")


def start_of(frame, innermost):
    function = frame.function()
    if function is not None:
        try:
            return int(function.value().address)
        except gdb.error:
            pass
    # a return address names the call before it
    pc = frame.pc() if innermost else frame.pc() - 1
    m = INFO_SYMBOL.match(gdb.execute(f"info symbol {pc:#x}", to_string=True))
    return pc - int(m.group(2)) if m else None


out = {}
for thread in gdb.selected_inferior().threads():
    thread.switch()
    frames, f = [], gdb.newest_frame()
    while f is not None and len(frames) < 512:
        # frames on the stack only: not a function inlined into its caller,
        # nor one that gdb infers from debug info to have tail-called the
        # next (it left the stack when it jumped)
        if f.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
            frames.append([f.name(), f.pc(), start_of(f, not frames)])
        f = f.older()
    out[thread.ptid[1]] = frames
print("frames " + json.dumps(out))
