/*
 * dump_process.h - every thread's Python stack of another process, read
 * once from outside (`stackwatch dump PID`): procmem's target (target.h)
 * bound to the layout of this extension's Python, and one round of the
 * one frame walker (pystack.h).
 *
 *   _native.dump_process(pid, max_depth=1024, layout="auto") -> {
 *       "pid", "version" ("3.12.1"), "python" (the interpreter's file),
 *       "layout" (where it came from: "own", "generated", "debug_offsets"),
 *       "threads": [{"thread_id", "native_id", "gil" (bool),
 *                    "state" ("running", "gil_wait", "idle", "unknown"),
 *                    "failed" (bool: the stack could not be read),
 *                    "frames": [(qualname, filename, line, locals, address)]
 *                    innermost first}],
 *       "asyncio": [{"address", "name", "loop", "running", "loop_thread",
 *                    "frames": [(qualname, filename, line)] innermost first,
 *                    "awaits" ("nothing", "task", "gather", "future"),
 *                    "waiter", "waiter_type", "children", "group_parent"}]
 *                   (the pending asyncio tasks: asynciotree.h),
 *       "asyncio_error": None, or why some or all were not read}
 *   in the interpreter's order of thread states (faulthandler's). The
 *   layout is this extension's own for its own release, a generated one
 *   for a known release (layouts_known.h), or for another 3.13 release the
 *   target's _Py_DebugOffsets (debug_offsets.h); layout="debug_offsets"
 *   forces the last for a 3.13 target (for the tests). native=True: each
 *   thread is stopped with ptrace while it is read (unwind.h), its native
 *   frames unwound from outside and merged in ("symbol [native]", the
 *   library as filename, line 0), as `profile --native` merges them (a
 *   core's threads: from their registers in the core).
 *
 * Raises ProcessLookupError (no such process), PermissionError (with what
 * grants it), ValueError (not a Python process, a Python version this
 * build cannot read, stackwatch's own process) or RuntimeError, each with
 * one sentence. Includes Python.h.
 */
#ifndef SW_DUMP_PROCESS_H
#define SW_DUMP_PROCESS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Adds dump_process to the module. Returns 0, or -1 with an exception. */
int sw_dump_process_add_to_module(PyObject *m);

#endif
