/*
 * pyargs.c - argument converters shared by the extension (see pyargs.h).
 */
#include "pyargs.h"

int sw_pyargs_optional_u64(PyObject *o, void *out)
{
    sw_optional_u64 *v = out;
    if (o == Py_None)
        return 1;
    unsigned long long x = PyLong_AsUnsignedLongLong(o);
    if (PyErr_Occurred())
        return 0;
    v->given = 1;
    v->value = x;
    return 1;
}
