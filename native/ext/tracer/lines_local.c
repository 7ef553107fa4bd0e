/*
 * lines_local.c - line and instruction events of chosen files only, on
 * 3.12+: when every consumer of those events limits itself to some files
 * (handlers' `where`, the file tracer's line filter: the switching owner
 * asks sw_lines_local_restricted), src/stackwatch/events/monitoring.py
 * asks sys.monitoring for LINE / INSTRUCTION as *local* events of the
 * matching code objects that exist (found through gc and the threads'
 * stacks), and this code watcher adds them to matching code objects
 * created later (a module imported, a function or lambda defined by exec /
 * compile). Other code objects carry no such events: other files run at
 * full speed (global LINE events returning DISABLE leave 3.12's code
 * slower for good).
 *
 * In _native.hooks, for monitoring.py:
 *   lines_local_begin(tool_id, bits)    the code watcher on
 *   lines_codes(objects, bits) -> [(code, wanted bits)]
 *   lines_local_end()                   the code watcher off
 */
#include "lines_local.h"

#include "ext/dispatch/dispatch.h"
#include "ext/dispatch/handlers.h"
#include "ext/shared/hookerr.h"
#include "ext/tracer/events.h"
#include "ext/tracer/session.h"

#include "base/base.h"

#if PY_VERSION_HEX >= 0x030C0000

static int tool_id = -1;
static long bits;             /* sys.monitoring.events.LINE | INSTRUCTION, as wanted */
static const long line_bit = SW_MON(LINE), instruction_bit = SW_MON(INSTRUCTION);
static PyObject *get_local, *set_local;
static int watcher_id = -1;

/* Can a consumer want line events in this file at all (its globs)? Cheap
 * enough to skip most code objects before the per-code test. */
static int file_maybe(PyObject *filename)
{
    const char *f = PyUnicode_Check(filename) ? PyUnicode_AsUTF8(filename) : NULL;
    if (!f) {
        PyErr_Clear();
        return 0;
    }
    uint32_t lines = SW_MASK_LINES;
    return ((sw_D.file & lines) && sw_dispatch_file_lines_match(f)) || sw_handlers_where_match(lines, f);
}

/* The watcher's decision per file name: code objects of one module come
 * in a row and share their co_filename. */
static PyObject *last_file;
static int last_maybe;
static unsigned long long last_gen;

static long wanted_bits(PyCodeObject *co)
{
    long w = 0;
    unsigned long long gen = sw_D.hgen ^ (sw_S.gen << 32);
    if (co->co_filename != last_file || gen != last_gen) {
        Py_XSETREF(last_file, Py_NewRef(co->co_filename));
        last_gen = gen;
        last_maybe = file_maybe(co->co_filename);
    }
    if (!last_maybe)
        return 0;
    if ((bits & line_bit) && sw_events_wanted_in(SW_K_LINE, co))
        w |= line_bit;
    if ((bits & instruction_bit) && sw_events_wanted_in(SW_K_INSTRUCTION, co))
        w |= instruction_bit;
    return w;
}

long sw_lines_local_bits(PyCodeObject *co)
{
    return tool_id >= 0 && bits ? wanted_bits(co) : 0;
}

static int on_code(PyCodeEvent event, PyCodeObject *co)
{
    if (event != PY_CODE_EVENT_CREATE || tool_id < 0 || !bits || !set_local)
        return 0;
    sw_exc_state es;
    sw_exc_save(&es);
    long w = wanted_bits(co);
    PyErr_Clear();
    if (w) {
        PyObject *old = PyObject_CallFunction(get_local, "iO", tool_id, (PyObject *)co);
        long o = old ? PyLong_AsLong(old) : 0;
        Py_XDECREF(old);
        PyErr_Clear();
        PyObject *r = PyObject_CallFunction(set_local, "iOl", tool_id, (PyObject *)co, o | w);
        if (!r) {
            PyErr_Clear();
            sw_hook_error("could not enable line events on a new code object");
        }
        Py_XDECREF(r);
    }
    sw_exc_restore(&es);
    return 0;
}

/* hooks.lines_local_begin(tool_id, bits): code objects created from now on
 * get the local events `bits` (LINE / INSTRUCTION) where a consumer wants
 * them. */
static PyObject *local_begin(PyObject *self, PyObject *args)
{
    (void)self;
    int tid;
    long b;
    if (!PyArg_ParseTuple(args, "il", &tid, &b))
        return NULL;
    PyObject *mon = PySys_GetObject("monitoring");   /* borrowed */
    PyObject *g = mon ? PyObject_GetAttrString(mon, "get_local_events") : NULL;
    PyObject *s = g ? PyObject_GetAttrString(mon, "set_local_events") : NULL;
    if (!s || (watcher_id < 0 && (watcher_id = PyCode_AddWatcher(on_code)) < 0)) {
        Py_XDECREF(g);
        Py_XDECREF(s);
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_RuntimeError, "sys.monitoring is missing");
    }
    tool_id = tid;
    bits = b;
    Py_XSETREF(get_local, g);
    Py_XSETREF(set_local, s);
    Py_RETURN_NONE;
}

static PyObject *local_end(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    tool_id = -1;
    bits = 0;
    Py_CLEAR(last_file);
    Py_CLEAR(get_local);
    Py_CLEAR(set_local);
    if (watcher_id >= 0) {
        int id = watcher_id;
        watcher_id = -1;
        if (PyCode_ClearWatcher(id) < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

int sw_lines_local_restricted(void)
{
    uint32_t lines = SW_MASK_LINES;
    int everywhere = (sw_D.probes & lines) || ((sw_D.file & lines) && sw_dispatch_file_lines_everywhere()) ||
                     sw_handlers_everywhere(lines);
    return !everywhere;
}

PyObject *sw_lines_local_key(void)
{
    uint32_t lines = SW_MASK_LINES;
    return Py_BuildValue("(KKkkk)", (unsigned long long)sw_D.hgen, (unsigned long long)sw_S.gen,
                         (unsigned long)(sw_D.handlers & lines), (unsigned long)(sw_D.file & lines),
                         (unsigned long)(sw_D.probes & lines));
}

/* The code objects found: a list in order of discovery, indexed by
 * address with a base/hashtab.h table (each is kept once). */
typedef struct {
    PyObject **v;
    size_t n, cap;
    sw_hashtab index;
} codevec;

static int push(codevec *c, PyObject *o)
{
    uint64_t h = sw_hash_u64((uint64_t)(uintptr_t)o);
    uint32_t pos;
    for (uint32_t i = sw_hashtab_first(&c->index, h, &pos); i != SW_HT_NONE; i = sw_hashtab_next(&c->index, h, &pos))
        if (c->v[i] == o)
            return 0;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 1024;
        PyObject **v = PyMem_Realloc(c->v, cap * sizeof *v);
        if (!v) {
            PyErr_NoMemory();
            return -1;
        }
        c->v = v;
        c->cap = cap;
    }
    if (c->n >= SW_HT_NONE || sw_hashtab_add(&c->index, h, (uint32_t)c->n) != SW_OK) {
        PyErr_NoMemory();
        return -1;
    }
    c->v[c->n++] = o;
    return 0;
}

static int visit_code(PyObject *o, void *arg)
{
    return o && PyCode_Check(o) ? push(arg, o) : 0;
}

/* hooks.lines_codes(objects, bits) -> list of (code, bits wanted there)
 * for every code object among `objects`, referred to by one
 * of them (tp_traverse: functions, generators, code kept in a container
 * or an attribute, e.g. a script compiled before the consumer came) or
 * nested in their constants, that some consumer wants line / instruction
 * events in. In C with a per-file decision: a walk in Python cost more
 * instructions than a short traced program. */
static PyObject *lines_codes(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *objs;
    long b;
    const long lb = line_bit, ib = instruction_bit;
    if (!PyArg_ParseTuple(args, "Ol", &objs, &b))
        return NULL;
    PyObject *fast = PySequence_Fast(objs, "lines_codes needs a sequence");
    if (!fast)
        return NULL;
    codevec c = {0};
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out && i < PySequence_Fast_GET_SIZE(fast); i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        traverseproc tr = Py_TYPE(o)->tp_traverse;
        if (visit_code(o, &c) < 0 || (!PyCode_Check(o) && tr && tr(o, visit_code, &c) < 0))
            Py_CLEAR(out);
    }
    /* Nested code objects (c.n grows while this runs). */
    for (size_t i = 0; out && i < c.n; i++) {
        PyObject *consts = ((PyCodeObject *)c.v[i])->co_consts;
        for (Py_ssize_t k = 0; out && consts && k < PyTuple_GET_SIZE(consts); k++)
            if (visit_code(PyTuple_GET_ITEM(consts, k), &c) < 0)
                Py_CLEAR(out);
    }
    /* The decision per file name object (a module's code objects share
     * theirs), in a small direct-mapped cache. */
    struct { PyObject *file; int maybe; } seen[256] = {{0}};
    for (size_t i = 0; out && i < c.n; i++) {
        PyCodeObject *co = (PyCodeObject *)c.v[i];
        size_t h = ((uintptr_t)co->co_filename >> 4) & 255;
        if (seen[h].file != co->co_filename) {
            seen[h].file = co->co_filename;
            seen[h].maybe = file_maybe(co->co_filename);
        }
        if (!seen[h].maybe)
            continue;
        long w = 0;
        if ((b & lb) && sw_events_wanted_in(SW_K_LINE, co))
            w |= lb;
        if ((b & ib) && sw_events_wanted_in(SW_K_INSTRUCTION, co))
            w |= ib;
        PyErr_Clear();
        if (!w)
            continue;
        PyObject *t = Py_BuildValue("(Ol)", (PyObject *)co, w);
        if (!t || PyList_Append(out, t) < 0)
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    PyMem_Free(c.v);
    sw_hashtab_free(&c.index);
    Py_DECREF(fast);
    return out;
}

static PyMethodDef methods[] = {
    {"lines_codes", lines_codes, METH_VARARGS,
     "lines_codes(objects, bits) -> [(code, bits)] of the code objects reachable from objects that want line events"},
    {"lines_local_begin", local_begin, METH_VARARGS,
     "lines_local_begin(tool_id, bits): new code objects get the local line events they want"},
    {"lines_local_end", local_end, METH_NOARGS, "lines_local_end(): the code watcher is removed"},
    {NULL, NULL, 0, NULL},
};

int sw_lines_local_add_hooks(PyObject *hooks)
{
    return PyModule_AddFunctions(hooks, methods);
}

#else

int sw_lines_local_add_hooks(PyObject *hooks)
{
    (void)hooks;
    return 0;
}

#endif
