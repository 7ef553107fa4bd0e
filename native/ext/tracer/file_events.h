/*
 * file_events.h - the file tracer as a consumer of the dispatch layer's
 * events other than calls (file_events.c): they become EXT records in the
 * thread's stream, on the same clock as its calls. GIL held.
 */
#ifndef SW_FILE_EVENTS_H
#define SW_FILE_EVENTS_H

#include "ext/dispatch/dispatch.h"

/* 1 if the session records events located in co (co is not filtered out). */
int sw_file_wants_code(PyCodeObject *co);
/* ... and co is in the file tracer's line filter. */
int sw_file_wants_lines(PyCodeObject *co);
/* Records the event as an EXT record of this thread (nothing for a kind
 * that has none, a busy thread, or code filtered out). Never raises. */
void sw_file_record_ext(int kind, const sw_evdata *d);

#endif
