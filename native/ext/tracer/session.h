/*
 * session.h - the tracing session: one per process at a time. It owns the
 * writer, the clock, the per-thread state and the mapping from code objects
 * to code ids. Backends (hook_eval.c) call into it; module.c exposes start
 * and stop to Python.
 *
 * Concurrency: all entry points run with the GIL held, except the
 * thread-exit destructor, which takes `lock` (stop() takes it too).
 */
#ifndef SW_SESSION_H
#define SW_SESSION_H

#include "ext/shared/compat.h"

#include "base/clock.h"
#include "trace/writer.h"

#include <pthread.h>

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
    pthread_mutex_t lock;
    pthread_key_t key;       /* only for its destructor (thread exit) */
    int key_made;
    int error;               /* first error met in a hook (reported at stop) */
    char errmsg[256];
    char *path;
} sw_session;

/* Per-thread state, in initial-exec TLS so the hook reaches it in one load. */
typedef struct sw_tstate {
    uint64_t gen;            /* == sw_S.gen when the hook's fast path may run:
                              * attached, not busy, name known, no max depth */
    uint64_t session;        /* session this thread is attached to */
    uint64_t failed_gen;     /* session for which attaching failed */
    sw_tbuf *tb;
    int busy;                /* the hook itself is running Python code */
    uintptr_t handler_guard; /* the same for stackwatch's own frames (a
                              * handler's), which may go deeper: 0 or below
                              * stack_guard */
    uintptr_t stack_guard;   /* a hooked call below this address raises
                              * RecursionError instead of overflowing the
                              * C stack (0: bounds unknown) */
    uint64_t recursion_gen;  /* == sw_S.recursion_gen once the thread has its
                              * guard and bonus (sw_recursion_attach) */
    int name_pending;        /* the thread's name is not known yet */
    int name_tries;
    /* C calls (ccalls.c): for each open C call (innermost last), whether it
     * was recorded; valid for session c_gen. */
    uint8_t *c_rec;
    uint32_t c_depth, c_cap;
    uint64_t c_gen;
    uint64_t hooks_gen;      /* 3.9-3.11: sw_D.hooks_gen when this thread's
                              * per-thread hooks were last checked */
    /* The innermost hooked frame this thread's trace does not record
     * (filtered out, a generator's creation, before attaching): the
     * session and the recorded depth it runs at. Its teardown (3.12+,
     * hook_eval.c) must not be taken for a recorded frame's. */
    uint64_t unrec_gen;
    uint32_t unrec_depth;
#if PY_VERSION_HEX >= 0x030C0000
    /* The hooked frames running while the dispatch layer has consumers of
     * frame events, innermost first (hook_eval.c). */
    struct sw_hook_call *calls;
#endif
#if PY_VERSION_HEX >= 0x030D0000
    /* 3.13 __init__ gap (init_gap.c): the frame the hook entered last (NULL
     * once it returned), and the frames recorded by monitoring callbacks. */
    void *hook_frame;
    void **mon_frames;
    uint32_t mon_depth, mon_cap;
    uint64_t mon_gen;
#endif
} sw_tstate;

extern sw_session sw_S;
extern __thread sw_tstate sw_T __attribute__((tls_model("initial-exec")));

typedef struct sw_start_opts {
    const char *path;
    size_t chunk_bytes, ring_bytes;
    uint32_t max_depth;
    int allow_tsc;
    PyObject *meta;          /* dict str -> str|int|float, written to META */
    PyObject *include, *exclude;  /* sequences of str globs, or None */
    int c_calls;
    double flush_interval;   /* seconds; 0 = only when buffers fill */
} sw_start_opts;

/* Starts a session. Returns 0, or -1 with a Python exception set. */
int sw_session_start(const sw_start_opts *o);

/* Stops the session and returns a dict of totals (new reference), or NULL
 * with an exception set (e.g. the file could not be written). */
PyObject *sw_session_stop(void);

/* The child after fork(): forget the parent's session without writing. */
void sw_session_after_fork_child(void);

/* Glob lists (globs.c): NULL-terminated arrays of patterns. sw_globs_copy
 * gives NULL for None or an empty sequence; returns 0, or -1 with an
 * exception naming `what`. */
int sw_globs_copy(PyObject *seq, const char *what, char ***out);
void sw_globs_free(char **g);
int sw_globs_match(char *const *g, const char *s);   /* 1 if any pattern matches s */
int sw_glob_match(const char *pattern, const char *s); /* 1 if it matches */

/* Slow paths called by backends. */
int sw_thread_attach(sw_tstate *t);          /* 1 if the thread can record */
void sw_tstate_refresh(sw_tstate *t);        /* recomputes t->gen */
void sw_thread_name_lookup(sw_tstate *t);
uint32_t sw_code_register(PyCodeObject *co, PyObject *globals);
void sw_session_error(const char *what);     /* records the first error */
void sw_session_fast_refresh(void);          /* recomputes sw_S.fast_gen */
/* The key whose destructor runs at a thread's exit (flushes its buffer,
 * forgets its recursion bonus); 1 if it exists. */
int sw_thread_exit_key(void);

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

/* The current stack pointer, for the C-stack guard: one instruction on
 * x86-64 (__builtin_frame_address would force a frame pointer on every
 * hooked call). */
static inline uintptr_t sw_stack_pointer(void)
{
#if defined(__x86_64__)
    uintptr_t sp;
    __asm__("mov %%rsp, %0" : "=r"(sp));
    return sp;
#else
    return (uintptr_t)__builtin_frame_address(0);
#endif
}

/* Marks the thread busy: the hook passes its frames through unrecorded. */
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

/* 3.13: recording __init__ frames that the specialised constructor call
 * pushes without the frame-evaluation hook (init_gap.c). Returns 0 or -1
 * with an exception set. */
int sw_init_gap_add_to_module(PyObject *m);
#if PY_VERSION_HEX >= 0x030D0000
/* Whether co was given the init gap's local events in this gap. */
int sw_init_gap_is_init(PyCodeObject *co);
/* At a hooked frame's start (eval_slow): gives the events to an __init__
 * of another name (see init_gap.c). */
void sw_init_gap_check_frame(SW_FRAME *f);
/* At the end of a class body (code that is not CO_OPTIMIZED): gives the
 * events to the function its namespace has as __init__. */
void sw_init_gap_check_namespace(PyObject *ns);
/* Marks a code registered in this session as a 3.13 __init__ (SW_ID_INIT),
 * so that its hooked frames take eval_slow. */
void sw_code_mark_init(PyCodeObject *co);
#endif

/* C calls (ccalls.c). 3.12+: sys.monitoring CALL/C_RETURN/C_RAISE
 * callbacks; 3.9-3.11: the C profile hook, installed per thread when the
 * thread attaches. */
int sw_ccalls_add_to_module(PyObject *m);
void sw_ccalls_thread_attach(sw_tstate *t);
void sw_ccalls_session_end(void);
void sw_ccalls_sync(void);   /* 3.9-3.11: the hook on every thread as the dispatch layer asks */

/* Recursion and the C stack (recursion.c). The first three are called
 * with the GIL held, except forget_self (thread exit, under sw_S.lock). */
void sw_recursion_bonus_give(PyThreadState *ts);
void sw_recursion_bonus_forget_self(void);
void sw_recursion_bonus_take_back(void);
/* A thread the hook runs frames for: its stack guard and (3.12+) its
 * C-recursion bonus, once until the bonuses are taken back. */
void sw_recursion_attach_slow(sw_tstate *t);
static inline void sw_recursion_attach(sw_tstate *t)
{
    if (t->recursion_gen != sw_S.recursion_gen)
        sw_recursion_attach_slow(t);
}
uintptr_t sw_stack_guard_of_this_thread(uintptr_t *handler_guard);

/* The statistical profiler's Python type (sampler.c). Returns 0 or -1 with
 * an exception set. */
int sw_sampler_add_to_module(PyObject *m);

/* The background flusher (flusher.c). */
int sw_flusher_start(double seconds);
void sw_flusher_stop(void);
void sw_flusher_forget(void);
void sw_flusher_pause(void);
void sw_flusher_resume(void);

/* Backends (hook_eval.c). */
int sw_hook_eval_install(void);
void sw_hook_eval_uninstall(void);
/* Installs or removes the hook as the session (session_active) and the
 * dispatch layer (Python events wanted by other consumers) need. */
int sw_hook_eval_sync(int session_active);

#endif
