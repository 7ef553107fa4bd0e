/*
 * lttng_events.c - the --lttng consumer (lttng_events.h). lttng_enable()
 * loads libstackwatch_lttng.so (RTLD_LOCAL, once; the build installs it
 * beside _native only where the lttng-ust headers were found) and asks the
 * dispatch layer for Python frame events (sw_D.lttng); each one becomes a
 * stackwatch:function_entry or function_exit tracepoint with the code's
 * qualified name, file and line: the frames the trace records (a frame the
 * file tracer leaves out, by its filters or as stackwatch's own code, is
 * left out here too), so that both count the same calls. So do the task
 * events the trace records (`--events tasks`: stackwatch:task_switch ...
 * task_woken) and the native functions it records (the runtime hands each
 * recorded entry and exit to ext/tracer/native_frames.c, which calls
 * sw_lttng_emit_native: stackwatch:native_entry / native_exit), and the
 * kernel events `--kernel` records (ext/tracer/kernel_trace.c, on the
 * kernel reader's thread, calls sw_lttng_emit_kernel: stackwatch:syscall_entry
 * ... page_fault, each with its thread and its own time, while
 * lttng_kernel(True) holds: `run --lttng` sets it before tracing starts
 * and clears it after it stopped, so that every kernel record of the
 * trace is emitted, those the reader hands at its stop too). The
 * tracepoints record only while an LTTng session has them enabled; the
 * hooks run while --lttng is on.
 */
#include "lttng_events.h"

#include "lttng/lttng_provider.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static sw_lttng_fn entry_fn, exit_fn;
static sw_lttng_native_fn native_fn;
static sw_lttng_task_fn task_fn;
static sw_lttng_kernel_fn kernel_fn;
/* kernel_fn while --lttng is on, else NULL: read by the kernel reader's
 * thread, without the GIL. */
static _Atomic(sw_lttng_kernel_fn) kernel_on;

/* The provider's task events are the dispatch layer's, in its order. */
#define SW_X_LTTNG_COUNT_(name) +1
_Static_assert(SW_K_TASK_WOKEN - SW_K_TASK_SWITCH + 1 == 0 SW_LTTNG_TASKS(SW_X_LTTNG_COUNT_),
               "lttng_provider.h SW_LTTNG_TASKS: one per task kind of kinds.h");

static const char *utf8(PyObject *s)
{
    const char *c = (s && PyUnicode_Check(s)) ? PyUnicode_AsUTF8(s) : NULL;
    if (!c)
        PyErr_Clear();
    return c ? c : "";
}

void sw_lttng_emit(int kind, const sw_evdata *d)
{
    sw_lttng_fn fn;
    switch (kind) {
    case SW_K_CALL:
    case SW_K_RESUME:
        fn = entry_fn;
        break;
    case SW_K_RETURN:
    case SW_K_YIELD:
    case SW_K_UNWIND:
        fn = exit_fn;
        break;
    default:
        if (task_fn && kind >= SW_K_TASK_SWITCH && kind <= SW_K_TASK_WOKEN) {
#if PY_VERSION_HEX >= 0x030B0000
            const char *where = d->code ? utf8(d->code->co_qualname) : "";
#else
            const char *where = d->code ? utf8(d->code->co_name) : "";
#endif
            task_fn(kind - SW_K_TASK_SWITCH, where, d->code ? utf8(d->code->co_filename) : "", d->line, d->a, d->b,
                    d->c, d->name ? d->name : "", d->file ? d->file : "");
        }
        return;
    }
    if (!fn || !d->code || d->unrecorded)
        return;
#if PY_VERSION_HEX >= 0x030B0000
    const char *name = utf8(d->code->co_qualname);
#else
    const char *name = utf8(d->code->co_name);
#endif
    fn(name, utf8(d->code->co_filename), d->line);
}

void sw_lttng_emit_native(int exit, const char *name, const char *file, int line, void *addr)
{
    if (native_fn && sw_D.lttng)
        native_fn(exit, name ? name : "", file ? file : "", line, (uintptr_t)addr);
}

void sw_lttng_emit_kernel(int kind, uint32_t tid, uint64_t ts, uint32_t cpu, int64_t a, int64_t b, int64_t c,
                          const char *s1, const char *s2)
{
    sw_lttng_kernel_fn fn = atomic_load_explicit(&kernel_on, memory_order_acquire);
    if (fn)
        fn(kind, tid, ts, cpu, a, b, c, s1 ? s1 : "", s2 ? s2 : "");
}

/* Loads the provider library (once). 0, or -1 with RuntimeError set (the
 * reason in one line). */
static int load(void)
{
    static void *handle;
    if (handle)
        return 0;
    Dl_info info;
    char path[4096];
    if (!dladdr((void *)(uintptr_t)sw_lttng_emit, &info) || !info.dli_fname) {
        PyErr_SetString(PyExc_RuntimeError, "--lttng: cannot find stackwatch's own folder");
        return -1;
    }
    const char *slash = strrchr(info.dli_fname, '/');
    int dir = slash ? (int)(slash - info.dli_fname) : 0;
    if (snprintf(path, sizeof path, "%.*s%slibstackwatch_lttng.so", dir, info.dli_fname, slash ? "/" : "") >=
        (int)sizeof path) {
        PyErr_SetString(PyExc_RuntimeError, "--lttng: stackwatch's folder has too long a path");
        return -1;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        if (e && strstr(e, "No such file"))
            PyErr_SetString(PyExc_RuntimeError, "--lttng: this stackwatch was built without LTTng-UST (install "
                                                "its headers, Debian liblttng-ust-dev, and rebuild)");
        else
            PyErr_Format(PyExc_RuntimeError, "--lttng: cannot load %s: %s", path, e ? e : "unknown error");
        return -1;
    }
    sw_lttng_fn en = (sw_lttng_fn)(uintptr_t)dlsym(h, SW_LTTNG_ENTRY_SYMBOL);
    sw_lttng_fn ex = (sw_lttng_fn)(uintptr_t)dlsym(h, SW_LTTNG_EXIT_SYMBOL);
    sw_lttng_native_fn na = (sw_lttng_native_fn)(uintptr_t)dlsym(h, SW_LTTNG_NATIVE_SYMBOL);
    sw_lttng_task_fn ta = (sw_lttng_task_fn)(uintptr_t)dlsym(h, SW_LTTNG_TASK_SYMBOL);
    sw_lttng_kernel_fn ke = (sw_lttng_kernel_fn)(uintptr_t)dlsym(h, SW_LTTNG_KERNEL_SYMBOL);
    if (!en || !ex || !na || !ta || !ke) {
        dlclose(h);
        PyErr_Format(PyExc_RuntimeError, "--lttng: %s lacks its entry points", path);
        return -1;
    }
    handle = h;   /* (never closed: lttng-ust keeps threads of its own) */
    entry_fn = en;
    exit_fn = ex;
    native_fn = na;
    task_fn = ta;
    kernel_fn = ke;
    return 0;
}

static PyObject *py_load(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (load() < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_enable(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (load() < 0)
        return NULL;
    /* The calls, and the task events when the trace records them. */
    uint32_t mask = SW_MASK_CALLS | (sw_D.file & SW_GROUP_MASK(TASKS));
    if (sw_D.lttng != mask) {
        sw_D.lttng = mask;
        sw_dispatch_changed();
    }
    Py_RETURN_NONE;
}

static PyObject *py_disable(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (sw_D.lttng) {
        sw_D.lttng = 0;
        sw_dispatch_changed();
    }
    Py_RETURN_NONE;
}

static PyObject *py_kernel(PyObject *self, PyObject *on)
{
    (void)self;
    int yes = PyObject_IsTrue(on);
    if (yes < 0)
        return NULL;
    if (yes && load() < 0)
        return NULL;
    atomic_store_explicit(&kernel_on, yes ? kernel_fn : NULL, memory_order_release);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"lttng_load", py_load, METH_NOARGS,
     "lttng_load(): loads libstackwatch_lttng.so (RuntimeError, with the reason, if it cannot be)"},
    {"lttng_enable", py_enable, METH_NOARGS,
     "lttng_enable(): emits the Python frame events, the native functions and the task events the trace records "
     "to the LTTng-UST tracepoints stackwatch:function_entry / function_exit, native_entry / "
     "native_exit and task_switch ... task_woken (loads libstackwatch_lttng.so; RuntimeError if it cannot be)"},
    {"lttng_disable", py_disable, METH_NOARGS, "lttng_disable(): stops emitting them"},
    {"lttng_kernel", py_kernel, METH_O,
     "lttng_kernel(on): while on, emits the kernel events the trace records (--kernel, all the kernel reader "
     "hands, from its start to its stop) to stackwatch:syscall_entry / syscall_exit, off_cpu, on_cpu, wakeup and "
     "page_fault, each with its thread and time (loads libstackwatch_lttng.so; RuntimeError if it cannot be)"},
    {NULL, NULL, 0, NULL},
};

int sw_lttng_add_to_module(PyObject *m)
{
    return PyModule_AddFunctions(m, methods);
}
