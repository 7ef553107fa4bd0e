/*
 * tstate.h - the one per-thread state of the extension, sw_T, in
 * initial-exec TLS so that the frame hook reaches it in one load, and the
 * busy mark that every room puts around Python code it runs itself (a
 * handler, a name lookup, a registration): the hook passes the frames of a
 * busy thread through unrecorded, and no backend reports their events.
 *
 * Each field says which room writes it (its owner); the others only read
 * it. Everything here runs with the GIL held, except the thread-exit
 * destructor of the tracer (session.c), which runs under the session lock.
 */
#ifndef SW_TSTATE_H
#define SW_TSTATE_H

#include "ext/shared/compat.h"

#include <stdint.h>

struct sw_tbuf;        /* trace/writer.h: a thread's buffer in the trace file */
struct sw_hook_call;   /* ext/tracer/hook_eval.c: a running hooked frame */

typedef struct sw_tstate {
    /* The thread's key (ext/shared, sw_tstate_refresh): equal to
     * sw_tstate_session_gen while the hook's fast path may record for this
     * thread (attached, not busy, name known), else 0. Read by the fast
     * path (ext/tracer/hook_eval.c), first of all. */
    uint64_t gen;
    /* ext/tracer (session.c): the session this thread is attached to, and
     * the session for which attaching failed. */
    uint64_t session;
    uint64_t failed_gen;
    struct sw_tbuf *tb;      /* ext/tracer (session.c): its buffer, while attached */
    int busy;                /* ext/shared (sw_busy_enter/exit): stackwatch itself runs
                              * Python code on this thread */
    /* ext/tracer (recursion.c): a hooked call below stack_guard raises
     * RecursionError instead of overflowing the C stack (0: bounds
     * unknown); handler_guard is the same for stackwatch's own frames (a
     * handler's), which may go deeper (0, or below stack_guard).
     * recursion_gen == sw_S.recursion_gen once the thread has its guard
     * and C-recursion bonus. */
    uintptr_t handler_guard;
    uintptr_t stack_guard;
    uint64_t recursion_gen;
    /* ext/tracer (session.c, hook_eval.c): the thread's name is not known
     * yet, and how often it was looked up. */
    int name_pending;
    int name_tries;
    /* ext/tracer (tasks.c): a task just switched in, named after the first
     * frame it records (0: none), and the session it belongs to. */
    uint64_t task_unnamed, task_unnamed_gen;
    /* ext/tracer (ccalls.c): for each open C call (innermost last),
     * whether it was recorded; valid for session c_gen. */
    uint8_t *c_rec;
    uint32_t c_depth, c_cap;
    uint64_t c_gen;
    /* ext/tracer (cython_frames.c): the Cython frames open (code object
     * | recorded bit, innermost last); valid for session cy_gen. */
    void **cy_frames;
    uint32_t cy_depth, cy_cap;
    uint64_t cy_gen;
    /* ext/tracer (native_frames.c): the thread's state in the
     * native-function runtime (cyg/cyg.h sw_cyg_thread), or NULL. */
    void *cyg;
    /* ext/tracer (hook_eval.c), 3.9-3.11: sw_D.hooks_gen when this
     * thread's per-thread trace / profile hooks were last checked. */
    uint64_t hooks_gen;
    /* ext/tracer (hook_eval.c): the innermost hooked frame this thread's
     * trace does not record (filtered out, a generator's creation, before
     * attaching): the session and the recorded depth it runs at. Its
     * teardown (3.12+) must not be taken for a recorded frame's. */
    uint64_t unrec_gen;
    uint32_t unrec_depth;
#if PY_VERSION_HEX >= 0x030C0000
    /* ext/tracer (hook_eval.c): the hooked frames running while the
     * dispatch layer has consumers of frame events, innermost first. */
    struct sw_hook_call *calls;
    /* ext/tracer (exit_line.c): the frame that last returned, yielded or
     * unwound under sys.monitoring, and the line it was running. */
    void *exit_frame;
    int exit_line;
#endif
#if PY_VERSION_HEX >= 0x030D0000
    /* ext/tracer (init_gap.c), 3.13 __init__ gap: the frame the hook
     * entered last (NULL once it returned), and the frames recorded by
     * monitoring callbacks. */
    void *hook_frame;
    void **mon_frames;
    uint32_t mon_depth, mon_cap;
    uint64_t mon_gen;
#endif
    /* ext/tracer (tasks.c): the task the thread runs, for task events
     * delivered to handlers only (a trace keeps its own: tb->task). */
    uint64_t task_now;
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
    t->gen = (g && t->session == g && !t->busy && !t->name_pending && !t->task_unnamed) ? g : 0;
}

/* Marks the thread busy: the hook passes its frames through unrecorded,
 * and no event of it is reported. Pairs nest. */
static inline void sw_busy_enter(sw_tstate *t)
{
    t->busy++;
    t->gen = 0;
}

static inline void sw_busy_exit(sw_tstate *t)
{
    t->busy--;
    sw_tstate_refresh(t);
}

#endif
