/*
 * test_entry_points.c - entry points that exist only for the tests in
 * tests/py, not for users (see test_entry_points.h).
 */
#include "test_entry_points.h"

#include "ext/shared/pyerr.h"
#include "procmem/procmem.h"

static PyObject *linetable_lines(PyObject *mod, PyObject *args)
{
    (void)mod;
    int kind, first;
    Py_buffer tab;
    Py_ssize_t nbytes;
    if (!PyArg_ParseTuple(args, "iy*in", &kind, &tab, &first, &nbytes))
        return NULL;
    sw_linetable t;
    int rc = sw_linetable_decode(kind, tab.buf, (size_t)tab.len, first, &t);
    PyBuffer_Release(&tab);
    if (rc != SW_OK) {
        sw_pyerr(rc, PyExc_ValueError, "cannot decode the line table (%s)", sw_strerror(rc));
        return NULL;
    }
    PyObject *out = PyList_New(0);
    for (Py_ssize_t off = 0; out && off < nbytes && off <= (Py_ssize_t)UINT32_MAX; off += 2) {
        PyObject *v = PyLong_FromLong(sw_linetable_line(&t, (uint32_t)off));
        if (!v || PyList_Append(out, v) < 0)
            Py_CLEAR(out);
        Py_XDECREF(v);
    }
    sw_linetable_free(&t);
    return out;
}

static PyMethodDef methods[] = {
    {"_linetable_lines", linetable_lines, METH_VARARGS,
     "_linetable_lines(kind, table, firstlineno, nbytes): the decoded line of every even byte offset"},
    {NULL, NULL, 0, NULL},
};

int sw_test_entry_points_add_to_module(PyObject *m)
{
#if PY_VERSION_HEX >= 0x030B0000
    int kind = SW_LINETABLE_LOCATIONS;
#elif PY_VERSION_HEX >= 0x030A0000
    int kind = SW_LINETABLE_PAIRS;
#else
    int kind = SW_LINETABLE_LNOTAB;
#endif
    if (PyModule_AddFunctions(m, methods) < 0 || PyModule_AddIntConstant(m, "LINETABLE_KIND", kind) < 0)
        return -1;
    return 0;
}
