/*
 * ext.c - the C extension that tests/py/tracer/test_native_builds.py builds
 * by each of README.md's recipes (cc with `stackwatch config --cflags
 * --ldflags`, setuptools, meson), named `ext` as the recipes name it. Its
 * call graph, known by construction:
 *
 *   run(n) -> outer(n) -> inner(i)   for i < n
 *
 * inner and outer are static: named from .symtab only.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static long inner(long i) { return i * i; }

static long outer(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++)
        s += inner(i);
    return s;
}

static PyObject *run(PyObject *self, PyObject *arg)
{
    (void)self;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(outer(n));
}

static PyMethodDef methods[] = {
    {"run", run, METH_O, "run(n): the sum of the squares below n"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "ext", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_ext(void) { return PyModule_Create(&module); }
