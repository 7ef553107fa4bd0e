/*
 * other_eval.c - a stand-in for another tool's PEP 523 frame evaluator (a
 * debugger's, a JIT's), used by tests/py/events/test_coexist_eval.py. It counts every
 * frame evaluation it sees, and separately those of one watched code object,
 * then calls the evaluator it replaced ("chaining"), like stackwatch does.
 *
 *   install()      make ours the interpreter's evaluator (chaining to the
 *                  current one) and start counting
 *   uninstall()    stop counting; restore the previous evaluator only if
 *                  ours is still the current one (else it stays in the chain
 *                  as a pass-through)
 *   watch(code)    count the frames of this code object in watched()
 *   total(), watched(), reset()
 *   is_current()   True if ours is the interpreter's current evaluator
 *   prev_is_default()  True if ours chains to _PyEval_EvalFrameDefault
 *   current_is_default()  True if no PEP 523 evaluator is installed
 *
 * Built by the test with the running interpreter's headers:
 *   gcc -shared -fPIC -Wall -Wextra -Werror -I<include> other_eval.c
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
/* 3.11: the frame's code object is only reachable through the internal
 * frame layout (3.12+ has PyUnstable_InterpreterFrame_GetCode). */
#  ifndef Py_BUILD_CORE
#    define Py_BUILD_CORE 1
#  endif
#  include <internal/pycore_frame.h>
#endif

#if PY_VERSION_HEX >= 0x030B0000
typedef struct _PyInterpreterFrame oe_frame;
#else
#  include <frameobject.h>
typedef PyFrameObject oe_frame;
#endif

typedef PyObject *(*oe_eval_fn)(PyThreadState *, oe_frame *, int);

static oe_eval_fn prev_eval;
static int counting;
static unsigned long long n_total, n_watched;
static PyObject *watched_code;  /* strong reference, or NULL */

static int frame_is_watched(oe_frame *f)
{
    if (!watched_code)
        return 0;
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *code = PyUnstable_InterpreterFrame_GetCode(f);
    int r = code == watched_code;
    Py_XDECREF(code);
    return r;
#else  /* 3.9-3.10 PyFrameObject, 3.11 _PyInterpreterFrame */
    return (PyObject *)f->f_code == watched_code;
#endif
}

static PyObject *oe_eval(PyThreadState *ts, oe_frame *f, int throwflag)
{
    if (counting) {
        n_total++;
        if (frame_is_watched(f))
            n_watched++;
    }
    return prev_eval(ts, f, throwflag);
}

static PyInterpreterState *interp(void)
{
    return PyThreadState_Get()->interp;
}

static oe_eval_fn current(void)
{
    return (oe_eval_fn)_PyInterpreterState_GetEvalFrameFunc(interp());
}

static PyObject *oe_install(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    oe_eval_fn cur = current();
    if (cur != oe_eval) {
        prev_eval = cur ? cur : (oe_eval_fn)_PyEval_EvalFrameDefault;
        _PyInterpreterState_SetEvalFrameFunc(interp(), (_PyFrameEvalFunction)oe_eval);
    }
    counting = 1;
    Py_RETURN_NONE;
}

static PyObject *oe_uninstall(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    counting = 0;
    if (current() == oe_eval)
        _PyInterpreterState_SetEvalFrameFunc(interp(), (_PyFrameEvalFunction)prev_eval);
    Py_RETURN_NONE;
}

static PyObject *oe_watch(PyObject *self, PyObject *code)
{
    (void)self;
    if (!PyCode_Check(code))
        return PyErr_Format(PyExc_TypeError, "watch() needs a code object");
    Py_INCREF(code);
    Py_XSETREF(watched_code, code);
    Py_RETURN_NONE;
}

static PyObject *oe_total(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromUnsignedLongLong(n_total);
}

static PyObject *oe_watched(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromUnsignedLongLong(n_watched);
}

static PyObject *oe_reset(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    n_total = n_watched = 0;
    Py_RETURN_NONE;
}

static PyObject *oe_is_current(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(current() == oe_eval);
}

static PyObject *oe_prev_is_default(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(prev_eval == (oe_eval_fn)_PyEval_EvalFrameDefault);
}

static PyObject *oe_current_is_default(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    oe_eval_fn cur = current();
    return PyBool_FromLong(cur == NULL || cur == (oe_eval_fn)_PyEval_EvalFrameDefault);
}

static PyMethodDef oe_methods[] = {
    {"install", oe_install, METH_NOARGS, "install the counting evaluator"},
    {"uninstall", oe_uninstall, METH_NOARGS, "stop counting; restore the previous evaluator if ours is current"},
    {"watch", oe_watch, METH_O, "count the frames of this code object"},
    {"total", oe_total, METH_NOARGS, "frames counted"},
    {"watched", oe_watched, METH_NOARGS, "frames of the watched code counted"},
    {"reset", oe_reset, METH_NOARGS, "zero the counters"},
    {"is_current", oe_is_current, METH_NOARGS, "ours is the current evaluator"},
    {"prev_is_default", oe_prev_is_default, METH_NOARGS, "ours chains to the default evaluator"},
    {"current_is_default", oe_current_is_default, METH_NOARGS, "no PEP 523 evaluator installed"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef oe_module = {
    PyModuleDef_HEAD_INIT, "other_eval", "a counting PEP 523 frame evaluator (tests)", -1, oe_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_other_eval(void)
{
    return PyModule_Create(&oe_module);
}
