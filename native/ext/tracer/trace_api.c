/*
 * trace_api.c - the tracer's functions in stackwatch._native: start, stop,
 * is_tracing, the session's steps around exec and fork
 * (src/stackwatch/tracer/session.py calls them), and the named regions a
 * program marks (region_begin/region_end, src/stackwatch/tracer/regions.py).
 */
#include "trace_api.h"

#include "ext/dispatch/kinds.h"
#include "ext/tracer/thread_state.h"
#include "ext/tracer/flusher.h"
#include "ext/tracer/kernel_trace.h"
#include "ext/tracer/native_frames.h"
#include "ext/tracer/session.h"

#include "trace/trace.h"

#include <string.h>

static PyObject *py_start(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"path", "chunk_bytes", "ring_bytes", "max_depth", "allow_tsc", "meta",
                             "include", "exclude", "c_calls", "flush_interval", "events", "lines", "kernel", "cython", "native_include", "native_exclude", "cpu", "calls", NULL};
    PyObject *path_obj;
    Py_ssize_t chunk = 256 * 1024, ring = 0, max_depth = 0;
    int allow_tsc = 1, c_calls = 0, cython = 0, cpu = 0, calls = 1;
    double flush_interval = 0.25;
    unsigned long events = 0;
    PyObject *meta = NULL, *inc = Py_None, *exc = Py_None, *lines = Py_None, *ninc = Py_None, *nexc = Py_None;
    const char *kernel = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|nnnpOOOpdkOzpOOpp", kwlist, PyUnicode_FSConverter, &path_obj,
                                     &chunk, &ring, &max_depth, &allow_tsc, &meta, &inc, &exc, &c_calls,
                                     &flush_interval, &events, &lines, &kernel, &cython, &ninc, &nexc, &cpu, &calls))
        return NULL;
    if (chunk < 4096 || chunk > (Py_ssize_t)(SW_CHUNK_MAX / 2)) {
        Py_DECREF(path_obj);
        return PyErr_Format(PyExc_ValueError, "buffer size must be between 4 KiB and %u MiB",
                            (unsigned)(SW_CHUNK_MAX / 2 >> 20));
    }
    if (!(flush_interval == 0 || (flush_interval >= 0.001 && flush_interval <= 3600))) {
        Py_DECREF(path_obj);
        return PyErr_Format(PyExc_ValueError, "flush interval must be 0 (off) or between 1 ms and 1 hour");
    }
    if (ring < 0 || max_depth < 0 || max_depth > 0x7fffffff) {
        Py_DECREF(path_obj);
        return PyErr_Format(PyExc_ValueError, "ring size and max depth must not be negative");
    }
    if (events & ~(unsigned long)SW_MASK_ALL) {
        Py_DECREF(path_obj);
        return PyErr_Format(PyExc_ValueError, "invalid event mask %lu", events);
    }
    if (!calls && (c_calls || cython || cpu || max_depth)) {
        Py_DECREF(path_obj);
        return PyErr_Format(PyExc_ValueError, "%s describes the call records: it cannot go with calls=False",
                            c_calls ? "c_calls" : cython ? "cython" : cpu ? "cpu" : "max_depth");
    }
    if (sw_native_frames_filters(ninc, nexc) < 0) {
        Py_DECREF(path_obj);
        return NULL;
    }
    sw_start_opts o = {PyBytes_AS_STRING(path_obj), (size_t)chunk, (size_t)ring, (uint32_t)max_depth,
                       allow_tsc, meta, inc, exc, c_calls, flush_interval, (uint32_t)events, lines, cython, cpu,
                       !calls};
    int rc = sw_session_start(&o);
    Py_DECREF(path_obj);
    if (rc < 0)
        return NULL;
    char kernel_msg[512] = "";
    if (kernel)
        sw_kernel_trace_start(kernel, kernel_msg, sizeof kernel_msg);
    /* kernel=...: what the kernel reader could not do (or a note), for the
     * caller to say; the session runs either way. */
    if (kernel_msg[0])
        return PyUnicode_FromString(kernel_msg);
    Py_RETURN_NONE;
}

/* stop(end=None): `end` is a dict of more END keys, "sampler.<name>" -> int
 * >= 0 (the sampler's counts of a `run --sample` trace; the prefix keeps
 * them from replacing the writer's own keys). Checked before anything
 * stops, so a bad argument leaves the session running. */
static PyObject *py_stop(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"end", NULL};
    PyObject *end = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:stop", kwlist, &end))
        return NULL;
    sw_bytes kv = {0};
    if (end != Py_None) {
        if (!PyDict_Check(end)) {
            PyErr_SetString(PyExc_TypeError, "stop(end=...) takes a dict of str -> int");
            return NULL;
        }
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(end, &pos, &k, &v)) {
            const char *key = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
            unsigned long long n = PyLong_Check(v) ? PyLong_AsUnsignedLongLong(v) : (unsigned long long)-1;
            if (!key || PyErr_Occurred() || !PyLong_Check(v) || strncmp(key, "sampler.", 8) != 0) {
                PyErr_Clear();
                sw_bytes_free(&kv);
                PyErr_SetString(PyExc_TypeError, "stop(end=...) takes a dict of 'sampler.<name>' -> int >= 0");
                return NULL;
            }
            sw_kv_uint(&kv, key, n);
        }
    }
    PyObject *r = sw_session_stop(kv.len ? &kv : NULL);
    sw_bytes_free(&kv);
    return r;
}

static PyObject *py_is_tracing(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(sw_S.gen != 0);
}

/* Everything recorded so far into the file, tracing going on (the process
 * is about to exec). */
static PyObject *py_flush_all(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    pthread_mutex_lock(&sw_S.lock);
    if (sw_S.gen && sw_S.w)
        sw_writer_flush_all(sw_S.w);
    pthread_mutex_unlock(&sw_S.lock);
    Py_RETURN_NONE;
}

static PyObject *py_before_fork(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    sw_flusher_pause();
    Py_RETURN_NONE;
}

static PyObject *py_after_fork_parent(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    sw_flusher_resume();
    Py_RETURN_NONE;
}

static PyObject *py_after_fork_child(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(sw_session_after_fork_child());
}

/* Records a REGION_BEGIN (name) or REGION_END (name NULL) event in the
 * calling thread's stream. Returns whether it was recorded: not when no
 * session runs, or the thread cannot record (stackwatch's own code runs on
 * it, or it is being torn down). The name is cut at 200 bytes, on a
 * character boundary, like every name of an EXT record (an embedded NUL
 * ends it). */
static PyObject *record_region(const char *name)
{
    sw_tracer_thread *t = &sw_TT;
    if (!sw_S.gen || sw_T.busy || !sw_thread_attach(t))
        Py_RETURN_FALSE;
    uint32_t kind = name ? SW_EXT_REGION_BEGIN : SW_EXT_REGION_END;
    sw_ext v = {.s1 = name};
    uint8_t buf[SW_VARINT_MAX + 200];
    long n = sw_record_encode(kind, &v, 200, buf, sizeof buf);
    if (n < 0)
        Py_RETURN_FALSE;
    sw_tbuf_ext(t->tb, sw_clock_now(&sw_S.clock), kind, buf, (size_t)n);
    Py_RETURN_TRUE;
}

static PyObject *py_region_begin(PyObject *self, PyObject *arg)
{
    (void)self;
    if (!PyUnicode_Check(arg))
        return PyErr_Format(PyExc_TypeError, "a region's name must be a str, not %.100s", Py_TYPE(arg)->tp_name);
    PyObject *b = PyUnicode_AsEncodedString(arg, "utf-8", "backslashreplace");
    if (!b)
        return NULL;
    PyObject *r = record_region(PyBytes_AS_STRING(b));
    Py_DECREF(b);
    return r;
}

static PyObject *py_region_end(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return record_region(NULL);
}

/* fn(*args) of the tuple args, with this thread marked busy (quiet: 0)
 * or quiet (1) meanwhile. */
static PyObject *call_marked(PyObject *args, int quiet, const char *what)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n < 1 || !PyCallable_Check(PyTuple_GET_ITEM(args, 0)))
        return PyErr_Format(PyExc_TypeError, "%s(fn, *args): fn must be callable", what);
    PyObject *rest = PyTuple_GetSlice(args, 1, n);
    if (!rest)
        return NULL;
    if (quiet)
        sw_quiet_enter(&sw_T);
    else
        sw_busy_enter(&sw_T);
    PyObject *r = PyObject_Call(PyTuple_GET_ITEM(args, 0), rest, NULL);
    if (quiet)
        sw_quiet_exit(&sw_T);
    else
        sw_busy_exit(&sw_T);
    Py_DECREF(rest);
    return r;
}

/* unrecorded(fn, *args): calls fn(*args) with this thread marked busy, as
 * for a handler: stackwatch's own Python work inside the traced window
 * (setting up following, the finisher) and every call it makes are not
 * the program's and are not recorded. */
static PyObject *py_unrecorded(PyObject *self, PyObject *args)
{
    (void)self;
    return call_marked(args, 0, "unrecorded");
}

/* quiet(fn, *args): calls fn(*args) with this thread marked quiet:
 * stackwatch's own work that records the program's state (the tasks alive
 * as task events start): its calls are not recorded, its task events
 * are. */
static PyObject *py_quiet(PyObject *self, PyObject *args)
{
    (void)self;
    return call_marked(args, 1, "quiet");
}

int sw_trace_api_is_quiet(PyObject *fn)
{
    return fn && PyCFunction_Check(fn) && ((PyCFunctionObject *)fn)->m_ml->ml_meth == py_quiet;
}

static PyMethodDef methods[] = {
    {"start", (PyCFunction)(void (*)(void))py_start, METH_VARARGS | METH_KEYWORDS,
     "start(path, chunk_bytes=262144, ring_bytes=0, max_depth=0, allow_tsc=True, meta=None, include=None, "
     "exclude=None, c_calls=False, flush_interval=0.25, events=0, lines=None, kernel=None, cython=False, native_include=None, native_exclude=None, cpu=False) -> None, or a line "
     "saying why the kernel events asked for (kernel='syscalls') are not recorded"},
    {"stop", (PyCFunction)(void (*)(void))py_stop, METH_VARARGS | METH_KEYWORDS,
     "stop(end=None) -> dict of totals; end: more END keys (str -> int)"},
    {"is_tracing", py_is_tracing, METH_NOARGS, "is_tracing() -> bool"},
    {"unrecorded", py_unrecorded, METH_VARARGS, "unrecorded(fn, *args): fn(*args), its calls not recorded"},
    {"quiet", py_quiet, METH_VARARGS,
     "quiet(fn, *args): fn(*args), its calls not recorded, the task events it records kept"},
    {"_after_fork_child", py_after_fork_child, METH_NOARGS, "forget the parent's session (fork child) -> whether there was one"},
    {"_flush_all", py_flush_all, METH_NOARGS, "write every event recorded so far, tracing going on (before exec)"},
    {"_before_fork", py_before_fork, METH_NOARGS, "stop the background flusher before fork()"},
    {"_after_fork_parent", py_after_fork_parent, METH_NOARGS, "restart the background flusher after fork()"},
    {"region_begin", py_region_begin, METH_O,
     "region_begin(name) -> whether recorded: a named region of this thread begins (trace format 1.6)"},
    {"region_end", py_region_end, METH_NOARGS,
     "region_end() -> whether recorded: this thread's innermost open region ends"},
    {NULL, NULL, 0, NULL},
};

int sw_trace_api_add_to_module(PyObject *m)
{
    return PyModule_AddFunctions(m, methods);
}
