/*
 * hook_eval.c - the PEP 523 frame-evaluation backend: every Python frame
 * evaluation (a call, or a resumption of a generator or coroutine) passes
 * through sw_eval(), which records the entry, runs the frame with the
 * evaluator it replaced, and records how the frame left (return, yield or
 * unwind). See docs/architecture.md for what this backend sees per version.
 *
 * sw_eval_tsc() / sw_eval_mono() are the fast path: one comparison decides that the thread is
 * attached and in an ordinary state, one that the code object is registered
 * in this session and is ordinary code (not excluded, not a generator, not
 * a 3.13 __init__). Everything else goes to eval_slow(), which does the
 * whole job.
 */
#include "hook_eval.h"

#include "ext/dispatch/dispatch.h"
#include "ext/tracer/ccalls.h"
#include "ext/tracer/events.h"
#include "ext/tracer/exit_line.h"
#include "ext/tracer/init_gap.h"
#include "ext/tracer/recursion.h"
#include "ext/tracer/session.h"
#include "ext/tracer/tasks.h"

/* Thread names become known once threading has registered the thread,
 * which happens within the first few frames of a new thread. */
#define NAME_LOOKUP_DEPTH 4
#define NAME_LOOKUP_TRIES 32

/* The depth the thread's trace is at (0 when it records nothing). */
static inline uint32_t recorded_depth(const sw_tracer_thread *t)
{
    return sw_S.gen && t->session == sw_S.gen ? t->tb->depth : 0;
}

/* Runs a hooked frame the trace does not record, marked as the innermost
 * such frame while it runs (see teardown_mark). */
static SW_NOINLINE PyObject *run_unrecorded(sw_tracer_thread *t, PyThreadState *ts, SW_FRAME *f, int throwflag)
{
    uint64_t outer_gen = t->unrec_gen;
    uint32_t outer_depth = t->unrec_depth;
    t->unrec_gen = sw_S.gen;
    t->unrec_depth = recorded_depth(t);
    PyObject *res = sw_S.prev_eval(ts, f, throwflag);
    t->unrec_gen = outer_gen;
    t->unrec_depth = outer_depth;
    return res;
}

/* The C stack is nearly exhausted: every hooked call uses C stack (on
 * 3.11+ a Python call otherwise would not), so where plain CPython would
 * recurse on, fail the call with RecursionError rather than crash. The
 * frame is run with the exception pending (as generator.throw() does) so
 * that CPython unwinds and frees it normally. */
static SW_NOINLINE PyObject *stack_exhausted(sw_tracer_thread *t, PyThreadState *ts, SW_FRAME *f)
{
    PyErr_SetString(PyExc_RecursionError,
                    "maximum recursion depth exceeded (C stack nearly exhausted; "
                    "under stackwatch each Python call also uses the C stack)");
    return run_unrecorded(t, ts, f, 1);
}

/* 3.12+: the frame is called while a returning frame's locals are cleared
 * (frame_compat.h sw_in_teardown). The innermost hooked frame is the one being
 * torn down: when the trace recorded it (it is the innermost recorded one),
 * a TEARDOWN event tells the reader to end it here, before what its
 * clearing runs, as sys.setprofile does. Several finalizers in one
 * clearing each write one; the reader uses the first. */
#if PY_VERSION_HEX >= 0x030C0000
static SW_NOINLINE void teardown_mark(sw_tracer_thread *t, sw_tbuf *tb)
{
    if (tb->depth == 0 || (t->unrec_gen == sw_S.gen && t->unrec_depth == tb->depth))
        return;
    static const uint8_t none[1];
    sw_tbuf_ext(tb, sw_clock_now(&sw_S.clock), SW_EXT_TEARDOWN, none, 0);
}

/* A hooked frame run while the dispatch layer has consumers of frame
 * events (3.12+): a teardown ends the one being cleared for them early. */
typedef struct sw_hook_call {
    struct sw_hook_call *outer;
    SW_FRAME *f;
    PyCodeObject *co;
    int ended;               /* its end was given (or is not to be) */
    int unrecorded;          /* the file tracer leaves it out (sw_evdata) */
} sw_hook_call;

/* The consumers' side of a teardown: the innermost hooked frame, if it is
 * the one being cleared, ends here, as it really left (return or unwind),
 * and its end is not given again when the evaluator hands it back. */
static SW_NOINLINE void teardown_dispatch(sw_tracer_thread *t, PyThreadState *ts)
{
    sw_hook_call *hc = t->calls;
    if (!hc || hc->ended || !sw_frame_dying(ts, hc->f))
        return;
    hc->ended = 1;
    int kind = sw_frame_returned(hc->f) ? SW_K_RETURN : SW_K_UNWIND;
    if (sw_D.slow & SW_EVB(kind))
        sw_emit_frame_rec(kind, hc->co, sw_exit_line(t, hc->f, hc->co), hc->unrecorded);
}
#endif

/* An event loop's thread stackwatch woke (session.h quiet_wake) is quiet
 * from its first frame after the wake (its selector's, as the wake ends
 * its wait): task_wrappers.c wake_pass sees whether the pass is the wake's
 * alone, and if so it stays quiet until the loop waits again, at frame f
 * of its selector's select, which then runs unrecorded, as the wait the
 * wake cut short did (returns 1), and records its callees. (A loop whose
 * pass did not go through BaseSelectorEventLoop._process_events is quiet
 * until there too.) A quiet stretch of a session that ended ends. */
static SW_NOINLINE int wake_quiet(sw_tracer_thread *t, SW_FRAME *f)
{
    if (t->wake_quiet_gen && (t->wake_quiet_gen != sw_S.gen || (const void *)sw_frame_code(f) == t->wake_quiet_code)) {
        int waits = t->wake_quiet_gen == sw_S.gen;
        t->wake_quiet_gen = 0;
        sw_quiet_exit(&sw_T);
        return waits;
    }
    if (sw_S.quiet_wake && sw_S.quiet_wake == PyThread_get_thread_ident() && !t->wake_quiet_gen) {
        sw_S.quiet_wake = 0;
        sw_session_fast_refresh();
        t->wake_quiet_gen = sw_S.gen;
        t->wake_quiet_phase = 1;
        t->wake_quiet_code = sw_S.quiet_wake_code;
        sw_quiet_enter(&sw_T);
    }
    return 0;
}

static SW_NOINLINE PyObject *eval_slow(PyThreadState *ts, SW_FRAME *f, int throwflag)
{
    sw_tracer_thread *t = &sw_TT;
    sw_eval_fn prev = sw_S.prev_eval;
    if (SW_UNLIKELY(sw_S.quiet_wake || t->wake_quiet_gen) && wake_quiet(t, f))
        return run_unrecorded(t, ts, f, throwflag);
    /* stackwatch's own Python code (a handler's frames) runs plain, with a
     * guard of its own lower down: a handler is called at the program's
     * deepest point, and must run there. */
    if (sw_T.calls_off)
        return sw_stack_pointer() < t->handler_guard ? stack_exhausted(t, ts, f) : prev(ts, f, throwflag);
    if (sw_stack_pointer() < t->stack_guard)
        return stack_exhausted(t, ts, f);
    /* At the recursion limit the evaluator refuses the frame before it
     * starts: not a call (sys.setprofile sees none either). */
    if (SW_UNLIKELY(sw_entry_fails(ts)))
        return prev(ts, f, throwflag);
    PyCodeObject *co = sw_frame_code(f);
    int others = (sw_D.slow & SW_MASK_CALLS) != 0;
    if (others)
        sw_recursion_attach(t);
    int file = !sw_S.no_calls && sw_thread_attach(t);   /* (a session with no calls records no frame) */
#if PY_VERSION_HEX < 0x030C0000
    if (SW_UNLIKELY(t->hooks_gen != sw_D.hooks_gen)) {
        /* A thread the trace / profile hooks have not reached yet. */
        t->hooks_gen = sw_D.hooks_gen;
        sw_events_thread_attach();
        if (sw_D.slow & SW_MASK_C_CALLS)
            sw_ccalls_thread_attach(t);
    }
#endif
    if (!others && !file)
        return run_unrecorded(t, ts, f, throwflag);
#if PY_VERSION_HEX >= 0x030C0000
    if (SW_UNLIKELY(sw_in_teardown(ts))) {
        if (file)
            teardown_mark(t, t->tb);
        if (others)
            teardown_dispatch(t, ts);
    }
    /* Every hooked frame is here while there are consumers (no fast path). */
    sw_hook_call hc = {t->calls, f, co, 0, 0};
    if (others)
        t->calls = &hc;
#endif
    if (sw_gen_creation(f, co)) {
        PyObject *created = run_unrecorded(t, ts, f, throwflag);
#if PY_VERSION_HEX >= 0x030C0000
        if (others)
            t->calls = hc.outer;
#endif
        return created;
    }
#if PY_VERSION_HEX >= 0x030D0000
    /* A code seen for the first time, or any frame while live consumers
     * run everything through here. */
    if (!file || !sw_code_known(co))
        sw_init_gap_check_frame(f);
#endif
    int resumes = sw_frame_resumes(f);
    PyGenObject *g = sw_frame_is_gen(f) ? sw_frame_gen(f) : NULL;
    (void)g;
    uint64_t gen = 0;
    sw_tbuf *tb = NULL;
    if (file) {
        uint32_t id = sw_code_id(co, sw_frame_globals(f));
        tb = t->tb;
        if (!((id & SW_ID_SKIP) || (sw_S.max_depth && tb->depth >= sw_S.max_depth))) {
            if (t->name_pending && tb->depth < NAME_LOOKUP_DEPTH) {
                /* A thread threading never registers (e.g.
                 * _thread.start_new_thread) stays unnamed: give up after
                 * a few tries. */
                if (++t->name_tries > NAME_LOOKUP_TRIES)
                    t->name_pending = 0;
                else
                    sw_thread_name_lookup(t);
                sw_tracer_thread_ready(t);
            }
            if (SW_UNLIKELY(t->task_unnamed))
                sw_tasks_name(t, co);
            sw_tbuf_enter(tb, sw_event_now(tb), resumes ? SW_OP_RESUME : SW_OP_CALL,
                          id & SW_ID_MASK);
            gen = sw_S.gen;
        }
    }
    int unrecorded = file && !gen;
#if PY_VERSION_HEX >= 0x030C0000
    hc.unrecorded = unrecorded;
#endif
    int wanted = others && (sw_D.slow & SW_EVB(resumes ? SW_K_RESUME : SW_K_CALL));
    if (wanted)
        sw_emit_frame_rec(resumes ? SW_K_RESUME : SW_K_CALL, co, co->co_firstlineno, unrecorded);
#if PY_VERSION_HEX >= 0x030D0000
    /* Restored, not cleared, on return: the outer frame is still running,
     * so its address cannot be reused by a frame pushed inline. */
    void *outer_hook_frame = t->hook_frame;
    t->hook_frame = f;
    /* A class body's namespace, looked into when it ends. */
    PyObject *ns = (co->co_flags & CO_OPTIMIZED) ? NULL : Py_XNewRef(f->f_locals);
#endif
    PyObject *res = gen ? prev(ts, f, throwflag) : run_unrecorded(t, ts, f, throwflag);
#if PY_VERSION_HEX >= 0x030D0000
    t->hook_frame = outer_hook_frame;
#endif
    int ended = 0;
#if PY_VERSION_HEX >= 0x030C0000
    if (others) {
        t->calls = hc.outer;
        ended = hc.ended;
    }
#endif
    if (gen || others) {
        int kind = res == NULL ? SW_K_UNWIND : sw_suspended(f, g) ? SW_K_YIELD : SW_K_RETURN;
        if (gen && SW_LIKELY(gen == sw_S.gen)) {
            unsigned op = kind == SW_K_UNWIND ? SW_OP_UNWIND : kind == SW_K_YIELD ? SW_OP_YIELD : SW_OP_RETURN;
            sw_tbuf_exit(tb, sw_event_now(tb), op);
        }
        if (others && !ended && (sw_D.slow & SW_EVB(kind)))
            sw_emit_frame_rec(kind, co, sw_exit_line(t, f, co), unrecorded);
    }
#if PY_VERSION_HEX >= 0x030D0000
    if (ns) {
        if (res)
            sw_init_gap_check_namespace(ns);
        Py_DECREF(ns);
    }
#endif
    return res;
}

/* The fast path's exit when the chunk is full or the frame unwound (an
 * exception): seals the chunk if need be, then records. */
static SW_NOINLINE PyObject *exit_slow(sw_tbuf *tb, PyObject *res)
{
    if (tb->pos <= tb->limit || sw_tbuf_make_room(tb))
        sw_tbuf_put_exit_paired(tb, sw_event_now(tb), res ? SW_OP_RETURN : SW_OP_UNWIND);
    return res;
}

/* The fast path, instantiated per clock and time shift (NOW gives the time
 * in the trace's units) so that neither is looked up per event. Only `gen` lives across the call (the thread's
 * buffer is found again after it), and every slower case leaves by a tail
 * call, so that few registers need saving. */
#define SW_DEFINE_FAST_EVAL(NAME, NOW)                                                       \
    static PyObject *NAME(PyThreadState *ts, SW_FRAME *f, int throwflag)                     \
    {                                                                                         \
        uint64_t gen = sw_S.fast_gen;                                                         \
        sw_code_extra *ce = (sw_code_extra *)sw_frame_code(f)->co_extra;                      \
        Py_ssize_t idx = sw_S.extra_index;                                                    \
        if (SW_UNLIKELY(sw_T.gen != gen || !ce || idx >= ce->ce_size ||                       \
                        sw_stack_pointer() < sw_TT.stack_guard || sw_in_teardown(ts) ||        \
                        sw_entry_near_limit(ts)))                                             \
            return eval_slow(ts, f, throwflag);                                               \
        uintptr_t v = (uintptr_t)ce->ce_extras[idx];                                          \
        sw_tbuf *tb = sw_TT.tb;                                                                \
        /* Registered in this session, none of the flag bits set, and room                    \
         * for the event (else eval_slow makes it). */                                        \
        if (SW_UNLIKELY((v >> 29) != sw_S.fast_tag || !sw_tbuf_enter_fits(tb)))               \
            return eval_slow(ts, f, throwflag);                                               \
        /* The flag bits are 0 here: the low word is the code id. */                         \
        sw_tbuf_put_enter_units(tb, NOW, SW_OP_CALL, (uint32_t)v);                            \
        PyObject *res = sw_S.prev_eval(ts, f, throwflag);                                     \
        if (SW_LIKELY(gen == sw_S.gen)) {                                                     \
            tb = sw_TT.tb;                                                                     \
            if (SW_UNLIKELY(tb->pos > tb->limit || !res))                                     \
                return exit_slow(tb, res);                                                    \
            sw_tbuf_put_exit_paired_units(tb, NOW, SW_OP_RETURN);                             \
        }                                                                                     \
        return res;                                                                           \
    }

/* Instances for the common shifts (the largest power-of-two number of
 * ticks not above 8 ns: 3 for nanoseconds, 4-6 for TSCs of 2-8 GHz), and
 * one reading the shift from the buffer for any other. */
#if SW_HAVE_TSC
SW_DEFINE_FAST_EVAL(sw_eval_tsc, __rdtsc() >> tb->shift)
SW_DEFINE_FAST_EVAL(sw_eval_tsc4, __rdtsc() >> 4)
SW_DEFINE_FAST_EVAL(sw_eval_tsc5, __rdtsc() >> 5)
SW_DEFINE_FAST_EVAL(sw_eval_tsc6, __rdtsc() >> 6)
#endif
SW_DEFINE_FAST_EVAL(sw_eval_mono, sw_clock_ns(CLOCK_MONOTONIC) >> tb->shift)
SW_DEFINE_FAST_EVAL(sw_eval_mono3, sw_clock_ns(CLOCK_MONOTONIC) >> 3)

/* --cpu (format 1.13): the time and the CPU of the event, with a CPU
 * record first when the thread moved (writer.h sw_tbuf_cpu). With the
 * TSC, one rdtscp reads both (Linux keeps the CPU's number in the low 12
 * bits of TSC_AUX); else the clock and getcpu. */
#if SW_HAVE_TSC
static inline uint64_t tscp_units(sw_tbuf *tb)
{
    unsigned aux;
    uint64_t t = __rdtscp(&aux);
    sw_tbuf_cpu(tb, t, aux & 0xfff);
    return t >> tb->shift;
}
SW_DEFINE_FAST_EVAL(sw_eval_tscp, tscp_units(tb))
#endif
static inline uint64_t mono_cpu_units(sw_tbuf *tb)
{
    uint64_t t = sw_clock_ns(CLOCK_MONOTONIC);
    int cpu = sched_getcpu();
    sw_tbuf_cpu(tb, t, cpu < 0 ? 0 : (uint32_t)cpu);
    return t >> tb->shift;
}
SW_DEFINE_FAST_EVAL(sw_eval_mono_cpu, mono_cpu_units(tb))

static const sw_eval_fn fast_evals[] = {
#if SW_HAVE_TSC
    sw_eval_tsc, sw_eval_tsc4, sw_eval_tsc5, sw_eval_tsc6, sw_eval_tscp,
#endif
    sw_eval_mono, sw_eval_mono3, sw_eval_mono_cpu,
};

/* The evaluator installed for this session's clock and time shift. */
static sw_eval_fn sw_eval_for_clock(void)
{
    unsigned shift = sw_S.time_shift;
#if SW_HAVE_TSC
    if (sw_S.cpu_ids && sw_S.clock.kind == SW_CLOCK_TSC)
        return sw_eval_tscp;
#endif
    if (sw_S.cpu_ids)
        return sw_eval_mono_cpu;
#if SW_HAVE_TSC
    if (sw_S.clock.kind == SW_CLOCK_TSC)
        return shift == 4 ? sw_eval_tsc4 : shift == 5 ? sw_eval_tsc5 : shift == 6 ? sw_eval_tsc6 : sw_eval_tsc;
#endif
    return shift == 3 ? sw_eval_mono3 : sw_eval_mono;
}

static int is_ours(sw_eval_fn fn)
{
    for (size_t i = 0; i < sizeof fast_evals / sizeof fast_evals[0]; i++)
        if (fn == fast_evals[i])
            return 1;
    return 0;
}

/* When stop() finds another evaluator installed over ours, ours stays in
 * its chain (it calls ours, ours calls what was there before). This
 * remembers that evaluator: while it is still the current one, a new
 * session must not install ours again on top of it (ours would then call
 * it, and it ours, forever). */
static sw_eval_fn left_under;

/* Our variant in the interpreter's chain (installed, or buried under
 * another evaluator), NULL if none. */
static sw_eval_fn ours_in_chain;

/* The fast path records times with its variant's clock and shift: it may
 * run only when that is the session's (else every frame takes eval_slow,
 * which reads the session's clock). */
static void note_variant(void)
{
    sw_S.fast_variant_ok = ours_in_chain == sw_eval_for_clock();
    sw_session_fast_refresh();
}

static void install(void)
{
    PyInterpreterState *interp = PyThreadState_Get()->interp;
    sw_eval_fn cur = sw_get_eval(interp);
    sw_S.hook_installed = 1;
    if (is_ours(cur)) {
        sw_set_eval(interp, ours_in_chain = sw_eval_for_clock());
        left_under = NULL;
        note_variant();
        return;
    }
    if (left_under && cur == left_under) {
        note_variant();
        return;  /* still called through that evaluator's chain */
    }
    left_under = NULL;
    sw_S.prev_eval = cur ? cur : (sw_eval_fn)_PyEval_EvalFrameDefault;
    sw_set_eval(interp, ours_in_chain = sw_eval_for_clock());
    note_variant();
}

static void uninstall(void)
{
    if (!sw_S.hook_installed)
        return;
    PyInterpreterState *interp = PyThreadState_Get()->interp;
    sw_eval_fn cur = sw_get_eval(interp);
    /* Restore the previous evaluator only if nobody replaced ours since;
     * otherwise ours stays in the other one's chain, passing frames
     * through (it records nothing between sessions). */
    if (is_ours(cur)) {
        sw_set_eval(interp, sw_S.prev_eval);
        ours_in_chain = NULL;
    } else {
        left_under = cur;
    }
    sw_S.hook_installed = 0;
}

void sw_hook_eval_sync(int session_active)
{
    uint32_t need = SW_MASK_EVAL_HOOK;
#if PY_VERSION_HEX < 0x030C0000
    /* It also carries the per-thread trace and profile hooks to new threads. */
    need |= SW_MASK_PROFILE_HOOK | SW_MASK_TRACE_HOOK;
#endif
    /* (session_active: a session that records calls; one without them
     * needs the hook only to carry those per-thread hooks, 3.9-3.11) */
    int want = session_active || (sw_D.slow & need) || (sw_S.gen && (sw_D.file & need & ~SW_MASK_EVAL_HOOK));
    if (want && !sw_S.hook_installed) {
        install();
        return;
    }
    if (!want && sw_S.hook_installed) {
        uninstall();
        /* Hooked calls no longer spend C recursion. */
        sw_recursion_bonus_take_back();
    } else if (want && is_ours(sw_get_eval(PyThreadState_Get()->interp))) {
        /* the session's clock and shift */
        sw_set_eval(PyThreadState_Get()->interp, ours_in_chain = sw_eval_for_clock());
    }
    note_variant();
}
