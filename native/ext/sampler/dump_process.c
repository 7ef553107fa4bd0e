/*
 * dump_process.c - _native.dump_process: one reading of every thread's
 * stack of another Python process (see dump_process.h).
 */
#include "dump_process.h"
#include "target_open.h"

#include "procmem/procmem.h"

#include <stdio.h>
#include <string.h>

#define DUMP_ROUNDS 5   /* rounds taken until every thread's stack reads whole */

typedef struct dump_sink {
    PyObject *threads;   /* list, or NULL after an error */
    int failed;          /* threads whose stack could not be read */
    sw_mem *mem;         /* with locals: the target's memory, and ... */
    const sw_py_layout *layout;   /* ... its layout (sw_pylocals_usable) */
} dump_sink;

static const char *state_name(uint32_t s)
{
    return s == SW_STATE_RUNNING ? "running" : s == SW_STATE_GIL_WAIT ? "gil_wait" : s == SW_STATE_IDLE ? "idle"
                                                                                                       : "unknown";
}

static PyObject *none_ref(void)
{
    Py_INCREF(Py_None);
    return Py_None;
}

/* The int of v's digits, in this process. */
static PyObject *int_of(const sw_pyval *v)
{
    PyObject *x = PyLong_FromLong(0), *shift = PyLong_FromUnsignedLong(v->shift);
    for (uint32_t i = v->ndigits; x && shift && i-- > 0;) {
        PyObject *d = PyLong_FromUnsignedLong(v->digits[i]);
        PyObject *up = d ? PyNumber_Lshift(x, shift) : NULL;
        Py_SETREF(x, up ? PyNumber_Or(up, d) : NULL);
        Py_XDECREF(up);
        Py_XDECREF(d);
    }
    Py_XDECREF(shift);
    if (x && v->negative)
        Py_SETREF(x, PyNumber_Negative(x));
    return x;
}

/* (name, kind, type name, address, value, truncated) of one variable:
 * kind "value" (value: the simple value, made in this process), "other"
 * (value None: only its type and address are known) or "unreadable". */
static int add_local(void *ud, const char *name, const sw_pyval *v)
{
    PyObject *list = ud, *value = NULL;
    const char *kind = "value";
    switch (v->kind) {
    case SW_PYVAL_NONE: value = none_ref(); break;
    case SW_PYVAL_BOOL: value = PyBool_FromLong((long)v->small); break;
    case SW_PYVAL_INT: value = int_of(v); break;
    case SW_PYVAL_FLOAT: value = PyFloat_FromDouble(v->f); break;
    case SW_PYVAL_STR: value = PyUnicode_DecodeUTF8(v->data, (Py_ssize_t)v->len, "replace"); break;
    case SW_PYVAL_BYTES: value = PyBytes_FromStringAndSize(v->data, (Py_ssize_t)v->len); break;
    default:
        kind = v->kind == SW_PYVAL_OTHER ? "other" : "unreadable";
        value = none_ref();
    }
    PyObject *t = value ? Py_BuildValue("(NssKNO)", PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace"),
                                        kind, v->type_name, (unsigned long long)v->addr, value,
                                        v->truncated ? Py_True : Py_False)
                        : NULL;
    if (!t || PyList_Append(list, t) < 0) {
        Py_XDECREF(t);
        return 1;
    }
    Py_DECREF(t);
    return 0;
}

/* The variables of frame i of s, read now: a list, or None where they
 * could not be read. */
static PyObject *locals_of(dump_sink *d, const sw_sample *s, uint32_t i)
{
    PyObject *list = PyList_New(0);
    if (!list)
        return NULL;
    int rc = sw_pylocals_read(d->mem, d->layout, s->frame_addrs[i], s->frames[i]->addr, add_local, list);
    if (PyErr_Occurred()) {
        Py_DECREF(list);
        return NULL;
    }
    if (rc < 0)
        Py_SETREF(list, none_ref());
    return list;
}

static PyObject *frames_of(dump_sink *d, const sw_sample *s)
{
    PyObject *frames = PyList_New(s->depth);
    for (uint32_t i = 0; frames && i < s->depth; i++) {
        const sw_sample_code *c = s->frames[i];
        PyObject *locals = d->mem && s->frame_addrs ? locals_of(d, s, i) : none_ref();
        PyObject *f = locals ? Py_BuildValue("(s#s#iNKzK)", c->name, (Py_ssize_t)c->name_len, c->filename,
                                             (Py_ssize_t)c->filename_len, s->lines ? (int)s->lines[i] : 0, locals,
                                             (unsigned long long)c->addr, c->library,
                                             (unsigned long long)(s->native_pcs ? s->native_pcs[i] : 0))
                             : NULL;
        if (!f) {
            Py_CLEAR(frames);
            break;
        }
        PyList_SET_ITEM(frames, i, f);
    }
    return frames;
}

/* The sink: called during sw_pystack_sample_all, on this thread, with
 * the GIL held. */
static void collect(void *ud, sw_sample *s)
{
    dump_sink *d = ud;
    if (!d->threads)
        return;
    int failed = (s->flags & SW_SAMPLE_FAILED) != 0;
    d->failed += failed;
    PyObject *frames = frames_of(d, s);
    PyObject *gil = (s->flags & SW_SAMPLE_GIL_HELD) ? Py_True : Py_False;
    PyObject *t = frames ? Py_BuildValue("{s:K,s:K,s:O,s:s,s:O,s:N}", "thread_id", (unsigned long long)s->thread_id,
                                         "native_id", (unsigned long long)s->native_tid, "gil", gil, "state",
                                         state_name(s->state), "failed", failed ? Py_True : Py_False, "frames",
                                         frames)
                         : NULL;
    if (!t || PyList_Append(d->threads, t) < 0)
        Py_CLEAR(d->threads);
    Py_XDECREF(t);
}

#define DUMP_MAX_NAMES 4096

/* Sets each thread's "name" to its Python name (threading's Thread.name)
 * where it can be read, else None. -1 only on a Python error. */
static int add_python_names(sw_target *t, const sw_py_layout *l, uint64_t interp, PyObject *threads)
{
    sw_threadname *names = PyMem_Calloc(DUMP_MAX_NAMES, sizeof *names);
    if (!names) {
        PyErr_NoMemory();
        return -1;
    }
    size_t n = 0;
    char err[256];
    Py_BEGIN_ALLOW_THREADS
    sw_threadnames_read(&t->mem, l, interp, names, DUMP_MAX_NAMES, &n, err, sizeof err);   /* none if it fails */
    Py_END_ALLOW_THREADS
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(threads); i++) {
        PyObject *th = PyList_GET_ITEM(threads, i);
        unsigned long long id = PyLong_AsUnsignedLongLong(PyDict_GetItemString(th, "thread_id"));
        PyObject *name = NULL;
        for (size_t k = 0; k < n && !name; k++)
            if (names[k].ident == id)
                name = PyUnicode_DecodeUTF8(names[k].name, (Py_ssize_t)strlen(names[k].name), "replace");
        rc = PyDict_SetItemString(th, "name", name ? name : Py_None);
        Py_XDECREF(name);
    }
    PyMem_Free(names);
    return rc;
}

/* One task as a dict (see dump_process.h). */
static int add_task(void *ud, const sw_aio_task *t)
{
    static const char *const awaits[] = {"nothing", "task", "gather", "future"};
    PyObject *list = ud, *frames = PyList_New(t->depth), *children = PyList_New(t->nchildren),
             *refs = PyList_New(t->nrefs);
    for (uint32_t i = 0; refs && i < t->nrefs; i++) {
        PyObject *x = PyLong_FromUnsignedLongLong(t->refs[i]);
        if (!x)
            Py_CLEAR(refs);
        else
            PyList_SET_ITEM(refs, i, x);
    }
    for (uint32_t i = 0; frames && children && i < t->depth; i++) {
        const sw_sample_code *c = t->codes[i];
        PyObject *f = Py_BuildValue("(s#s#i)", c->name, (Py_ssize_t)c->name_len, c->filename,
                                    (Py_ssize_t)c->filename_len, (int)t->lines[i]);
        if (!f)
            Py_CLEAR(frames);
        else
            PyList_SET_ITEM(frames, i, f);
    }
    for (uint32_t i = 0; frames && children && i < t->nchildren; i++) {
        PyObject *c = PyLong_FromUnsignedLongLong(t->children[i]);
        if (!c)
            Py_CLEAR(children);
        else
            PyList_SET_ITEM(children, i, c);
    }
    PyObject *name = PyUnicode_DecodeUTF8(t->name, (Py_ssize_t)strlen(t->name), "replace");
    PyObject *type = PyUnicode_DecodeUTF8(t->waiter_type, (Py_ssize_t)strlen(t->waiter_type), "replace");
    PyObject *d = frames && children && refs && name && type
                      ? Py_BuildValue("{s:K,s:N,s:K,s:O,s:K,s:N,s:s,s:K,s:N,s:N,s:K,s:N}", "address",
                                      (unsigned long long)t->addr, "name", name, "loop", (unsigned long long)t->loop,
                                      "running", t->running ? Py_True : Py_False,
                                      "loop_thread", (unsigned long long)t->loop_thread, "frames", frames, "awaits",
                                      awaits[t->awaits < 4 ? t->awaits : 0], "waiter", (unsigned long long)t->waiter,
                                      "waiter_type", type, "children", children, "group_parent",
                                      (unsigned long long)t->group_parent, "callback_refs", refs)
                      : NULL;
    if (!d) {   /* (Py_BuildValue's N consumed them even when it failed) */
        if (!frames || !children || !refs || !name || !type) {
            Py_XDECREF(frames);
            Py_XDECREF(children);
            Py_XDECREF(refs);
            Py_XDECREF(name);
            Py_XDECREF(type);
        }
    }
    int rc = !d || PyList_Append(list, d) < 0;
    Py_XDECREF(d);
    return rc;
}

/* The asyncio tasks of the target into out["asyncio"] (a list), and
 * out["asyncio_error"]: None, or why they could not be read. -1 only on
 * a Python error. */
static int add_asyncio(sw_target *t, const sw_py_layout *l, uint64_t interp, PyObject *out)
{
    char err[512] = "";
    sw_aio_stats st;
    PyObject *tasks = PyList_New(0);
    sw_codecache *codes = sw_codecache_new(65536);
    if (!tasks || !codes) {
        Py_XDECREF(tasks);
        sw_codecache_free(codes);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    int rc = sw_aio_read(&t->mem, l, interp, codes, add_task, tasks, &st, err, sizeof err);
    sw_codecache_free(codes);
    if (PyErr_Occurred()) {
        Py_DECREF(tasks);
        return -1;
    }
    if (rc < 0)
        PyList_SetSlice(tasks, 0, PyList_GET_SIZE(tasks), NULL);   /* none, said why */
    else if (st.unreadable)
        snprintf(err, sizeof err, "%u of %u tasks could not be read (changed while read)", st.unreadable, st.found);
    PyObject *why = err[0] ? PyUnicode_FromString(err) : (Py_INCREF(Py_None), Py_None);
    int bad = !why || PyDict_SetItemString(out, "asyncio", tasks) < 0 ||
              PyDict_SetItemString(out, "asyncio_error", why) < 0;
    Py_XDECREF(why);
    Py_DECREF(tasks);
    return bad ? -1 : 0;
}

static PyObject *dump_process(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"pid", "max_depth", "layout", "locals", "core", "exe", "native", "blocking", NULL};
    int pid, locals = 0, native = 0, blocking = 0;
    unsigned int max_depth = 1024;
    const char *layout = "auto", *core = NULL, *exe = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|Ispzzpp", kwlist, &pid, &max_depth, &layout, &locals, &core, &exe,
                                     &native, &blocking))
        return NULL;

    if (strcmp(layout, "auto") != 0 && strcmp(layout, "debug_offsets") != 0) {
        PyErr_SetString(PyExc_ValueError, "layout must be 'auto' or 'debug_offsets'");
        return NULL;
    }
    char err[1024];
    sw_target t;
    sw_py_layout l;
    const char *used = "";
    uint64_t interp;
    if ((core ? sw_target_open_core_bound(core, exe, layout, &t, &l, &interp, &used)
              : sw_target_open_bound(pid, layout, &t, &l, &interp, &used)) < 0)
        return NULL;
    pid = t.pid;
    if (locals && sw_pylocals_usable(&l, err, sizeof err) != SW_OK) {
        sw_target_close(&t);
        return sw_target_raise(SW_TARGET_UNSUPPORTED, err);
    }
    sw_pystack_limits lim = {.max_threads = 4096, .max_depth = max_depth, .max_codes = 65536, .code_ttl = 0,
                             .thread_states = !core, .lines = 1, .native = (uint32_t)native,
                             .frame_addrs = (uint32_t)(locals && !native), .blocking = (uint32_t)(blocking && !core)};
    sw_pystack *r = core ? sw_pystack_new_core(&l, t.core, interp, &lim, err, sizeof err)
                         : sw_pystack_new(&l, pid, interp, &lim, interp, 8, err, sizeof err);
    char why[512];
    if (r && lim.blocking && sw_pystack_block_check(pid, why, sizeof why) != SW_OK) {
        snprintf(err, sizeof err, "cannot dump process %d blocking: %s", pid, why);
        sw_pystack_free(r);
        r = NULL;
    }
    if (!r) {
        sw_target_close(&t);
        return sw_target_raise(SW_TARGET_FAILED, err);
    }
    dump_sink d = {NULL, 0, locals ? &t.mem : NULL, &l};
    for (int round = 0; round < DUMP_ROUNDS; round++) {
        Py_XDECREF(d.threads);
        d.threads = PyList_New(0);
        d.failed = 0;
        if (!d.threads)
            break;
        int rc = sw_pystack_sample_all(r, 0, 0, collect, &d);
        if (rc < 0) {
            Py_CLEAR(d.threads);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_RuntimeError, "process %d: its thread list cannot be read (exiting?)", pid);
            break;
        }
        if (!d.threads || !d.failed)
            break;
    }
    char native_err[512] = "";
    if (native)
        snprintf(native_err, sizeof native_err, "%s", sw_pystack_native_error(r));
    sw_pystack_free(r);
    if (d.threads && add_python_names(&t, &l, interp, d.threads) < 0)
        Py_CLEAR(d.threads);
    char version[32];
    sw_target_version_str(t.version_hex, version, sizeof version);
    PyObject *path = d.threads ? PyUnicode_DecodeFSDefault(t.python_path) : NULL;   /* any bytes */
    PyObject *out = path ? Py_BuildValue("{s:i,s:s,s:N,s:s,s:N}", "pid", pid, "version", version, "python", path,
                                         "layout", used, "threads", d.threads)
                         : NULL;
    if (!path)
        Py_XDECREF(d.threads);
    if (out && add_asyncio(&t, &l, interp, out) < 0)
        Py_CLEAR(out);
    if (out && native) {
        PyObject *why = native_err[0] ? PyUnicode_DecodeUTF8(native_err, (Py_ssize_t)strlen(native_err), "replace")
                                      : (Py_INCREF(Py_None), Py_None);
        if (!why || PyDict_SetItemString(out, "native_error", why) < 0)
            Py_CLEAR(out);
        Py_XDECREF(why);
    }
    sw_target_close(&t);
    if (!out && !PyErr_Occurred())
        PyErr_NoMemory();
    return out;
}

static PyMethodDef methods[] = {
    {"dump_process", (PyCFunction)(void (*)(void))dump_process, METH_VARARGS | METH_KEYWORDS,
     "dump_process(pid, max_depth=1024, layout='auto', locals=False, core=None, exe=None, native=False) -> {pid, version, python, layout, threads: "
     "[{thread_id, native_id, gil, state, failed, name, frames: [(qualname, filename, line, locals, address, library, "
     "pc)]}]}: every "
     "thread's Python stack of process pid, read once from outside (name: threading's, None where unread); layout='debug_offsets' reads a 3.13 target through its debug offsets; locals: None, or with "
     "locals=True each frame's variables [(name, kind, type name, address, value, truncated)], kind 'value' "
     "(value: a None, bool, int, float, str or bytes made here), 'other' or 'unreadable' (None where the frame's "
     "could not be read); core='FILE' (pid then ignored) reads the process of that core file instead (gdb's gcore, "
     "or a crash's), exe the python that ran (for a core of another machine or files changed since): no thread "
     "states there (state 'unknown', gil False); native=True merges each thread's native frames in ('symbol "
     "[native]', the library as filename, line 0; where the library has DWARF line tables the function's source "
     "file as filename, the line its pc is at as line, the library as library; pc: the frame's instruction, or "
     "return address), each thread stopped with ptrace while read and unwound from "
     "outside (a core's: unwound from its registers; not with locals); address: a native frame's symbol's start "
     "in the process (a Python frame's: its code object's); native_error (native=True): None, or why some "
     "thread's native frames could not be read (it could not be stopped); blocking=True: every thread stopped "
     "while the stacks are read (one instant; not with a core); asyncio: the pending asyncio tasks [{address, name, "
     "loop, running, loop_thread, frames, awaits, waiter, waiter_type, children, group_parent, callback_refs: "
     "the objects its done callbacks hold}], asyncio_error: "
     "None or why some or all were not read"},
    {NULL, NULL, 0, NULL},
};

int sw_dump_process_add_to_module(PyObject *m)
{
    return PyModule_AddFunctions(m, methods);
}
