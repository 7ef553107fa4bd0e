/*
 * cxxthrow.cpp - a C++ extension of tests/py/tracer/test_native_frames.py,
 * compiled with g++ (and its C part, cxxthrow_c.c, as C) and the flags of
 * `stackwatch config --cflags --ldflags`: a C++ exception thrown through
 * instrumented frames and caught above them. Its call graph is known by
 * construction:
 *
 *   run(n) -> catcher() -> through(3) -> through(2) -> through(1) -> through(0)
 *                          -> thrower(), which throws; catcher catches it
 *                          and returns
 *          -> after()  (n times, after catcher has returned)
 *
 * thrower ends by the exception and calls its exit hook from its cleanup;
 * the C frames of through end by the exception without theirs: the trace
 * must close them at catcher's return. The functions have C linkage so
 * that their symbols are their names (stackwatch does not demangle C++
 * names).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "cxxthrow.h"

extern "C" {

static void thrower(void)
{
    throw 7;   /* an int: no library type's inline code instrumented */
}

static int after(int x) { return x + 1; }

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

static PyObject *run(PyObject *, PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    long total = catcher();
    for (long i = 0; i < n; i++)
        total += after(0);
    return PyLong_FromLong(total);
}

}

static PyMethodDef methods[] = {
    {"run", run, METH_O, "run(n): a C++ exception through instrumented frames, caught above them"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cxxthrow", NULL, -1, methods, NULL, NULL, NULL, NULL};

extern "C" PyMODINIT_FUNC PyInit_cxxthrow(void) { return PyModule_Create(&module); }
