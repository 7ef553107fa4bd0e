/*
 * profile_file_type.c - stackwatch._native.ProfileFile, read_profile(),
 * is_profile() and the bytes of a running profile's file (see
 * profile_file_type.h).
 */
#include "profile_file_type.h"

#include "calltree_type.h"
#include "history_view.h"
#include "ext/shared/pyerr.h"

#include "base/base.h"
#include "profile/profile.h"

#include <stdio.h>
#include <string.h>

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
    unsigned long long u[7] = {0};
    long long start = 0, stop = 0;
    PyObject *mode = PyDict_GetItemString(info, "mode");
    const char *ms = mode && PyUnicode_Check(mode) ? PyUnicode_AsUTF8(mode) : "wall";
    PyObject *process = PyDict_GetItemString(info, "process");
    const char *ps = process && PyUnicode_Check(process) ? PyUnicode_AsUTF8(process) : "";
    if (!ms || !ps || dict_ull(info, "interval_ns", &u[0]) < 0 || dict_ull(info, "cycle_ns", &u[1]) < 0 ||
        dict_ull(info, "maxlen", &u[2]) < 0 || dict_ull(info, "failed", &u[3]) < 0 ||
        dict_ull(info, "missed", &u[4]) < 0 || dict_ull(info, "pid", &u[5]) < 0 ||
        dict_ull(info, "parent_pid", &u[6]) < 0 || dict_ll(info, "start_ns", &start) < 0 ||
        dict_ll(info, "stop_ns", &stop) < 0)
        return NULL;
    snprintf(in.mode, sizeof in.mode, "%s", ms);
    /* Cut at a character's start, as the reader does. */
    size_t plen = strlen(ps) < sizeof in.process - 1 ? strlen(ps) : sizeof in.process - 1;
    while (plen > 0 && ps[plen] && ((unsigned char)ps[plen] & 0xC0) == 0x80)
        plen--;
    memcpy(in.process, ps, plen);
    in.process[plen] = 0;
    in.pid = u[5];
    in.parent_pid = u[6];
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
        th[i] = (sw_prof_thread){.thread_id = v[0], .native_tid = v[1], .name = PyBytes_AS_STRING(names[i]),
                                 .samples = v[2], .off_cpu = v[3], .cpu_ns = v[4]};
        /* "states": {"running", "gil_wait", "idle", "unknown"} (Profiler.threads()). */
        PyObject *st = PyDict_GetItemString(d, "states");
        static const struct { const char *name; unsigned state; } states[] = {
            {"running", SW_STATE_RUNNING}, {"gil_wait", SW_STATE_GIL_WAIT}, {"idle", SW_STATE_IDLE},
            {"unknown", SW_STATE_UNKNOWN}};
        if (st && PyDict_Check(st)) {
            th[i].has_states = 1;
            for (size_t k = 0; k < sizeof states / sizeof states[0]; k++) {
                unsigned long long x = 0;
                if (dict_ull(st, states[k].name, &x) < 0)
                    goto done;
                th[i].states[states[k].state] = x;
            }
        }
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
        PyErr_SetString(PyExc_ValueError, "a call tree is too large for a profile file chunk (64 MiB)");
    else if (rc != SW_OK)
        sw_py_tree_error(rc, "building the profile file");
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
    return Py_BuildValue("{s:s,s:K,s:K,s:K,s:L,s:L,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:s,s:O,s:K,s:K,s:N}",
                         "mode", in->mode,
                         "interval_ns", (unsigned long long)in->interval_ns, "cycle_ns",
                         (unsigned long long)in->cycle_ns, "maxlen", (unsigned long long)in->maxlen, "start_ns",
                         (long long)in->start_ns, "stop_ns", (long long)in->stop_ns, "samples",
                         (unsigned long long)in->samples, "dropped", (unsigned long long)in->dropped, "cut",
                         (unsigned long long)in->cut, "off_cpu", (unsigned long long)in->off_cpu, "failed",
                         (unsigned long long)in->failed, "missed", (unsigned long long)in->missed, "evicted",
                         (unsigned long long)in->evicted, "evicted_samples", (unsigned long long)in->evicted_samples,
                         "history_dropped", (unsigned long long)in->history_dropped, "damage",
                         sw_profile_file_damage(self->pf), "complete",
                         sw_profile_file_complete(self->pf) ? Py_True : Py_False, "pid",
                         (unsigned long long)in->pid, "parent_pid", (unsigned long long)in->parent_pid, "process",
                         PyUnicode_DecodeUTF8(in->process, (Py_ssize_t)strlen(in->process), "replace"));
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
        if (d && t->has_states) {
            PyObject *st = Py_BuildValue("{s:K,s:K,s:K,s:K}", "running",
                                         (unsigned long long)t->states[SW_STATE_RUNNING], "gil_wait",
                                         (unsigned long long)t->states[SW_STATE_GIL_WAIT], "idle",
                                         (unsigned long long)t->states[SW_STATE_IDLE], "unknown",
                                         (unsigned long long)t->states[SW_STATE_UNKNOWN]);
            if (!st || PyDict_SetItemString(d, "states", st) < 0)
                Py_CLEAR(d);
            Py_XDECREF(st);
        }
        if (!d || PyList_Append(l, d) < 0)
            Py_CLEAR(l);
        Py_XDECREF(d);
    }
    return l;
}

static PyObject *ProfileFile_history(ProfileFileObject *self, PyObject *unused)
{
    (void)unused;
    return sw_py_history_entries(sw_profile_file_history(self->pf), sw_profile_file_info(self->pf)->history_dropped);
}

static PyObject *ProfileFile_window(ProfileFileObject *self, PyObject *args, PyObject *kw)
{
    return sw_py_history_window(sw_profile_file_history(self->pf), NULL, args, kw);
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

static PyMethodDef functions[] = {
    {"read_profile", (PyCFunction)read_profile, METH_O, "read_profile(path) -> ProfileFile"},
    {"is_profile", (PyCFunction)is_profile, METH_O, "is_profile(first_bytes) -> bool"},
    {NULL, NULL, 0, NULL},
};

int sw_profile_file_type_add_to_module(PyObject *m)
{
    if (PyType_Ready(&ProfileFileType) < 0)
        return -1;
    Py_INCREF(&ProfileFileType);
    if (PyModule_AddObject(m, "ProfileFile", (PyObject *)&ProfileFileType) < 0) {
        Py_DECREF(&ProfileFileType);
        return -1;
    }
    return PyModule_AddFunctions(m, functions);
}
