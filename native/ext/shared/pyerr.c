/*
 * pyerr.c - SW_E* codes as Python exceptions, and TraceError (pyerr.h).
 */
#include "pyerr.h"

#include "base/base.h"

#include <stdarg.h>

PyObject *sw_TraceError;

int sw_pyerr_add_to_module(PyObject *m)
{
    if (!sw_TraceError &&
        !(sw_TraceError = PyErr_NewException("stackwatch._native.TraceError", PyExc_ValueError, NULL)))
        return -1;
    Py_INCREF(sw_TraceError);
    if (PyModule_AddObject(m, "TraceError", sw_TraceError) < 0) {
        Py_DECREF(sw_TraceError);
        return -1;
    }
    return 0;
}

PyObject *sw_pyerr_type(int rc)
{
    switch (rc) {
    case SW_ENOMEM: return PyExc_MemoryError;
    case SW_EIO: return PyExc_OSError;
    case SW_EFORMAT: case SW_ETRUNC: case SW_ECRC: case SW_EVERSION:
        return sw_TraceError ? sw_TraceError : PyExc_ValueError;
    case SW_EARG: return PyExc_ValueError;
    default: return PyExc_RuntimeError;
    }
}

static PyObject *raise_v(int rc, PyObject *type, const char *fmt, va_list ap)
{
    if (rc == SW_ENOMEM)
        return PyErr_NoMemory();
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    if (msg) {
        PyErr_SetObject(type ? type : sw_pyerr_type(rc), msg);
        Py_DECREF(msg);
    }
    return NULL;
}

PyObject *sw_pyerr(int rc, PyObject *type, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    raise_v(rc, type, fmt, ap);
    va_end(ap);
    return NULL;
}

PyObject *sw_pyerr_file(int rc, const char *path, PyObject *type, const char *fmt, ...)
{
    if (rc == SW_EIO)
        return PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
    va_list ap;
    va_start(ap, fmt);
    raise_v(rc, type, fmt, ap);
    va_end(ap);
    return NULL;
}
