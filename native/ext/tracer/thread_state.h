/*
 * thread_state.h - the tracer's per-thread state, sw_TT, in initial-exec
 * TLS beside the extension's own (ext/shared/tstate.h sw_T: the busy mark
 * and the thread's key, which the frame hook reads first): the thread's
 * buffer in the trace, its recursion guard, the frames each backend keeps
 * open (C calls, Cython, the native-function runtime, 3.12+ hooked calls,
 * the 3.13 __init__ gap) and its task. Each field says which file of the
 * tracer writes it (its owner); the others only read it. Everything here
 * runs with the GIL held, except the thread-exit destructor (session.c),
 * which runs under the session lock.
 */
#ifndef SW_THREAD_STATE_H
#define SW_THREAD_STATE_H

#include "ext/shared/tstate.h"

#include <stdint.h>

struct sw_tbuf;        /* trace/writer.h: a thread's buffer in the trace file */
struct sw_hook_call;   /* hook_eval.c: a running hooked frame */

typedef struct sw_tracer_thread {
    /* session.c: the session this thread is attached to, and the session
     * for which attaching failed. */
    uint64_t session;
    uint64_t failed_gen;
    struct sw_tbuf *tb;      /* session.c: its buffer, while attached */
    /* recursion.c: a hooked call below stack_guard raises
     * RecursionError instead of overflowing the C stack (0: bounds
     * unknown); handler_guard is the same for stackwatch's own frames (a
     * handler's), which may go deeper (0, or below stack_guard).
     * recursion_gen == sw_S.recursion_gen once the thread has its guard
     * and C-recursion bonus. */
    uintptr_t handler_guard;
    uintptr_t stack_guard;
    uint64_t recursion_gen;
    /* session.c, hook_eval.c: the thread's name is not known
     * yet, and how often it was looked up. */
    int name_pending;
    int name_tries;
    /* tasks.c: a task just switched in, named after the first
     * frame it records (0: none), and the session it belongs to. */
    uint64_t task_unnamed, task_unnamed_gen;
    /* tasks.c: greenlet's trace callback is ours on this thread as of
     * its install number greenlet_gen. */
    uint64_t greenlet_gen;
    /* ccalls.c: for each open C call (innermost last),
     * whether it was recorded; valid for session c_gen. */
    uint8_t *c_rec;
    uint32_t c_depth, c_cap;
    uint64_t c_gen;
    /* cython_frames.c: the Cython frames open (code object
     * | recorded bit, innermost last); valid for session cy_gen. */
    void **cy_frames;
    uint32_t cy_depth, cy_cap;
    uint64_t cy_gen;
    /* native_frames.c: the thread's state in the
     * native-function runtime (cyg/cyg.h sw_cyg_thread), or NULL. */
    void *cyg;
    /* hook_eval.c, 3.9-3.11: sw_D.hooks_gen when this
     * thread's per-thread trace / profile hooks were last checked. */
    uint64_t hooks_gen;
    /* hook_eval.c: the innermost hooked frame this thread's
     * trace does not record (filtered out, a generator's creation, before
     * attaching): the session and the recorded depth it runs at. Its
     * teardown (3.12+) must not be taken for a recorded frame's. */
    uint64_t unrec_gen;
    uint32_t unrec_depth;
    /* An event loop's thread woken by stackwatch (session.h quiet_wake):
     * the session in which it is quiet since its wake, else 0, and till
     * when: 1, its loop's next _process_events, which tells whether the
     * pass is the wake's alone (task_wrappers.c); 2, its next wait, in
     * code wake_quiet_code (hook_eval.c), which ends either. */
    uint64_t wake_quiet_gen;
    int wake_quiet_phase;
    const void *wake_quiet_code;
#if PY_VERSION_HEX >= 0x030C0000
    /* hook_eval.c: the hooked frames running while the
     * dispatch layer has consumers of frame events, innermost first. */
    struct sw_hook_call *calls;
    /* exit_line.c: the frame that last returned, yielded or
     * unwound under sys.monitoring, and the line it was running. */
    void *exit_frame;
    int exit_line;
#endif
#if PY_VERSION_HEX >= 0x030D0000
    /* init_gap.c, 3.13 __init__ gap: the frame the hook
     * entered last (NULL once it returned), and the frames recorded by
     * monitoring callbacks. */
    void *hook_frame;
    void **mon_frames;
    uint32_t mon_depth, mon_cap;
    uint64_t mon_gen;
#endif
    /* tasks.c: the task the thread runs, for task events delivered to
     * handlers only (a trace keeps its own: tb->task). */
    uint64_t task_now;
    /* file_events.c: the string this thread interned last (format 1.16:
     * a channel's name, met again by most records), its id, valid for
     * session istr_gen. */
    uint64_t istr_gen, istr_id;
    uint32_t istr_len;
    char istr[64];
} sw_tracer_thread;

extern __thread sw_tracer_thread sw_TT __attribute__((tls_model("initial-exec")));

/* Tells the thread's key (sw_T) whether the fast path may record for the
 * thread: attached to the running session, its name looked up and its
 * task named. Called wherever one of those changes. */
static inline void sw_tracer_thread_ready(const sw_tracer_thread *t)
{
    sw_T.ready = (t->session && !t->name_pending && !t->task_unnamed) ? t->session : 0;
    sw_tstate_refresh(&sw_T);
}

#endif
