/*
 * trace_type.c - stackwatch._native.Trace: a trace file opened for reading,
 * the C reader with its statistics and exporters seen from Python
 * (src/stackwatch/tracer/tracefile.py wraps it), and the record constants
 * the Python reader needs.
 */
#include "trace_type.h"

#include "ext/shared/pyerr.h"

#include "trace/trace.h"

#include <errno.h>
#include <string.h>


typedef struct {
    PyObject_HEAD
    sw_trace *t;
    PyObject *path;
} TraceObject;

static void Trace_dealloc(TraceObject *self)
{
    sw_trace_free(self->t);
    Py_XDECREF(self->path);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Trace_init(TraceObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", NULL};
    PyObject *path_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&", kwlist, PyUnicode_FSConverter, &path_obj))
        return -1;
    char err[512] = "";
    sw_trace *t = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sw_trace_open_file(PyBytes_AS_STRING(path_obj), &t, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc) {
        sw_pyerr(rc, sw_TraceError, "%s: %s", PyBytes_AS_STRING(path_obj), err);
        Py_DECREF(path_obj);
        return -1;
    }
    sw_trace_free(self->t);
    self->t = t;
    Py_XSETREF(self->path, PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(path_obj)));
    Py_DECREF(path_obj);
    return self->path ? 0 : -1;
}

static PyObject *meta_value(const sw_meta_entry *e)
{
    switch (e->type) {
    case SW_VAL_UINT: return PyLong_FromUnsignedLongLong(e->u);
    case SW_VAL_SINT: return PyLong_FromLongLong(e->i);
    case SW_VAL_F64: return PyFloat_FromDouble(e->f);
    default: return PyUnicode_DecodeUTF8(e->s, (Py_ssize_t)e->slen, "replace");
    }
}

static PyObject *Trace_meta(TraceObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < sw_trace_meta_count(self->t); i++) {
        const sw_meta_entry *e = sw_trace_meta(self->t, i);
        PyObject *v = meta_value(e);
        if (!v || PyDict_SetItemString(d, e->key, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

/* A str from a NUL-terminated UTF-8 string of the trace (bad bytes
 * replaced). */
static PyObject *text_of(const char *s)
{
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

static PyObject *Trace_threads(TraceObject *self, PyObject *unused)
{
    (void)unused;
    size_t n = sw_trace_thread_count(self->t);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        const sw_thread_info *ti = sw_trace_thread(self->t, i);
        PyObject *d = Py_BuildValue("{s:I,s:K,s:K,s:N,s:K,s:K,s:K,s:K}", "index", ti->index, "native_tid",
                                    (unsigned long long)ti->native_tid, "ident",
                                    (unsigned long long)ti->ident, "name",
                                    text_of(ti->name),
                                    "chunks", (unsigned long long)ti->chunks, "events",
                                    (unsigned long long)ti->events, "dropped",
                                    (unsigned long long)ti->dropped, "samples",
                                    (unsigned long long)ti->samples);
        if (!d) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, d);
    }
    return l;
}

/* d[id] = v, taking v (which may be NULL: an error). Returns 0, or -1 with
 * an exception set and d freed. */
static int set_by_id(PyObject *d, uint32_t id, PyObject *v)
{
    PyObject *k = v ? PyLong_FromUnsignedLong(id) : NULL;
    int rc = k ? PyDict_SetItem(d, k, v) : -1;
    Py_XDECREF(k);
    Py_XDECREF(v);
    if (rc < 0)
        Py_DECREF(d);
    return rc;
}

static PyObject *Trace_codes(TraceObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *d = PyDict_New();
    for (uint32_t id = 0; d && id < sw_trace_code_limit(self->t); id++) {
        const sw_code_info *c = sw_trace_code(self->t, id);
        if (c && set_by_id(d, id, Py_BuildValue("(iNNNI)", c->kind, text_of(c->name), text_of(c->qualname),
                                                text_of(c->filename), c->firstlineno)) < 0)
            return NULL;
    }
    return d;
}

static int collect_event(void *ud, const sw_event *ev)
{
    PyObject *t = Py_BuildValue("(iLIIi)", ev->kind, (long long)ev->t_ns, ev->code, ev->depth, ev->synthetic);
    if (!t || PyList_Append((PyObject *)ud, t) < 0) {
        Py_XDECREF(t);
        return 1;
    }
    Py_DECREF(t);
    return 0;
}

static PyObject *Trace_events(TraceObject *self, PyObject *arg)
{
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0 || (size_t)i >= sw_trace_thread_count(self->t))
        return PyErr_Format(PyExc_IndexError, "no thread at position %zd", i);
    PyObject *l = PyList_New(0);
    if (!l)
        return NULL;
    int rc = sw_trace_replay(self->t, (size_t)i, collect_event, l);
    if (rc > 0 || PyErr_Occurred()) {
        Py_DECREF(l);
        return NULL;
    }
    return l;
}

typedef struct ext_collect {
    PyObject *list;
    uint32_t mask;           /* bit k: EXT kind k is wanted */
} ext_collect;

static int collect_ext(void *ud, const sw_event *ev)
{
    ext_collect *c = ud;
    if (ev->kind != SW_EV_EXT || !ev->ext || ev->ext->kind >= 32 || !(c->mask & (1u << ev->ext->kind)))
        return 0;
    const sw_ext *x = ev->ext;
    PyObject *t = Py_BuildValue("(ILINKKKKNNi)", x->kind, (long long)ev->t_ns, ev->depth,
                                x->code == SW_EXT_NO_CODE ? Py_NewRef(Py_None) : PyLong_FromUnsignedLong(x->code),
                                (unsigned long long)x->line, (unsigned long long)x->a,
                                (unsigned long long)x->b, (unsigned long long)x->c,
                                text_of(x->s1),
                                text_of(x->s2),
                                (int)x->malformed);
    if (!t || PyList_Append(c->list, t) < 0) {
        Py_XDECREF(t);
        return 1;
    }
    Py_DECREF(t);
    return 0;
}

/* ext_events(thread_pos, mask=all): the thread's EXT events of the kinds
 * whose bit is set in mask, as tuples (kind, t_ns, depth, code or None,
 * line, a, b, c, s1, s2, malformed); see reader.h, sw_ext. */
static PyObject *Trace_ext_events(TraceObject *self, PyObject *args)
{
    Py_ssize_t i;
    unsigned long mask = 0xffffffffUL;
    if (!PyArg_ParseTuple(args, "n|k", &i, &mask))
        return NULL;
    if (i < 0 || (size_t)i >= sw_trace_thread_count(self->t))
        return PyErr_Format(PyExc_IndexError, "no thread at position %zd", i);
    ext_collect c = {PyList_New(0), (uint32_t)mask};
    if (!c.list)
        return NULL;
    int rc = sw_trace_replay_ext(self->t, (size_t)i, SW_REPLAY_EXT, collect_ext, &c);
    if (rc > 0 || PyErr_Occurred()) {
        Py_DECREF(c.list);
        return NULL;
    }
    return c.list;
}

static PyObject *Trace_ext_summary(TraceObject *self, PyObject *unused)
{
    (void)unused;
    sw_ext_summary s;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sw_ext_summary_compute(self->t, &s);
    Py_END_ALLOW_THREADS
    if (rc)
        return sw_pyerr(rc, NULL, "counting the EXT events failed (%s)", sw_strerror(rc));
    PyObject *counts = PyList_New(SW_EXT_KIND_LIMIT);
    for (Py_ssize_t k = 0; counts && k < SW_EXT_KIND_LIMIT; k++)
        PyList_SET_ITEM(counts, k, PyLong_FromUnsignedLongLong(s.count[k]));
    return Py_BuildValue("{s:N,s:K,s:K,s:L,s:K,s:K}", "counts", counts, "malformed",
                         (unsigned long long)s.malformed, "gc_pairs", (unsigned long long)s.gc_pairs, "gc_ns",
                         (long long)s.gc_ns, "gc_collected", (unsigned long long)s.gc_collected,
                         "gc_uncollectable", (unsigned long long)s.gc_uncollectable);
}

/* sample_frames() -> {id: (kind, name, filename, line)} */
static PyObject *Trace_sample_frames(TraceObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *d = PyDict_New();
    for (uint32_t id = 0; d && id < sw_trace_frame_limit(self->t); id++) {
        const sw_frame_info *f = sw_trace_frame(self->t, id);
        if (f && set_by_id(d, id, Py_BuildValue("(iNNI)", f->kind, text_of(f->name), text_of(f->filename),
                                                f->line)) < 0)
            return NULL;
    }
    return d;
}

/* samples(thread_pos=-1) -> [(t_ns, thread_pos, state, flags, weight_ns,
 * cpu_ns or None, (frame ids outermost first), (lines being run, parallel)
 * or None)] of one thread or all. */
static PyObject *Trace_samples(TraceObject *self, PyObject *args)
{
    Py_ssize_t i = -1;
    if (!PyArg_ParseTuple(args, "|n", &i))
        return NULL;
    if (i < -1 || (i >= 0 && (size_t)i >= sw_trace_thread_count(self->t)))
        return PyErr_Format(PyExc_IndexError, "no thread at position %zd", i);
    sw_sample_cursor *c = sw_sample_cursor_new(self->t, i < 0 ? SIZE_MAX : (size_t)i);
    PyObject *l = c ? PyList_New(0) : PyErr_NoMemory();
    sw_trace_sample s;
    int n;
    while (l && (n = sw_sample_cursor_next(c, &s)) != 0) {
        PyObject *stack = n > 0 ? PyTuple_New(s.depth) : NULL;
        for (uint32_t k = 0; stack && k < s.depth; k++) {
            PyObject *id = PyLong_FromUnsignedLong(s.frames[k]);
            if (!id)
                Py_CLEAR(stack);
            else
                PyTuple_SET_ITEM(stack, k, id);
        }
        PyObject *lines = NULL;
        if (stack && s.lines) {
            lines = PyTuple_New(s.depth);
            for (uint32_t k = 0; lines && k < s.depth; k++) {
                PyObject *v = PyLong_FromUnsignedLong(s.lines[k]);
                if (!v)
                    Py_CLEAR(lines);
                else
                    PyTuple_SET_ITEM(lines, k, v);
            }
        } else if (stack) {
            lines = Py_NewRef(Py_None);
        }
        PyObject *cpu = s.cpu_ns == UINT64_MAX ? Py_NewRef(Py_None) : PyLong_FromUnsignedLongLong(s.cpu_ns);
        PyObject *t = stack && cpu && lines
                          ? Py_BuildValue("(LIIIKNNN)", (long long)s.t_ns, s.thread, s.state, s.flags,
                                          (unsigned long long)s.weight_ns, cpu, stack, lines)
                          : NULL;
        if (!t) {
            if (!stack || !cpu || !lines) {
                Py_XDECREF(stack);
                Py_XDECREF(cpu);
                Py_XDECREF(lines);
            }
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            Py_CLEAR(l);
            break;
        }
        if (PyList_Append(l, t) < 0)
            Py_CLEAR(l);
        Py_DECREF(t);
    }
    sw_sample_cursor_free(c);
    return l;
}

static PyObject *Trace_stats(TraceObject *self, PyObject *unused)
{
    (void)unused;
    sw_stat_row *rows = NULL;
    size_t n = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sw_stats_compute(self->t, &rows, &n);
    Py_END_ALLOW_THREADS
    if (rc)
        return sw_pyerr(rc, NULL, "computing the statistics failed (%s)", sw_strerror(rc));
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *r = Py_BuildValue("(IIKLL)", rows[i].thread, rows[i].code,
                                    (unsigned long long)rows[i].calls, (long long)rows[i].total_ns,
                                    (long long)rows[i].own_ns);
        if (!r) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, r);
    }
    free(rows);
    return l;
}

static PyObject *Trace_export(TraceObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"format", "path", "min_duration_ns", NULL};
    const char *fmt;
    PyObject *path_obj;
    long long min_ns = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO&|L", kwlist, &fmt, PyUnicode_FSConverter, &path_obj, &min_ns))
        return NULL;
    int (*fn)(sw_trace *, FILE *, const sw_export_opts *, char *, size_t) = NULL;
    if (strcmp(fmt, "chrome") == 0)
        fn = sw_export_chrome;
    else if (strcmp(fmt, "perfetto") == 0)
        fn = sw_export_perfetto;
    if (!fn) {
        Py_DECREF(path_obj);
        return PyErr_Format(PyExc_ValueError, "unknown export format %R (known: chrome, perfetto)",
                            PyTuple_GET_ITEM(args, 0));
    }
    FILE *f = fopen(PyBytes_AS_STRING(path_obj), "wb");
    if (!f) {
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, PyBytes_AS_STRING(path_obj));
        Py_DECREF(path_obj);
        return NULL;
    }
    sw_export_opts o = {min_ns};
    char err[256] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fn(self->t, f, &o, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (fclose(f) != 0 && !rc) {
        rc = SW_EIO;
        snprintf(err, sizeof err, "%s", strerror(errno));
    }
    if (rc) {
        sw_pyerr(rc, PyExc_OSError, "%s: %s", PyBytes_AS_STRING(path_obj), err);
        Py_DECREF(path_obj);
        return NULL;
    }
    Py_DECREF(path_obj);
    Py_RETURN_NONE;
}

static PyObject *Trace_get_damage(TraceObject *self, void *c)
{
    (void)c;
    const char *d = sw_trace_damage(self->t);
    if (!d[0])
        Py_RETURN_NONE;
    return PyUnicode_FromString(d);
}

static PyObject *Trace_get_complete(TraceObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(sw_trace_complete(self->t));
}

static PyObject *Trace_get_path(TraceObject *self, void *c)
{
    (void)c;
    return Py_NewRef(self->path);
}

static PyObject *Trace_get_samples_unattributed(TraceObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(sw_trace_samples_unattributed(self->t));
}

static PyObject *Trace_get_end_ns(TraceObject *self, void *c)
{
    (void)c;
    return PyLong_FromLongLong(sw_trace_end_ns(self->t));
}

static PyMethodDef Trace_methods[] = {
    {"meta", (PyCFunction)Trace_meta, METH_NOARGS, "meta() -> dict of the header and end key/values"},
    {"threads", (PyCFunction)Trace_threads, METH_NOARGS, "threads() -> list of dicts, one per thread"},
    {"codes", (PyCFunction)Trace_codes, METH_NOARGS, "codes() -> {id: (kind, name, qualname, filename, firstlineno)}"},
    {"events", (PyCFunction)Trace_events, METH_O, "events(thread_pos) -> [(kind, t_ns, code, depth, synthetic)]"},
    {"ext_events", (PyCFunction)Trace_ext_events, METH_VARARGS,
     "ext_events(thread_pos, mask=all) -> [(kind, t_ns, depth, code, line, a, b, c, s1, s2, malformed)]"},
    {"ext_summary", (PyCFunction)Trace_ext_summary, METH_NOARGS,
     "ext_summary() -> {counts: [per EXT kind], malformed, gc_pairs, gc_ns, gc_collected, gc_uncollectable}"},
    {"sample_frames", (PyCFunction)Trace_sample_frames, METH_NOARGS,
     "sample_frames() -> {id: (kind, name, filename, line)} of the sampler's frames"},
    {"samples", (PyCFunction)Trace_samples, METH_VARARGS,
     "samples(thread_pos=-1) -> [(t_ns, thread_pos, state, flags, weight_ns, cpu_ns, frame ids)]"},
    {"stats", (PyCFunction)Trace_stats, METH_NOARGS, "stats() -> [(thread_pos, code, calls, total_ns, own_ns)]"},
    {"export", (PyCFunction)(void (*)(void))Trace_export, METH_VARARGS | METH_KEYWORDS,
     "export(format, path, min_duration_ns=0): write chrome JSON or perfetto protobuf"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Trace_getset[] = {
    {"damage", (getter)Trace_get_damage, NULL, "None for an intact file, else what is damaged", NULL},
    {"complete", (getter)Trace_get_complete, NULL, "True if tracing stopped normally", NULL},
    {"path", (getter)Trace_get_path, NULL, "the file's path", NULL},
    {"end_ns", (getter)Trace_get_end_ns, NULL, "when tracing stopped (trace clock ns) or -1", NULL},
    {"samples_unattributed", (getter)Trace_get_samples_unattributed, NULL,
     "samples of threads beyond the 4096 the reader tells apart", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TraceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stackwatch._native.Trace",
    .tp_basicsize = sizeof(TraceObject),
    .tp_dealloc = (destructor)Trace_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Trace(path): a stackwatch trace file opened for reading.",
    .tp_methods = Trace_methods,
    .tp_getset = Trace_getset,
    .tp_init = (initproc)Trace_init,
    .tp_new = PyType_GenericNew,
};

int sw_trace_type_add_to_module(PyObject *m)
{
    if (PyType_Ready(&TraceType) < 0 || PyModule_AddObject(m, "Trace", Py_NewRef((PyObject *)&TraceType)) < 0)
        return -1;
    static const struct { const char *name; long value; } consts[] = {
        {"FORMAT_MAJOR", SW_FORMAT_MAJOR}, {"OP_CALL", SW_OP_CALL}, {"OP_RETURN", SW_OP_RETURN},
        {"OP_RESUME", SW_OP_RESUME}, {"OP_YIELD", SW_OP_YIELD}, {"OP_UNWIND", SW_OP_UNWIND},
        {"OP_C_CALL", SW_OP_C_CALL}, {"OP_C_RETURN", SW_OP_C_RETURN}, {"EV_DROPPED", SW_EV_DROPPED},
    };
    for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++)
        if (PyModule_AddIntConstant(m, consts[i].name, consts[i].value) < 0)
            return -1;
    return 0;
}
