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
/* In a session without call records (sw_S.no_calls): records the stack
 * that made task `task` (or the thread native_id), from frame f outwards,
 * with line at_line at the innermost frame of code `at` (the program's
 * code that made it; NULL: the innermost frame, its line), as a
 * TASK_STACK record of this thread (records.h). Never raises. */
void sw_file_record_stack(PyFrameObject *f, PyCodeObject *at, int at_line, uint64_t task, uint64_t native_id);

/* The same from the running frame (an asyncio task's creation), read in
 * place where the evaluator keeps its frames (3.11+: no frame object made). */
void sw_file_record_stack_here(PyCodeObject *at, int at_line, uint64_t task);

#endif
