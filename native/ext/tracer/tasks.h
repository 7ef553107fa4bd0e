/*
 * tasks.h - task switches (the dispatch kind TASK_SWITCH, `--events
 * tasks`): greenlet switches, seen by a greenlet.settrace callback
 * (tasks.c), become TASK_SWITCH records of the thread's trace, whose
 * writer keeps an open-frame stack per task, and events for the handlers.
 * GIL held.
 */
#ifndef SW_TASKS_H
#define SW_TASKS_H

#include "ext/tracer/frame_compat.h"
#include "ext/tracer/thread_state.h"

/* The thread records its first frame since a new task was switched in
 * (sw_TT.task_unnamed): the task is defined, named after the frame's code
 * ("greenlet worker"). The hook's slow path calls it. */
void sw_tasks_name(sw_tracer_thread *t, PyCodeObject *co);

/* The object a weak reference refers to (new reference), or NULL. */
PyObject *sw_tasks_weak_target(PyObject *wr);

/* The task id of o (an asyncio task, a greenlet; weakly held), given when
 * first met in the session (*fresh set then); 0 when out of memory. */
uint64_t sw_tasks_id(PyObject *o, int *fresh);

/* A task id for an object not made yet (an eager asyncio task, whose
 * first step runs as it is made), then given to it: 0 when out of memory. */
uint64_t sw_tasks_reserve(void);
int sw_tasks_bind(PyObject *o, uint64_t id);

/* o's task id when it has one in this session, else 0 (none given). */
uint64_t sw_tasks_known(PyObject *o);

/* Defines task `id` as `name` in the trace (a TASK chunk, on this thread)
 * when the trace records task events. */
void sw_tasks_define(uint64_t id, const char *name);

/* The thread runs task `to` (0: itself) from here on (TASK_SWITCH when it
 * ran another); returns the task it ran. *acted is 0 when nobody wants
 * task switches (or the thread is busy): nothing was done. */
uint64_t sw_tasks_switch(uint64_t to, int *acted);

/* Records a task event of dispatch kind `kind` (TASK_CREATE..TASK_WOKEN:
 * its EXT record and the handlers'), located at frame f or, when its code
 * is not recorded (a filter's, or stackwatch's own), its first caller
 * whose code is (borrowed; NULL: nowhere). Fields as sw_evdata's. Clears
 * any error it meets. */
void sw_task_record(int kind, PyFrameObject *f, long long a, long long b, long long c, const char *s1, const char *s2);

/* The same, located at code co, at its instruction `offset` (in bytes, as
 * PyCode_Addr2Line takes it; its line kept in a table: reading it walks
 * the code's line table); co NULL: nowhere. */
void sw_task_record_code(int kind, PyCodeObject *co, int offset, long long a, long long b, long long c,
                         const char *s1, const char *s2);

/* The task the thread runs now (0: itself). */
uint64_t sw_task_running(void);

/* Adds greenlet_trace (the callback), greenlet_trace_chain(previous)
 * (installed, replacing previous), greenlet_trace_off() -> previous, and
 * greenlet_trace_on() to _native.hooks. Returns 0, or -1 with an exception set. */
int sw_tasks_add_hooks(PyObject *hooks);

#endif
