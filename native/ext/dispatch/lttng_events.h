/*
 * lttng_events.h - LTTng-UST tracepoints (`stackwatch run --lttng`) as a
 * consumer of the dispatch layer: Python frame entries and exits handed to
 * the provider library libstackwatch_lttng.so (native/lttng), loaded at run
 * time from _native's own folder. GIL held.
 */
#ifndef SW_LTTNG_EVENTS_H
#define SW_LTTNG_EVENTS_H

#include "ext/dispatch/dispatch.h"

/* Fires the tracepoint of `kind` (a Python frame event). Never raises. */
void sw_lttng_emit(int kind, const sw_evdata *d);

/* A native function's entry (exit 0) or exit (1), recorded by the trace
 * (ext/tracer/native_frames.c): its code's name, file and line, its
 * address. Never raises. */
void sw_lttng_emit_native(int exit, const char *name, const char *file, int line, void *addr);

/* Adds lttng_load(), lttng_enable() and lttng_disable() to the module.
 * Returns 0, or -1 with an exception set. */
int sw_lttng_add_to_module(PyObject *m);

#endif
