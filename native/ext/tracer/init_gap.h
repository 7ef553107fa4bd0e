/*
 * init_gap.h - CPython 3.13 only: recording the __init__ frames that the
 * specialised constructor call pushes without the frame-evaluation hook
 * (init_gap.c). On other versions only sw_init_gap_add_hooks exists, and
 * adds nothing.
 */
#ifndef SW_INIT_GAP_H
#define SW_INIT_GAP_H

#include "ext/tracer/frame_compat.h"

/* Adds init_gap_begin / init_gap_end and the gap's sys.monitoring
 * callbacks to _native.hooks. Returns 0, or -1 with an exception set. */
int sw_init_gap_add_hooks(PyObject *hooks);

#if PY_VERSION_HEX >= 0x030D0000
#  include "ext/dispatch/kinds.h"

/* The gap's sys.monitoring events: local on the __init__ code objects
 * (init_gap_begin sets them), and global. */
#  define SW_INIT_GAP_LOCAL_EVENTS (SW_MON(PY_START) | SW_MON(PY_RETURN))
#  define SW_INIT_GAP_GLOBAL_EVENTS SW_MON(PY_UNWIND)

/* A PY_RETURN / PY_UNWIND (kind SW_K_RETURN or SW_K_UNWIND) of code at
 * line, from exit_line.c's callbacks: closes the current frame if it is one
 * the gap recorded. Never raises. */
void sw_init_gap_exit(int kind, PyObject *code, int line);
/* Whether co was given the gap's local events in this gap. */
int sw_init_gap_is_init(PyCodeObject *co);
/* At a hooked frame's start (eval_slow): gives the events to an __init__
 * of another name. Never raises. */
void sw_init_gap_check_frame(SW_FRAME *f);
/* At the end of a class body (code that is not CO_OPTIMIZED): gives the
 * events to the function its namespace has as __init__. Never raises. */
void sw_init_gap_check_namespace(PyObject *ns);
#endif

#endif
