/*
 * tstate.h - what every room of the extension keeps per thread: the busy
 * mark that every room puts around Python code it runs itself (a handler,
 * a name lookup, a registration), through which the hook passes the frames
 * of a busy thread unrecorded and no backend reports their events; the
 * quiet mark, around stackwatch's own code that records the program's
 * state (the tasks alive as task events start): its calls (frames, lines,
 * C calls, objects) are not recorded, its task records are; and the
 * thread's key, which the tracer's frame hook reads first, in one load from
 * initial-exec TLS. The tracer's own per-thread state is its own
 * (ext/tracer/thread_state.h). Everything here runs with the GIL held.
 */
#ifndef SW_TSTATE_H
#define SW_TSTATE_H

#include "ext/shared/compat.h"

#include <stdint.h>

typedef struct sw_tstate {
    /* The thread's key (sw_tstate_refresh): equal to sw_tstate_session_gen
     * while the tracer's fast path may record for this thread (the tracer
     * made it ready, and it is not busy), else 0. Read by the fast path
     * (ext/tracer/hook_eval.c), first of all. */
    uint64_t gen;
    /* The session generation for which the tracer made this thread ready
     * (attached, its name and its task's known: ext/tracer/thread_state.h
     * sw_tracer_thread_ready), else 0. */
    uint64_t ready;
    int busy;                /* sw_busy_enter/exit: stackwatch itself runs
                              * Python code on this thread */
    int calls_off;           /* busy or quiet (sw_quiet_enter/exit): the
                              * thread's calls are not recorded */
} sw_tstate;

extern __thread sw_tstate sw_T __attribute__((tls_model("initial-exec")));

/* What a thread's key takes while the fast path may record: the tracing
 * session's generation while a session records without a maximum depth,
 * else 0. Written by the tracer (session.c) whenever that changes. */
extern uint64_t sw_tstate_session_gen;

/* Recomputes t->gen from the thread's state. */
static inline void sw_tstate_refresh(sw_tstate *t)
{
    uint64_t g = sw_tstate_session_gen;
    t->gen = (g && t->ready == g && !t->calls_off) ? g : 0;
}

/* Marks the thread busy: the hook passes its frames through unrecorded,
 * and no event of it is reported. Pairs nest. */
static inline void sw_busy_enter(sw_tstate *t)
{
    t->busy++;
    t->calls_off++;
    t->gen = 0;
}

static inline void sw_busy_exit(sw_tstate *t)
{
    t->busy--;
    t->calls_off--;
    sw_tstate_refresh(t);
}

/* Marks the thread quiet: the hook passes its frames through unrecorded
 * and no call, line, C call or object event of it is reported, but its
 * task events are (and the other events of no code: GC). Pairs nest, with
 * each other and with busy ones. */
static inline void sw_quiet_enter(sw_tstate *t)
{
    t->calls_off++;
    t->gen = 0;
}

static inline void sw_quiet_exit(sw_tstate *t)
{
    t->calls_off--;
    sw_tstate_refresh(t);
}

#endif
