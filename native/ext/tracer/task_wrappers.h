/*
 * task_wrappers.h - the task events of asyncio and of queues in C
 * (`--events tasks`, issue 22): the wrappers of asyncio.events.Handle._run
 * and __init__, of BaseEventLoop.create_task and of queues' _put and _get
 * that events/task_hooks.py puts in place while task events are wanted. Each step of a task runs as that task
 * (TASK_SWITCH in and out), its creation, wake, block and exit are task
 * events; only a block's await chain is read by Python (task_hooks.py).
 * Its wrapper type serves threading's Condition too (task_conditions.c).
 * GIL held.
 */
#ifndef SW_TASK_WRAPPERS_H
#define SW_TASK_WRAPPERS_H

#include "ext/shared/compat.h"

/* A method wrapped to record task events: a method descriptor (bound to
 * an instance, it is called with it first, as a function in a class is)
 * whose calls go to `vectorcall`, which calls `orig` and records. */
typedef struct {
    PyObject_HEAD
    int kind;                  /* what it wraps, by its maker's numbering */
    PyObject *orig;
    vectorcallfunc vectorcall;
} sw_task_wrapper;

/* A new wrapper of orig (a callable) whose calls go to call; NULL with
 * an exception set. */
PyObject *sw_task_wrapper_new(int kind, PyObject *orig, vectorcallfunc call);

/* The code of the running Python frame (the caller of a C function;
 * borrowed), read as sw_task_record_here reads frames; NULL: none. */
PyCodeObject *sw_task_running_code(void);

/* sw_task_record's task event, located at the innermost frame that is
 * the program's own (not in asyncio, threading, queue or stackwatch, nor
 * left out of the trace by a filter): from 3.11 read from the thread's
 * frames as the evaluator keeps them, no frame object made. */
void sw_task_record_here(int kind, long long a, long long b, long long c, const char *s1, const char *s2);

/* Adds asyncio_setup(...), asyncio_wrap(kind, original) and
 * asyncio_reset() to _native.hooks. Returns 0, or -1 with an exception
 * set. */
int sw_task_wrappers_add_hooks(PyObject *hooks);

#endif
