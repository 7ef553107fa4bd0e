/*
 * exit_line.c - the line a Python frame is running when it returns, yields
 * or unwinds (exit_line.h).
 *
 * 3.9-3.11: the evaluator hands the frame back to the frame-evaluation hook
 * whole (its caller clears it afterwards): its current instruction is read.
 * 3.12+: the evaluator clears and pops a returning frame itself, so the
 * line is noted before, by sys.monitoring PY_RETURN / PY_YIELD / PY_UNWIND
 * callbacks: the leaving frame and its line, in sw_TT, which the hook takes
 * when it sees that frame end. sys.monitoring has one callback per event
 * and tool: on 3.13 the same PY_RETURN / PY_UNWIND callbacks also close the
 * __init__ frames the hook did not see (init_gap.c).
 */
#include "exit_line.h"

#include "ext/tracer/init_gap.h"
#include "ext/tracer/switch.h"

#include <limits.h>

#if PY_VERSION_HEX >= 0x030C0000

int sw_exit_line(sw_tracer_thread *t, SW_FRAME *f, PyCodeObject *co)
{
    if (t->exit_frame == (void *)f) {
        t->exit_frame = NULL;
        return t->exit_line;
    }
    return co->co_firstlineno;
}

/* What the three callbacks do: note the line of the thread's current
 * frame, which is leaving (their arguments are code, instruction offset in
 * bytes, ...), and on 3.13 close it if the __init__ gap recorded it (kind
 * SW_K_RETURN or SW_K_UNWIND; not for a yield). */
static PyObject *leaving(int kind, PyObject *const *args, Py_ssize_t n)
{
    int line = -1;
    if (n >= 2 && PyCode_Check(args[0]) && PyLong_Check(args[1])) {
        long offset = PyLong_AsLong(args[1]);
        if (offset >= 0 && offset <= INT_MAX) {
            sw_tracer_thread *t = &sw_TT;
            line = PyCode_Addr2Line((PyCodeObject *)args[0], (int)offset);
            t->exit_frame = sw_thread_iframe(PyThreadState_Get());
            t->exit_line = line;
        } else {
            PyErr_Clear();
        }
    }
#  if PY_VERSION_HEX >= 0x030D0000
    if (kind != SW_K_YIELD)
        sw_init_gap_exit(kind, n >= 1 ? args[0] : NULL, line);
#  else
    (void)kind;
#  endif
    Py_RETURN_NONE;
}

static PyObject *mon_return(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    return leaving(SW_K_RETURN, args, n);
}

static PyObject *mon_yield(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    return leaving(SW_K_YIELD, args, n);
}

static PyObject *mon_unwind(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    return leaving(SW_K_UNWIND, args, n);
}

static PyMethodDef mon_return_def = {"mon_return", (PyCFunction)(void (*)(void))mon_return, METH_FASTCALL,
                                      "sys.monitoring PY_RETURN callback"};
static PyMethodDef mon_yield_def = {"mon_yield", (PyCFunction)(void (*)(void))mon_yield, METH_FASTCALL,
                                     "sys.monitoring PY_YIELD callback"};
static PyMethodDef mon_unwind_def = {"mon_unwind", (PyCFunction)(void (*)(void))mon_unwind, METH_FASTCALL,
                                      "sys.monitoring PY_UNWIND callback"};

int sw_exit_line_add_hooks(PyObject *hooks)
{
    if (sw_hooks_add_monitoring_callback(hooks, SW_MON(PY_RETURN), &mon_return_def) < 0 ||
        sw_hooks_add_monitoring_callback(hooks, SW_MON(PY_YIELD), &mon_yield_def) < 0 ||
        sw_hooks_add_monitoring_callback(hooks, SW_MON(PY_UNWIND), &mon_unwind_def) < 0)
        return -1;
    return 0;
}

#else

int sw_exit_line(sw_tracer_thread *t, SW_FRAME *f, PyCodeObject *co)
{
    (void)t;
#  if PY_VERSION_HEX >= 0x030B0000
    return PyCode_Addr2Line(co, _PyInterpreterFrame_LASTI(f) * (int)sizeof(_Py_CODEUNIT));
#  else
    (void)co;
    return PyFrame_GetLineNumber(f);
#  endif
}

int sw_exit_line_add_hooks(PyObject *hooks)
{
    (void)hooks;
    return 0;
}

#endif
