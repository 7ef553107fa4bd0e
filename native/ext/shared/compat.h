/*
 * compat.h - what differs between the supported CPython versions (3.9 to
 * 3.13) for every room of the extension: Python.h, the version gate,
 * Py_NewRef before 3.10, the code object's extra slot (co_extra) and its
 * qualname, saving and restoring the pending exception, a weak
 * reference's target, and letting a callback of stackwatch's run at the
 * program's recursion limit. How each version lays out frames, generators
 * and the recursion counters for the PEP 523 hook is the tracer's
 * (ext/tracer/frame_compat.h). A file that uses it includes it (or a
 * header that does) before any other header.
 */
#ifndef SW_COMPAT_H
#define SW_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x03090000
#  error "stackwatch supports CPython 3.9 and newer"
#endif

/* From 3.11 on, rooms read CPython's internal headers (the tracer's frames,
 * ext/tracer/frame_compat.h; the dispatch layer's monitoring events,
 * ext/dispatch/kinds.h), which want this defined. */
#if PY_VERSION_HEX >= 0x030B0000
#  ifndef Py_BUILD_CORE
#    define Py_BUILD_CORE 1
#  endif
#endif

#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *sw_new_ref(PyObject *o) { Py_INCREF(o); return o; }
#  define Py_NewRef(o) sw_new_ref((PyObject *)(o))
#endif

/* Lets a callback of stackwatch's (a handler) run at the program's
 * recursion limit: n more levels while it runs, taken back after, so the
 * program's own frames meet the limit where they would without it. */
static inline void sw_recursion_allow(PyThreadState *ts, int n)
{
#if PY_VERSION_HEX >= 0x030C0000
    ts->py_recursion_remaining += n;
    ts->c_recursion_remaining += n;
#elif PY_VERSION_HEX >= 0x030B0000
    ts->recursion_remaining += n;
#else
    ts->recursion_depth -= n;
#endif
}

/* co_extra: one pointer-sized slot per code object for our code id. The
 * layout of the extra array (a size then the slots) has been the same since
 * 3.6 but is not in a public header. */
typedef struct {
    Py_ssize_t ce_size;
    void *ce_extras[1];
} sw_code_extra;

#if PY_VERSION_HEX >= 0x030C0000
#  define sw_request_extra_index PyUnstable_Eval_RequestCodeExtraIndex
#  define sw_code_set_extra PyUnstable_Code_SetExtra
#else
#  define sw_request_extra_index _PyEval_RequestCodeExtraIndex
#  define sw_code_set_extra _PyCode_SetExtra
#endif

/* Saving and restoring the pending exception around work done in a hook. */
#if PY_VERSION_HEX >= 0x030C0000
typedef struct { PyObject *exc; } sw_exc_state;
#  define sw_exc_save(s) ((s)->exc = PyErr_GetRaisedException())
#  define sw_exc_restore(s) PyErr_SetRaisedException((s)->exc)
#else
typedef struct { PyObject *t, *v, *tb; } sw_exc_state;
#  define sw_exc_save(s) PyErr_Fetch(&(s)->t, &(s)->v, &(s)->tb)
#  define sw_exc_restore(s) PyErr_Restore((s)->t, (s)->v, (s)->tb)
#endif

/* Drops the pending exception, if any: a hook's path that raised nothing
 * pays a look at the thread's state, not PyErr_Clear's whole restore. */
static inline void sw_err_drop(void)
{
    if (PyErr_Occurred())
        PyErr_Clear();
}

/* The object weak reference wr refers to (a new reference), or NULL when it
 * is gone (no exception left). */
static inline PyObject *sw_weak_target(PyObject *wr)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *o = NULL;
    if (PyWeakref_GetRef(wr, &o) < 0)
        PyErr_Clear();
    return o;
#else
    PyObject *o = PyWeakref_GetObject(wr);
    return o && o != Py_None ? Py_NewRef(o) : NULL;
#endif
}

#if PY_VERSION_HEX >= 0x030B0000
#  define sw_code_qualname(co) ((co)->co_qualname)
#else
#  define sw_code_qualname(co) ((co)->co_name)
#endif

#endif
