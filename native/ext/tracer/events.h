/*
 * events.h - the events that do not come from the frame evaluator
 * (events.c): line, instruction and exception events (sys.monitoring
 * callbacks on 3.12+, a C trace hook per thread on 3.9-3.11), garbage
 * collection (a gc.callbacks entry) and thread start / exit (a wrapper of
 * threading.Thread._bootstrap_inner, in Python). GIL held.
 */
#ifndef SW_EVENTS_H
#define SW_EVENTS_H

#include "ext/tracer/frame_compat.h"

/* 1 if some consumer wants `kind` events located in co. */
int sw_events_wanted_in(int kind, PyCodeObject *co);

/* 3.9-3.11: the trace hook on every thread while line, instruction or
 * exception events are wanted, off everywhere otherwise; nothing on 3.12+.
 * Called by the switching owner. */
void sw_events_thread_sync(void);
/* 3.9-3.11, while the trace hook is wanted: puts it back on threads whose
 * slot is free again, and records as the session's error (and warns once)
 * that another tool's trace function displaced it; nothing on 3.12+. */
void sw_events_check(void);
#if PY_VERSION_HEX < 0x030C0000
/* ... and on a thread seen for the first time (the frame hook meets it). */
void sw_events_thread_attach(void);
#else
/* The objects the sys.monitoring callbacks return or report with
 * (sys.monitoring.DISABLE, dis.opname), looked up once, when line or
 * instruction events are first wanted. Never raises. */
void sw_events_monitoring_refs(void);
#endif

/* Adds gc_callback, thread_event, and the sys.monitoring callbacks
 * (3.12+) or the sys.settrace replacement (3.9-3.11), to _native.hooks.
 * Returns 0, or -1 with an exception set. */
int sw_events_add_hooks(PyObject *hooks);

#endif
