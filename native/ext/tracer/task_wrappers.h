/*
 * task_wrappers.h - the task events of asyncio and of queues in C
 * (`--events tasks`, issue 22): the wrappers of asyncio.events.Handle._run
 * and __init__, of BaseEventLoop.create_task and of queues' _put and _get
 * that events/task_hooks.py puts in place while task events are wanted. Each step of a task runs as that task
 * (TASK_SWITCH in and out), its creation, wake, block and exit are task
 * events; only a block's await chain is read by Python (task_hooks.py).
 * GIL held.
 */
#ifndef SW_TASK_WRAPPERS_H
#define SW_TASK_WRAPPERS_H

#include "ext/shared/compat.h"

/* Adds asyncio_setup(...), asyncio_wrap(kind, original) and
 * asyncio_reset() to _native.hooks. Returns 0, or -1 with an exception
 * set. */
int sw_task_wrappers_add_hooks(PyObject *hooks);

#endif
