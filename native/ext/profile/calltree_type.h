/*
 * calltree_type.h - the type stackwatch._native.CallTree: one call tree
 * (native/profile/calltree.h) as a Python object, and a call tree as nested
 * dicts. Includes Python.h.
 *
 * A CallTree usually owns its function table, so it outlives whatever it
 * was made from (a running profile, a file); merging interns across
 * tables. The CallTrees of one snapshot of a profile (Sampler.thread_trees)
 * share one table instead, a copy of the profile's with the same function
 * ids, so that rendering them together (render.c) keeps those ids.
 */
#ifndef SW_CALLTREE_TYPE_H
#define SW_CALLTREE_TYPE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "profile/profile.h"

/* Adds the type CallTree to the module. Returns 0, or -1 with an exception. */
int sw_calltree_type_add_to_module(PyObject *m);

/* A new empty CallTree with a table of its own, or NULL with an exception. */
PyObject *sw_py_calltree_new(void);

/* The tree of a CallTree object (borrowed: it lives as long as obj), or
 * NULL with a TypeError if obj is not a CallTree. */
sw_calltree *sw_py_calltree_get(PyObject *obj);

/* Holds (hold 1) or releases (hold 0) the CallTree obj for a writer that
 * reads it while Python code may run (a write callback, or without the
 * GIL): a reference, and until released merge() into it, or into a tree
 * sharing its table, raises RuntimeError, so that neither its nodes nor
 * its table change under the writer. Needs the GIL. */
void sw_py_calltree_hold(PyObject *obj, int hold);

/* The table obj shares with the other CallTrees of its snapshot, or NULL
 * when obj has a table of its own (or is not a CallTree). */
const sw_functab *sw_py_calltree_shared_table(PyObject *obj);

/* A list of n CallTree objects for trees[0..n-1], all on the table ft,
 * which they share (a snapshot). Takes ownership of ft and of every tree,
 * also on failure. Returns NULL with an exception on failure. */
PyObject *sw_py_calltree_list_shared(sw_functab *ft, sw_calltree **trees, size_t n);

/* A copy of ft in which every function has the id it has in ft. NULL if out
 * of memory. Needs no GIL (plain C). */
sw_functab *sw_py_functab_copy(const sw_functab *ft);

/* The tree as nested dicts {"name", "filename", "line", "count", "self",
 * "time_ns", "self_time_ns", "children": [...]} (plus "native": True on a
 * native frame's node), the root named "<root>". NULL with an exception. */
PyObject *sw_py_tree_to_dicts(const sw_calltree *t);

/* Raises the Python exception for an SW_E* code from work on call trees
 * ("<what> failed (<reason>)"; MemoryError for SW_ENOMEM). Returns -1. */
int sw_py_tree_error(int rc, const char *what);

#endif
