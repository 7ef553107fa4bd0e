/*
 * cgraph.c - the C extension of tests/py/tracer/test_native_frames.py,
 * compiled with `stackwatch config --cflags --ldflags`: its functions'
 * call graph is known by construction, and the test checks that the
 * trace's native frames nest exactly so under the Python caller.
 *
 *   run(n) -> walk(n) -> branch(i) -> leaf(i), leaf(i + 1)   for i < n
 *          -> jumper() -> dive(3) -> dive(2) -> dive(1) -> dive(0), which
 *             longjmps back to jumper: the dive frames never return
 *          -> callback()  (a Python function, called through the C API)
 * Every function but run is static: named from .symtab only.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <setjmp.h>

static jmp_buf back;

static int leaf(int x) { return x * 2 + 1; }

static int branch(int i) { return leaf(i) + leaf(i + 1); }

static int walk(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += branch(i);
    return s;
}

static void dive(int n)
{
    if (n == 0)
        longjmp(back, 1);
    dive(n - 1);
}

static int jumper(void)
{
    if (setjmp(back) == 0)
        dive(3);
    return 7;
}

static PyObject *run(PyObject *self, PyObject *args)
{
    (void)self;
    int n;
    PyObject *callback;
    if (!PyArg_ParseTuple(args, "iO", &n, &callback))
        return NULL;
    long total = walk(n) + jumper();
    PyObject *r = PyObject_CallNoArgs(callback);
    if (!r)
        return NULL;
    Py_DECREF(r);
    return PyLong_FromLong(total);
}

/* A C-heavy loop for the cost per event (bench and docs/performance.md):
 * fib(n) calls. */
static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static PyObject *cfib(PyObject *self, PyObject *arg)
{
    (void)self;
    return PyLong_FromLong(fib((int)PyLong_AsLong(arg)));
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "run(n, callback): the known call graph"},
    {"fib", cfib, METH_O, "fib(n) in C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cgraph", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_cgraph(void) { return PyModule_Create(&module); }
