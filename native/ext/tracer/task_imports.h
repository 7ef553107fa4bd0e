/*
 * task_imports.h - the sys.meta_path finder that hooks modules for task
 * events (asyncio, queue, multiprocessing.connection, greenlet, trio,
 * uvloop) as the program imports them, in C: no frame of stackwatch's in
 * the program's import (events/task_imports.py holds the hooks). GIL held.
 */
#ifndef SW_TASK_IMPORTS_H
#define SW_TASK_IMPORTS_H

#include "ext/shared/compat.h"

/* Adds task_import_finder(hooks, run) to _native.hooks. Returns 0, or -1
 * with an exception set. */
int sw_task_imports_add_hooks(PyObject *hooks);

#endif
