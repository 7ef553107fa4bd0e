/*
 * hook_eval.c - the PEP 523 frame-evaluation backend: every Python frame
 * evaluation (a call, or a resumption of a generator or coroutine) passes
 * through sw_eval(), which records the entry, runs the frame with the
 * evaluator it replaced, and records how the frame left (return, yield or
 * unwind). See docs/architecture.md for what this backend sees per version.
 */
#include "session.h"

/* Thread names become known once threading has registered the thread,
 * which happens within the first few frames of a new thread. */
#define NAME_LOOKUP_DEPTH 4

static PyObject *sw_eval(PyThreadState *ts, SW_FRAME *f, int throwflag)
{
    sw_tstate *t = &sw_T;
    sw_eval_fn prev = sw_S.prev_eval;
    if (SW_UNLIKELY(t->gen != sw_S.gen || t->busy)) {
        if (t->busy || !sw_thread_attach(t))
            return prev(ts, f, throwflag);
    }
    PyCodeObject *co = sw_frame_code(f);
    if (sw_gen_creation(f, co))
        return prev(ts, f, throwflag);
    uint32_t id = sw_code_id(co, sw_frame_globals(f));
    sw_tbuf *tb = t->tb;
    if (SW_UNLIKELY((id & SW_ID_SKIP) || (sw_S.max_depth && tb->depth >= sw_S.max_depth)))
        return prev(ts, f, throwflag);
    if (SW_UNLIKELY(t->name_pending) && tb->depth < NAME_LOOKUP_DEPTH)
        sw_thread_name_lookup(t);
    PyGenObject *g = sw_frame_is_gen(f) ? sw_frame_gen(f) : NULL;
    (void)g;
    sw_tbuf_enter(tb, sw_clock_now(&sw_S.clock), sw_frame_resumes(f) ? SW_OP_RESUME : SW_OP_CALL, id);
    uint64_t gen = sw_S.gen;
#if PY_VERSION_HEX >= 0x030D0000
    t->hook_frame = f;
#endif
    PyObject *res = prev(ts, f, throwflag);
#if PY_VERSION_HEX >= 0x030D0000
    t->hook_frame = NULL;
#endif
    if (SW_LIKELY(gen == sw_S.gen)) {
        unsigned op = res == NULL ? SW_OP_UNWIND : sw_suspended(f, g) ? SW_OP_YIELD : SW_OP_RETURN;
        sw_tbuf_exit(tb, sw_clock_now(&sw_S.clock), op);
    }
    return res;
}

int sw_hook_eval_install(void)
{
    PyInterpreterState *interp = PyThreadState_Get()->interp;
    sw_eval_fn cur = sw_get_eval(interp);
    if (cur == sw_eval)
        return 0;
    sw_S.prev_eval = cur ? cur : (sw_eval_fn)_PyEval_EvalFrameDefault;
    sw_set_eval(interp, sw_eval);
    sw_S.hook_installed = 1;
    return 0;
}

void sw_hook_eval_uninstall(void)
{
    if (!sw_S.hook_installed)
        return;
    PyInterpreterState *interp = PyThreadState_Get()->interp;
    /* Restore the previous evaluator only if nobody replaced ours since. */
    if (sw_get_eval(interp) == sw_eval)
        sw_set_eval(interp, sw_S.prev_eval);
    sw_S.hook_installed = 0;
}
