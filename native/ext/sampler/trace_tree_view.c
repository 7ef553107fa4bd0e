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

#include <stdlib.h>

/* trace_trees(trace, filter=None, progress=None) -> [(thread_pos,
 * CallTree)] for each thread the filter keeps: a node per call path, its
 * self the calls of that path, self_time its own nanoseconds. */
static PyObject *trace_trees(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"trace", "filter", "progress", NULL};
    PyObject *obj, *spec = Py_None, *progress = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:trace_trees", kwlist, &obj, &spec, &progress))
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
    int rc = sw_trace_trees(t, &pf.f, ft, trees);
    int raised = sw_py_progress_end(&pr);
    sw_py_filter_free(&pf);
    if (raised < 0 || rc) {
        for (size_t i = 0; i < n; i++)
            sw_calltree_free(trees[i]);
        free(trees);
        sw_functab_free(ft);
        if (raised < 0)
            return NULL;
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
     "trace_trees(trace, filter=None, progress=None) -> [(thread_pos, CallTree)] of an exact trace "
     "(self: calls, self_time_ns: own time)"},
    {NULL, NULL, 0, NULL},
};

int sw_trace_tree_view_add_to_module(PyObject *m)
{
    return PyModule_AddFunctions(m, functions);
}
