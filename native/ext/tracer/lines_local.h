/*
 * lines_local.h - 3.12+: line and instruction events of chosen files only,
 * as sys.monitoring *local* events of the matching code objects
 * (lines_local.c). On 3.9-3.11 only sw_lines_local_add_hooks exists, and
 * adds nothing.
 */
#ifndef SW_LINES_LOCAL_H
#define SW_LINES_LOCAL_H

#include "ext/tracer/frame_compat.h"

/* Adds lines_local_begin, lines_codes and lines_local_end to
 * _native.hooks. Returns 0, or -1 with an exception set. */
int sw_lines_local_add_hooks(PyObject *hooks);

#if PY_VERSION_HEX >= 0x030C0000
/* The local line bits co gets while local line events are on (0: none). */
long sw_lines_local_bits(PyCodeObject *co);
/* 1 if every line / instruction consumer is limited to some files (then
 * those events are local). */
int sw_lines_local_restricted(void);
/* A value (new reference) that changes whenever which code objects want
 * line events may have changed (the handler set or the file tracer's
 * filters, a session, the masks); NULL with an exception set. */
PyObject *sw_lines_local_key(void);
#endif

#endif
