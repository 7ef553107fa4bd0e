/*
 * task_log.h - the readable log's lines (`stackwatch run --log`) written
 * in C: _native.TaskLog, the one renderer of task events as lines (who
 * created whom, switches with every task's state, blocks, wakes, sends,
 * receives, exits, names) and the writer every line of the log goes
 * through (stackwatch.events.handlers.verbose formats the other kinds and
 * hands them to it), buffered for the Python stream it writes to.
 *
 * Registered as a handler (add_handler) of the task kinds, it is called by
 * handlers.c with the event's fields directly: no stackwatch.Event and no
 * Python per event. Called with an Event (it is callable), it renders the
 * same line. GIL held.
 */
#ifndef SW_TASK_LOG_H
#define SW_TASK_LOG_H

#include "ext/dispatch/dispatch.h"

/* 1 if handler o is a TaskLog (handlers.c then calls sw_task_log_emit). */
int sw_task_log_check(PyObject *o);

/* Renders the line of task event `kind` (SW_K_TASK_*) of this thread, now.
 * Returns 0, or -1 with an exception set (its stream's write failed). */
int sw_task_log_emit(PyObject *o, int kind, const sw_evdata *d);

/* Adds TaskLog to the module. Returns 0, or -1 with an exception set. */
int sw_task_log_add_to_module(PyObject *m);

#endif
