/*
 * trace_type.h - stackwatch._native.Trace, a trace file read back
 * (trace_type.c). The room ext/tracefile needs only ext/shared and the
 * trace rooms below it: reading a file does not need the tracer.
 */
#ifndef SW_TRACE_TYPE_H
#define SW_TRACE_TYPE_H

#include "ext/shared/compat.h"

/* Adds Trace, FORMAT_MAJOR and the record constants OP_* and EV_DROPPED
 * to the module. Returns 0, or -1 with an exception set. */
int sw_trace_type_add_to_module(PyObject *m);

#endif
