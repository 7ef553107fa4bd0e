/*
 * probes.c - USDT probes (provider "stackwatch") for bpftrace, SystemTap
 * and perf, with the classic CPython DTrace names and arguments:
 *
 *   function__entry(file, function, line)   a Python frame starts or resumes
 *                                           (line: the function's first)
 *   function__return(file, function, line)  it returns, suspends or unwinds
 *                                           (line: the one it leaves from)
 *   line(file, function, line)
 *   gc__start(generation)  gc__done(collected)
 *   instance__new__start(class, file)  instance__new__done(class, file)
 *   instance__delete__start(class, file)  instance__delete__done(class, file)
 * and, beyond the classic set:
 *   c__call(name)  c__return(name)  exception__raise(type, file, line)
 *   thread__start(name, native_id)  thread__exit(name, native_id)
 *
 * Each probe has a semaphore that the kernel raises while a tool is
 * attached. A watcher thread (started by `stackwatch run --probes` or
 * stackwatch.probes.watch()) polls the semaphores and, when the set of
 * attached probes changes, asks the dispatch layer (through a pending call,
 * in the main thread) to turn on exactly the hooks those probes need; with
 * nothing attached no hook is on and a probe costs nothing.
 *
 * Built only where <sys/sdt.h> is found (SW_HAVE_SDT, set by
 * src/stackwatch/meson.build).
 */
#include "probes.h"

#include "ext/shared/ticker.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

/* Every probe, once: X(name). */
#define SW_PROBES(X)                                                                        \
    X(function__entry) X(function__return) X(line) X(gc__start) X(gc__done)                 \
    X(instance__new__start) X(instance__new__done) X(instance__delete__start)               \
    X(instance__delete__done) X(c__call) X(c__return) X(exception__raise)                   \
    X(thread__start) X(thread__exit)

#ifdef SW_HAVE_SDT
#  define _SDT_HAS_SEMAPHORES 1
#  include <sys/sdt.h>
#  define SEM(name) __attribute__((section(".probes"), used)) volatile unsigned short stackwatch_##name##_semaphore;
SW_PROBES(SEM)
#  define ON(name) (stackwatch_##name##_semaphore != 0)
#else
#  define ON(name) 0
#endif

#define NAME(name) #name,
static const char *const probe_names[] = {SW_PROBES(NAME)};

uint32_t sw_probes_poll(void)
{
    uint32_t m = 0;
    if (ON(function__entry) || ON(function__return))
        m |= SW_MASK_CALLS;
    if (ON(line))
        m |= SW_EVB(SW_K_LINE);
    if (ON(gc__start))
        m |= SW_EVB(SW_K_GC_START);
    if (ON(gc__done))
        m |= SW_EVB(SW_K_GC_DONE);
    if (ON(instance__new__start) || ON(instance__new__done))
        m |= SW_EVB(SW_K_NEW_START) | SW_EVB(SW_K_NEW_DONE);
    if (ON(instance__delete__start) || ON(instance__delete__done))
        m |= SW_EVB(SW_K_DEL_START) | SW_EVB(SW_K_DEL_DONE);
    if (ON(c__call) || ON(c__return))
        m |= SW_MASK_C_CALLS;
    if (ON(exception__raise))
        m |= SW_EVB(SW_K_RAISE);
    if (ON(thread__start))
        m |= SW_EVB(SW_K_THREAD_START);
    if (ON(thread__exit))
        m |= SW_EVB(SW_K_THREAD_EXIT);
    return m;
}

#ifdef SW_HAVE_SDT
static const char *utf8(PyObject *s)
{
    const char *c = (s && PyUnicode_Check(s)) ? PyUnicode_AsUTF8(s) : NULL;
    if (!c)
        PyErr_Clear();
    return c ? c : "";
}
#endif

void sw_probes_emit(int kind, const sw_evdata *d)
{
#ifdef SW_HAVE_SDT
    const char *file = d->code ? utf8(d->code->co_filename) : "";
    const char *func = d->code ? utf8(d->code->co_name) : "";
    const char *name = d->name ? d->name : "";
    int line = d->line;
    switch (kind) {
    case SW_K_CALL:
    case SW_K_RESUME:
        if (ON(function__entry))
            STAP_PROBE3(stackwatch, function__entry, file, func, line);
        break;
    case SW_K_RETURN:
    case SW_K_YIELD:
    case SW_K_UNWIND:
        if (ON(function__return))
            STAP_PROBE3(stackwatch, function__return, file, func, line);
        break;
    case SW_K_LINE:
        if (ON(line))
            STAP_PROBE3(stackwatch, line, file, func, line);
        break;
    case SW_K_GC_START:
        if (ON(gc__start))
            STAP_PROBE1(stackwatch, gc__start, (int)d->a);
        break;
    case SW_K_GC_DONE:
        if (ON(gc__done))
            STAP_PROBE1(stackwatch, gc__done, (long)d->b);
        break;
    case SW_K_NEW_START:
        if (ON(instance__new__start))
            STAP_PROBE2(stackwatch, instance__new__start, name, d->file ? d->file : "");
        break;
    case SW_K_NEW_DONE:
        if (ON(instance__new__done))
            STAP_PROBE2(stackwatch, instance__new__done, name, d->file ? d->file : "");
        break;
    case SW_K_DEL_START:
        if (ON(instance__delete__start))
            STAP_PROBE2(stackwatch, instance__delete__start, name, d->file ? d->file : "");
        break;
    case SW_K_DEL_DONE:
        if (ON(instance__delete__done))
            STAP_PROBE2(stackwatch, instance__delete__done, name, d->file ? d->file : "");
        break;
    case SW_K_C_CALL:
        if (ON(c__call))
            STAP_PROBE1(stackwatch, c__call, name);
        break;
    case SW_K_C_RETURN:
    case SW_K_C_RAISE:
        if (ON(c__return))
            STAP_PROBE1(stackwatch, c__return, name);
        break;
    case SW_K_RAISE:
        if (ON(exception__raise))
            STAP_PROBE3(stackwatch, exception__raise, name, file, line);
        break;
    case SW_K_THREAD_START:
        if (ON(thread__start))
            STAP_PROBE2(stackwatch, thread__start, name, (long)d->a);
        break;
    case SW_K_THREAD_EXIT:
        if (ON(thread__exit))
            STAP_PROBE2(stackwatch, thread__exit, name, (long)d->a);
        break;
    }
#else
    (void)kind;
    (void)d;
#endif
}

/* ---- the watcher ---- */

static sw_ticker watcher;
static volatile uint32_t last_seen;
static volatile int pending;

static int apply(void *unused)
{
    (void)unused;
    pending = 0;
    uint32_t m = sw_probes_poll();
    if (m != sw_D.probes) {
        sw_D.probes = m;
        sw_dispatch_changed();
    }
    return 0;
}

/* On the watcher's thread, every poll interval: when the set of attached
 * probes changed, the hooks are switched by a pending call (with the GIL). */
static void watch_tick(void *arg)
{
    (void)arg;
    uint32_t m = sw_probes_poll();
    if (m != last_seen && !pending) {
        pending = 1;
        if (Py_AddPendingCall(apply, NULL) == 0)
            last_seen = m;
        else
            pending = 0;   /* the queue is full: try again next round */
    }
}

static PyObject *py_watch(PyObject *self, PyObject *args)
{
    (void)self;
    double interval = 0.1;
    if (!PyArg_ParseTuple(args, "|d", &interval))
        return NULL;
    if (!(interval >= 0.001 && interval <= 60))
        return PyErr_Format(PyExc_ValueError, "probe poll interval must be between 1 ms and 60 s");
    if (watcher.running)
        Py_RETURN_FALSE;
    last_seen = sw_D.probes;
    if (sw_ticker_start(&watcher, interval, 1, watch_tick, NULL) != 0)
        return PyErr_Format(PyExc_RuntimeError, "cannot start the probe watcher thread");
    Py_RETURN_TRUE;
}

static PyObject *py_unwatch(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!watcher.running)
        Py_RETURN_FALSE;
    sw_ticker_stop(&watcher);
    if (sw_D.probes) {
        sw_D.probes = 0;
        sw_dispatch_changed();
    }
    Py_RETURN_TRUE;
}

/* The child after fork() has no watcher thread. */
static PyObject *py_forget(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    sw_ticker_forget(&watcher);
    pending = 0;
    Py_RETURN_NONE;
}

static PyObject *py_poll(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    apply(NULL);
    return PyLong_FromUnsignedLong(sw_D.probes);
}

static PyObject *py_semaphore(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *n = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!n)
        return NULL;
#ifdef SW_HAVE_SDT
#  define SEMV(name) if (strcmp(n, #name) == 0) return PyLong_FromLong(stackwatch_##name##_semaphore);
    SW_PROBES(SEMV)
#endif
    return PyErr_Format(PyExc_ValueError, "no probe named %s", n);
}

static PyMethodDef methods[] = {
    {"_probe_semaphore", py_semaphore, METH_O, "the semaphore of a probe (nonzero: a tool is attached)"},
    {"_probes_watch", py_watch, METH_VARARGS, "start the semaphore watcher thread"},
    {"_probes_unwatch", py_unwatch, METH_NOARGS, "stop it"},
    {"_probes_forget", py_forget, METH_NOARGS, "after fork, in the child"},
    {"_probes_poll", py_poll, METH_NOARGS, "read the semaphores now; returns the probes' event mask"},
    {NULL, NULL, 0, NULL},
};

int sw_probes_add_to_module(PyObject *m)
{
    size_t n = sizeof probe_names / sizeof *probe_names;
    PyObject *names = PyTuple_New((Py_ssize_t)n);
    if (!names)
        return -1;
    for (size_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(names, (Py_ssize_t)i, PyUnicode_FromString(probe_names[i]));
    if (PyModule_AddObject(m, "PROBE_NAMES", names) < 0)
        return -1;
#ifdef SW_HAVE_SDT
    if (PyModule_AddIntConstant(m, "PROBES_AVAILABLE", 1) < 0)
#else
    if (PyModule_AddIntConstant(m, "PROBES_AVAILABLE", 0) < 0)
#endif
        return -1;
    return PyModule_AddFunctions(m, methods);
}
