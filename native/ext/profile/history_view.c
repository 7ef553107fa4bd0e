/*
 * history_view.c - the entries and time windows of a history as Python
 * objects, and a Sampler's history options (see history_view.h).
 */
#include "history_view.h"

#include "calltree_type.h"
#include "ext/shared/pyargs.h"

#include <string.h>
#include <time.h>

PyObject *sw_py_history_entries(const sw_history *h, unsigned long long dropped)
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

PyObject *sw_py_history_window(const sw_history *h, sw_profile *lock, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"start_ns", "stop_ns", "thread_id", NULL};
    long long start, stop;
    sw_optional_u64 tid = {0, 0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "LL|O&:window", kwlist, &start, &stop, sw_pyargs_optional_u64, &tid))
        return NULL;
    PyObject *res = sw_py_calltree_new();
    if (!res)
        return NULL;
    sw_calltree *t = sw_py_calltree_get(res);
    int rc = SW_OK;
    if (h) {
        Py_BEGIN_ALLOW_THREADS
        if (lock)
            sw_profile_lock(lock);
        rc = sw_history_window(h, start, stop, !tid.given, tid.value, t);
        if (lock)
            sw_profile_unlock(lock);
        Py_END_ALLOW_THREADS
    }
    if (rc != SW_OK) {
        Py_DECREF(res);
        sw_py_tree_error(rc, "merging the history's trees");
        return NULL;
    }
    return res;
}

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

