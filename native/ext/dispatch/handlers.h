/*
 * handlers.h - Python functions as consumers of the dispatch layer's
 * events (stackwatch.add_handler): delivery, and the questions the
 * backends ask about them before asking CPython for events. Which handlers
 * (and whether the file tracer's line filter) match a code object is cached
 * in a co_extra slot until a handler or filter changes. GIL held.
 */
#ifndef SW_HANDLERS_H
#define SW_HANDLERS_H

#include "ext/dispatch/dispatch.h"

/* Calls every handler of `kind` whose `where` matches d->code, with the
 * event as a stackwatch.Event. A handler that raises is removed (reported
 * once on stderr); nothing is raised. The caller marks the thread busy. */
void sw_handlers_emit(int kind, const sw_evdata *d);

/* 1 if a handler wants `kind` events located in co. */
int sw_handlers_want(int kind, PyCodeObject *co);
/* 1 if a handler of one of `kinds` has no `where` (wants every file). */
int sw_handlers_everywhere(uint32_t kinds);
/* 1 if a handler of one of `kinds` wants events in file (no `where`, or
 * one that matches); never for stackwatch's own files. */
int sw_handlers_where_match(uint32_t kinds, const char *file);
/* 1 if the file tracer's line filter matches co (from the same cache). */
int sw_handlers_file_lines_in(PyCodeObject *co);
/* The per-code cache is stale (a filter changed). */
void sw_handlers_cache_reset(void);

/* The keys of a task event's data (stackwatch.Event.data), by kind from
 * SW_K_TASK_SWITCH: its fields a, b, c and the string `file` (records.h
 * says what each is); NULL: not carried. */
extern const char *const sw_task_keys[SW_K_TASK_WOKEN - SW_K_TASK_SWITCH + 1][4];

/* Adds Event, add_handler, remove_handler, _handler_ids and _set_own_prefix
 * to the module. Returns 0, or -1 with an exception set. */
int sw_handlers_add_to_module(PyObject *m);

#endif
