/*
 * frame_compat.h - how each supported CPython version (3.9 to 3.13) lays out
 * frames, code objects, generators and the recursion counters, as seen by
 * a PEP 523 frame-evaluation hook. Code that runs on every version uses
 * these macros; only code compiled for one range of versions reads that
 * range's fields itself (the 3.13 __init__ gap, init_gap.c and its part of
 * hook_eval.c; the 3.9-3.11 trace callback, events.c; the 3.12+ recursion
 * bonus, recursion.c). It includes ext/shared/compat.h (Python.h) and,
 * from 3.11 on, the internal headers it needs: a file that uses it
 * includes it (or a header that does) before any other header.
 *
 *   SW_FRAME            the frame type handed to the hook
 *   sw_frame_code(f)    its code object (borrowed)
 *   sw_frame_globals(f) its globals dict (borrowed)
 *   sw_frame_is_gen(f)  1 if the frame belongs to a generator/coroutine
 *   sw_frame_resumes(f) at hook entry: 1 if this is a resumption (not the
 *                       first run) of a generator/coroutine frame
 *   sw_gen_creation(f)  at hook entry: 1 if this run only creates the
 *                       generator (3.11+ runs such a frame up to
 *                       RETURN_GENERATOR; sys.setprofile does not report it)
 *   sw_suspended(f, g)  after the evaluator returned a value: 1 if the frame
 *                       suspended (yield/await) rather than returned; g is
 *                       the generator saved at entry (3.11+) or NULL
 */
#ifndef SW_FRAME_COMPAT_H
#define SW_FRAME_COMPAT_H

#include "ext/shared/compat.h"

#if PY_VERSION_HEX >= 0x030B0000
#  include <internal/pycore_frame.h>   /* Py_BUILD_CORE: ext/shared/compat.h */
#  define SW_FRAME struct _PyInterpreterFrame
#  if PY_VERSION_HEX >= 0x030D0000
#    define sw_frame_code(f) ((PyCodeObject *)(f)->f_executable)
#  else
#    define sw_frame_code(f) ((f)->f_code)
#  endif
#  define sw_frame_globals(f) ((f)->f_globals)
#  define sw_frame_is_gen(f) ((f)->owner == FRAME_OWNED_BY_GENERATOR)
#  define sw_frame_gen(f) ((PyGenObject *)((char *)(f) - offsetof(PyGenObject, gi_iframe)))
#  define sw_frame_resumes(f) (sw_frame_is_gen(f) && sw_frame_gen(f)->gi_frame_state != FRAME_CREATED)
#  define SW_GEN_FLAGS (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)
#  define sw_gen_creation(f, co) (((co)->co_flags & SW_GEN_FLAGS) && !sw_frame_is_gen(f))
#  define sw_suspended(f, g) ((g) && (g)->gi_frame_state < FRAME_EXECUTING)
#else
#  include <frameobject.h>
#  define SW_FRAME PyFrameObject
#  define sw_frame_code(f) ((f)->f_code)
#  define sw_frame_globals(f) ((f)->f_globals)
#  define sw_frame_gen(f) ((PyGenObject *)NULL)
#  define sw_frame_is_gen(f) (((f)->f_code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) != 0)
#  define sw_gen_creation(f, co) 0
#  if PY_VERSION_HEX >= 0x030A0000
#    define sw_frame_resumes(f) ((f)->f_state == FRAME_SUSPENDED)
#    define sw_suspended(f, g) ((f)->f_state == FRAME_SUSPENDED)
#  else
#    define sw_frame_resumes(f) ((f)->f_lasti >= 0)
#    define sw_suspended(f, g) ((f)->f_stacktop != NULL)
#  endif
#endif

/* sw_in_teardown(ts), at hook entry: 1 if the frame is called while a
 * returning frame's locals are being cleared (3.12+: __del__, weakref
 * callbacks, generators closed during the clearing). The evaluator has
 * then already unlinked the dying frame, so the thread's current frame is
 * the entry frame of the C call of the evaluator that ran it (owned by the
 * C stack); at every other hook entry it is the calling Python frame (or
 * NULL for a thread's first frame). Always 0 before 3.12, where the frame
 * is cleared after the evaluator returns, as sys.setprofile sees it. */
#if PY_VERSION_HEX >= 0x030D0000
#  define sw_thread_iframe(ts) ((ts)->current_frame)
#elif PY_VERSION_HEX >= 0x030B0000
#  define sw_thread_iframe(ts) ((ts)->cframe->current_frame)   /* (3.11: cython_frames.c) */
#endif

#if PY_VERSION_HEX >= 0x030B0000
/* The first frame from f outwards that is a Python function's, running
 * (as PyEval_GetFrame and PyFrame_GetBack skip them: not an entry frame of
 * the C stack, nor one still being set up), or NULL. No frame object made. */
static inline SW_FRAME *sw_complete_frame(SW_FRAME *f)
{
#  if PY_VERSION_HEX >= 0x030C0000
    while (f && (f->owner == FRAME_OWNED_BY_CSTACK || _PyFrame_IsIncomplete(f)))
#  else
    while (f && _PyFrame_IsIncomplete(f))
#  endif
        f = f->previous;
    return f;
}
#endif
#if PY_VERSION_HEX >= 0x030C0000
#  include <opcode.h>
static inline int sw_in_teardown(PyThreadState *ts)
{
    struct _PyInterpreterFrame *cf = sw_thread_iframe(ts);
    return cf && cf->owner == FRAME_OWNED_BY_CSTACK;
}

/* At a teardown (sw_in_teardown), whether f is the frame being cleared:
 * the evaluator that ran it linked it to its entry frame, which is still
 * the thread's current frame; a generator's frame is unlinked before its
 * clearing, which marks the generator cleared. */
static inline int sw_frame_dying(PyThreadState *ts, struct _PyInterpreterFrame *f)
{
    if (f->owner == FRAME_OWNED_BY_GENERATOR)
        return sw_frame_gen(f)->gi_frame_state == FRAME_CLEARED;
    return f->previous == sw_thread_iframe(ts);
}

/* How a frame being cleared left: 1 if by a return (its current
 * instruction is a return, possibly under sys.monitoring's instrumentation),
 * 0 if by an exception. */
static inline int sw_frame_returned(struct _PyInterpreterFrame *f)
{
    PyCodeObject *co = sw_frame_code(f);
#  if PY_VERSION_HEX >= 0x030D0000
    _Py_CODEUNIT *ip = f->instr_ptr;
#  else
    _Py_CODEUNIT *ip = f->prev_instr;
#  endif
    Py_ssize_t i = ip - _PyCode_CODE(co);
    if (i < 0 || i >= Py_SIZE(co))
        return 0;
    int op = ip->op.code;
    _PyCoMonitoringData *m = co->_co_monitoring;
    if (op == INSTRUMENTED_LINE && m && m->lines)
        op = m->lines[i].original_opcode;
    if (op == INSTRUMENTED_INSTRUCTION && m && m->per_instruction_opcodes)
        op = m->per_instruction_opcodes[i];
    return op == RETURN_VALUE || op == RETURN_CONST || op == INSTRUMENTED_RETURN_VALUE ||
           op == INSTRUMENTED_RETURN_CONST;
}
#else
#  define sw_in_teardown(ts) 0
#endif

/* The recursion limit, and whether the evaluator will refuse to run a
 * frame at its very start because the thread is at that limit (the checks
 * at the top of _PyEval_EvalFrameDefault, made before any event: CPython
 * raises RecursionError in the caller and sys.setprofile sees no call).
 * sw_entry_near_limit is the fast path's cheap superset of
 * sw_entry_fails (the C budget of 3.12+ is topped up for traced threads,
 * recursion.c). */
#if PY_VERSION_HEX >= 0x030C0000
#  define sw_entry_near_limit(ts) ((ts)->py_recursion_remaining <= 0)
static inline int sw_entry_fails(PyThreadState *ts)
{
    if (ts->recursion_headroom)
        return 0;
    /* C check first: one level taken, then `c_recursion_remaining-- <= 0`
     * (3.12) or `< 0` (3.13); then `py_recursion_remaining-- <= 0`. */
#  if PY_VERSION_HEX >= 0x030D0000
    return ts->c_recursion_remaining <= 0 || ts->py_recursion_remaining <= 0;
#  else
    return ts->c_recursion_remaining <= 1 || ts->py_recursion_remaining <= 0;
#  endif
}
#elif PY_VERSION_HEX >= 0x030B0000
#  define sw_entry_near_limit(ts) ((ts)->recursion_remaining <= 0)
static inline int sw_entry_fails(PyThreadState *ts)
{
    /* One check at the frame's start, `recursion_remaining-- <= 0`, which
     * first adopts a limit raised since (depth below it: no error). */
    int r = ts->recursion_remaining;
    if (ts->recursion_headroom || r > 0)
        return 0;
    return ts->recursion_limit - (r - 1) >= Py_GetRecursionLimit();
}
#else
#  ifndef Py_BUILD_CORE
#    define Py_BUILD_CORE 1
#  endif
/* Public headers define it (a function call) without Py_BUILD_CORE; the
 * internal one is an equivalent macro. */
#  undef _PyGC_FINALIZED
#  include <internal/pycore_interp.h>
#  define sw_entry_near_limit(ts) ((ts)->recursion_depth >= (ts)->interp->ceval.recursion_limit)
static inline int sw_entry_fails(PyThreadState *ts)
{
    /* `++recursion_depth > limit`, unless already handling an overflow. */
#  if PY_VERSION_HEX >= 0x030A0000
    if (ts->recursion_headroom)
        return 0;
#  else
    if (ts->overflowed || ts->recursion_critical)
        return 0;
#  endif
    return ts->recursion_depth + 1 > ts->interp->ceval.recursion_limit;
}
#endif

/* Installing a frame evaluator. */
#if PY_VERSION_HEX >= 0x030B0000
typedef PyObject *(*sw_eval_fn)(PyThreadState *, SW_FRAME *, int);
#else
typedef PyObject *(*sw_eval_fn)(PyThreadState *, PyFrameObject *, int);
#endif
#define sw_get_eval(interp) ((sw_eval_fn)_PyInterpreterState_GetEvalFrameFunc(interp))
#define sw_set_eval(interp, fn) _PyInterpreterState_SetEvalFrameFunc((interp), (_PyFrameEvalFunction)(fn))

#endif
