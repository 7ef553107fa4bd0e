/*
 * cython_frames.c - Cython's profiled functions as frames of the trace
 * (cython_frames.h). A call is a CALL event of the function's code object
 * (Cython makes one per function, named after it, with the .pyx file and
 * its first line), its return a RETURN (UNWIND on 3.13 when it raised), so
 * that the readers nest them among the Python frames as any other. A
 * Cython generator's resumption and yield are RESUME and YIELD on 3.13,
 * a CALL and a RETURN on 3.9-3.12 (as Cython reports them there).
 *
 * Which reports are Cython's: a Python function's start and end are
 * reported from inside its own frame, which is then the thread's running
 * frame; Cython makes a frame (or, on 3.13, only a code object) of its own
 * that is never pushed, so the running frame is its caller's. Each thread
 * keeps the Cython frames it has open (their code objects, innermost last)
 * and whether each was recorded: a return closes the innermost one only
 * when it is that function's, so a function that started before tracing
 * did returns unrecorded.
 *
 * 3.13: the callbacks return sys.monitoring.DISABLE for Python functions'
 * code, so each Python function costs one callback, then none.
 */
#include "cython_frames.h"

#include "ext/dispatch/kinds.h"
#include "ext/shared/hookerr.h"
#include "ext/tracer/thread_state.h"
#include "ext/tracer/session.h"
#include "ext/tracer/switch.h"

#define CY_RECORDED ((uintptr_t)1)

/* Opens a Cython frame of co on this thread (globals: its module's, for
 * the filters, or NULL; op: SW_OP_CALL, or SW_OP_RESUME for a generator
 * resumed on 3.13). */
static void cy_enter(sw_tracer_thread *t, PyCodeObject *co, PyObject *globals, unsigned op)
{
    if (sw_T.calls_off || !sw_S.gen || !sw_S.cython)
        return;
    if (SW_UNLIKELY(t->session != sw_S.gen) && !sw_thread_attach(t))
        return;
    if (t->cy_gen != sw_S.gen) {
        t->cy_gen = sw_S.gen;
        t->cy_depth = 0;
    }
    if (t->cy_depth == t->cy_cap) {
        uint32_t cap = t->cy_cap ? t->cy_cap * 2 : 32;
        void **p = PyMem_RawRealloc(t->cy_frames, cap * sizeof *p);
        if (!p) {
            sw_hook_error("out of memory recording a Cython frame");
            return;
        }
        t->cy_frames = p;
        t->cy_cap = cap;
    }
    sw_exc_state es;
    sw_exc_save(&es);
    uint32_t id = sw_code_id(co, globals);
    sw_exc_restore(&es);
    int rec = !(id & SW_ID_SKIP) && !(sw_S.max_depth && t->tb->depth >= sw_S.max_depth);
    t->cy_frames[t->cy_depth++] = (void *)((uintptr_t)co | (rec ? CY_RECORDED : 0));
    if (rec)
        sw_tbuf_enter(t->tb, sw_event_now(t->tb), op, id & SW_ID_MASK);
}

/* Closes the innermost Cython frame if it is co's (op: SW_OP_RETURN,
 * SW_OP_UNWIND or SW_OP_YIELD). */
static void cy_exit(sw_tracer_thread *t, PyCodeObject *co, unsigned op)
{
    if (sw_T.calls_off || t->cy_gen != sw_S.gen || !t->cy_depth || !sw_S.gen || t->session != sw_S.gen)
        return;
    uintptr_t top = (uintptr_t)t->cy_frames[t->cy_depth - 1];
    if ((top & ~CY_RECORDED) != (uintptr_t)co)
        return;
    t->cy_depth--;
    if (top & CY_RECORDED)
        sw_tbuf_exit(t->tb, sw_event_now(t->tb), op);
}

#if PY_VERSION_HEX < 0x030D0000

/* Whether frame is the thread's running frame (a Python function's). */
static int is_running(PyFrameObject *frame)
{
    PyThreadState *ts = PyThreadState_Get();
#  if PY_VERSION_HEX >= 0x030B0000
    return frame->f_frame == sw_thread_iframe(ts);
#  else
    return frame == ts->frame;
#  endif
}

void sw_cython_profile(PyFrameObject *frame, int what)
{
    if (!frame || !sw_S.cython || is_running(frame))
        return;
    PyCodeObject *co = PyFrame_GetCode(frame);
#  if PY_VERSION_HEX >= 0x030B0000
    PyObject *globals = frame->f_frame->f_globals;
#  else
    PyObject *globals = frame->f_globals;
#  endif
    if (what == PyTrace_CALL)
        cy_enter(&sw_TT, co, globals, SW_OP_CALL);
    else
        cy_exit(&sw_TT, co, SW_OP_RETURN);
    Py_DECREF(co);
}

int sw_cython_add_hooks(PyObject *hooks) { (void)hooks; return 0; }

#else  /* 3.13: sys.monitoring */

static PyObject *mon_disable;   /* sys.monitoring.DISABLE */

/* Whether co is the running frame's code (a Python function's). */
static int is_running(PyCodeObject *co)
{
    _PyInterpreterFrame *f = sw_thread_iframe(PyThreadState_Get());
    return f && (PyObject *)f->f_executable == (PyObject *)co;
}

static PyObject *python_code(void)
{
    return Py_NewRef(mon_disable ? mon_disable : Py_None);
}

/* PY_START / PY_RESUME(code, offset), PY_RETURN / PY_YIELD(code,
 * offset, value), PY_UNWIND(code, offset, exception): a Cython function
 * (or generator) starts, resumes, returns, yields, raises. */
static PyObject *starts(PyObject *const *args, Py_ssize_t n, unsigned op)
{
    if (n < 1 || !PyCode_Check(args[0]))
        Py_RETURN_NONE;
    if (is_running((PyCodeObject *)args[0]))
        return python_code();
    cy_enter(&sw_TT, (PyCodeObject *)args[0], NULL, op);
    Py_RETURN_NONE;
}

static PyObject *ends(PyObject *const *args, Py_ssize_t n, unsigned op)
{
    if (n < 1 || !PyCode_Check(args[0]))
        Py_RETURN_NONE;
    if (is_running((PyCodeObject *)args[0]))
        return python_code();
    cy_exit(&sw_TT, (PyCodeObject *)args[0], op);
    Py_RETURN_NONE;
}

static PyObject *mon_start(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    return starts(args, n, SW_OP_CALL);
}

static PyObject *mon_resume(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    return starts(args, n, SW_OP_RESUME);
}

static PyObject *mon_return(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    return ends(args, n, SW_OP_RETURN);
}

static PyObject *mon_yield(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    return ends(args, n, SW_OP_YIELD);
}

static PyObject *mon_unwind(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    /* (PY_UNWIND cannot be disabled: Python functions' unwinds come here.) */
    if (n >= 1 && PyCode_Check(args[0]) && !is_running((PyCodeObject *)args[0]))
        cy_exit(&sw_TT, (PyCodeObject *)args[0], SW_OP_UNWIND);
    Py_RETURN_NONE;
}

static PyMethodDef mon_start_def = {"cython_start", (PyCFunction)(void (*)(void))mon_start, METH_FASTCALL,
                                    "sys.monitoring PY_START callback of Cython's functions"};
static PyMethodDef mon_resume_def = {"cython_resume", (PyCFunction)(void (*)(void))mon_resume, METH_FASTCALL,
                                     "sys.monitoring PY_RESUME callback of Cython's generators"};
static PyMethodDef mon_yield_def = {"cython_yield", (PyCFunction)(void (*)(void))mon_yield, METH_FASTCALL,
                                    "sys.monitoring PY_YIELD callback of Cython's generators"};
static PyMethodDef mon_return_def = {"cython_return", (PyCFunction)(void (*)(void))mon_return, METH_FASTCALL,
                                     "sys.monitoring PY_RETURN callback of Cython's functions"};
static PyMethodDef mon_unwind_def = {"cython_unwind", (PyCFunction)(void (*)(void))mon_unwind, METH_FASTCALL,
                                     "sys.monitoring PY_UNWIND callback of Cython's functions"};

int sw_cython_add_hooks(PyObject *hooks)
{
    PyObject *mon = PySys_GetObject("monitoring");   /* borrowed */
    if (mon && !mon_disable) {
        mon_disable = PyObject_GetAttrString(mon, "DISABLE");
        if (!mon_disable)
            PyErr_Clear();
    }
    PyObject *d = PyDict_New();
    if (!d || sw_hooks_add_callback_to(d, SW_MON(PY_START), &mon_start_def) < 0 || sw_hooks_add_callback_to(d, SW_MON(PY_RETURN), &mon_return_def) < 0 ||
        sw_hooks_add_callback_to(d, SW_MON(PY_UNWIND), &mon_unwind_def) < 0 ||
        sw_hooks_add_callback_to(d, SW_MON(PY_RESUME), &mon_resume_def) < 0 ||
        sw_hooks_add_callback_to(d, SW_MON(PY_YIELD), &mon_yield_def) < 0 || PyModule_AddObject(hooks, "cython_callbacks", d) < 0) {
        Py_XDECREF(d);
        return -1;
    }
    return 0;
}

#endif
