/*
 * render.c - render_trees(): call trees to collapsed stacks, speedscope
 * JSON or a pprof Profile message (see render.h).
 *
 * The trees are first copied onto one new function table, in the order
 * given (the writers want one table), with the GIL; the output is then
 * written without it, from those private copies. The new table starts
 * empty, so functions are numbered in the order the trees first show them;
 * but when every tree is of one snapshot of a profile (they share a table:
 * Sampler.thread_trees), it starts as a copy of that table, so every
 * function keeps the id it has in the profile: speedscope's frames and
 * pprof's locations are then in the order the profile first sampled them,
 * unused ones included, as the profiler has always written its own trees.
 */
#include "render.h"

#include "calltree_type.h"

#include "base/base.h"
#include "profile/profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct render {
    sw_functab *ft;
    sw_calltree **trees;     /* n copies on ft */
    char **names;            /* names[i]: the name of trees[i], or NULL */
    uint64_t *pids;          /* pids[i]: the process of trees[i] (trees of several processes), or 0 */
    size_t n;
    const char *title;
    int exact;               /* the trees of an exact trace: own nanoseconds are the values */
    sw_pprof_opts opts;
} render;

/* Runs fn on a memory stream and appends what it wrote to out. */
static int write_mem(int (*fn)(FILE *, const render *), const render *r, sw_bytes *out)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return SW_ENOMEM;
    int rc = fn(f, r);
    if (fclose(f) != 0 && rc == SW_OK)
        rc = SW_EIO;
    if (rc == SW_OK && sw_bytes_put(out, buf, len) != SW_OK)
        rc = SW_ENOMEM;
    free(buf);
    return rc;
}

/* All trees merged, in the given order. */
static int collapsed_fn(FILE *f, const render *r)
{
    sw_calltree *all = sw_calltree_new(r->ft);
    int rc = all ? SW_OK : SW_ENOMEM;
    for (size_t i = 0; rc == SW_OK && i < r->n; i++)
        rc = sw_calltree_merge(all, r->trees[i]);
    if (rc == SW_OK)
        rc = sw_calltree_write_collapsed(all, f, r->exact);
    sw_calltree_free(all);
    return rc;
}

/* One profile per tree; with no tree, one empty profile keeps the file
 * valid. */
static int speedscope_fn(FILE *f, const render *r)
{
    sw_speedscope_profile *profs = calloc(r->n ? r->n : 1, sizeof *profs);
    sw_calltree *empty = NULL;
    if (!profs)
        return SW_ENOMEM;
    for (size_t i = 0; i < r->n; i++)
        profs[i] = (sw_speedscope_profile){r->names[i], r->trees[i]};
    size_t n = r->n;
    if (n == 0) {
        empty = sw_calltree_new(r->ft);
        profs[0] = (sw_speedscope_profile){"(no samples)", empty};
        n = 1;
    }
    int rc = n && profs[0].tree ? sw_speedscope_write(f, r->title, profs, n, "nanoseconds", 0, "stackwatch")
                                : SW_ENOMEM;
    sw_calltree_free(empty);
    free(profs);
    return rc;
}

static int render_collapsed(const render *r, sw_bytes *out)
{
    return write_mem(collapsed_fn, r, out);
}

static int render_speedscope(const render *r, sw_bytes *out)
{
    return write_mem(speedscope_fn, r, out);
}

/* A "thread" label per named tree, a "pid" label per tree of a process;
 * not compressed. */
static int render_pprof(const render *r, sw_bytes *out)
{
    sw_pprof_tree *pt = calloc(r->n ? r->n : 1, sizeof *pt);
    if (!pt)
        return SW_ENOMEM;
    for (size_t i = 0; i < r->n; i++)
        pt[i] = (sw_pprof_tree){r->names[i], r->trees[i], r->pids[i]};
    int rc = sw_pprof_write(out, pt, r->n, &r->opts);
    free(pt);
    return rc;
}

/* The formats rendered here: the one list. */
static const struct {
    const char *name;
    int (*render)(const render *r, sw_bytes *out);
    int every_tree_named;    /* a tree given without a name is called "Profile <i>" */
} formats[] = {
    {"collapsed", render_collapsed, 0},
    {"speedscope", render_speedscope, 1},
    {"pprof", render_pprof, 0},
};
#define NFORMATS (sizeof formats / sizeof formats[0])

static void unknown_format(const char *fmt)
{
    char names[128] = "";
    for (size_t i = 0; i < NFORMATS; i++) {
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", formats[i].name);
    }
    PyErr_Format(PyExc_ValueError, "unknown format '%s' (choose from: %s)", fmt, names);
}

/* render_trees(format, trees, title="stackwatch profile", interval_ns=0,
 * time_ns=0, duration_ns=0, exact=False, mode="wall") -> bytes (exact: the
 * trees of a trace; mode: what the weights are, "wall" or "cpu" time;
 * pprof names it). trees: [(name or None, CallTree)] or [(name or None,
 * CallTree, pid)] (trees of several processes).
 * "collapsed": all trees merged (in the given order); "speedscope": one
 * profile per tree; "pprof": the uncompressed Profile message, a "thread"
 * label per tree with a name, a numeric "pid" label per tree with a pid. */
static PyObject *render_trees(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"format", "trees", "title", "interval_ns", "time_ns", "duration_ns", "exact", "mode",
                             NULL};
    const char *fmt, *title = "stackwatch profile", *mode = "wall";
    PyObject *list;
    unsigned long long interval = 0;
    long long time_ns = 0, duration = 0;
    int exact = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO!|sKLLps:render_trees", kwlist, &fmt, &PyList_Type, &list, &title,
                                     &interval, &time_ns, &duration, &exact, &mode))
        return NULL;
    if (strcmp(mode, "wall") != 0 && strcmp(mode, "cpu") != 0) {
        PyErr_Format(PyExc_ValueError, "mode must be 'wall' or 'cpu', not '%s'", mode);
        return NULL;
    }
    size_t kind = 0;
    while (kind < NFORMATS && strcmp(fmt, formats[kind].name) != 0)
        kind++;
    if (kind == NFORMATS) {
        unknown_format(fmt);
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    const sw_functab *shared = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        const sw_functab *t = PyTuple_Check(item) && PyTuple_GET_SIZE(item) >= 2
                                  ? sw_py_calltree_shared_table(PyTuple_GET_ITEM(item, 1))
                                  : NULL;
        shared = i == 0 || t == shared ? t : NULL;
        if (!shared)
            break;
    }
    render r = {shared ? sw_py_functab_copy(shared) : sw_functab_new(),
                PyMem_Calloc(n ? (size_t)n : 1, sizeof(sw_calltree *)),
                PyMem_Calloc(n ? (size_t)n : 1, sizeof(char *)), PyMem_Calloc(n ? (size_t)n : 1, sizeof(uint64_t)), 0,
                title, exact,
                {interval, time_ns, duration, title, exact ? "calls" : NULL, mode}};
    PyObject *res = NULL;
    sw_bytes out = {0};
    if (!r.ft || !r.trees || !r.names || !r.pids) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i), *name;
        sw_calltree *tree = NULL;
        unsigned long long pid = 0;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 2 || PyTuple_GET_SIZE(item) > 3 ||
            ((name = PyTuple_GET_ITEM(item, 0)) != Py_None && !PyUnicode_Check(name)) ||
            !(tree = sw_py_calltree_get(PyTuple_GET_ITEM(item, 1))) ||
            (PyTuple_GET_SIZE(item) == 3 &&
             ((pid = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(item, 2))) == (unsigned long long)-1 &&
              PyErr_Occurred()))) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "trees must be a list of (name or None, CallTree[, pid])");
            goto done;
        }
        r.pids[i] = pid;
        /* A name with lone surrogates (a thread named from undecodable
         * bytes) is written with them escaped, as the HTML page does. */
        PyObject *utf8 = name == Py_None ? NULL : PyUnicode_AsEncodedString(name, "utf-8", "backslashreplace");
        if (name != Py_None && !utf8)
            goto done;
        const char *s = utf8 ? PyBytes_AS_STRING(utf8) : NULL;
        /* Copies over one function table (the writers want one). */
        r.trees[i] = sw_calltree_new(r.ft);
        r.n++;
        int rc = r.trees[i] ? sw_calltree_merge(r.trees[i], tree) : SW_ENOMEM;
        if (rc == SW_OK && s && !(r.names[i] = strdup(s)))
            rc = SW_ENOMEM;
        Py_XDECREF(utf8);
        if (rc != SW_OK) {
            sw_py_tree_error(rc, "copying a call tree");
            goto done;
        }
        if (!s && formats[kind].every_tree_named) {
            char buf[32];
            snprintf(buf, sizeof buf, "Profile %zd", i + 1);
            if (!(r.names[i] = strdup(buf))) {
                PyErr_NoMemory();
                goto done;
            }
        }
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = formats[kind].render(&r, &out);
    Py_END_ALLOW_THREADS
    if (rc != SW_OK)
        sw_py_tree_error(rc, "writing the profile");
    else
        res = PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.len);
done:
    sw_bytes_free(&out);
    for (size_t i = 0; i < r.n; i++) {
        sw_calltree_free(r.trees[i]);
        free(r.names[i]);
    }
    PyMem_Free(r.trees);
    PyMem_Free(r.names);
    PyMem_Free(r.pids);
    sw_functab_free(r.ft);
    return res;
}

static PyMethodDef functions[] = {
    {"render_trees", (PyCFunction)(void (*)(void))render_trees, METH_VARARGS | METH_KEYWORDS,
     "render_trees(format, [(name, CallTree[, pid])], title=..., interval_ns=0, time_ns=0, duration_ns=0, exact=False, "
     "mode='wall') -> bytes (exact: trees of a trace, whose values are calls and own nanoseconds; mode: "
     "what a sample's time measures, 'wall' or 'cpu')"},
    {NULL, NULL, 0, NULL},
};

int sw_render_add_to_module(PyObject *m)
{
    return PyModule_AddFunctions(m, functions);
}
