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

/* Adds lttng_load(), lttng_enable() and lttng_disable() to the module.
 * Returns 0, or -1 with an exception set. */
int sw_lttng_add_to_module(PyObject *m);

#endif
