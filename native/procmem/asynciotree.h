/*
 * asynciotree.h - the asyncio tasks of a target read from its memory,
 * without running code in it (`stackwatch dump`): each pending task with
 * its name, its loop, its coroutine stack (the chain of coroutines it
 * awaits through, each frame's code and line) and what it awaits (another
 * task, a gather's children, another future), the task whose TaskGroup
 * made it, and the objects its done callbacks hold (the future that
 * asyncio.wait_for, wait or shield releases when it ends). What the caller
 * makes a tree of: a task is a child of each task that awaits it.
 *
 * Found as asyncio.all_tasks() finds them: asyncio.tasks' task sets, read
 * through sys.modules (3.9-3.11: the WeakSet _all_tasks; 3.12+: the WeakSet
 * _scheduled_tasks and the set _eager_tasks), done tasks left out; a task
 * is an object of the type _asyncio.Task or of a subclass. Objects
 * are read through the version's layout (layout.h) and its asyncio table
 * (asyncio_layout.h), checked once against the target: its _asyncio.Task
 * and Future types must have the table's names and sizes. Every read is
 * bounded; a task that cannot be read whole is counted, never reported
 * half.
 */
#ifndef SW_ASYNCIOTREE_H
#define SW_ASYNCIOTREE_H

#include "codecache.h"
#include "layout.h"
#include "mem.h"

#define SW_AIO_MAX_TASKS 65536u      /* tasks read (the first ones found) */
#define SW_AIO_MAX_STACK 256u        /* coroutines followed down from a task */
#define SW_AIO_MAX_CHILDREN 4096u    /* a gather's children kept */
#define SW_AIO_NAME_MAX 256u
#define SW_AIO_MAX_REFS 32u          /* objects held by a task's done callbacks kept */

typedef enum {
    SW_AIO_AWAITS_NOTHING = 0,   /* no future (running, or about to) */
    SW_AIO_AWAITS_TASK,          /* waiter: a task */
    SW_AIO_AWAITS_GATHER,        /* waiter: gather's future; children[] what it gathers */
    SW_AIO_AWAITS_FUTURE,        /* waiter: another future (waiter_type its type's name) */
} sw_aio_awaits;

typedef struct sw_aio_task {
    uint64_t addr;                          /* the Task object */
    uint64_t loop;                          /* its event loop */
    uint64_t loop_thread;                   /* the loop's _thread_id (threading.get_ident()
                                               of the thread running it), 0 if not running */
    char name[SW_AIO_NAME_MAX];             /* get_name() (UTF-8, cut) */
    uint32_t depth;                         /* coroutine frames, innermost first */
    const sw_sample_code *codes[SW_AIO_MAX_STACK];
    int32_t lines[SW_AIO_MAX_STACK];
    int running;                            /* its coroutines run now (on the loop's thread:
                                               the frames below them are on its stack) */
    uint32_t awaits;                        /* sw_aio_awaits */
    uint64_t waiter;                        /* the future awaited (fut_waiter), or 0 */
    char waiter_type[SW_AIO_NAME_MAX];      /* its type's tp_name */
    uint32_t nchildren;                     /* SW_AIO_AWAITS_GATHER: children[] */
    uint64_t children[SW_AIO_MAX_CHILDREN];
    uint64_t group_parent;                  /* the task of the TaskGroup that made it (its
                                               first done callback is the group's), or 0 */
    uint32_t nrefs;                         /* refs[]: the objects its done callbacks hold (a
                                               functools.partial's arguments, a function's
                                               closure cells): where asyncio.wait_for (before
                                               3.12), wait and shield keep the future they
                                               release when it ends, which another task awaits */
    uint64_t refs[SW_AIO_MAX_REFS];
} sw_aio_task;

/* Called once per pending task; t is valid during the call only (its codes
 * until codes is freed). Returns nonzero to stop. */
typedef int (*sw_aio_task_fn)(void *ud, const sw_aio_task *t);

typedef struct sw_aio_stats {
    uint32_t found;                          /* tasks in the sets */
    uint32_t unreadable;                     /* left out: could not be read whole */
} sw_aio_stats;

/* Reads the tasks of the interpreter at interp and passes each pending one
 * to fn. codes: a code cache for this target's code objects. Returns the
 * number given to fn (0 also when asyncio is not imported), or a negative
 * SW_E* code with one sentence in err: no table for this Python version,
 * or its Task and Future types differ from the table's, or the task sets
 * cannot be read. */
int sw_aio_read(sw_mem *m, const sw_py_layout *l, uint64_t interp, sw_codecache *codes, sw_aio_task_fn fn,
                void *ud, sw_aio_stats *stats, char *err, size_t errlen);

#endif
