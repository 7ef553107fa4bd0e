/*
 * trace_api.h - the tracer's functions in stackwatch._native (trace_api.c):
 * start, stop, is_tracing, and the session's steps around exec and fork.
 */
#ifndef SW_TRACE_API_H
#define SW_TRACE_API_H

#include "ext/tracer/frame_compat.h"

/* Returns 0, or -1 with an exception set. */
int sw_trace_api_add_to_module(PyObject *m);

/* Whether fn is _native.quiet (a loop's handle that calls it is
 * stackwatch's: task_wrappers.c runs it quiet whole). */
int sw_trace_api_is_quiet(PyObject *fn);

#endif
