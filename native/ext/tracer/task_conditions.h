/*
 * task_conditions.h - threading.Condition's wait and notify as task events
 * (`--events tasks`), in C: a thread's block on what its caller waits for
 * (a queue, an Event, a Semaphore, the Condition) and its wake by the
 * thread that notifies it. task_conditions.c makes the wrappers that
 * events/task_hooks.py sets in threading.Condition while task events are
 * wanted. GIL held.
 */
#ifndef SW_TASK_CONDITIONS_H
#define SW_TASK_CONDITIONS_H

#include "ext/shared/compat.h"

/* Adds cond_wrap(kind, original), cond_setup(what_of, threading_file,
 * own_names) and task_names_changed() to _native.hooks. Returns 0, or -1
 * with an exception set. */
int sw_task_conditions_add_hooks(PyObject *hooks);

#endif
