/*
 * trace_tree_view.c - trace_trees(): one replay of each thread of a trace
 * (through its filter, the GIL released, progress told) into call trees on
 * one function table, handed to Python as CallTree objects sharing it.
 */
#include "trace_tree_view.h"

#include "calltree_type.h"

#include "ext/tracefile/trace_type.h"

#include "base/base.h"
#include "profile/profile.h"
#include "trace/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* What a node of the trees costs: the node and its index slot (8 bytes
 * in a table at most 3/4 full, doubled when it is: 16 on average). */
#define NODE_BYTES (sizeof(sw_calltree_node) + 16)

/* The default budget of nodes: half the machine's memory. */
static size_t default_max_nodes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0)
        return 0;
    return (size_t)pages / 2 * (size_t)size / NODE_BYTES;
}

/* trace_trees(trace, filter=None, progress=None, max_nodes=None) ->
 * [(thread_pos, CallTree)] for each thread the filter keeps: a node per
 * call path, its self the calls of that path, self_time its own
 * nanoseconds. Trees of more than max_nodes nodes together (None: as many
 * as half the machine's memory holds; 0: no limit) raise MemoryError with
 * a one-line message naming the filters that make them smaller. */
static PyObject *trace_trees(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"trace", "filter", "progress", "max_nodes", NULL};
    PyObject *obj, *spec = Py_None, *progress = Py_None, *limit = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOO:trace_trees", kwlist, &obj, &spec, &progress, &limit))
        return NULL;
    size_t max_nodes = limit == Py_None ? default_max_nodes() : PyLong_AsSize_t(limit);
    if (max_nodes == (size_t)-1 && PyErr_Occurred())
        return NULL;
    sw_trace *t = sw_py_trace_get(obj);
    if (!t)
        return NULL;
    sw_py_filter pf;
    if (sw_py_filter_parse(spec, t, &pf) < 0)
        return NULL;
    size_t n = sw_trace_thread_count(t);
    sw_calltree **trees = calloc(n ? n : 1, sizeof *trees);
    sw_functab *ft = sw_functab_new();
    if (!trees || !ft) {
        free(trees);
        sw_functab_free(ft);
        sw_py_filter_free(&pf);
        return PyErr_NoMemory();
    }
    sw_py_progress pr;
    sw_py_progress_begin(&pr, t, progress);
    int rc = sw_trace_trees(t, &pf.f, ft, max_nodes, trees);
    int raised = sw_py_progress_end(&pr);
    sw_py_filter_free(&pf);
    if (raised < 0 || rc) {
        for (size_t i = 0; i < n; i++)
            sw_calltree_free(trees[i]);
        free(trees);
        sw_functab_free(ft);
        if (raised < 0)
            return NULL;
        if (rc == SW_ENOMEM) {
            char budget[96] = "";
            if (max_nodes)
                snprintf(budget, sizeof budget, " (over %zu nodes, the limit: %zu MB)", max_nodes,
                         max_nodes * NODE_BYTES >> 20);
            PyErr_Format(PyExc_MemoryError,
                         "the call trees of the trace are too large%s: make them smaller with "
                         "--max-depth N, --thread, --include/--exclude or --start/--stop",
                         budget);
            return NULL;
        }
        sw_py_tree_error(rc, "building the call trees of the trace");
        return NULL;
    }
    /* The kept threads' trees, packed, and their positions. */
    PyObject *pos = PyList_New(0);
    size_t k = 0;
    for (size_t i = 0; pos && i < n; i++) {
        if (!trees[i])
            continue;
        PyObject *p = PyLong_FromSize_t(i);
        if (!p || PyList_Append(pos, p) < 0)
            Py_CLEAR(pos);
        Py_XDECREF(p);
        trees[k++] = trees[i];
    }
    if (!pos) {
        for (size_t i = 0; i < k; i++)
            sw_calltree_free(trees[i]);
        free(trees);
        sw_functab_free(ft);
        return NULL;
    }
    PyObject *list = sw_py_calltree_list_shared(ft, trees, k);   /* takes ft and the trees */
    free(trees);
    PyObject *res = list ? PyList_New((Py_ssize_t)k) : NULL;
    for (size_t i = 0; res && i < k; i++) {
        PyObject *pair = PyTuple_Pack(2, PyList_GET_ITEM(pos, i), PyList_GET_ITEM(list, i));
        if (!pair)
            Py_CLEAR(res);
        else
            PyList_SET_ITEM(res, (Py_ssize_t)i, pair);
    }
    Py_DECREF(pos);
    Py_XDECREF(list);
    return res;
}

static PyMethodDef functions[] = {
    {"trace_trees", (PyCFunction)(void (*)(void))trace_trees, METH_VARARGS | METH_KEYWORDS,
     "trace_trees(trace, filter=None, progress=None, max_nodes=None) -> [(thread_pos, CallTree)] of an exact "
     "trace (self: calls, self_time_ns: own time); more than max_nodes nodes (None: half the memory's worth) "
     "raise MemoryError"},
    {NULL, NULL, 0, NULL},
};

int sw_trace_tree_view_add_to_module(PyObject *m)
{
    if (PyModule_AddIntConstant(m, "CALLTREE_NODE_BYTES", (long)NODE_BYTES) < 0)
        return -1;
    return PyModule_AddFunctions(m, functions);
}
