/*
 * exit_line.h - the line a Python frame is running when it returns, yields
 * or unwinds, as CPython's own function__return probe and frame.f_lineno
 * give it, for the dispatch layer's consumers of those events (the
 * function__return probe, handlers): exit_line.c.
 */
#ifndef SW_EXIT_LINE_H
#define SW_EXIT_LINE_H

#include "ext/dispatch/kinds.h"
#include "ext/tracer/frame_compat.h"
#include "ext/tracer/thread_state.h"

/* The sys.monitoring events (3.12+) that note it: global while consumers
 * want returns, yields or unwinds (switch.c). */
#define SW_EXIT_LINE_EVENTS (SW_MON(PY_RETURN) | SW_MON(PY_YIELD) | SW_MON(PY_UNWIND))
#define SW_EXIT_LINE_KINDS (SW_EVB(SW_K_RETURN) | SW_EVB(SW_K_YIELD) | SW_EVB(SW_K_UNWIND))

/* The line hooked frame f of code co was running when the evaluator handed
 * it back (hook_eval.c, after the evaluator returned, or at its teardown):
 * read from the frame before 3.12, else as noted by the callbacks (the
 * first line when none was, e.g. a frame already running when the events
 * were turned on). Never raises. */
int sw_exit_line(sw_tracer_thread *t, SW_FRAME *f, PyCodeObject *co);

/* Adds the PY_RETURN / PY_YIELD / PY_UNWIND callbacks (3.12+; on 3.13
 * they also close the __init__ frames of init_gap.c) to _native.hooks.
 * Returns 0, or -1 with an exception set. */
int sw_exit_line_add_hooks(PyObject *hooks);

#endif
