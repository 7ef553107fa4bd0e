/*
 * test_entry_points.h - entry points of the sampler's room that exist only
 * for the tests in tests/py (differential tests against CPython), not for
 * users; their names start with "_". Today: the line-table decoder
 * (native/procmem/linetable.c) on a real code object's table, compared with
 * co_lines() / dis.findlinestarts() in test_profiler_lines.py.
 *
 *   _native._linetable_lines(kind, table, firstlineno, nbytes)
 *       -> [line of byte offset 0, 2, 4, ... < nbytes] (-1: no line)
 *   _native.LINETABLE_KIND: the kind this Python's tables use
 *
 * Includes Python.h.
 */
#ifndef SW_TEST_ENTRY_POINTS_H
#define SW_TEST_ENTRY_POINTS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Adds the entry points to the module. Returns 0, or -1 with an exception. */
int sw_test_entry_points_add_to_module(PyObject *m);

#endif
