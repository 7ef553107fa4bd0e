/*
 * cxxthrow.cpp - a C++ extension of tests/py/tracer/test_native_frames.py
 * and tests/py/cli/test_dump_native.py, compiled with g++ (and its C
 * part, cxxthrow_c.c, as C) and the flags of `stackwatch config --cflags
 * --ldflags`. A C++ exception thrown through instrumented frames and
 * caught above them; its call graph is known by construction:
 *
 *   run(n) -> Catcher::catcher() -> through(3) -> through(2) -> through(1)
 *             -> through(0) -> thrower(), which throws; catcher catches
 *             it and returns
 *          -> after<int>()  (n times, after catcher has returned)
 *
 * thrower ends by the exception and calls its exit hook from its cleanup;
 * the C frames of through end by the exception without theirs: the trace
 * must close them at catcher's return. park(f) calls f from two C++ frames
 * (a class template's static method, an overload), for a process read
 * from outside while f sleeps. The C++ functions have C++ names (a
 * namespace, a class, templates, overloads: mangled symbols), which
 * stackwatch shows as c++filt does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "cxxthrow.h"

namespace cxxthrow {

static void thrower(void)
{
    throw 7;   /* an int: no library type's inline code instrumented */
}

template <typename T> static T after(T x) { return x + 1; }

struct Catcher {
    static int catcher(void)
    {
        int got = 0;
        try {
            through(3, thrower);
        } catch (int thrown) {
            got = thrown + 3;
        }
        return got;
    }
};

static PyObject *run(PyObject *, PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    long total = Catcher::catcher();
    for (long i = 0; i < n; i++)
        total += after<int>(0);
    return PyLong_FromLong(total);
}

static PyObject *call(PyObject *f, int) { return PyObject_CallObject(f, NULL); }

static PyObject *call(PyObject *f) { return call(f, 0); }

template <typename T> struct Holder {
    static PyObject *hold(T f) { return call(f); }
};

static PyObject *park(PyObject *, PyObject *f) { return Holder<PyObject *>::hold(f); }

}  // namespace cxxthrow

static PyMethodDef methods[] = {
    {"run", cxxthrow::run, METH_O, "run(n): a C++ exception through instrumented frames, caught above them"},
    {"park", cxxthrow::park, METH_O, "park(f): calls f() from C++ frames"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cxxthrow", NULL, -1, methods, NULL, NULL, NULL, NULL};

extern "C" PyMODINIT_FUNC PyInit_cxxthrow(void) { return PyModule_Create(&module); }
