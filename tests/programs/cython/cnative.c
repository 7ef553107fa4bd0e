/*
 * cnative.c - native functions of tests/py/tracer/test_cython.py, compiled
 * with `stackwatch config --cflags` and linked into cynative's extension:
 * cynative.pyx (Cython, profile=True) calls them, and c_apply calls back
 * into a Cython function, so the trace nests Python > Cython > native >
 * Cython > native.
 */
#include "cnative.h"

int c_leaf(int x) { return x + 1; }

int c_apply(int x, int (*cb)(int)) { return cb(c_leaf(x)); }
