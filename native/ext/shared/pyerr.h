/*
 * pyerr.h - the one place that turns the SW_E* codes of the C rooms
 * (base/common.h) into Python exceptions, and the exception
 * stackwatch._native.TraceError. Every room of native/ext raises through
 * it when a core function fails; hooks never raise (hookerr.h).
 *
 * The rule: SW_ENOMEM is always MemoryError (nothing more may be
 * allocated); any other code is the exception type the caller names, or by
 * default the code's own (sw_pyerr_type).
 */
#ifndef SW_PYERR_H
#define SW_PYERR_H

/* Python.h alone (not compat.h): the sampler's and the profile types'
 * files include this too, and only compat.h's users want CPython's
 * internal headers. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* stackwatch._native.TraceError (a ValueError): a file that is not a
 * readable trace. NULL until sw_pyerr_add_to_module ran. */
extern PyObject *sw_TraceError;

/* Creates TraceError and adds it to the module. Returns 0, or -1 with an
 * exception set. */
int sw_pyerr_add_to_module(PyObject *m);

/* The default exception type of a code (borrowed): MemoryError for
 * SW_ENOMEM, OSError for SW_EIO, TraceError for SW_EFORMAT, SW_ETRUNC,
 * SW_ECRC and SW_EVERSION, ValueError for SW_EARG, RuntimeError for the
 * others. */
PyObject *sw_pyerr_type(int rc);

/* Sets the exception for the failure rc (nonzero) and returns NULL:
 * MemoryError for SW_ENOMEM, else an exception of `type` (NULL: the
 * code's default) with the message formatted from fmt as
 * PyUnicode_FromFormat does. */
PyObject *sw_pyerr(int rc, PyObject *type, const char *fmt, ...);

/* The same for a failed operation on the file `path`: SW_EIO is the
 * OSError of errno (as the failed call left it) naming the file. */
PyObject *sw_pyerr_file(int rc, const char *path, PyObject *type, const char *fmt, ...);

#endif
