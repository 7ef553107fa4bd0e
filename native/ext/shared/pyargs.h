/*
 * pyargs.h - argument converters shared by the extension's functions and
 * types, for PyArg_Parse*'s "O&" (one parser per kind of argument, not one
 * copy per function).
 */
#ifndef SW_PYARGS_H
#define SW_PYARGS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* An optional unsigned 64-bit integer (a thread id): None or absent
 * leaves given at 0. */
typedef struct {
    int given;
    unsigned long long value;
} sw_optional_u64;

/* "O&" converter into a sw_optional_u64 (the caller initialises it to
 * {0, 0}): None is "not given", an int is taken whole, anything else (a
 * negative or too large int, a non-int) raises and returns 0. */
int sw_pyargs_optional_u64(PyObject *o, void *out);

#endif
