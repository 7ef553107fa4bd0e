/*
 * trace_tree_view.h - stackwatch._native.trace_trees(trace, filter=None,
 * progress=None, max_nodes=None): the call trees of an exact trace
 * (native/trace/trace_trees.h) as CallTree objects, so that the registry
 * of formats (src/stackwatch/render/formats.py) writes a trace as it
 * writes a profile's trees; and CALLTREE_NODE_BYTES, what a node of them
 * costs (its struct and index slot), the unit of their memory. Includes
 * Python.h.
 */
#ifndef SW_TRACE_TREE_VIEW_H
#define SW_TRACE_TREE_VIEW_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Adds trace_trees and CALLTREE_NODE_BYTES to the module. Returns 0, or -1 with an exception. */
int sw_trace_tree_view_add_to_module(PyObject *m);

#endif
