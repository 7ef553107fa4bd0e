/*
 * globs.c - lists of fnmatch patterns copied out of Python sequences
 * (globs.h).
 */
#include "globs.h"

#include "base/base.h"

#include <stdio.h>
#include <string.h>

void sw_globs_free(char **g)
{
    for (char **p = g; p && *p; p++)
        PyMem_RawFree(*p);
    PyMem_RawFree(g);
}

int sw_globs_copy(PyObject *seq, const char *what, char ***out)
{
    *out = NULL;
    if (!seq || seq == Py_None)
        return 0;
    char msg[128];
    snprintf(msg, sizeof msg, "%s must be a sequence of str globs", what);
    PyObject *fast = PySequence_Fast(seq, msg);
    if (!fast)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n == 0) {
        Py_DECREF(fast);
        return 0;
    }
    char **g = PyMem_RawCalloc((size_t)n + 1, sizeof *g);
    if (!g) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(fast, i);
        const char *c = PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
        size_t len = c ? strlen(c) : 0;
        if (!c || !(g[i] = PyMem_RawMalloc(len + 1))) {
            if (c)
                PyErr_NoMemory();
            else if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "%s patterns must be str", what);
            sw_globs_free(g);
            Py_DECREF(fast);
            return -1;
        }
        memcpy(g[i], c, len + 1);
    }
    Py_DECREF(fast);
    *out = g;
    return 0;
}
