/*
 * task_locks.h - threading's locks as channels of task events (`--events
 * tasks`): a thread that blocks acquiring a _thread.lock or _thread.RLock
 * (TASK_BLOCK, reason lock) and, once it has it, who released it last
 * (TASK_WOKEN). task_locks.c sets its acquire, release, __enter__ and
 * __exit__ in the lock types while task events are wanted. GIL held.
 */
#ifndef SW_TASK_LOCKS_H
#define SW_TASK_LOCKS_H

#include <Python.h>

/* Adds lock_wrap(types, on, own_file, name_of) to _native.hooks. Returns
 * 0, or -1 with an exception set. */
int sw_task_locks_add_hooks(PyObject *hooks);

#endif
