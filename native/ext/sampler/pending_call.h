/*
 * pending_call.h - _native's way into another Python process for
 * `stackwatch attach` (cli/attach.py): a call queued into the target's
 * pending-calls queue from outside (procmem/pending.h), every thread
 * frozen meanwhile (procmem/freeze.h); and, for the target's side, the C
 * function that a second pending call runs to stop the tracer, and the
 * one that gives the target the signals that came during either.
 *
 *   _native.pending_call(pid, func, text=None, arg=0, timeout=2.0, audit_hooks_ok=False)
 *       -> {"func", "arg", "slot", "main_thread_only", "version"}
 *       func: a symbol of the target's interpreter ("PyRun_SimpleString")
 *       or an address; text: a string written into free slots of the
 *       queue, whose address becomes the argument. With text, a process
 *       with audit hooks is refused (RuntimeError, nothing pushed) unless
 *       audit_hooks_ok: a hook that refused the compile or the exec of the
 *       text would fail the program's own code (pending_call.c).
 *   _native.pending_take_back(pid, func, arg) -> bool (True: it was still
 *       queued and is removed; False: the target took it already)
 *   _native.attach_stop_address() -> int: the address, in this process,
 *       of the function that stops an attached session (attached.py).
 *   _native.attach_release_signals(handlers, arrived, raised, note): run
 *       by the attach's start-up and stop in the target, which held the
 *       target's Python signal handlers ({signum: handler}) meanwhile, the
 *       handler `note` noting in `arrived` the signals that came
 *       (tracer/signal_hold.py): a pending call puts them back where note
 *       still is and runs each arrived signal's handler in the target's
 *       own code, so that what it raises (KeyboardInterrupt) is raised
 *       there; or raises `raised` there (an exception a handler raised
 *       before the holding began).
 *
 * Raises as dump_process does (ProcessLookupError, PermissionError,
 * ValueError, RuntimeError; one sentence each); TimeoutError when the queue
 * stayed locked or full for timeout seconds. Includes Python.h.
 */
#ifndef SW_PENDING_CALL_H
#define SW_PENDING_CALL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Adds the functions above to the module. 0, or -1 with an exception. */
int sw_pending_call_add_to_module(PyObject *m);

#endif
