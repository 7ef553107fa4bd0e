/*
 * session.h - the tracing session: one per process at a time. It owns the
 * writer, the clock, the threads' attachment to the trace and the mapping
 * from code objects to code ids. The hooks (hook_eval.c and the other
 * backends) call into it; trace_api.c exposes start and stop to Python.
 * The file tracer is a consumer of the dispatch layer: starting and
 * stopping a session is a consumer change (sw_dispatch_changed).
 *
 * Concurrency: all entry points run with the GIL held, except the
 * thread-exit destructor, which takes `lock` (stop() takes it too).
 */
#ifndef SW_SESSION_H
#define SW_SESSION_H

#include "ext/tracer/frame_compat.h"
#include "ext/tracer/thread_state.h"

#include "base/base.h"
#include "trace/trace.h"

#include <pthread.h>
#include <sched.h>

/* A code object's co_extra slot holds (session generation << 32) | flags |
 * id. Ids live in the low 29 bits. Flags send the hook to its slow path:
 * SW_ID_SKIP marks code the filters exclude (its frames are not recorded;
 * their children are), SW_ID_GEN generator/coroutine code (creation runs,
 * resumption and suspension need looking at), SW_ID_INIT, on 3.13, an
 * __init__ or a class body (see init_gap.c). */
#define SW_ID_SKIP  0x80000000u
#define SW_ID_GEN   0x40000000u
#define SW_ID_INIT  0x20000000u
#define SW_ID_FLAGS 0xE0000000u
#define SW_ID_MASK  0x1FFFFFFFu

typedef struct sw_session {
    uint64_t gen;            /* nonzero while a session is active */
    uint64_t fast_gen;       /* gen while the hook's fast path may run (a
                              * session, and no other consumer of Python
                              * events), else ~0: no thread's gen matches */
    uint64_t fast_tag;       /* (fast_gen & 0xffffffff) << 3: what the top
                              * bits of a co_extra value (>> 29) equal when
                              * the fast path may record that code */
    int fast_variant_ok;     /* the fast path in the evaluator chain uses the
                              * session's clock and time shift (hook_eval.c) */
    unsigned time_shift;     /* the session's time unit: 2^time_shift ticks */
    sw_clock clock;
    sw_writer *w;
    Py_ssize_t extra_index;  /* co_extra slot, -1 until requested */
    uint32_t next_code;
    uint32_t max_depth;      /* 0 = unlimited */
    char **include, **exclude;   /* NULL-terminated glob lists or NULL */
    int nfilters;
    sw_eval_fn prev_eval;    /* evaluator we chain to */
    int hook_installed;
    uint64_t recursion_gen;  /* bumped when every thread's C-recursion bonus
                              * is taken back (recursion.c) */
    int c_calls;             /* record calls of builtin/extension functions */
    int cython;              /* record Cython's profiled functions (cython_frames.c) */
    int cpu_ids;             /* --cpu: the CPU of every Python event (sw_event_now) */
    int no_calls;            /* the file records no calls: only the events asked
                              * (run --no-trace --events ...): the frame hook is
                              * not installed for it, and each TASK_CREATE is
                              * followed by the creating stack (TASK_STACK) */
    unsigned long quiet_wake;   /* the thread (ident) of an event loop that
                              * stackwatch wakes, idle, to list its tasks:
                              * quiet from its next frame (task_wrappers.c
                              * asyncio_wake_quiet), else 0; the fast path
                              * is off while it is set */
    const void *quiet_wake_code;   /* the code its loop waits in (its
                              * selector's select; only compared) */
    pthread_mutex_t lock;
    pthread_key_t key;       /* only for its destructor (thread exit) */
    int key_made;
    char *path;
} sw_session;

extern sw_session sw_S;

typedef struct sw_start_opts {
    const char *path;
    size_t chunk_bytes, ring_bytes;
    uint32_t max_depth;
    int allow_tsc;
    PyObject *meta;          /* dict str -> str|int|float, written to META */
    PyObject *include, *exclude;  /* sequences of str globs, or None */
    int c_calls;
    double flush_interval;   /* seconds; 0 = only when buffers fill */
    uint32_t events;         /* kinds recorded besides calls (kinds.h bits) */
    PyObject *lines;         /* globs of the files whose line / instruction
                              * events are recorded, or None: every file */
    int cython;              /* record Cython's profiled functions */
    int cpu_ids;             /* --cpu: record the CPU of every Python event */
    int no_calls;            /* record no calls: only the events (sw_session.no_calls) */
} sw_start_opts;

/* Starts a session and switches on what it needs. Returns 0, or -1 with a
 * Python exception set (then nothing changed). */
int sw_session_start(const sw_start_opts *o);

/* Stops the session (first the sampler writing into its file, if one
 * does), writes the end of the file, switches off what only the session
 * needed and returns a dict of totals (new reference), or NULL with an
 * exception set. `more_end`, if not NULL, is a key/value list added to END. */
PyObject *sw_session_stop(const sw_bytes *more_end);

/* The child after fork(): forget the parent's session without writing.
 * Returns 1 if there was one (the fork happened while tracing), else 0. */
int sw_session_after_fork_child(void);

/* 1 while a session records calls into its file (not a no_calls one). */
static inline int sw_session_calls(void)
{
    return sw_S.gen && !sw_S.no_calls;
}

/* Slow paths called by the hooks. */
int sw_thread_attach(sw_tracer_thread *t);          /* 1 if the thread can record */
void sw_thread_name_lookup(sw_tracer_thread *t);
uint32_t sw_code_register(PyCodeObject *co, PyObject *globals);
void sw_session_fast_refresh(void);          /* recomputes sw_S.fast_gen */
/* The key whose destructor runs at a thread's exit (flushes its buffer,
 * forgets its recursion bonus); 1 if it exists. */
int sw_thread_exit_key(void);

/* The time of a Python event about to be written into tb (the thread's
 * buffer, or NULL); with --cpu, first a CPU record when the thread runs
 * on another CPU than its previous event (format 1.13, writer.h). The
 * hook's fast path reads both at once (rdtscp, hook_eval.c). */
static inline uint64_t sw_event_now(sw_tbuf *tb)
{
    uint64_t t = sw_clock_now(&sw_S.clock);
    if (SW_UNLIKELY(sw_S.cpu_ids) && tb) {
        int cpu = sched_getcpu();
        sw_tbuf_cpu(tb, t, cpu < 0 ? 0 : (uint32_t)cpu);
    }
    return t;
}

/* Whether co is registered in this session. */
static inline int sw_code_known(PyCodeObject *co)
{
    sw_code_extra *ce = (sw_code_extra *)co->co_extra;
    return ce && sw_S.extra_index < ce->ce_size &&
           ((uintptr_t)ce->ce_extras[sw_S.extra_index] >> 32) == (sw_S.gen & 0xffffffffu);
}

/* The code id and flags of co in this session (registering it the first
 * time). */
static inline uint32_t sw_code_id(PyCodeObject *co, PyObject *globals)
{
    sw_code_extra *ce = (sw_code_extra *)co->co_extra;
    if (SW_LIKELY(ce && sw_S.extra_index < ce->ce_size)) {
        uintptr_t v = (uintptr_t)ce->ce_extras[sw_S.extra_index];
        if (SW_LIKELY((v >> 32) == (sw_S.gen & 0xffffffffu)))
            return (uint32_t)v;
    }
    return sw_code_register(co, globals);
}

#if PY_VERSION_HEX >= 0x030D0000
/* Marks a code registered in this session as a 3.13 __init__ (SW_ID_INIT),
 * so that its hooked frames take eval_slow (init_gap.c). */
void sw_code_mark_init(PyCodeObject *co);
#endif

#endif
