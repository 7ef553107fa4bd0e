/*
 * calltree_type.c - stackwatch._native.CallTree, stackwatch._native.
 * ProfileFile, read_profile(), render_trees(), and the history helpers of
 * sampler.c (see calltree_type.h).
 *
 * A CallTree owns its function table, so it outlives whatever it was made
 * from (a running profile, a file); merging interns across tables. Work on
 * a running profile's history is done under the profile's lock without
 * the GIL (the sampler thread never needs the GIL, so it cannot deadlock).
 */
#include "calltree_type.h"

#include "ext/shared/pyerr.h"

#include "base/bytes.h"
#include "profile/pprof.h"
#include "profile/profile_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- CallTree ---- */

typedef struct {
    PyObject_HEAD
    sw_functab *ft;
    sw_calltree *t;
} CallTreeObject;

static PyTypeObject CallTreeType;

static PyObject *CallTree_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, ":CallTree", kwlist))
        return NULL;
    CallTreeObject *self = (CallTreeObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->ft = sw_functab_new();
    self->t = self->ft ? sw_calltree_new(self->ft) : NULL;
    if (!self->t) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static CallTreeObject *new_tree(void)
{
    PyObject *args = PyTuple_New(0);
    PyObject *t = args ? CallTree_new(&CallTreeType, args, NULL) : NULL;
    Py_XDECREF(args);
    return (CallTreeObject *)t;
}

static void CallTree_dealloc(CallTreeObject *self)
{
    sw_calltree_free(self->t);
    sw_functab_free(self->ft);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int raise_rc(int rc, const char *what)
{
    sw_pyerr(rc, PyExc_RuntimeError, "%s failed (%s)", what, sw_strerror(rc));
    return -1;
}

/* merge(*trees): adds every sample of the given CallTrees to this one. */
static PyObject *CallTree_merge(CallTreeObject *self, PyObject *args)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyObject_TypeCheck(PyTuple_GET_ITEM(args, i), &CallTreeType)) {
            PyErr_Format(PyExc_TypeError, "merge() takes CallTree objects, not %.100s",
                         Py_TYPE(PyTuple_GET_ITEM(args, i))->tp_name);
            return NULL;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        CallTreeObject *o = (CallTreeObject *)PyTuple_GET_ITEM(args, i);
        int rc;
        if (o == self) {
            /* Merging a tree into itself: through a copy. */
            sw_calltree *copy = sw_calltree_new(self->ft);
            rc = copy ? sw_calltree_merge(copy, self->t) : SW_ENOMEM;
            if (rc == SW_OK)
                rc = sw_calltree_merge(self->t, copy);
            sw_calltree_free(copy);
        } else {
            rc = sw_calltree_merge(self->t, o->t);
        }
        if (rc != SW_OK) {
            raise_rc(rc, "merging call trees");
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

static PyObject *CallTree_tree(CallTreeObject *self, PyObject *unused)
{
    (void)unused;
    return tree_to_dicts(self->t);
}

static PyObject *CallTree_get_total(CallTreeObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(sw_calltree_total(self->t));
}

static PyObject *CallTree_get_nodes(CallTreeObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(sw_calltree_node_count(self->t));
}

static PyMethodDef CallTree_methods[] = {
    {"merge", (PyCFunction)CallTree_merge, METH_VARARGS, "merge(*trees): add the samples of other CallTrees"},
    {"tree", (PyCFunction)CallTree_tree, METH_NOARGS,
     "tree() -> nested dicts {name, filename, line, count, self, time_ns, self_time_ns, children}"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef CallTree_getset[] = {
    {"total", (getter)CallTree_get_total, NULL, "number of samples", NULL},
    {"nodes", (getter)CallTree_get_nodes, NULL, "number of nodes, the root included", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CallTreeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stackwatch._native.CallTree",
    .tp_basicsize = sizeof(CallTreeObject),
    .tp_dealloc = (destructor)CallTree_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "CallTree(): a call tree of samples with its own function table (empty when made).",
    .tp_methods = CallTree_methods,
    .tp_getset = CallTree_getset,
    .tp_new = CallTree_new,
};

/* ---- history queries, on a live profile (lock != NULL) or a file ---- */

/* {"entries": [{start_ns, end_ns, samples, threads}], "evicted": n,
 * "evicted_samples": n, "dropped": n} */
static PyObject *entries_of(const sw_history *h, unsigned long long dropped)
{
    PyObject *l = PyList_New(0);
    for (size_t i = 0; l && h && i < sw_history_len(h); i++) {
        const sw_history_entry *e = sw_history_get(h, i);
        PyObject *tids = PyList_New((Py_ssize_t)e->ntrees);
        for (size_t k = 0; tids && k < e->ntrees; k++) {
            PyObject *v = PyLong_FromUnsignedLongLong(e->trees[k].thread_id);
            if (!v) {
                Py_CLEAR(tids);
                break;
            }
            PyList_SET_ITEM(tids, (Py_ssize_t)k, v);
        }
        PyObject *d = tids ? Py_BuildValue("{s:L,s:L,s:K,s:N}", "start_ns", (long long)e->start_ns, "end_ns",
                                           (long long)e->end_ns, "samples", (unsigned long long)e->samples,
                                           "threads", tids)
                           : NULL;
        if (!d || PyList_Append(l, d) < 0)
            Py_CLEAR(l);
        Py_XDECREF(d);
    }
    if (!l)
        return NULL;
    return Py_BuildValue("{s:N,s:K,s:K,s:K}", "entries", l, "evicted",
                         (unsigned long long)(h ? sw_history_evicted(h) : 0), "evicted_samples",
                         (unsigned long long)(h ? sw_history_evicted_samples(h) : 0), "dropped", dropped);
}

static PyObject *window_of(const sw_history *h, sw_profile *lock, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"start_ns", "stop_ns", "thread_id", NULL};
    long long start, stop;
    PyObject *tid_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "LL|O:window", kwlist, &start, &stop, &tid_obj))
        return NULL;
    unsigned long long tid = 0;
    if (tid_obj != Py_None) {
        tid = PyLong_AsUnsignedLongLong(tid_obj);
        if (PyErr_Occurred())
            return NULL;
    }
    CallTreeObject *res = new_tree();
    if (!res)
        return NULL;
    int rc = SW_OK;
    if (h) {
        Py_BEGIN_ALLOW_THREADS
        if (lock)
            sw_profile_lock(lock);
        rc = sw_history_window(h, start, stop, tid_obj == Py_None, tid, res->t);
        if (lock)
            sw_profile_unlock(lock);
        Py_END_ALLOW_THREADS
    }
    if (rc != SW_OK) {
        Py_DECREF(res);
        raise_rc(rc, "merging the history's trees");
        return NULL;
    }
    return (PyObject *)res;
}

PyObject *sw_py_history_entries(sw_profile *p)
{
    if (!p)
        return entries_of(NULL, 0);
    sw_profile_lock(p);
    PyObject *l = entries_of(sw_profile_history(p), sw_profile_history_dropped(p));
    sw_profile_unlock(p);
    return l;
}

PyObject *sw_py_history_window(sw_profile *p, PyObject *args, PyObject *kw)
{
    return window_of(p ? sw_profile_history(p) : NULL, p, args, kw);
}

/* ---- history options of a Sampler ---- */

void sw_history_opts_clear(sw_history_opts *o)
{
    for (size_t i = 0; i < o->nomit; i++)
        PyMem_RawFree(o->omit[i]);
    PyMem_RawFree(o->omit);
    memset(o, 0, sizeof *o);
}

int sw_history_opts_parse(sw_history_opts *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"cycle_ns", "maxlen", "omit", NULL};
    long long cycle;
    unsigned long long maxlen;
    PyObject *omit = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "LK|O:set_history", kwlist, &cycle, &maxlen, &omit))
        return -1;
    if (cycle < 0) {
        PyErr_SetString(PyExc_ValueError, "cycle_ns must not be negative");
        return -1;
    }
    PyObject *seq = omit ? PySequence_Fast(omit, "omit must be a sequence of str") : NULL;
    if (omit && !seq)
        return -1;
    Py_ssize_t n = seq ? PySequence_Fast_GET_SIZE(seq) : 0;
    if (n > SW_PROFILE_MAX_OMIT) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "at most %d omit patterns", SW_PROFILE_MAX_OMIT);
        return -1;
    }
    sw_history_opts no = {cycle, maxlen, PyMem_RawCalloc(n ? (size_t)n : 1, sizeof(char *)), 0};
    if (!no.omit) {
        Py_XDECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *g = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t len;
        const char *s = PyUnicode_Check(g) ? PyUnicode_AsUTF8AndSize(g, &len) : NULL;
        if (!s) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "omit patterns must be str");
            sw_history_opts_clear(&no);
            Py_DECREF(seq);
            return -1;
        }
        if (!(no.omit[i] = PyMem_RawMalloc((size_t)len + 1))) {
            sw_history_opts_clear(&no);
            Py_DECREF(seq);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(no.omit[i], s, (size_t)len + 1);
        no.nomit++;
    }
    Py_XDECREF(seq);
    sw_history_opts_clear(o);
    *o = no;
    return 0;
}

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int sw_history_opts_apply(const sw_history_opts *o, sw_profile *p)
{
    int64_t mono = clock_ns(CLOCK_MONOTONIC);
    int64_t offset = clock_ns(CLOCK_REALTIME) - mono;
    int rc = sw_profile_set_history(p, o->cycle_ns, (size_t)o->maxlen, offset, mono);
    if (rc == SW_OK && o->nomit)
        rc = sw_profile_set_omit(p, (const char *const *)o->omit, o->nomit);
    return rc;
}

void sw_history_stopped(sw_profile *p)
{
    if (p)
        sw_profile_end_history(p, clock_ns(CLOCK_MONOTONIC));
}

/* ---- profile files ---- */

static int dict_ull(PyObject *d, const char *key, unsigned long long *out)
{
    PyObject *v = PyDict_GetItemString(d, key);   /* borrowed */
    if (!v || v == Py_None)
        return 0;
    *out = PyLong_AsUnsignedLongLong(v);
    return PyErr_Occurred() ? -1 : 0;
}

static int dict_ll(PyObject *d, const char *key, long long *out)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v || v == Py_None)
        return 0;
    *out = PyLong_AsLongLong(v);
    return PyErr_Occurred() ? -1 : 0;
}

PyObject *sw_py_profile_file_bytes(sw_profile *p, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"info", "threads", NULL};
    PyObject *info, *threads;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!:save_bytes", kwlist, &PyDict_Type, &info, &PyList_Type,
                                     &threads))
        return NULL;
    if (!p) {
        PyErr_SetString(PyExc_RuntimeError, "this profiler has not been started");
        return NULL;
    }
    sw_prof_info in;
    memset(&in, 0, sizeof in);
    unsigned long long u[6] = {0};
    long long start = 0, stop = 0;
    PyObject *mode = PyDict_GetItemString(info, "mode");
    const char *ms = mode && PyUnicode_Check(mode) ? PyUnicode_AsUTF8(mode) : "wall";
    if (!ms || dict_ull(info, "interval_ns", &u[0]) < 0 || dict_ull(info, "cycle_ns", &u[1]) < 0 ||
        dict_ull(info, "maxlen", &u[2]) < 0 || dict_ull(info, "failed", &u[3]) < 0 ||
        dict_ull(info, "missed", &u[4]) < 0 || dict_ll(info, "start_ns", &start) < 0 ||
        dict_ll(info, "stop_ns", &stop) < 0)
        return NULL;
    snprintf(in.mode, sizeof in.mode, "%s", ms);
    in.interval_ns = u[0];
    in.cycle_ns = u[1];
    in.maxlen = u[2];
    in.failed = u[3];
    in.missed = u[4];
    in.start_ns = start;
    in.stop_ns = stop;
    Py_ssize_t n = PyList_GET_SIZE(threads);
    sw_prof_thread *th = PyMem_Calloc(n ? (size_t)n : 1, sizeof *th);
    PyObject **names = PyMem_Calloc(n ? (size_t)n : 1, sizeof *names);
    PyObject *res = NULL;
    if (!th || !names) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyList_GET_ITEM(threads, i);
        if (!PyDict_Check(d)) {
            PyErr_SetString(PyExc_TypeError, "threads must be a list of dicts");
            goto done;
        }
        unsigned long long v[6] = {0};
        if (dict_ull(d, "thread_id", &v[0]) < 0 || dict_ull(d, "native_id", &v[1]) < 0 ||
            dict_ull(d, "samples", &v[2]) < 0 || dict_ull(d, "off_cpu", &v[3]) < 0 ||
            dict_ull(d, "cpu_ns", &v[4]) < 0)
            goto done;
        PyObject *nm = PyDict_GetItemString(d, "name");
        names[i] = nm && PyUnicode_Check(nm) ? PyUnicode_AsEncodedString(nm, "utf-8", "replace")
                                              : PyBytes_FromString("");
        if (!names[i])
            goto done;
        th[i] = (sw_prof_thread){v[0], v[1], PyBytes_AS_STRING(names[i]), v[2], v[3], v[4]};
    }
    sw_bytes out = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    sw_profile_lock(p);
    in.samples = sw_profile_samples(p);
    in.dropped = sw_profile_dropped(p);
    in.cut = sw_profile_cut(p);
    in.off_cpu = sw_profile_off_cpu(p);
    in.history_dropped = sw_profile_history_dropped(p);
    sw_history *h = sw_profile_history(p), *empty = NULL;
    if (!h)   /* history off: a file with no trees */
        h = empty = sw_history_new(sw_profile_functab(p), 0);
    rc = h ? sw_profile_file_build(&out, &in, th, (size_t)n, h) : SW_ENOMEM;
    sw_history_free(empty);
    sw_profile_unlock(p);
    Py_END_ALLOW_THREADS
    if (rc == SW_EARG)
        sw_pyerr(rc, PyExc_ValueError, "a call tree is too large for a profile file chunk (64 MiB)");
    else if (rc != SW_OK)
        raise_rc(rc, "building the profile file");
    else
        res = PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.len);
    sw_bytes_free(&out);
done:
    for (Py_ssize_t i = 0; names && i < n; i++)
        Py_XDECREF(names[i]);
    PyMem_Free(names);
    PyMem_Free(th);
    return res;
}

/* ---- ProfileFile ---- */

typedef struct {
    PyObject_HEAD
    sw_profile_file *pf;
} ProfileFileObject;

static PyTypeObject ProfileFileType;

static void ProfileFile_dealloc(ProfileFileObject *self)
{
    sw_profile_file_free(self->pf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *ProfileFile_info(ProfileFileObject *self, PyObject *unused)
{
    (void)unused;
    const sw_prof_info *in = sw_profile_file_info(self->pf);
    return Py_BuildValue("{s:s,s:K,s:K,s:K,s:L,s:L,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:s,s:O}", "mode", in->mode,
                         "interval_ns", (unsigned long long)in->interval_ns, "cycle_ns",
                         (unsigned long long)in->cycle_ns, "maxlen", (unsigned long long)in->maxlen, "start_ns",
                         (long long)in->start_ns, "stop_ns", (long long)in->stop_ns, "samples",
                         (unsigned long long)in->samples, "dropped", (unsigned long long)in->dropped, "cut",
                         (unsigned long long)in->cut, "off_cpu", (unsigned long long)in->off_cpu, "failed",
                         (unsigned long long)in->failed, "missed", (unsigned long long)in->missed, "evicted",
                         (unsigned long long)in->evicted, "evicted_samples", (unsigned long long)in->evicted_samples,
                         "history_dropped", (unsigned long long)in->history_dropped, "damage",
                         sw_profile_file_damage(self->pf), "complete",
                         sw_profile_file_complete(self->pf) ? Py_True : Py_False);
}

static PyObject *ProfileFile_threads(ProfileFileObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *l = PyList_New(0);
    for (size_t i = 0; l && i < sw_profile_file_thread_count(self->pf); i++) {
        const sw_prof_thread *t = sw_profile_file_thread(self->pf, i);
        PyObject *d = Py_BuildValue("{s:K,s:K,s:N,s:K,s:K,s:K}", "thread_id", (unsigned long long)t->thread_id,
                                    "native_id", (unsigned long long)t->native_tid, "name",
                                    PyUnicode_DecodeUTF8(t->name, (Py_ssize_t)strlen(t->name), "replace"), "samples",
                                    (unsigned long long)t->samples, "off_cpu", (unsigned long long)t->off_cpu,
                                    "cpu_ns", (unsigned long long)t->cpu_ns);
        if (!d || PyList_Append(l, d) < 0)
            Py_CLEAR(l);
        Py_XDECREF(d);
    }
    return l;
}

static PyObject *ProfileFile_history(ProfileFileObject *self, PyObject *unused)
{
    (void)unused;
    return entries_of(sw_profile_file_history(self->pf), sw_profile_file_info(self->pf)->history_dropped);
}

static PyObject *ProfileFile_window(ProfileFileObject *self, PyObject *args, PyObject *kw)
{
    return window_of(sw_profile_file_history(self->pf), NULL, args, kw);
}

static PyMethodDef ProfileFile_methods[] = {
    {"info", (PyCFunction)ProfileFile_info, METH_NOARGS, "info() -> dict: mode, interval, totals, damage"},
    {"threads", (PyCFunction)ProfileFile_threads, METH_NOARGS, "threads() -> [dict]"},
    {"history", (PyCFunction)ProfileFile_history, METH_NOARGS,
     "history() -> {entries: [{start_ns, end_ns, samples, threads}], evicted, evicted_samples, dropped}"},
    {"window", (PyCFunction)(void (*)(void))ProfileFile_window, METH_VARARGS | METH_KEYWORDS,
     "window(start_ns, stop_ns, thread_id=None) -> CallTree of the entries overlapping the window"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ProfileFileType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stackwatch._native.ProfileFile",
    .tp_basicsize = sizeof(ProfileFileObject),
    .tp_dealloc = (destructor)ProfileFile_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A profile file read back (made by read_profile).",
    .tp_methods = ProfileFile_methods,
};

/* read_profile(path) -> ProfileFile; ValueError (OSError for an
 * unreadable file) with a one-line message. */
static PyObject *read_profile(PyObject *mod, PyObject *arg)
{
    (void)mod;
    PyObject *path = NULL;
    if (!PyUnicode_FSConverter(arg, &path))
        return NULL;
    char err[256] = "";
    sw_profile_file *pf = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sw_profile_file_open_file(PyBytes_AS_STRING(path), &pf, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc != SW_OK) {
        sw_pyerr(rc, rc == SW_EIO ? PyExc_OSError : PyExc_ValueError, "%s: %s", PyBytes_AS_STRING(path), err);
        Py_DECREF(path);
        return NULL;
    }
    Py_DECREF(path);
    ProfileFileObject *o = PyObject_New(ProfileFileObject, &ProfileFileType);
    if (!o) {
        sw_profile_file_free(pf);
        return NULL;
    }
    o->pf = pf;
    return (PyObject *)o;
}

/* is_profile(head: bytes) -> bool */
static PyObject *is_profile(PyObject *mod, PyObject *arg)
{
    (void)mod;
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "is_profile() takes bytes");
        return NULL;
    }
    return PyBool_FromLong(
        sw_profile_file_is_profile((const uint8_t *)PyBytes_AS_STRING(arg), (size_t)PyBytes_GET_SIZE(arg)));
}

/* ---- render_trees ---- */

static int write_mem(int (*fn)(FILE *, void *), void *ud, sw_bytes *out)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return SW_ENOMEM;
    int rc = fn(f, ud);
    if (fclose(f) != 0 && rc == SW_OK)
        rc = SW_EIO;
    if (rc == SW_OK && sw_bytes_put(out, buf, len) != SW_OK)
        rc = SW_ENOMEM;
    free(buf);
    return rc;
}

typedef struct render {
    sw_functab *ft;
    sw_calltree **trees;
    char **names;
    size_t n;
    const char *title;
    sw_pprof_opts opts;
} render;

static int collapsed_fn(FILE *f, void *ud)
{
    render *r = ud;
    sw_calltree *all = sw_calltree_new(r->ft);
    int rc = all ? SW_OK : SW_ENOMEM;
    for (size_t i = 0; rc == SW_OK && i < r->n; i++)
        rc = sw_calltree_merge(all, r->trees[i]);
    if (rc == SW_OK)
        rc = sw_calltree_write_collapsed(all, f);
    sw_calltree_free(all);
    return rc;
}

static int speedscope_fn(FILE *f, void *ud)
{
    render *r = ud;
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

/* render_trees(format, trees, title="stackwatch profile", interval_ns=0,
 * time_ns=0, duration_ns=0) -> bytes. trees: [(name or None, CallTree)].
 * "collapsed": all trees merged (in the given order); "speedscope": one
 * profile per tree; "pprof": the uncompressed Profile message, a "thread"
 * label per tree with a name. */
static PyObject *render_trees(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"format", "trees", "title", "interval_ns", "time_ns", "duration_ns", NULL};
    const char *fmt, *title = "stackwatch profile";
    PyObject *list;
    unsigned long long interval = 0;
    long long time_ns = 0, duration = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO!|sKLL:render_trees", kwlist, &fmt, &PyList_Type, &list, &title,
                                     &interval, &time_ns, &duration))
        return NULL;
    int kind = strcmp(fmt, "collapsed") == 0 ? 0 : strcmp(fmt, "speedscope") == 0 ? 1
                                                   : strcmp(fmt, "pprof") == 0      ? 2
                                                                                    : -1;
    if (kind < 0) {
        PyErr_Format(PyExc_ValueError, "unknown format '%s' (choose from: collapsed, speedscope, pprof)", fmt);
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    render r = {sw_functab_new(), PyMem_Calloc(n ? (size_t)n : 1, sizeof(sw_calltree *)),
                PyMem_Calloc(n ? (size_t)n : 1, sizeof(char *)), 0, title,
                {interval, time_ns, duration, title}};
    PyObject *res = NULL;
    sw_bytes out = {0};
    if (!r.ft || !r.trees || !r.names) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i), *name, *tree;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 ||
            !PyObject_TypeCheck((tree = PyTuple_GET_ITEM(item, 1)), &CallTreeType) ||
            ((name = PyTuple_GET_ITEM(item, 0)) != Py_None && !PyUnicode_Check(name))) {
            PyErr_SetString(PyExc_TypeError, "trees must be a list of (name or None, CallTree)");
            goto done;
        }
        const char *s = name == Py_None ? NULL : PyUnicode_AsUTF8(name);
        if (name != Py_None && !s)
            goto done;
        /* Copies over one function table (the writers want one). */
        r.trees[i] = sw_calltree_new(r.ft);
        r.n++;
        int rc = r.trees[i] ? sw_calltree_merge(r.trees[i], ((CallTreeObject *)tree)->t) : SW_ENOMEM;
        if (rc == SW_OK && s && !(r.names[i] = strdup(s)))
            rc = SW_ENOMEM;
        if (rc != SW_OK) {
            raise_rc(rc, "copying a call tree");
            goto done;
        }
        if (!s && kind == 1) {
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
    if (kind == 0) {
        rc = write_mem(collapsed_fn, &r, &out);
    } else if (kind == 1) {
        rc = write_mem(speedscope_fn, &r, &out);
    } else {
        sw_pprof_tree *pt = calloc(r.n ? r.n : 1, sizeof *pt);
        rc = pt ? SW_OK : SW_ENOMEM;
        for (size_t i = 0; pt && i < r.n; i++)
            pt[i] = (sw_pprof_tree){r.names[i], r.trees[i]};
        if (rc == SW_OK)
            rc = sw_pprof_write(&out, pt, r.n, &r.opts);
        free(pt);
    }
    Py_END_ALLOW_THREADS
    if (rc != SW_OK)
        raise_rc(rc, "writing the profile");
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
    sw_functab_free(r.ft);
    return res;
}

static PyMethodDef functions[] = {
    {"read_profile", (PyCFunction)read_profile, METH_O, "read_profile(path) -> ProfileFile"},
    {"is_profile", (PyCFunction)is_profile, METH_O, "is_profile(first_bytes) -> bool"},
    {"render_trees", (PyCFunction)(void (*)(void))render_trees, METH_VARARGS | METH_KEYWORDS,
     "render_trees(format, [(name, CallTree)], title=..., interval_ns=0, time_ns=0, duration_ns=0) -> bytes"},
    {NULL, NULL, 0, NULL},
};

int sw_calltree_type_add_to_module(PyObject *m)
{
    if (PyType_Ready(&CallTreeType) < 0 || PyType_Ready(&ProfileFileType) < 0)
        return -1;
    Py_INCREF(&CallTreeType);
    if (PyModule_AddObject(m, "CallTree", (PyObject *)&CallTreeType) < 0) {
        Py_DECREF(&CallTreeType);
        return -1;
    }
    Py_INCREF(&ProfileFileType);
    if (PyModule_AddObject(m, "ProfileFile", (PyObject *)&ProfileFileType) < 0) {
        Py_DECREF(&ProfileFileType);
        return -1;
    }
    return PyModule_AddFunctions(m, functions);
}
