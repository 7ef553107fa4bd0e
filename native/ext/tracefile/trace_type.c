/*
 * trace_type.c - stackwatch._native.Trace: a trace file opened for reading,
 * the C reader with its statistics and exporters seen from Python
 * (src/stackwatch/tracer/tracefile.py wraps it), and the record constants
 * the Python reader needs.
 */
#include "trace_type.h"

#include "ext/shared/globs.h"
#include "ext/shared/pyerr.h"

#include "trace/trace.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>


typedef struct {
    PyObject_HEAD
    sw_trace *t;
    PyObject *path;
} TraceObject;

static PyTypeObject TraceType;

sw_trace *sw_py_trace_get(PyObject *obj)
{
    if (!PyObject_TypeCheck(obj, &TraceType)) {
        PyErr_SetString(PyExc_TypeError, "expected a stackwatch._native.Trace");
        return NULL;
    }
    return ((TraceObject *)obj)->t;
}

/* An int64 time of a filter, or the default for None. */
static int filter_time(PyObject *v, int64_t none, int64_t *out)
{
    if (v == Py_None) {
        *out = none;
        return 0;
    }
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred())
        return -1;
    *out = x;
    return 0;
}

void sw_py_filter_free(sw_py_filter *pf)
{
    sw_globs_free(pf->include);
    sw_globs_free(pf->exclude);
    PyMem_RawFree(pf->threads);
    memset(pf, 0, sizeof *pf);
    sw_filter_all(&pf->f);
}

int sw_py_filter_parse(PyObject *spec, sw_trace *t, sw_py_filter *out)
{
    memset(out, 0, sizeof *out);
    sw_filter_all(&out->f);
    if (!spec || spec == Py_None)
        return 0;
    PyObject *threads, *start, *stop, *inc, *exc;
    unsigned int depth;
    if (!PyTuple_Check(spec)) {
        PyErr_SetString(PyExc_TypeError, "a filter is None or (threads, start_ns, stop_ns, include, exclude, "
                                         "max_depth)");
        return -1;
    }
    if (!PyArg_ParseTuple(spec, "OOOOOI:filter", &threads, &start, &stop, &inc, &exc, &depth))
        return -1;
    if (filter_time(start, INT64_MIN, &out->f.start_ns) < 0 || filter_time(stop, INT64_MAX, &out->f.stop_ns) < 0 ||
        sw_globs_copy(inc, "include", &out->include) < 0 || sw_globs_copy(exc, "exclude", &out->exclude) < 0)
        goto fail;
    out->f.include = out->include;
    out->f.exclude = out->exclude;
    out->f.max_depth = depth;
    if (threads != Py_None) {
        size_t n = sw_trace_thread_count(t);
        PyObject *fast = PySequence_Fast(threads, "threads must be a sequence of thread positions");
        if (!fast)
            goto fail;
        out->threads = PyMem_RawCalloc(n ? n : 1, 1);
        if (!out->threads) {
            Py_DECREF(fast);
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
            Py_ssize_t pos = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(fast, i));
            if (pos == -1 && PyErr_Occurred()) {
                Py_DECREF(fast);
                goto fail;
            }
            if (pos < 0 || (size_t)pos >= n) {
                Py_DECREF(fast);
                PyErr_Format(PyExc_IndexError, "no thread at position %zd", pos);
                goto fail;
            }
            out->threads[pos] = 1;
        }
        Py_DECREF(fast);
        out->f.threads = out->threads;
        out->f.nthreads = n;
    }
    return 0;
fail:
    sw_py_filter_free(out);
    return -1;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The trace's progress callback while the GIL is released: at most every
 * 0.1 s, takes the GIL to check signals and call the Python callable. */
static int py_progress(void *ud, uint64_t bytes)
{
    sw_py_progress *p = ud;
    p->done += bytes;
    double now = mono_now();
    if (now - p->last < 0.1)
        return 0;
    p->last = now;
    PyEval_RestoreThread(p->save);
    int stop = PyErr_CheckSignals() < 0;
    if (!stop && p->fn) {
        PyObject *r = PyObject_CallFunction(p->fn, "K", (unsigned long long)p->done);
        stop = r == NULL;
        Py_XDECREF(r);
    }
    if (stop)
        p->raised = 1;
    p->save = PyEval_SaveThread();
    return stop;
}

void sw_py_progress_begin(sw_py_progress *p, sw_trace *t, PyObject *fn)
{
    p->t = t;
    p->fn = fn == Py_None ? NULL : fn;
    p->done = 0;
    p->last = mono_now();
    p->raised = 0;
    sw_trace_set_progress(t, py_progress, p);
    p->save = PyEval_SaveThread();
}

int sw_py_progress_end(sw_py_progress *p)
{
    PyEval_RestoreThread(p->save);
    sw_trace_set_progress(p->t, NULL, NULL);
    if (!p->raised && p->fn) {
        PyObject *r = PyObject_CallFunction(p->fn, "K", (unsigned long long)p->done);
        if (!r)
            p->raised = 1;
        Py_XDECREF(r);
    }
    return p->raised ? -1 : 0;
}

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
        PyObject *d = Py_BuildValue("{s:I,s:K,s:K,s:N,s:K,s:K,s:K,s:K,s:K,s:I}", "index", ti->index, "native_tid",
                                    (unsigned long long)ti->native_tid, "ident",
                                    (unsigned long long)ti->ident, "name",
                                    text_of(ti->name),
                                    "chunks", (unsigned long long)ti->chunks, "events",
                                    (unsigned long long)ti->events, "dropped",
                                    (unsigned long long)ti->dropped, "samples",
                                    (unsigned long long)ti->samples, "task", (unsigned long long)ti->task,
                                    "thread", ti->thread);
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
    uint64_t mask;           /* bit k: EXT kind k is wanted */
} ext_collect;

/* 1 when the kind's row has a code id (its events are located: a code and
 * a line). */
static int ext_located(uint32_t kind)
{
    const sw_record_kind *k = sw_record_kind_of(kind);
    for (unsigned i = 0; k && i < k->nfields; i++)
        if (k->fields[i].type == SW_FT_CODE)
            return 1;
    return 0;
}

/* The data of a decoded EXT record as its row (trace/records.h) gives it:
 * {field: value} for its fields other than its location (code and line),
 * in order, a SIGNED one as a negative int where it is; {"malformed":
 * True} for a payload that did not decode. */
static PyObject *ext_data(const sw_ext *x)
{
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    if (x->malformed) {
        if (PyDict_SetItemString(d, "malformed", Py_True) < 0)
            Py_CLEAR(d);
        return d;
    }
    const sw_record_kind *k = sw_record_kind_of(x->kind);
    for (unsigned i = 0; k && i < k->nfields; i++) {
        const sw_record_field *f = &k->fields[i];
        if (f->slot == SW_SLOT_CODE || (f->slot == SW_SLOT_LINE && ext_located(x->kind)))
            continue;   /* a located record's code and line are the tuple's own */
        PyObject *v = f->type == SW_FT_STR      ? text_of(sw_ext_string(x, f->slot))
                      : f->type == SW_FT_SIGNED ? PyLong_FromLongLong((long long)sw_ext_number(x, f->slot))
                                                : PyLong_FromUnsignedLongLong(sw_ext_number(x, f->slot));
        if (!v || PyDict_SetItemString(d, f->name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

static int collect_ext(void *ud, const sw_event *ev)
{
    ext_collect *c = ud;
    if (ev->kind != SW_EV_EXT || !ev->ext || ev->ext->kind >= 64 || !(c->mask & (1ull << ev->ext->kind)))
        return 0;
    const sw_ext *x = ev->ext;
    int located = !x->malformed && ext_located(x->kind);
    /* A TASK_SWITCH (SW_REPLAY_TASKS) has the code of the frame it left; a
     * located record with no code (format 1.14) has None. */
    int coded = !x->malformed && x->code != SW_EXT_NO_CODE;
    PyObject *t = Py_BuildValue("(ILINNN)", x->kind, (long long)ev->t_ns, ev->depth,
                                coded ? PyLong_FromUnsignedLong(x->code) : Py_NewRef(Py_None),
                                located ? PyLong_FromUnsignedLongLong(x->line) : Py_NewRef(Py_None), ext_data(x));
    if (!t || PyList_Append(c->list, t) < 0) {
        Py_XDECREF(t);
        return 1;
    }
    Py_DECREF(t);
    return 0;
}

/* ext_events(thread_pos, mask=all, all_tasks=False): the thread's EXT
 * events of the kinds whose bit is set in mask, as tuples (kind, t_ns,
 * depth, code, line, data): code and line None for kinds without a
 * location (and malformed records), code None for a record located
 * nowhere (no code, line 0; format 1.14), data a dict of the other fields by
 * name (ext_data). all_tasks (a thread's position): those of every task
 * the thread ran, and its TASK_SWITCH records (code: the frame left;
 * replay.h SW_REPLAY_TASKS). */
static PyObject *Trace_ext_events(TraceObject *self, PyObject *args)
{
    Py_ssize_t i;
    unsigned long long mask = ~0ull;
    int all_tasks = 0;
    if (!PyArg_ParseTuple(args, "n|Kp", &i, &mask, &all_tasks))
        return NULL;
    if (i < 0 || (size_t)i >= sw_trace_thread_count(self->t))
        return PyErr_Format(PyExc_IndexError, "no thread at position %zd", i);
    ext_collect c = {PyList_New(0), (uint64_t)mask};
    if (!c.list)
        return NULL;
    int rc = sw_trace_replay_ext(self->t, (size_t)i, SW_REPLAY_EXT | (all_tasks ? SW_REPLAY_TASKS : 0), collect_ext,
                                 &c);
    if (rc > 0 || PyErr_Occurred()) {
        Py_DECREF(c.list);
        return NULL;
    }
    /* Then the thread's records written by another thread (format 1.7:
     * system calls), depth -1 (not known to them). */
    sw_trec_cursor *tc = sw_trec_cursor_new(self->t, (size_t)i);
    if (!tc) {
        Py_DECREF(c.list);
        return PyErr_NoMemory();
    }
    sw_trace_trec r;
    int n;
    while ((n = sw_trec_cursor_next(tc, &r)) == 1) {
        sw_event ev = {r.t_ns, 0, (uint32_t)-1, SW_EV_EXT, 0, r.ext, NULL};
        if (collect_ext(&c, &ev))
            break;
    }
    sw_trec_cursor_free(tc);
    if (n < 0 || PyErr_Occurred()) {
        Py_DECREF(c.list);
        if (n < 0 && !PyErr_Occurred())
            return sw_pyerr(n, NULL, "reading the thread's records failed (%s)", sw_strerror(n));
        return NULL;
    }
    return c.list;
}

static PyObject *Trace_ext_summary(TraceObject *self, PyObject *args)
{
    PyObject *spec = Py_None;
    if (!PyArg_ParseTuple(args, "|O:ext_summary", &spec))
        return NULL;
    sw_py_filter pf;
    if (sw_py_filter_parse(spec, self->t, &pf) < 0)
        return NULL;
    sw_ext_summary s;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sw_ext_summary_filtered(self->t, &pf.f, &s);
    Py_END_ALLOW_THREADS
    sw_py_filter_free(&pf);
    if (rc)
        return sw_pyerr(rc, NULL, "counting the EXT events failed (%s)", sw_strerror(rc));
    PyObject *counts = PyList_New(SW_EXT_KIND_LIMIT);
    for (Py_ssize_t k = 0; counts && k < SW_EXT_KIND_LIMIT; k++)
        PyList_SET_ITEM(counts, k, PyLong_FromUnsignedLongLong(s.count[k]));
    PyObject *sys = PyList_New((Py_ssize_t)s.nsyscalls);
    for (size_t k = 0; sys && k < s.nsyscalls; k++)
        PyList_SET_ITEM(sys, (Py_ssize_t)k,
                        Py_BuildValue("(NKKL)", text_of(s.syscalls[k].name), (unsigned long long)s.syscalls[k].calls,
                                      (unsigned long long)s.syscalls[k].errors, (long long)s.syscalls[k].total_ns));
    return Py_BuildValue("{s:N,s:K,s:K,s:L,s:K,s:K,s:N,s:K,s:K,s:L,s:K}", "counts", counts, "malformed",
                         (unsigned long long)s.malformed, "gc_pairs", (unsigned long long)s.gc_pairs, "gc_ns",
                         (long long)s.gc_ns, "gc_collected", (unsigned long long)s.gc_collected,
                         "gc_uncollectable", (unsigned long long)s.gc_uncollectable, "syscalls", sys,
                         "kernel_lost", (unsigned long long)s.kernel_lost, "off_cpu_pairs",
                         (unsigned long long)s.off_cpu_pairs, "off_cpu_ns", (long long)s.off_cpu_ns, "faults",
                         (unsigned long long)s.faults);
}

/* kernel_by_function(filter=None) -> [(thread_pos, code or None, calls,
 * total_ns, off_cpu, off_cpu_ns, faults)]: system calls, time off CPU and
 * page faults (run --kernel) per innermost function. */
static PyObject *Trace_kernel_by_function(TraceObject *self, PyObject *args)
{
    PyObject *spec = Py_None;
    if (!PyArg_ParseTuple(args, "|O:kernel_by_function", &spec))
        return NULL;
    sw_py_filter pf;
    if (sw_py_filter_parse(spec, self->t, &pf) < 0)
        return NULL;
    sw_kernel_fn_row *rows;
    size_t n;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sw_kernel_by_function(self->t, &pf.f, &rows, &n);
    Py_END_ALLOW_THREADS
    sw_py_filter_free(&pf);
    if (rc)
        return sw_pyerr(rc, NULL, "summing the kernel's events failed (%s)", sw_strerror(rc));
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *code = rows[i].code == SW_NO_CALLER ? Py_NewRef(Py_None) : PyLong_FromUnsignedLong(rows[i].code);
        PyObject *row = Py_BuildValue("(INKLKLK)", rows[i].thread, code, (unsigned long long)rows[i].calls,
                                      (long long)rows[i].total_ns, (unsigned long long)rows[i].off_cpu,
                                      (long long)rows[i].off_cpu_ns, (unsigned long long)rows[i].faults);
        if (!row) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, row);
    }
    free(rows);
    return list;
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

/* stats(filter=None, edges=False, progress=None) -> rows [(thread_pos,
 * code, calls, total_ns, own_ns, prim)], or with edges (rows, [(thread_pos,
 * caller or None, callee, calls, prim, total_ns, own_ns, inclusive_ns)]). */
static PyObject *Trace_stats(TraceObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"filter", "edges", "progress", NULL};
    PyObject *spec = Py_None, *progress = Py_None;
    int want_edges = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OpO:stats", kwlist, &spec, &want_edges, &progress))
        return NULL;
    sw_py_filter pf;
    if (sw_py_filter_parse(spec, self->t, &pf) < 0)
        return NULL;
    sw_stat_row *rows = NULL;
    sw_edge_row *edges = NULL;
    size_t n = 0, ne = 0;
    sw_py_progress pr;
    sw_py_progress_begin(&pr, self->t, progress);
    int rc = sw_stats_filtered(self->t, &pf.f, &rows, &n, want_edges ? &edges : NULL, &ne);
    int raised = sw_py_progress_end(&pr);
    sw_py_filter_free(&pf);
    if (raised < 0 || rc) {
        free(rows);
        free(edges);
        return raised < 0 ? NULL : sw_pyerr(rc, NULL, "computing the statistics failed (%s)", sw_strerror(rc));
    }
    PyObject *l = PyList_New((Py_ssize_t)n), *el = want_edges ? PyList_New((Py_ssize_t)ne) : NULL;
    for (size_t i = 0; l && i < n; i++) {
        PyObject *r = Py_BuildValue("(IIKLLK)", rows[i].thread, rows[i].code, (unsigned long long)rows[i].calls,
                                    (long long)rows[i].total_ns, (long long)rows[i].own_ns,
                                    (unsigned long long)rows[i].prim);
        if (!r) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, r);
    }
    for (size_t i = 0; el && i < ne; i++) {
        const sw_edge_row *e = &edges[i];
        PyObject *caller = e->caller == SW_NO_CALLER ? Py_NewRef(Py_None) : PyLong_FromUnsignedLong(e->caller);
        PyObject *r = caller ? Py_BuildValue("(INIKKLLL)", e->thread, caller, e->callee, (unsigned long long)e->calls,
                                             (unsigned long long)e->prim, (long long)e->total_ns,
                                             (long long)e->own_ns, (long long)e->inclusive_ns)
                             : NULL;
        if (!r) {
            Py_CLEAR(el);
            break;
        }
        PyList_SET_ITEM(el, (Py_ssize_t)i, r);
    }
    free(rows);
    free(edges);
    if (!want_edges)
        return l;
    if (!l || !el) {
        Py_XDECREF(l);
        Py_XDECREF(el);
        return NULL;
    }
    return Py_BuildValue("(NN)", l, el);
}

/* events_bytes() -> the bytes a replay of every thread reads (the total of
 * a conversion's progress). */
static PyObject *Trace_events_bytes(TraceObject *self, PyObject *unused)
{
    (void)unused;
    unsigned long long n = 0;
    for (size_t i = 0; i < sw_trace_thread_count(self->t); i++)
        n += sw_trace_events_bytes(self->t, i);
    return PyLong_FromUnsignedLongLong(n);
}

/* The ValueError for an export format with no row in the table of
 * exporters (trace/exporters.h); returns NULL. */
static PyObject *unknown_exporter(const char *fmt)
{
    char known[256];
    sw_exporter_names(known, sizeof known);
    return PyErr_Format(PyExc_ValueError, "unknown export format '%s' (known: %s)", fmt, known);
}

/* The output of a directory format (exporters.h): `dir` created, or an
 * empty directory already there, and the folders on the path of its first
 * file (`inside`: "ust/metadata"), whose whole name goes into first.
 * Returns 0, or -1 with an exception set. */
static int output_dir(const char *dir, const char *inside, char *first, size_t len)
{
    if (mkdir(dir, 0777) != 0) {
        int e = errno;
        DIR *d = e == EEXIST ? opendir(dir) : NULL;
        if (!d) {
            errno = e == EEXIST ? ENOTDIR : e;
            PyErr_SetFromErrnoWithFilename(PyExc_OSError, dir);
            return -1;
        }
        struct dirent *de;
        int empty = 1;
        while (empty && (de = readdir(d)))
            empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
        closedir(d);
        if (!empty) {
            PyErr_Format(PyExc_OSError, "%s: the directory is not empty (the export writes a new directory)", dir);
            return -1;
        }
    }
    if ((size_t)snprintf(first, len, "%s/%s", dir, inside) >= len) {
        PyErr_Format(PyExc_OSError, "%s: the name is too long", dir);
        return -1;
    }
    for (char *slash = first + strlen(dir) + 1; (slash = strchr(slash, '/')); slash++) {
        *slash = 0;
        int bad = mkdir(first, 0777) != 0 && errno != EEXIST;
        if (bad)
            PyErr_SetFromErrnoWithFilename(PyExc_OSError, first);
        *slash = '/';
        if (bad)
            return -1;
    }
    return 0;
}

/* The ends of task flows given to export(): a sequence of (id, thread
 * position, t_ns, ends, name) sorted by thread then time (a list or a
 * tuple), into a new array (*out, *n; NULL and 0 for None) whose names
 * point into the strings `seq` holds (the caller's, alive during the call). Returns 0, or -1 with a
 * ValueError / TypeError / MemoryError set. */
static int parse_task_flows(PyObject *seq, TraceObject *self, sw_export_task_flow **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (seq == Py_None)
        return 0;
    if (!PyList_Check(seq) && !PyTuple_Check(seq)) {   /* (a list or tuple holds the names' strings) */
        PyErr_SetString(PyExc_TypeError, "task_flows must be a list of (id, thread, t_ns, ends, name)");
        return -1;
    }
    PyObject *fast = PySequence_Fast(seq, "task_flows must be a list of (id, thread, t_ns, ends, name)");
    if (!fast)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    sw_export_task_flow *f = PyMem_Calloc(len ? (size_t)len : 1, sizeof *f);
    if (!f) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    size_t threads = sw_trace_thread_count(self->t);
    for (Py_ssize_t i = 0; i < len; i++) {
        unsigned long long id, thread;
        long long t_ns;
        int ends;
        const char *name;
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "KKLps", &id, &thread, &t_ns, &ends, &name)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a task flow is a tuple (id, thread, t_ns, ends, name)");
            goto fail;
        }
        if (!id || thread >= threads || (i && (thread < f[i - 1].thread ||
                                              (thread == f[i - 1].thread && t_ns < f[i - 1].t_ns)))) {
            PyErr_Format(PyExc_ValueError, "task flow %zd: a zero id, a thread out of range, or not sorted by "
                         "thread then time", i);
            goto fail;
        }
        f[i] = (sw_export_task_flow){id, (size_t)thread, t_ns, ends, name, NULL};
    }
    Py_DECREF(fast);
    *out = f;
    *n = (size_t)len;
    return 0;
fail:
    Py_DECREF(fast);
    PyMem_Free(f);
    return -1;
}

static PyObject *Trace_export(TraceObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"format", "path", "min_duration_ns", "filter", "progress", "task_flows", NULL};
    const char *fmt;
    PyObject *path_obj, *spec = Py_None, *progress = Py_None, *flows_obj = Py_None;
    long long min_ns = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO&|LOOO", kwlist, &fmt, PyUnicode_FSConverter, &path_obj, &min_ns,
                                     &spec, &progress, &flows_obj))
        return NULL;
    const sw_exporter *ex = sw_exporter_find(fmt);
    if (!ex) {
        Py_DECREF(path_obj);
        return unknown_exporter(fmt);
    }
    sw_export_fn fn = ex->write;
    sw_export_task_flow *flows;
    size_t nflows;
    if (parse_task_flows(flows_obj, self, &flows, &nflows) < 0) {
        Py_DECREF(path_obj);
        return NULL;
    }
    sw_py_filter pf;
    if (sw_py_filter_parse(spec, self->t, &pf) < 0) {
        Py_DECREF(path_obj);
        PyMem_Free(flows);
        return NULL;
    }
    const char *dir = ex->directory ? PyBytes_AS_STRING(path_obj) : NULL;
    char first[4096];
    if (dir && output_dir(dir, ex->directory, first, sizeof first) < 0) {
        Py_DECREF(path_obj);
        sw_py_filter_free(&pf);
        PyMem_Free(flows);
        return NULL;
    }
    FILE *f = fopen(dir ? first : PyBytes_AS_STRING(path_obj), "wb");
    if (!f) {
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, dir ? first : PyBytes_AS_STRING(path_obj));
        Py_DECREF(path_obj);
        sw_py_filter_free(&pf);
        PyMem_Free(flows);
        return NULL;
    }
    sw_export_opts o = {min_ns, &pf.f, NULL, dir, flows, nflows};
    char err[256] = "";
    sw_py_progress pr;
    sw_py_progress_begin(&pr, self->t, progress);
    int rc = fn(self->t, f, &o, err, sizeof err);
    if (fclose(f) != 0 && !rc) {
        rc = SW_EIO;
        snprintf(err, sizeof err, "%s", strerror(errno));
    }
    int raised = sw_py_progress_end(&pr);
    sw_py_filter_free(&pf);
    PyMem_Free(flows);
    if (raised < 0 || rc) {
        if (raised == 0)
            sw_pyerr(rc, PyExc_OSError, "%s: %s", PyBytes_AS_STRING(path_obj), err);
        Py_DECREF(path_obj);
        return NULL;
    }
    Py_DECREF(path_obj);
    Py_RETURN_NONE;
}

/* export_merged(traces, format, path, min_duration_ns=0): several traces
 * (processes) as one output (trace/merge.h). */
static PyObject *export_merged(PyObject *module, PyObject *args, PyObject *kw)
{
    (void)module;
    static char *kwlist[] = {"traces", "format", "path", "min_duration_ns", NULL};
    PyObject *seq, *path_obj;
    const char *fmt;
    long long min_ns = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OsO&|L", kwlist, &seq, &fmt, PyUnicode_FSConverter, &path_obj,
                                     &min_ns))
        return NULL;
    const sw_exporter *ex = sw_exporter_find(fmt);
    PyObject *list = NULL;
    sw_trace **ts = NULL;
    FILE *f = NULL;
    if (!ex) {
        unknown_exporter(fmt);
        goto out;
    }
    if (ex->directory) {
        PyErr_Format(PyExc_ValueError, "the %s export of several processes is not supported yet: export one trace",
                     fmt);
        goto out;
    }
    if (!(list = PySequence_Fast(seq, "traces must be a sequence of Trace objects")))
        goto out;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(list);
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "export_merged needs at least one trace");
        goto out;
    }
    if (!(ts = PyMem_Calloc((size_t)n, sizeof *ts))) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(list, i);
        if (!PyObject_TypeCheck(item, &TraceType) || !((TraceObject *)item)->t) {
            PyErr_SetString(PyExc_TypeError, "traces must be a sequence of opened Trace objects");
            goto out;
        }
        ts[i] = ((TraceObject *)item)->t;
    }
    if (!(f = fopen(PyBytes_AS_STRING(path_obj), "wb"))) {
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, PyBytes_AS_STRING(path_obj));
        goto out;
    }
    sw_export_opts o = {min_ns, NULL, NULL, NULL, NULL, 0};
    char err[256] = "";
    int rc = sw_export_merged(ts, (size_t)n, ex->write, f, &o, err, sizeof err);
    if (fclose(f) != 0 && !rc) {
        rc = SW_EIO;
        snprintf(err, sizeof err, "%s", strerror(errno));
    }
    if (rc)
        sw_pyerr(rc, PyExc_OSError, "%s: %s", PyBytes_AS_STRING(path_obj), err);
out:
    PyMem_Free(ts);
    Py_XDECREF(list);
    Py_DECREF(path_obj);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef module_functions[] = {
    {"export_merged", (PyCFunction)(void (*)(void))export_merged, METH_VARARGS | METH_KEYWORDS,
     "export_merged(traces, format, path, min_duration_ns=0): several traces (processes) as one file of a "
     "format of TRACE_EXPORTERS, on the host's clock, with flows from each child's start to its first slice"},
    {NULL, NULL, 0, NULL},
};

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
     "ext_events(thread_pos, mask=all, all_tasks=False) -> [(kind, t_ns, depth, code, line, data)]: data made by "
     "the kind's row (RECORD_KINDS); all_tasks: every task's of the thread, task switches included"},
    {"ext_summary", (PyCFunction)Trace_ext_summary, METH_VARARGS,
     "ext_summary(filter=None) -> {counts: [per EXT kind], malformed, gc_pairs, gc_ns, gc_collected, gc_uncollectable, "
     "syscalls: [(name, calls, errors, total_ns)], kernel_lost, off_cpu_pairs, off_cpu_ns, faults}"},
    {"kernel_by_function", (PyCFunction)Trace_kernel_by_function, METH_VARARGS,
     "kernel_by_function(filter=None) -> [(thread_pos, code or None, calls, total_ns, off_cpu, off_cpu_ns, "
     "faults)] (run --kernel)"},
    {"sample_frames", (PyCFunction)Trace_sample_frames, METH_NOARGS,
     "sample_frames() -> {id: (kind, name, filename, line)} of the sampler's frames"},
    {"samples", (PyCFunction)Trace_samples, METH_VARARGS,
     "samples(thread_pos=-1) -> [(t_ns, thread_pos, state, flags, weight_ns, cpu_ns, frame ids)]"},
    {"stats", (PyCFunction)(void (*)(void))Trace_stats, METH_VARARGS | METH_KEYWORDS,
     "stats(filter=None, edges=False, progress=None) -> [(thread_pos, code, calls, total_ns, own_ns, prim)] "
     "(with edges: (rows, [(thread_pos, caller, callee, calls, prim, total_ns, own_ns, inclusive_ns)]))"},
    {"events_bytes", (PyCFunction)Trace_events_bytes, METH_NOARGS,
     "events_bytes() -> bytes of event chunks a full replay reads"},
    {"export", (PyCFunction)(void (*)(void))Trace_export, METH_VARARGS | METH_KEYWORDS,
     "export(format, path, min_duration_ns=0, filter=None, progress=None, task_flows=None): write the trace in a format of "
     "TRACE_EXPORTERS (perfetto protobuf, chrome JSON, a ctf directory)"},
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

/* RECORD_KINDS: the table of EXT record kinds (trace/records.h), one
 * tuple per kind: (number, name, since, source, category, label, shape, pair,
 * stat, title, track, ((field, type, slot, interned), ...)), shape, stat,
 * title, type and slot by name (interned: a str written as a STRINGS
 * entry's id, format 1.16); TRACE_EXPORTERS: the table of exporters
 * (trace/exporters.h), (name, suffix, binary) each; and THREAD_STATES:
 * the names of the samples' thread states by number (base/sample.h). */
static int add_record_kinds(PyObject *m)
{
    PyObject *kinds = PyTuple_New((Py_ssize_t)sw_record_kind_count);
    for (size_t i = 0; kinds && i < sw_record_kind_count; i++) {
        const sw_record_kind *k = &sw_record_kinds[i];
        PyObject *fields = PyTuple_New(k->nfields);
        for (unsigned j = 0; fields && j < k->nfields; j++) {
            const sw_record_field *f = &k->fields[j];
            PyObject *ft = Py_BuildValue("(sssN)", f->name, sw_record_type_name(f->type), sw_record_slot_name(f->slot),
                                         PyBool_FromLong(f->interned));
            if (!ft)
                Py_CLEAR(fields);
            else
                PyTuple_SET_ITEM(fields, j, ft);
        }
        PyObject *row = fields ? Py_BuildValue("(IsIssssIsszN)", k->number, k->name, k->since, k->source, k->category,
                                               k->label, sw_record_shape_name(k->shape), k->pair,
                                               sw_record_stat_name(k->stat), sw_record_slot_name(k->title), k->track,
                                               fields)
                               : NULL;
        if (!row)
            Py_CLEAR(kinds);
        else
            PyTuple_SET_ITEM(kinds, (Py_ssize_t)i, row);
    }
    if (!kinds || PyModule_AddObject(m, "RECORD_KINDS", kinds) < 0) {
        Py_XDECREF(kinds);
        return -1;
    }
    PyObject *exporters = PyTuple_New((Py_ssize_t)sw_exporter_count);
    for (size_t i = 0; exporters && i < sw_exporter_count; i++) {
        const sw_exporter *e = &sw_exporters[i];
        PyObject *row = Py_BuildValue("(ssOO)", e->name, e->suffix, e->binary ? Py_True : Py_False,
                                      e->directory ? Py_True : Py_False);
        if (!row)
            Py_CLEAR(exporters);
        else
            PyTuple_SET_ITEM(exporters, (Py_ssize_t)i, row);
    }
    if (!exporters || PyModule_AddObject(m, "TRACE_EXPORTERS", exporters) < 0) {
        Py_XDECREF(exporters);
        return -1;
    }
    PyObject *states = PyDict_New();
#define SW_X_STATE_ADD_(K, n, name)                                      \
    if (states) {                                                        \
        PyObject *key = PyLong_FromUnsignedLong(n);                      \
        PyObject *v = PyUnicode_FromString(#name);                       \
        if (!key || !v || PyDict_SetItem(states, key, v) < 0)            \
            Py_CLEAR(states);                                            \
        Py_XDECREF(key);                                                 \
        Py_XDECREF(v);                                                   \
    }
    SW_THREAD_STATES(SW_X_STATE_ADD_)
#undef SW_X_STATE_ADD_
    if (!states || PyModule_AddObject(m, "THREAD_STATES", states) < 0) {
        Py_XDECREF(states);
        return -1;
    }
    return 0;
}

int sw_trace_type_add_to_module(PyObject *m)
{
    if (PyType_Ready(&TraceType) < 0 || PyModule_AddObject(m, "Trace", Py_NewRef((PyObject *)&TraceType)) < 0 ||
        PyModule_AddFunctions(m, module_functions) < 0)
        return -1;
    static const struct { const char *name; long value; } consts[] = {
        {"FORMAT_MAJOR", SW_FORMAT_MAJOR}, {"OP_CALL", SW_OP_CALL}, {"OP_RETURN", SW_OP_RETURN},
        {"OP_RESUME", SW_OP_RESUME}, {"OP_YIELD", SW_OP_YIELD}, {"OP_UNWIND", SW_OP_UNWIND},
        {"OP_C_CALL", SW_OP_C_CALL}, {"OP_C_RETURN", SW_OP_C_RETURN}, {"EV_DROPPED", SW_EV_DROPPED},
    };
    for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++)
        if (PyModule_AddIntConstant(m, consts[i].name, consts[i].value) < 0)
            return -1;
    return add_record_kinds(m);
}
