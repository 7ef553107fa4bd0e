/*
 * render.c - render_trees(): call trees to collapsed stacks, speedscope
 * JSON or a pprof Profile message (see render.h).
 *
 * The writers want one function table. When every tree is of one snapshot
 * (they share a table: Sampler.thread_trees, Trace.trees), the trees are
 * written in place, held (sw_py_calltree_hold: merge() into them raises
 * meanwhile), so a trace's big trees are not copied; every function keeps
 * its id: speedscope's frames and pprof's locations are in the order the
 * snapshot first met them, unused ones included, as the profiler has
 * always written its own trees. Other trees are first copied onto one new
 * table, in the order given, with the GIL; functions are then numbered in
 * the order the trees first show them. The output is written without the
 * GIL.
 *
 * Given write=, the output goes to that Python callable through a stdio
 * stream of its own (fopencookie), a MiB at a time: the writers stream, so
 * what is held is the trees, never the text.
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
    sw_calltree **trees;     /* n trees on ft: copies, or with held the trees themselves */
    PyObject **held;         /* the CallTrees rendered in place (held), or NULL: copies */
    char **names;            /* names[i]: the name of trees[i], or NULL */
    uint64_t *pids;          /* pids[i]: the process of trees[i] (trees of several processes), or 0 */
    size_t n;
    const char *title;
    int exact;               /* the trees of an exact trace: own nanoseconds are the values */
    sw_pprof_opts opts;
} render;

/* Where the output goes: a Python callable given bytes a piece at a
 * time (write=), called with the GIL taken back for it (the writers run
 * without it), so that no output is ever held whole. */
typedef struct py_sink {
    PyObject *write;
    PyThreadState *saved;    /* the thread state while the GIL is released; NULL: held */
    int text;                /* write takes str (the output is ASCII), not bytes */
    int failed;              /* write raised: its exception stays set */
} py_sink;

static ssize_t sink_write(void *cookie, const char *buf, size_t size)
{
    py_sink *s = cookie;
    if (s->failed)
        return 0;
    if (s->saved)
        PyEval_RestoreThread(s->saved);
    PyObject *r = PyObject_CallFunction(s->write, s->text ? "s#" : "y#", buf, (Py_ssize_t)size);
    if (!r)
        s->failed = 1;
    Py_XDECREF(r);
    if (s->saved)
        s->saved = PyEval_SaveThread();
    return s->failed ? 0 : (ssize_t)size;
}

#define SINK_BUFFER (1u << 20)

/* A stream whose writes go to sink->write, or NULL with an exception. */
static FILE *sink_open(py_sink *sink)
{
    cookie_io_functions_t io = {NULL, sink_write, NULL, NULL};
    FILE *f = fopencookie(sink, "w", io);
    if (!f || setvbuf(f, NULL, _IOFBF, SINK_BUFFER) != 0) {
        if (f)
            fclose(f);
        PyErr_NoMemory();
        return NULL;
    }
    return f;
}

/* All trees merged, in the given order (one tree: itself). */
static int collapsed_fn(FILE *f, const render *r)
{
    if (r->n == 1)
        return sw_calltree_write_collapsed(r->trees[0], f, r->exact);
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

/* A "thread" label per named tree, a "pid" label per tree of a process;
 * not compressed. */
static int pprof_fn(FILE *f, const render *r)
{
    sw_pprof_tree *pt = calloc(r->n ? r->n : 1, sizeof *pt);
    if (!pt)
        return SW_ENOMEM;
    for (size_t i = 0; i < r->n; i++)
        pt[i] = (sw_pprof_tree){r->names[i], r->trees[i], r->pids[i]};
    int rc = sw_pprof_write_file(f, pt, r->n, &r->opts);
    free(pt);
    return rc;
}

/* The formats rendered here: the one list. */
static const struct {
    const char *name;
    int (*render)(FILE *f, const render *r);
    int every_tree_named;    /* a tree given without a name is called "Profile <i>" */
} formats[] = {
    {"collapsed", collapsed_fn, 0},
    {"speedscope", speedscope_fn, 1},
    {"pprof", pprof_fn, 0},
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

/* Renders into a memory stream: the output as bytes, or NULL with an
 * exception. */
static PyObject *render_to_bytes(size_t kind, const render *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return PyErr_NoMemory();
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = formats[kind].render(f, r);
    if (fclose(f) != 0 && rc == SW_OK)
        rc = SW_EIO;
    Py_END_ALLOW_THREADS
    PyObject *res = rc == SW_OK ? PyBytes_FromStringAndSize(buf, (Py_ssize_t)len) : NULL;
    if (rc != SW_OK)
        sw_py_tree_error(rc, "writing the profile");
    free(buf);
    return res;
}

/* Renders through write(bytes), a piece of at most SINK_BUFFER bytes at a
 * time: None, or NULL with an exception (write's own, if it raised). */
static PyObject *render_to_sink(size_t kind, const render *r, PyObject *write)
{
    py_sink sink = {write, NULL, 0, 0};
    FILE *f = sink_open(&sink);
    if (!f)
        return NULL;
    sink.saved = PyEval_SaveThread();
    int rc = formats[kind].render(f, r);
    if (fclose(f) != 0 && rc == SW_OK)
        rc = SW_EIO;
    PyEval_RestoreThread(sink.saved);
    if (sink.failed)
        return NULL;
    if (rc != SW_OK)
        return sw_py_tree_error(rc, "writing the profile"), NULL;
    Py_RETURN_NONE;
}

/* render_trees(format, trees, title="stackwatch profile", interval_ns=0,
 * time_ns=0, duration_ns=0, exact=False, mode="wall", write=None) -> bytes,
 * or None with write: the output is then given to write(bytes) a piece at
 * a time (at most 1 MiB each), never held whole (exact: the
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
                             "write", NULL};
    PyObject *write = Py_None;
    const char *fmt, *title = "stackwatch profile", *mode = "wall";
    PyObject *list;
    unsigned long long interval = 0;
    long long time_ns = 0, duration = 0;
    int exact = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO!|sKLLpsO:render_trees", kwlist, &fmt, &PyList_Type, &list, &title,
                                     &interval, &time_ns, &duration, &exact, &mode, &write))
        return NULL;
    if (write != Py_None && !PyCallable_Check(write)) {
        PyErr_SetString(PyExc_TypeError, "write must be callable or None");
        return NULL;
    }
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
    /* Trees of one snapshot (one table) are rendered in place, held;
     * others are copied onto one new table. */
    render r = {shared ? (sw_functab *)shared : sw_functab_new(),
                PyMem_Calloc(n ? (size_t)n : 1, sizeof(sw_calltree *)),
                shared ? PyMem_Calloc((size_t)n, sizeof(PyObject *)) : NULL,
                PyMem_Calloc(n ? (size_t)n : 1, sizeof(char *)), PyMem_Calloc(n ? (size_t)n : 1, sizeof(uint64_t)), 0,
                title, exact,
                {interval, time_ns, duration, title, exact ? "calls" : NULL, mode}};
    PyObject *res = NULL;
    if (!r.ft || !r.trees || !r.names || !r.pids || (shared && !r.held)) {
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
        int rc = SW_OK;
        if (r.held) {
            r.held[i] = PyTuple_GET_ITEM(item, 1);
            sw_py_calltree_hold(r.held[i], 1);
            r.trees[i] = tree;
            r.n++;
        } else {
            /* Copies over one function table (the writers want one). */
            r.trees[i] = sw_calltree_new(r.ft);
            r.n++;
            rc = r.trees[i] ? sw_calltree_merge(r.trees[i], tree) : SW_ENOMEM;
        }
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
    res = write == Py_None ? render_to_bytes(kind, &r) : render_to_sink(kind, &r, write);
done:
    for (size_t i = 0; i < r.n; i++) {
        if (r.held)
            sw_py_calltree_hold(r.held[i], 0);
        else
            sw_calltree_free(r.trees[i]);
        free(r.names[i]);
    }
    PyMem_Free(r.trees);
    PyMem_Free(r.held);
    PyMem_Free(r.names);
    PyMem_Free(r.pids);
    if (!shared)
        sw_functab_free(r.ft);
    return res;
}

/* render_flat(tree, frames, write): the flame graph page's nodes of a
 * CallTree (sw_calltree_write_flat), given to write(str) a piece at a time
 * (at most 1 MiB each); frames[i] is the page's frame of function id i.
 * The tree is not copied: the GIL stays held. */
static PyObject *render_flat(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *obj, *frames, *write;
    if (!PyArg_ParseTuple(args, "OO!O:render_flat", &obj, &PyList_Type, &frames, &write))
        return NULL;
    const sw_calltree *t = sw_py_calltree_get(obj);
    if (!t)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(frames);
    uint32_t *map = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *map);
    if (!map)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long v = PyLong_AsUnsignedLong(PyList_GET_ITEM(frames, i));
        if ((v == (unsigned long)-1 && PyErr_Occurred()) || v > UINT32_MAX) {
            PyMem_Free(map);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_OverflowError, "a frame index is too large");
            return NULL;
        }
        map[i] = (uint32_t)v;
    }
    py_sink sink = {write, NULL, 1, 0};
    FILE *f = sink_open(&sink);
    sw_py_calltree_hold(obj, 1);   /* write may let other threads run */
    int rc = f ? sw_calltree_write_flat(t, f, map, (uint32_t)n) : SW_OK;
    if (f && fclose(f) != 0 && rc == SW_OK)
        rc = SW_EIO;
    sw_py_calltree_hold(obj, 0);
    PyMem_Free(map);
    if (!f || sink.failed)
        return NULL;
    if (rc != SW_OK)
        return sw_py_tree_error(rc, "writing the flame graph's nodes"), NULL;
    Py_RETURN_NONE;
}

static PyMethodDef functions[] = {
    {"render_flat", render_flat, METH_VARARGS,
     "render_flat(tree, frames, write): the flame graph page's flat nodes of a CallTree, given to write(str) a "
     "piece at a time; frames[function id] is the page's frame"},
    {"render_trees", (PyCFunction)(void (*)(void))render_trees, METH_VARARGS | METH_KEYWORDS,
     "render_trees(format, [(name, CallTree[, pid])], title=..., interval_ns=0, time_ns=0, duration_ns=0, "
     "exact=False, mode='wall', write=None) -> bytes, or None with write (called with the output a piece at a "
     "time); exact: trees of a trace, whose values are calls and own nanoseconds; mode: "
     "what a sample's time measures, 'wall' or 'cpu'"},
    {NULL, NULL, 0, NULL},
};

int sw_render_add_to_module(PyObject *m)
{
    return PyModule_AddFunctions(m, functions);
}
