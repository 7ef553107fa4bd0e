/*
 * handlers.c - Python functions as consumers of events:
 * _native.add_handler(fn, mask, where) -> id, _native.remove_handler(id).
 *
 * A handler gets a stackwatch.Event (a struct sequence) for every event of
 * its mask; `where` (globs matched against the code's file name) limits
 * the events that have a code location. Which handlers a code object
 * matches is cached in its co_extra slot until the handler set changes.
 * A handler that raises is removed and the error reported once on stderr;
 * the traced program never sees the exception. Handlers run with the
 * thread marked busy: their own calls are not events.
 */
#include "handlers.h"

#include "ext/dispatch/task_log.h"
#include "ext/shared/globs.h"
#include "ext/shared/hookerr.h"

#include <string.h>
#include <time.h>

/* Bit 31 of the per-code cache holds the file tracer's line filter. */
#define MAX_HANDLERS 31
#define FILE_LINES_BIT 0x80000000u

typedef struct {
    PyObject *fn;          /* NULL: free slot */
    uint32_t mask;
    char **where;          /* NULL-terminated globs, or NULL for anywhere */
    long id;
} handler;

static handler H[MAX_HANDLERS];
static char own_prefix[1024];   /* stackwatch's own package directory: never an event for handlers */
static long next_id = 1;
static PyTypeObject *EventType;
static uint32_t in_use, placed;   /* bit i: H[i] is a handler; one with globs (recompute) */
/* Each kind's name and each task kind's data keys as interned str, made
 * once (sw_handlers_add_to_module): an event's kind and dict reuse them
 * (interning them per event was most of what an Event cost). */
static PyObject *kind_str[SW_K_COUNT];
static PyObject *task_key_str[SW_K_TASK_WOKEN - SW_K_TASK_SWITCH + 1][4];

static PyStructSequence_Field event_fields[] = {
    {"kind", "the event's kind, e.g. 'call', 'line', 'gc_start'"},
    {"time_ns", "when, in CLOCK_MONOTONIC nanoseconds (time.monotonic_ns())"},
    {"thread_id", "threading.get_ident() of the thread"},
    {"filename", "file of the code where it happened, or None"},
    {"function", "qualified name of that code, or None"},
    {"lineno", "line number (of a call or resume: the function's first line; of a return, yield or unwind: "
               "the line it leaves from), or None"},
    {"name", "C function, exception type, class or thread name, or None"},
    {"data", "dict of the kind's other details, or None"},
    {NULL, NULL},
};

static PyStructSequence_Desc event_desc = {
    "stackwatch.Event", "One event delivered to a handler.", event_fields, 8,
};

void sw_handlers_cache_reset(void)
{
    sw_D.hgen++;
}

static void recompute(void)
{
    uint32_t m = 0;
    in_use = placed = 0;
    for (int i = 0; i < MAX_HANDLERS; i++) {
        if (!H[i].fn)
            continue;
        m |= H[i].mask;
        in_use |= 1u << i;
        if (H[i].where)
            placed |= 1u << i;
    }
    sw_D.handlers = m;
    sw_D.hgen++;
}

/* Which handlers (bit i = H[i]) accept events located in co. */
static uint32_t matching(PyCodeObject *co)
{
    uint32_t all = in_use, need_match = placed;
    if (!co)
        return all;
    sw_code_extra *ce = (sw_code_extra *)co->co_extra;
    if (sw_D.extra_index >= 0 && ce && sw_D.extra_index < ce->ce_size) {
        uintptr_t v = (uintptr_t)ce->ce_extras[sw_D.extra_index];
        if ((v >> 32) == (sw_D.hgen & 0xffffffffu))
            return (uint32_t)v;
    }
    const char *file = PyUnicode_Check(co->co_filename) ? PyUnicode_AsUTF8(co->co_filename) : NULL;
    if (!file)
        PyErr_Clear();
    uint32_t ok = all & ~need_match;
    if (file && own_prefix[0] && strncmp(file, own_prefix, strlen(own_prefix)) == 0)
        ok = 0, file = NULL;
    if (file && sw_dispatch_file_lines_match(file))
        ok |= FILE_LINES_BIT;
    for (int i = 0; file && i < MAX_HANDLERS; i++) {
        if (!(need_match & (1u << i)))
            continue;
        if (sw_globs_match(H[i].where, file))
            ok |= 1u << i;
    }
    if (sw_D.extra_index >= 0) {
        uintptr_t v = ((uintptr_t)(sw_D.hgen & 0xffffffffu) << 32) | ok;
        if (sw_code_set_extra((PyObject *)co, sw_D.extra_index, (void *)v) < 0)
            PyErr_Clear();
    }
    return ok;
}

static PyObject *str_or_none(const char *s)
{
    if (!s)
        Py_RETURN_NONE;
    PyObject *o = PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
    if (!o) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return o;
}

const char *const sw_task_keys[SW_K_TASK_WOKEN - SW_K_TASK_SWITCH + 1][4] = {
    [SW_K_TASK_SWITCH - SW_K_TASK_SWITCH] = {"origin", "task", NULL, NULL},
    [SW_K_TASK_CREATE - SW_K_TASK_SWITCH] = {"task", "kind", "native_id", NULL},
    [SW_K_TASK_EXIT - SW_K_TASK_SWITCH] = {"task", "outcome", NULL, NULL},
    [SW_K_TASK_BLOCK - SW_K_TASK_SWITCH] = {"reason", NULL, NULL, NULL},
    [SW_K_TASK_WAKE - SW_K_TASK_SWITCH] = {"task", "cause", "native_id", NULL},
    [SW_K_TASK_SEND - SW_K_TASK_SWITCH] = {"peer", NULL, NULL, "value"},
    [SW_K_TASK_RECEIVE - SW_K_TASK_SWITCH] = {"peer", NULL, NULL, "value"},
    [SW_K_TASK_NAME - SW_K_TASK_SWITCH] = {"task", NULL, "native_id", "group"},
    [SW_K_TASK_WOKEN - SW_K_TASK_SWITCH] = {"task", "ago_ns", "native_id", NULL},
};

/* Each task kind's last data dict, filled again in place when nothing
 * else holds it (its Event let go, its handlers kept neither) and it has
 * still its keys alone, in their order (a handler may change it while it
 * holds it): no dict made and freed per event. */
static PyObject *spare_data[SW_K_TASK_WOKEN - SW_K_TASK_SWITCH + 1];

/* 1 if dict d has exactly the keys `keys` (NULL entries skipped), in order. */
static int has_keys(PyObject *d, PyObject *const *keys)
{
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    for (int i = 0; i < 4; i++)
        if (keys[i] && (!PyDict_Next(d, &pos, &k, &v) || k != keys[i]))
            return 0;
    return !PyDict_Next(d, &pos, &k, &v);
}

/* A task event's data: its fields under sw_task_keys' names. */
static PyObject *task_data(int kind, const sw_evdata *d)
{
    PyObject *const *keys = task_key_str[kind - SW_K_TASK_SWITCH];
    PyObject **spare = &spare_data[kind - SW_K_TASK_SWITCH];
    long long v[3] = {d->a, d->b, d->c};
    PyObject *data = *spare && Py_REFCNT(*spare) == 1 && has_keys(*spare, keys) ? Py_NewRef(*spare) : PyDict_New();
    for (int i = 0; data && i < 4; i++) {
        PyObject *x = !keys[i] ? NULL : i < 3 ? PyLong_FromLongLong(v[i]) : str_or_none(d->file);
        if (keys[i] && (!x || PyDict_SetItem(data, keys[i], x) < 0))
            Py_CLEAR(data);
        Py_XDECREF(x);
    }
    if (data && data != *spare)
        Py_XSETREF(*spare, Py_NewRef(data));
    return data;
}

static PyObject *kind_data(int kind, const sw_evdata *d)
{
    if (kind >= SW_K_TASK_SWITCH && kind <= SW_K_TASK_WOKEN)
        return task_data(kind, d);
    switch (kind) {
    case SW_K_INSTRUCTION:
        return Py_BuildValue("{s:L,s:L}", "offset", d->a, "opcode", d->b);
    case SW_K_GC_START:
        return Py_BuildValue("{s:L}", "generation", d->a);
    case SW_K_GC_DONE:
        return Py_BuildValue("{s:L,s:L,s:L}", "generation", d->a, "collected", d->b, "uncollectable", d->c);
    case SW_K_NEW_START: case SW_K_NEW_DONE: case SW_K_DEL_START: case SW_K_DEL_DONE:
        return Py_BuildValue("{s:N}", "class_file", str_or_none(d->file));
    case SW_K_THREAD_START: case SW_K_THREAD_EXIT:
        return Py_BuildValue("{s:L}", "native_id", d->a);
    default:
        Py_RETURN_NONE;
    }
}

/* The last Event made, made again in place when nothing else holds it
 * (its handlers kept it not): PyStructSequence_New and the Event's
 * dealloc each look the type's size up in its dict, most of what an
 * Event cost; its fields are set anew all the same. */
static PyObject *spare_event;

static PyObject *event_object(void)
{
    if (spare_event && Py_REFCNT(spare_event) == 1) {
        for (Py_ssize_t i = 0; i < 8; i++) {
            PyObject *old = PyStructSequence_GET_ITEM(spare_event, i);
            PyStructSequence_SET_ITEM(spare_event, i, NULL);
            Py_XDECREF(old);
        }
        return Py_NewRef(spare_event);
    }
    PyObject *ev = PyStructSequence_New(EventType);
    if (ev)
        Py_XSETREF(spare_event, Py_NewRef(ev));
    return ev;
}

/* threading.get_ident() as an int (new reference): the last one made
 * while the thread is the same. */
static PyObject *thread_ident(void)
{
    static unsigned long last;
    static PyObject *last_obj;
    unsigned long ident = PyThread_get_thread_ident();
    if (!last_obj || ident != last) {
        PyObject *o = PyLong_FromUnsignedLong(ident);
        if (!o)
            return NULL;
        Py_XSETREF(last_obj, o);
        last = ident;
    }
    return Py_NewRef(last_obj);
}

/* An event's name (str_or_none), the last one made while the text is
 * the same (a task event's channel or task: often the same again). */
static PyObject *name_str(const char *s)
{
    static PyObject *last;
    if (!s)
        Py_RETURN_NONE;
    const char *was = last ? PyUnicode_AsUTF8(last) : NULL;
    if (was && strcmp(was, s) == 0)
        return Py_NewRef(last);
    PyObject *o = str_or_none(s);
    if (o != Py_None)
        Py_XSETREF(last, Py_NewRef(o));
    return o;
}

static PyObject *make_event(int kind, const sw_evdata *d)
{
    PyObject *ev = event_object();
    if (!ev)
        return NULL;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    PyStructSequence_SET_ITEM(ev, 0, Py_NewRef(kind_str[kind]));
    PyStructSequence_SET_ITEM(ev, 1, PyLong_FromLongLong((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec));
    PyStructSequence_SET_ITEM(ev, 2, thread_ident());
    PyObject *file = Py_None, *func = Py_None;
    if (d->code) {
        file = d->code->co_filename;
        func = sw_code_qualname(d->code);
    }
    PyStructSequence_SET_ITEM(ev, 3, Py_NewRef(file));
    PyStructSequence_SET_ITEM(ev, 4, Py_NewRef(func));
    PyStructSequence_SET_ITEM(ev, 5, d->line >= 0 ? PyLong_FromLong(d->line) : Py_NewRef(Py_None));
    PyStructSequence_SET_ITEM(ev, 6, name_str(d->name));
    PyStructSequence_SET_ITEM(ev, 7, kind_data(kind, d));
    for (Py_ssize_t i = 0; i < 8; i++) {
        if (!PyStructSequence_GET_ITEM(ev, i)) {
            Py_DECREF(ev);
            return NULL;
        }
    }
    return ev;
}

static int refresh_later(void *unused)
{
    (void)unused;
    sw_dispatch_changed();
    return 0;
}

static void report_and_remove(int i)
{
    PyObject *exc_repr = NULL;
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
    exc_repr = exc ? PyObject_Repr(exc) : NULL;
    Py_XDECREF(exc);
#else
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    exc_repr = v ? PyObject_Repr(v) : NULL;
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
#endif
    PyErr_Clear();
    PyObject *fn_repr = PyObject_Repr(H[i].fn);
    PyErr_Clear();
    PySys_FormatStderr("stackwatch: handler %.200s raised %.300s; it was removed\n",
                       fn_repr ? PyUnicode_AsUTF8(fn_repr) : "?",
                       exc_repr ? PyUnicode_AsUTF8(exc_repr) : "an exception");
    PyErr_Clear();
    Py_XDECREF(fn_repr);
    Py_XDECREF(exc_repr);
    PyObject *fn = H[i].fn;
    H[i].fn = NULL;
    sw_globs_free(H[i].where);
    H[i].where = NULL;
    recompute();
    Py_DECREF(fn);
    Py_AddPendingCall(refresh_later, NULL);
}

int sw_handlers_file_lines_in(PyCodeObject *co)
{
    if (sw_D.extra_index < 0)
        return 0;
    return (matching(co) & FILE_LINES_BIT) != 0;
}

int sw_handlers_everywhere(uint32_t kinds)
{
    for (int i = 0; i < MAX_HANDLERS; i++)
        if (H[i].fn && (H[i].mask & kinds) && !H[i].where)
            return 1;
    return 0;
}

int sw_handlers_where_match(uint32_t kinds, const char *file)
{
    if (own_prefix[0] && strncmp(file, own_prefix, strlen(own_prefix)) == 0)
        return 0;
    for (int i = 0; i < MAX_HANDLERS; i++)
        if (H[i].fn && (H[i].mask & kinds) && (!H[i].where || sw_globs_match(H[i].where, file)))
            return 1;
    return 0;
}

int sw_handlers_want(int kind, PyCodeObject *co)
{
    uint32_t with = 0;
    for (int i = 0; i < MAX_HANDLERS; i++)
        if (H[i].fn && (H[i].mask & SW_EVB(kind)))
            with |= 1u << i;
    return with && (matching(co) & with);
}

/* The recursion levels a handler may use beyond the program's limit: an
 * event of a frame at the limit is still delivered (sw_recursion_allow). */
#define HANDLER_RECURSION_ROOM 100

void sw_handlers_emit(int kind, const sw_evdata *d)
{
    uint32_t bit = SW_EVB(kind);
    uint32_t ok = matching(d->code);
    PyObject *ev = NULL;
    PyThreadState *ts = PyThreadState_Get();
    sw_recursion_allow(ts, HANDLER_RECURSION_ROOM);
    for (uint32_t todo = ok & in_use; todo; todo &= todo - 1) {
        int i = __builtin_ctz(todo);
        if (!H[i].fn || !(H[i].mask & bit))
            continue;
        if (sw_task_log_check(H[i].fn) && kind >= SW_K_TASK_SWITCH && kind <= SW_K_TASK_WOKEN) {
            PyObject *fn = Py_NewRef(H[i].fn);   /* (the log's line, with no Event) */
            if (sw_task_log_emit(fn, kind, d) < 0 && H[i].fn == fn)
                report_and_remove(i);
            sw_err_drop();
            Py_DECREF(fn);
            continue;
        }
        if (!ev && !(ev = make_event(kind, d))) {
            PyErr_Clear();
            sw_hook_error("out of memory creating an event for a handler");
            break;
        }
        PyObject *fn = Py_NewRef(H[i].fn);
        PyObject *r = PyObject_CallOneArg(fn, ev);
        if (r)
            Py_DECREF(r);
        else if (H[i].fn == fn)
            report_and_remove(i);
        else
            PyErr_Clear();
        Py_DECREF(fn);
    }
    Py_XDECREF(ev);
    sw_recursion_allow(ts, -HANDLER_RECURSION_ROOM);
}

static PyObject *py_add_handler(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *fn, *where;
    unsigned long mask;
    if (!PyArg_ParseTuple(args, "OkO", &fn, &mask, &where))
        return NULL;
    if (!PyCallable_Check(fn))
        return PyErr_Format(PyExc_TypeError, "a handler must be callable, not %.100s", Py_TYPE(fn)->tp_name);
    if (mask == 0 || (mask & ~(unsigned long)SW_MASK_ALL))
        return PyErr_Format(PyExc_ValueError, "invalid event mask %lu", mask);
    if (sw_dispatch_extra_index() < 0)
        return NULL;
    int slot = -1;
    for (int i = 0; i < MAX_HANDLERS && slot < 0; i++)
        if (!H[i].fn)
            slot = i;
    if (slot < 0)
        return PyErr_Format(PyExc_RuntimeError, "at most %d handlers can be active at once", MAX_HANDLERS);
    char **g;
    if (sw_globs_copy(where, "where", &g) < 0)
        return NULL;
    H[slot] = (handler){Py_NewRef(fn), (uint32_t)mask, g, next_id++};
    recompute();
    sw_dispatch_changed();
    return PyLong_FromLong(H[slot].id);
}

static PyObject *py_remove_handler(PyObject *self, PyObject *arg)
{
    (void)self;
    long id = PyLong_AsLong(arg);
    if (id == -1 && PyErr_Occurred())
        return NULL;
    for (int i = 0; i < MAX_HANDLERS; i++) {
        if (H[i].fn && H[i].id == id) {
            PyObject *fn = H[i].fn;
            H[i].fn = NULL;
            sw_globs_free(H[i].where);
            H[i].where = NULL;
            recompute();
            sw_dispatch_changed();
            Py_DECREF(fn);
            Py_RETURN_TRUE;
        }
    }
    Py_RETURN_FALSE;
}

static PyObject *py_own_prefix(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *c = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!c)
        return NULL;
    snprintf(own_prefix, sizeof own_prefix, "%s", c);
    sw_D.hgen++;
    Py_RETURN_NONE;
}

static PyObject *py_ids(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *l = PyList_New(0);
    for (int i = 0; l && i < MAX_HANDLERS; i++) {
        if (!H[i].fn)
            continue;
        PyObject *x = PyLong_FromLong(H[i].id);
        if (!x || PyList_Append(l, x) < 0) {
            Py_XDECREF(x);
            Py_CLEAR(l);
            break;
        }
        Py_DECREF(x);
    }
    return l;
}

static PyMethodDef methods[] = {
    {"_handler_ids", py_ids, METH_NOARGS, "ids of the active handlers"},
    {"_set_own_prefix", py_own_prefix, METH_O, "stackwatch's package directory (its code is no event)"},
    {"add_handler", py_add_handler, METH_VARARGS, "add_handler(fn, mask, where) -> id"},
    {"remove_handler", py_remove_handler, METH_O, "remove_handler(id) -> bool"},
    {NULL, NULL, 0, NULL},
};

int sw_handlers_add_to_module(PyObject *m)
{
    for (int k = 0; k < SW_K_COUNT; k++)
        if (!kind_str[k] && !(kind_str[k] = PyUnicode_InternFromString(sw_kind_names[k])))
            return -1;
    for (int k = 0; k <= SW_K_TASK_WOKEN - SW_K_TASK_SWITCH; k++)
        for (int i = 0; i < 4; i++)
            if (sw_task_keys[k][i] && !task_key_str[k][i] &&
                !(task_key_str[k][i] = PyUnicode_InternFromString(sw_task_keys[k][i])))
                return -1;
    EventType = PyStructSequence_NewType(&event_desc);
    if (!EventType || PyModule_AddObject(m, "Event", (PyObject *)EventType) < 0)
        return -1;
    Py_INCREF(EventType);
    return PyModule_AddFunctions(m, methods);
}
