/*
 * task_wrappers.c - the task events of asyncio and of queues in C
 * (task_wrappers.h). Each wrapper is a method descriptor (called with the instance first, as a
 * Python function would be) that calls the original and records:
 *
 * - Handle._run: a callback that steps a task (its step or wakeup method:
 *   a bound method, a builtin bound to the task, or the C Task's step
 *   wrapper) runs as that task; after it, the task exited (result,
 *   exception, cancelled; read from its state, never retrieving it),
 *   blocks on what its await chain waits on (task_hooks._block_of), or
 *   made a bare yield (sleep(0): runnable, no event). A task whose
 *   asyncio name changed since it was last seen (set_name, or a name
 *   given after create_task returned, as 3.9-3.11's asyncio.create_task
 *   does), checked at its first step and at its exit, is defined again
 *   with its new name (TASK_NAME).
 * - Handle.__init__: the wakeup of a blocked task scheduled is its wake,
 *   by the task running, located where the program's code completed what
 *   it waited on; made by a task's done callback (gather's, shield's: a
 *   Handle._run whose first argument is the task, run on its behalf), it
 *   is told by the woken task at its next step (TASK_WOKEN): the task that
 *   ended the wait, not the loop.
 * - BaseEventLoop.call_soon_threadsafe, called from a thread that is not
 *   the loop's: the handle runs on behalf of the task that scheduled it
 *   (that thread's running task), so a task it wakes was woken by that
 *   task of that thread (TASK_WOKEN); asyncio's copy of a concurrent.futures
 *   Future's outcome (run_in_executor's) runs on behalf of the task that
 *   set it (asyncio_on_behalf, from task_hooks.py), on whichever thread
 *   the copy is scheduled from.
 * - BaseSelectorEventLoop._process_events: the handles of the fds the
 *   selector found ready; a task woken while one runs (asyncio's sock_*
 *   calls, a stream's transport reading) was woken by I/O readiness
 *   (TASK_WAKE's cause io), not by the loop's thread that passed it on.
 * - BaseEventLoop.create_task: the task's creation, by the running task.
 * - a queue's _put and _get (asyncio.Queue, queue.Queue): the message
 *   sent (when _put returns) and received (when _get returns it), on the
 *   channel named by stackwatch.name() or by its class and address.
 *
 * A location is the first frame outwards that is the program's own (not
 * in asyncio, threading, queue or stackwatch: task_hooks' prefixes).
 * The tasks alive as task events start are defined then, and those that
 * wait block then (asyncio_at_start, called by task_hooks.py).
 *
 * Nothing here raises into the program: a failure to record is dropped.
 */
#include "task_wrappers.h"

#include "base/base.h"
#include "ext/dispatch/dispatch.h"
#include "ext/tracer/frame_compat.h"
#include "ext/tracer/session.h"
#include "ext/tracer/tasks.h"
#include "ext/tracer/trace_api.h"
#include "procmem/procmem.h"

#include <string.h>
#include <sys/syscall.h>
#if PY_VERSION_HEX >= 0x030C0000
#  define SLOT_OBJECT_EX Py_T_OBJECT_EX
#  define SLOT_AUDITED Py_AUDIT_READ
#else
#  include <structmember.h>
#  define SLOT_OBJECT_EX T_OBJECT_EX
#  define SLOT_AUDITED READ_RESTRICTED   /* (audited reads: PY_AUDIT_READ from 3.10) */
#endif
#include <unistd.h>

enum { WRAP_RUN, WRAP_INIT, WRAP_CREATE, WRAP_PUT, WRAP_GET, WRAP_THREADSAFE, WRAP_EVENTS };

/* TASK_BLOCK's reason io (records.h); a wake by I/O readiness has cause
 * REASON_IO + 1. */
#define REASON_IO 7

static PyObject *task_types;   /* tuple: the task classes (C and Python) */
static PyObject *namer;        /* task_hooks._task_name(task, coro): for tasks given names */
static PyObject *names_data;   /* the dict of task_hooks._names (stackwatch.name()'s), or NULL */
static PyObject *block_of;     /* task_hooks._block_of(task) -> (reason, channel, frame) */
static PyObject *skip;         /* tuple of str: folders and files that are no event's location */
static PyObject *blocked;      /* {task id: channel (str or None)} of the tasks blocked now */
static PyObject **seen_names; /* by task id (dense, given in turn): its asyncio name when last seen (or the
                                 * name field that stands for it: seen()), or NULL */
static size_t seen_cap;
static uint8_t *stepped;       /* a bit per task id (they are given in turn): its name was checked at its
                                * first step */
static size_t stepped_cap;     /* bytes */
static PyObject *woken_by;     /* {task id: (waker's id, channel, CLOCK_MONOTONIC ns, waker's thread's native
                                *  id or 0: this one)}: told at its next step */
static PyObject *from_thread;  /* {handle: (task id, native id)}: handles another thread scheduled
                                * (call_soon_threadsafe), not run yet */
static uint64_t behalf;        /* the task on whose behalf a callback runs now (a done callback's, gather's or
                                * shield's; a handle's from_thread), 0: none */
static long long behalf_thread; /* with behalf: the native id of its thread, 0: this one */
static PyObject *io_ready;     /* {handle: loop}: the handles a loop's selector found ready in its last pass
                                * (their fds' I/O), run in that pass */
static int by_io;              /* 1 while such a handle runs: a task it wakes was woken by I/O readiness */
static uint64_t tables_gen;    /* the session the two tables belong to */

#define VALUE_MAX 200

/* Attribute and method names, interned once (asyncio_setup). */
static PyObject *S_self;
static PyObject *S_coro;
static PyObject *S_qualname;
static PyObject *S_get_name;
static PyObject *S_exception;
static PyObject *S_result;
static PyObject *S_fut_waiter;
static PyObject *S_callback;
static PyObject *S_done;
static PyObject *S_cancelled;
static PyObject *S_task_factory;
static PyObject *S_space;
static PyObject *S_args;
static PyObject *S_is_running;
static PyObject *S_thread_id;
static PyObject *S_ready;

/* Forgets the names seen (a new session). */
static void forget_names(void)
{
    for (size_t i = 0; i < seen_cap; i++)
        Py_CLEAR(seen_names[i]);
}

static int tables(void)
{
    if (tables_gen != sw_S.gen || !blocked || !woken_by || !from_thread || !io_ready) {
        Py_XSETREF(blocked, PyDict_New());
        Py_XSETREF(woken_by, PyDict_New());
        Py_XSETREF(from_thread, PyDict_New());
        Py_XSETREF(io_ready, PyDict_New());
        forget_names();
        if (stepped)
            memset(stepped, 0, stepped_cap);
        tables_gen = sw_S.gen;
    }
    return blocked && woken_by && from_thread && io_ready ? 0 : -1;
}

/* Keeps name as task tid's (seen_names); 0, or -1 when out of memory. */
static int keep_name(uint64_t tid, PyObject *name)
{
    if (tid >= seen_cap) {
        size_t was = seen_cap;
        PyObject **grown = tid < SIZE_MAX / sizeof *grown - 1
                               ? sw_array_grow(seen_names, &seen_cap, (size_t)tid + 1, sizeof *grown, 1024)
                               : NULL;
        if (!grown)
            return -1;
        seen_names = grown;
        memset(seen_names + was, 0, (seen_cap - was) * sizeof *seen_names);
    }
    Py_XSETREF(seen_names[tid], Py_NewRef(name));
    return 0;
}

/* 1 when nobody wants task events (the hooks then only call through). */
static int unwanted(void)
{
    return !(sw_D.mask & SW_EVB(SW_K_TASK_SWITCH)) || sw_T.busy || !task_types;
}

/* 1 for the type name of the C Task's step callback (3.9-3.13:
 * "_asyncio.TaskStepMethWrapper") or of its wakeup's (3.9, 3.10:
 * "TaskWakeupMethWrapper"; a builtin method from 3.11). */
static int is_step_wrapper(const char *tp_name)
{
    const char *dot = strrchr(tp_name, '.');
    const char *name = dot ? dot + 1 : tp_name;
    return strcmp(name, "TaskStepMethWrapper") == 0 || strcmp(name, "TaskWakeupMethWrapper") == 0;
}

/* The same by type, the types found kept (a step's callback is one of
 * the two at every step), and the last few that are not (a done
 * callback's: a function, a partial). */
static int is_step_wrapper_type(PyTypeObject *tp)
{
    static PyTypeObject *known[2], *other[4];
    static unsigned next_other;
    if (tp == known[0] || tp == known[1])
        return 1;
    if (tp == other[0] || tp == other[1] || tp == other[2] || tp == other[3])
        return 0;
    int is = is_step_wrapper(tp->tp_name);
    Py_INCREF(tp);   /* (held: never another type's address) */
    if (is)
        Py_XSETREF(known[known[0] ? 1 : 0], tp);
    else
        Py_XSETREF(other[next_other++ % 4], tp);
    return is;
}

/* 1 if o is an asyncio task: its type one of task_types (most), else an
 * instance of one (a subclass). */
static int is_task(PyObject *o)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(task_types); i++)
        if ((PyObject *)Py_TYPE(o) == PyTuple_GET_ITEM(task_types, i))
            return 1;
    int r = PyObject_IsInstance(o, task_types) == 1;
    sw_err_drop();
    return r;
}

/* The C Task's fields read in place where this release keeps them
 * (procmem/asyncio_layout.h's generated table: its future state, its
 * _fut_waiter and its name), instead of calling done(), cancelled() and
 * get_name() and looking _fut_waiter up (a few hundred instructions each,
 * several times a step). Known once per process: the exact type of this
 * release's name and size (a subclass, or the Python Task, calls them),
 * and the first task's reads equal to what its methods say; else never
 * read. */
static struct {
    int checked;               /* 0: not yet, 1: the reads agreed, -1: they did not (the calls then) */
    PyTypeObject *type;        /* _asyncio.Task as the table describes it (held), or NULL */
    sw_asyncio_layout l;
} task_fields;

static int call_true(PyObject *o, PyObject *method);

/* Finds the C Task among the task classes (asyncio_setup). */
static void task_fields_find(PyObject *types)
{
    Py_CLEAR(task_fields.type);
    task_fields.checked = 0;
#ifndef Py_GIL_DISABLED   /* (the tables are of builds with the GIL) */
    sw_asyncio_layout l;
    if (sw_asyncio_layout_known(PY_VERSION_HEX, &l) != SW_OK || l.pointer_size != sizeof(void *))
        return;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(types); i++) {
        PyObject *t = PyTuple_GET_ITEM(types, i);
        if (PyType_Check(t) && strcmp(((PyTypeObject *)t)->tp_name, l.task_type) == 0 &&
            ((PyTypeObject *)t)->tp_basicsize == (Py_ssize_t)l.task_size) {
            task_fields.type = (PyTypeObject *)Py_NewRef(t);
            task_fields.l = l;
        }
    }
#else
    (void)types;
#endif
}

static PyObject *field_at(PyObject *task, uint32_t offset)
{
    return *(PyObject **)((char *)task + offset);   /* borrowed; NULL: unset */
}

static int state_of(PyObject *task)
{
    return *(int *)((char *)task + task_fields.l.fut_state);
}

/* 1 when task's fields may be read in place (checked at the first such
 * task against its methods), else 0. */
static int fields_of(PyObject *task)
{
    if (!task_fields.type || !Py_IS_TYPE(task, task_fields.type) || task_fields.checked < 0)
        return 0;
    if (task_fields.checked)
        return 1;
    const sw_asyncio_layout *l = &task_fields.l;
    int st = state_of(task);
    PyObject *w = PyObject_GetAttr(task, S_fut_waiter);
    PyObject *name = PyObject_CallMethodNoArgs(task, S_get_name);   /* (3.12+: makes "Task-N" of N, kept) */
    PyObject *fw = field_at(task, l->task_fut_waiter);
    int ok = (st == (int)l->fut_state_pending || st == (int)l->fut_state_cancelled ||
              st == (int)l->fut_state_finished) &&
             (st != (int)l->fut_state_pending) == call_true(task, S_done) &&
             (st == (int)l->fut_state_cancelled) == call_true(task, S_cancelled) &&
             w && w == (fw ? fw : Py_None) && name && name == field_at(task, l->task_name);
    Py_XDECREF(w);
    Py_XDECREF(name);
    sw_err_drop();
    task_fields.checked = ok ? 1 : -1;
    return ok;
}

/* task.done() */
static int task_done(PyObject *task)
{
    return fields_of(task) ? state_of(task) != (int)task_fields.l.fut_state_pending : call_true(task, S_done);
}

/* task.cancelled() */
static int task_cancelled(PyObject *task)
{
    return fields_of(task) ? state_of(task) == (int)task_fields.l.fut_state_cancelled
                           : call_true(task, S_cancelled);
}

/* 1 if task awaits a future (its _fut_waiter is set), else 0 (a bare
 * yield, or done). */
static int task_waits(PyObject *task)
{
    if (fields_of(task)) {
        PyObject *w = field_at(task, task_fields.l.task_fut_waiter);
        return w && w != Py_None;
    }
    PyObject *w = PyObject_GetAttr(task, S_fut_waiter);
    int r = w && w != Py_None;
    Py_XDECREF(w);
    sw_err_drop();
    return r;
}

/* The C Task's name field as it is, when it may stand for the name
 * (borrowed): a str, or from 3.12 the task's number N until get_name()
 * makes "Task-N" of it; else NULL (get_name() then). The same object seen
 * again is the same name: none made. */
static PyObject *task_name_field(PyObject *task)
{
    if (!fields_of(task))
        return NULL;
    PyObject *n = field_at(task, task_fields.l.task_name);
    return n && (PyUnicode_CheckExact(n) || PyLong_CheckExact(n)) ? n : NULL;
}

/* The asyncio name that name field n stands for (new reference, NULL with
 * an exception set): "Task-N" of a number, made as get_name() would
 * (PyUnicode_FromFormat: ~2k instructions), the field left as it is. */
static PyObject *name_of_field(PyObject *n)
{
    if (PyUnicode_CheckExact(n))
        return Py_NewRef(n);
    unsigned long long v = PyLong_AsUnsignedLongLong(n);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    char buf[SW_DECIMAL_MAX];
    const char *digits = sw_decimal(buf, v);
    size_t nd = strlen(digits);
    PyObject *r = PyUnicode_New((Py_ssize_t)(5 + nd), 127);
    if (r) {
        Py_UCS1 *d = PyUnicode_1BYTE_DATA(r);
        memcpy(d, "Task-", 5);
        memcpy(d + 5, digits, nd);
    }
    return r;
}

/* A Handle's _callback and _args (__slots__: member descriptors) read
 * where the type keeps them, and a C Future's _exception and _result
 * (getset descriptors) from their getter: each attribute's descriptor is
 * looked up once per type and used while the type is unchanged (its
 * version tag); a type whose attribute is neither, read by GetAttr
 * (Python's own attribute cache does the same; GetAttr costs ~20 times the
 * read, ~3 times the getter's call). */
typedef struct {
    PyTypeObject *type;   /* held: its address is never another type's */
    unsigned int version;
    Py_ssize_t offset;    /* 0: not a plain object slot of that type */
    getter get;           /* NULL: not a data descriptor of C getset of that type */
    void *closure;
} slot_cache;

static slot_cache callback_slot, args_slot, exception_slot, result_slot;

static void learn_slot(PyTypeObject *tp, PyObject *name, slot_cache *c)
{
    PyObject *d = tp->tp_getattro == PyObject_GenericGetAttr && Py_IS_TYPE(tp, &PyType_Type)
                      ? PyObject_GetAttr((PyObject *)tp, name) : NULL;
    Py_ssize_t offset = 0;
    getter get = NULL;
    void *closure = NULL;
    if (d && Py_IS_TYPE(d, &PyMemberDescr_Type) && PyType_IsSubtype(tp, PyDescr_TYPE(d))) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == SLOT_OBJECT_EX && !(m->flags & SLOT_AUDITED) && m->offset >= (Py_ssize_t)sizeof(PyObject) &&
            m->offset + (Py_ssize_t)sizeof(PyObject *) <= tp->tp_basicsize)
            offset = m->offset;
    } else if (d && Py_IS_TYPE(d, &PyGetSetDescr_Type) && PyType_IsSubtype(tp, PyDescr_TYPE(d))) {
        PyGetSetDef *g = ((PyGetSetDescrObject *)d)->d_getset;
        get = g->get;   /* (a data descriptor: before the instance's dict, as GetAttr has it) */
        closure = g->closure;
    }
    Py_XDECREF(d);
    sw_err_drop();
    Py_INCREF(tp);
    Py_XSETREF(c->type, tp);
    c->version = (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? tp->tp_version_tag : 0;
    c->offset = c->version ? offset : 0;
    c->get = c->version ? get : NULL;
    c->closure = closure;
}

/* o.name (new reference; NULL with an exception set when it has none). */
static PyObject *slot_of(PyObject *o, PyObject *name, slot_cache *c)
{
    PyTypeObject *tp = Py_TYPE(o);
    if (tp != c->type || tp->tp_version_tag != c->version || !(tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
        learn_slot(tp, name, c);
    if ((c->offset || c->get) && tp->tp_version_tag == c->version && (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) {
        if (c->get)
            return c->get(o, c->closure);
        PyObject *v = *(PyObject **)((char *)o + c->offset);
        if (v)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(o, name);
}

/* The task a C step wrapper steps (new reference), or NULL: its first
 * field (TaskStepMethWrapper's sw_task, 3.9/3.10's TaskWakeupMethWrapper's
 * ww_task), read in place for a type whose first wrapper's field was its
 * __self__, else its __self__. */
static PyObject *step_wrapper_task(PyObject *cb)
{
    static PyTypeObject *types[2];   /* held: never another type's address */
    static int in_place[2];
    PyTypeObject *tp = Py_TYPE(cb);
    int i = tp == types[0] ? 0 : tp == types[1] ? 1 : -1;
    PyObject *first = tp->tp_basicsize >= (Py_ssize_t)(sizeof(PyObject) + sizeof(PyObject *))
                          ? *(PyObject **)((char *)cb + sizeof(PyObject)) : NULL;
    if (i >= 0 && in_place[i])
        return first ? Py_NewRef(first) : NULL;
    PyObject *self = PyObject_GetAttr(cb, S_self);
    if (!self)
        sw_err_drop();
    if (i < 0 && (!types[0] || !types[1])) {
        i = types[0] ? 1 : 0;
        types[i] = (PyTypeObject *)Py_NewRef((PyObject *)tp);
        in_place[i] = self && first == self;
    }
    return self;
}

/* The task a callback steps (new reference), or NULL. */
static PyObject *stepped_task(PyObject *cb)
{
    PyObject *self = NULL;
    if (PyMethod_Check(cb))
        self = Py_NewRef(PyMethod_GET_SELF(cb));
    else if (PyCFunction_Check(cb)) {
        self = PyCFunction_GET_SELF(cb);
        Py_XINCREF(self);
    } else if (is_step_wrapper_type(Py_TYPE(cb))) {
        self = step_wrapper_task(cb);
    }
    if (self && !is_task(self))
        Py_CLEAR(self);
    return self;
}

/* 1 if code co is in a folder or file that is no event's location; kept
 * in a small table by code object (held: its address is never another
 * code's), since a location walks a few frames of asyncio each time. */
#define SKIP_CACHE 64
static struct {
    PyCodeObject *code;
    int skip;
} skip_cache[SKIP_CACHE];

static int skipped(PyCodeObject *co)
{
    size_t slot = ((uintptr_t)co >> 4) % SKIP_CACHE;
    if (skip_cache[slot].code == co)
        return skip_cache[slot].skip;
    PyObject *file = co->co_filename;
    int s = 0;
    for (Py_ssize_t i = 0; !s && i < PyTuple_GET_SIZE(skip); i++)
        s = PyUnicode_Tailmatch(file, PyTuple_GET_ITEM(skip, i), 0, PY_SSIZE_T_MAX, -1) == 1;
    Py_INCREF(co);
    Py_XSETREF(skip_cache[slot].code, co);
    skip_cache[slot].skip = s;
    return s;
}

PyCodeObject *sw_task_running_code(void)
{
#if PY_VERSION_HEX >= 0x030B0000
    SW_FRAME *f = sw_complete_frame(sw_thread_iframe(PyThreadState_Get()));
    return f && PyCode_Check((PyObject *)sw_frame_code(f)) ? sw_frame_code(f) : NULL;
#else
    PyFrameObject *f = PyEval_GetFrame();
    return f ? f->f_code : NULL;
#endif
}

void sw_task_record_here(int kind, long long a, long long b, long long c, const char *s1, const char *s2)
{
#if PY_VERSION_HEX >= 0x030B0000
    /* The thread's frames as the evaluator keeps them: no frame object
     * made (PyEval_GetFrame and PyFrame_GetBack make one for each). */
    for (SW_FRAME *f = sw_complete_frame(sw_thread_iframe(PyThreadState_Get())); f; f = sw_complete_frame(f->previous)) {
        PyCodeObject *co = sw_frame_code(f);
        if (!PyCode_Check((PyObject *)co) || skipped(co) || (sw_S.gen && (sw_code_id(co, NULL) & SW_ID_SKIP)))
            continue;
        sw_task_record_code(kind, co, _PyInterpreterFrame_LASTI(f) * (int)sizeof(_Py_CODEUNIT), a, b, c, s1, s2);
        return;
    }
    sw_task_record_code(kind, NULL, -1, a, b, c, s1, s2);
#else
    PyFrameObject *f = PyEval_GetFrame();   /* (borrowed: frames are objects before 3.11) */
    while (f && skipped(f->f_code))
        f = f->f_back;
    sw_task_record(kind, f, a, b, c, s1, s2);
#endif
}

/* repr(v), cut to VALUE_MAX characters (new reference, never NULL unless
 * out of memory). */
static PyObject *short_repr(PyObject *v)
{
    PyObject *r = PyObject_Repr(v);
    if (!r) {
        PyObject *t = PyErr_Occurred();
        const char *name = t && PyExceptionClass_Check(t) ? PyExceptionClass_Name(t) : "?";
        const char *dot = strrchr(name, '.');
        r = PyUnicode_FromFormat("<repr failed: %s>", dot ? dot + 1 : name);
        sw_err_drop();
        return r;
    }
    if (PyUnicode_GET_LENGTH(r) > VALUE_MAX) {
        PyObject *head = PyUnicode_Substring(r, 0, VALUE_MAX - 3);
        Py_SETREF(r, head ? PyUnicode_FromFormat("%U...", head) : NULL);
        Py_XDECREF(head);
    }
    return r;
}

/* The text of value v as a task event holds it (short_repr's): an int
 * (exact, in a long long), None, True or False written into buf with no
 * object made (repr makes a str: a third of a queue message's cost);
 * anything else repr'd into *held (a new reference to release). NULL when
 * out of memory. */
typedef struct {
    char buf[24];
    PyObject *held;
} value_text;

static const char *text_of(PyObject *v, value_text *t)
{
    t->held = NULL;
    if (v == Py_None || v == Py_True || v == Py_False)
        return v == Py_None ? "None" : v == Py_True ? "True" : "False";
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (!overflow && !(n == -1 && PyErr_Occurred())) {   /* (by hand: snprintf costs what repr did) */
            unsigned long long u = n < 0 ? 0ull - (unsigned long long)n : (unsigned long long)n;
            char *p = t->buf + sizeof t->buf;
            *--p = 0;
            do
                *--p = (char)('0' + u % 10);
            while (u /= 10);
            if (n < 0)
                *--p = '-';
            return p;
        }
        sw_err_drop();
    }
    t->held = short_repr(v);
    return t->held ? PyUnicode_AsUTF8(t->held) : NULL;
}

/* "a b" (new reference; a and b str): ASCII (asyncio's names and most
 * qualified names) copied into one new str, else concatenated (two
 * PyUnicode_Concat cost ten times as much). */
static PyObject *spaced(PyObject *a, PyObject *b)
{
    if (PyUnicode_IS_ASCII(a) && PyUnicode_IS_ASCII(b)) {
        Py_ssize_t na = PyUnicode_GET_LENGTH(a), nb = PyUnicode_GET_LENGTH(b);
        PyObject *r = PyUnicode_New(na + 1 + nb, 127);
        if (r) {
            Py_UCS1 *d = PyUnicode_1BYTE_DATA(r);
            memcpy(d, PyUnicode_1BYTE_DATA(a), (size_t)na);
            d[na] = ' ';
            memcpy(d + na + 1, PyUnicode_1BYTE_DATA(b), (size_t)nb);
        }
        return r;
    }
    PyObject *head = PyUnicode_Concat(a, S_space);
    PyObject *r = head ? PyUnicode_Concat(head, b) : NULL;
    Py_XDECREF(head);
    return r;
}

/* "NAME COROUTINE" (new reference): the task's asyncio name `aname` and
 * its coroutine's qualified name; stackwatch.name()'s when one was given. */
static PyObject *task_name(PyObject *task, PyObject *aname, PyObject *coro)
{
    if (names_data && PyDict_Check(names_data) && PyDict_GET_SIZE(names_data))
        return coro ? PyObject_CallFunctionObjArgs(namer, task, coro, NULL) : PyObject_CallOneArg(namer, task);
    PyObject *c = coro ? Py_NewRef(coro) : PyObject_GetAttr(task, S_coro);
    if (!c) {
        sw_err_drop();
        c = Py_NewRef(Py_None);
    }
    PyObject *qn = PyCoro_CheckExact(c) ? Py_NewRef(((PyCoroObject *)c)->cr_qualname)   /* (its __qualname__'s getter) */
                                        : PyObject_GetAttr(c, S_qualname);
    if (!qn) {
        sw_err_drop();
        qn = PyUnicode_FromString(Py_TYPE(c)->tp_name);
    }
    PyObject *r = NULL;
    if (qn && PyUnicode_Check(aname) && PyUnicode_Check(qn)) {
        r = spaced(aname, qn);
    } else if (qn) {
        r = PyUnicode_FromFormat("%S %S", aname, qn);
    }
    Py_XDECREF(qn);
    Py_DECREF(c);
    return r;
}

/* 1 if stackwatch.name() named the task. */
static int named_by_user(PyObject *task)
{
    if (!names_data || !PyDict_Check(names_data) || !PyDict_GET_SIZE(names_data))
        return 0;
    PyObject *wr = PyWeakref_NewRef(task, NULL);
    int r = wr && PyDict_Contains(names_data, wr) == 1;
    Py_XDECREF(wr);
    sw_err_drop();
    return r;
}

/* The task's id, defined when first met (*name: its name then, a new
 * reference, when name is not NULL); a task whose asyncio name changed
 * since it was last seen is renamed (TASK_NAME), unless stackwatch.name()
 * named it. 0: none. */
static void seen(PyObject *task, uint64_t tid, int fresh, PyObject *coro, PyObject **name);

/* 1 if this step of task tid is its first (0 also when out of memory). */
static int first_step_of(uint64_t tid)
{
    size_t byte = (size_t)(tid >> 3);
    uint8_t bit = (uint8_t)(1u << (tid & 7));
    if (byte >= stepped_cap) {
        size_t was = stepped_cap;
        uint8_t *grown = sw_array_grow(stepped, &stepped_cap, byte + 1, 1, 1024);
        if (!grown)
            return 0;
        stepped = grown;
        memset(stepped + was, 0, stepped_cap - was);
    }
    if (stepped[byte] & bit)
        return 0;
    stepped[byte] |= bit;
    return 1;
}

/* first_step: a step of the task, whose name is checked only at its first
 * (asyncio's create_task(name=) of 3.9-3.11 names it after its creation)
 * and at its exit (set_name while it ran: its last name is the trace's). */
static uint64_t task_id(PyObject *task, PyObject *coro, PyObject **name, int first_step)
{
    if (!sw_S.gen && !(sw_D.mask & SW_EVB(SW_K_TASK_SWITCH)))
        return 0;
    if (tables() < 0) {
        sw_err_drop();
        return 0;
    }
    int fresh;
    uint64_t tid = sw_tasks_id(task, &fresh);
    if (tid && !fresh && first_step && !first_step_of(tid))   /* its name is checked at its first step, and
                                                                * at its exit */
        return tid;
    if (tid)
        seen(task, tid, fresh, coro, name);
    return tid;
}

/* Task tid is seen: defined when fresh (*name: its name, a new reference,
 * when name is not NULL), or renamed when its asyncio name changed.
 * seen_names keeps its name field when that stands for the name (an
 * unchanged field is an unchanged name: nothing made, nothing compared),
 * else its name. */
static void seen(PyObject *task, uint64_t tid, int fresh, PyObject *coro, PyObject **name)
{
    PyObject *was = fresh || tid >= seen_cap ? NULL : seen_names[tid];   /* borrowed */
    PyObject *field = task_name_field(task);                            /* borrowed */
    if (field && field == was)
        return;
    PyObject *aname = field ? name_of_field(field) : PyObject_CallMethodNoArgs(task, S_get_name);
    PyObject *was_name = was ? name_of_field(was) : NULL;   /* (was: a str or a number, as kept) */
    if (!aname || (was && !was_name)) {
        Py_XDECREF(aname);
        Py_XDECREF(was_name);
        sw_err_drop();
        return;
    }
    if (fresh || (was_name != aname && (!was_name || PyObject_RichCompareBool(was_name, aname, Py_EQ) != 1))) {
        PyObject *full = fresh || !named_by_user(task) ? task_name(task, aname, coro) : NULL;
        const char *u = full && PyUnicode_Check(full) ? PyUnicode_AsUTF8(full) : NULL;
        if (u)
            sw_tasks_define(tid, u);
        if (u && was)   /* renamed since it was last seen (not a first sight in a new session) */
            sw_task_record(SW_K_TASK_NAME, NULL, (long long)tid, 0, 0, u, NULL);
        if (name && fresh)
            *name = full ? Py_NewRef(full) : NULL;
        Py_XDECREF(full);
    }
    if (keep_name(tid, field ? field : aname) < 0)
        PyErr_NoMemory();   /* (cleared below: checked again next time) */
    sw_err_drop();
    Py_XDECREF(was_name);
    Py_DECREF(aname);
}

static int call_true(PyObject *o, PyObject *method)
{
    PyObject *r = PyObject_CallMethodNoArgs(o, method);
    int t = r == Py_True;
    Py_XDECREF(r);
    sw_err_drop();
    return t;
}

/* The task ended: TASK_EXIT with its outcome, read without retrieving it
 * (its "never retrieved" log stays). */
static void exited(PyObject *task, uint64_t tid)
{
    if (task_cancelled(task)) {
        sw_task_record(SW_K_TASK_EXIT, NULL, (long long)tid, 2, 0, NULL, NULL);
        return;
    }
    PyObject *exc = slot_of(task, S_exception, &exception_slot);
    int failed = exc && exc != Py_None;
    PyObject *v = failed ? Py_NewRef(exc) : exc ? slot_of(task, S_result, &result_slot) : NULL;
    value_text t = {.held = NULL};
    const char *u = v ? text_of(v, &t) : NULL;
    sw_task_record(SW_K_TASK_EXIT, NULL, (long long)tid, failed, 0, u, NULL);
    Py_XDECREF(t.held);
    Py_XDECREF(v);
    Py_XDECREF(exc);
    sw_err_drop();
}

/* After a step of task tid: its exit, or its block on what it awaits. */
static void after_step(PyObject *task, uint64_t tid)
{
    if (task_done(task)) {
        if (tables() == 0)
            seen(task, tid, 0, NULL, NULL);   /* a name given while it ran */
        exited(task, tid);
        return;
    }
    if (!task_waits(task) || !block_of)   /* a bare yield (sleep(0)): stepped again at once */
        return;
    PyObject *b = PyObject_CallOneArg(block_of, task);
    if (b && PyTuple_Check(b) && PyTuple_GET_SIZE(b) == 3 && tables() == 0) {
        PyObject *reason = PyTuple_GET_ITEM(b, 0), *channel = PyTuple_GET_ITEM(b, 1), *f = PyTuple_GET_ITEM(b, 2);
        const char *ch = PyUnicode_Check(channel) ? PyUnicode_AsUTF8(channel) : NULL;
        PyObject *key = PyLong_FromUnsignedLongLong(tid);
        if (key && PyDict_SetItem(blocked, key, channel) == 0)
            sw_task_record(SW_K_TASK_BLOCK, PyFrame_Check(f) ? (PyFrameObject *)f : NULL, PyLong_AsLongLong(reason),
                            0, 0, ch, NULL);
        Py_XDECREF(key);
    }
    Py_XDECREF(b);
    sw_err_drop();
}

/* The task runs (tid): a wake made for it by a task's done callback is
 * told now, by it (TASK_WOKEN: the waker, how long ago, on what). */
static void told(uint64_t tid)
{
    PyObject *key = PyLong_FromUnsignedLongLong(tid);
    PyObject *by = key ? PyDict_GetItemWithError(woken_by, key) : NULL;   /* borrowed */
    if (by && PyTuple_Check(by) && PyTuple_GET_SIZE(by) == 4) {
        Py_INCREF(by);
        PyDict_DelItem(woken_by, key);
        PyObject *channel = PyTuple_GET_ITEM(by, 1);
        long long t = PyLong_AsLongLong(PyTuple_GET_ITEM(by, 2));
        long long thread = PyLong_AsLongLong(PyTuple_GET_ITEM(by, 3));
        long long now = (long long)sw_clock_ns(CLOCK_MONOTONIC);
        sw_task_record(SW_K_TASK_WOKEN, NULL, PyLong_AsLongLong(PyTuple_GET_ITEM(by, 0)), now > t && t > 0 ? now - t : 0,
                       thread > 0 ? thread : (long long)syscall(SYS_gettid),
                       PyUnicode_Check(channel) ? PyUnicode_AsUTF8(channel) : NULL, NULL);
        Py_DECREF(by);
    }
    Py_XDECREF(key);
    sw_err_drop();
}

/* The task of another thread that scheduled handle h (call_soon_threadsafe),
 * taken off from_thread: 1 and *tid, *thread set, else 0. */
static int scheduled_from_thread(PyObject *h, uint64_t *tid, long long *thread)
{
    if (!from_thread || PyDict_GET_SIZE(from_thread) == 0 || tables_gen != sw_S.gen)
        return 0;
    PyObject *by = PyDict_GetItemWithError(from_thread, h);   /* borrowed */
    if (!by || !PyTuple_Check(by) || PyTuple_GET_SIZE(by) != 2)
        return 0;
    *tid = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(by, 0));
    *thread = PyLong_AsLongLong(PyTuple_GET_ITEM(by, 1));
    PyDict_DelItem(from_thread, h);
    return *thread > 0;
}

/* A handle run on behalf of a task: a done callback of a task (gather's,
 * shield's: the handle's first argument), or a handle another thread
 * scheduled (from_thread: its task then). A task it wakes was woken by
 * that task, told at its next step. 0 if the handle is none (*r untouched). */
static int on_behalf(sw_task_wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames, PyObject **r)
{
    sw_exc_state exc;
    sw_exc_save(&exc);
    uint64_t tid = 0;
    long long thread = 0;
    if (!scheduled_from_thread(args[0], &tid, &thread)) {
        tid = 0, thread = 0;
        PyObject *a = slot_of(args[0], S_args, &args_slot);
        PyObject *done = a && PyTuple_Check(a) && PyTuple_GET_SIZE(a) > 0 ? PyTuple_GET_ITEM(a, 0) : NULL;
        tid = done && is_task(done) ? task_id(done, NULL, NULL, 1) : 0;
        Py_XDECREF(a);
    }
    sw_err_drop();
    sw_exc_restore(&exc);
    if (!tid && !thread)
        return 0;
    uint64_t outer = behalf;
    long long outer_thread = behalf_thread;
    behalf = tid;
    behalf_thread = thread;
    *r = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    behalf = outer;
    behalf_thread = outer_thread;
    return 1;
}

/* Forgets the handles of loop's last pass still in io_ready (cancelled:
 * the loop skipped them). */
static void forget_io_of(PyObject *loop)
{
    PyObject *stale = PyList_New(0);
    Py_ssize_t pos = 0;
    PyObject *h, *owner;
    while (stale && PyDict_Next(io_ready, &pos, &h, &owner))
        if (owner == loop && PyList_Append(stale, h) < 0)
            break;
    for (Py_ssize_t i = 0; stale && i < PyList_GET_SIZE(stale); i++)
        PyDict_DelItem(io_ready, PyList_GET_ITEM(stale, i));
    Py_XDECREF(stale);
}

/* Whether the pass of the loop that processes `events` runs only
 * stackwatch's wake (asyncio_wake_quiet): its one event is the loop's
 * self-pipe, its one ready handle a quiet one (_native.quiet's: the
 * listing), and no timer is due within a millisecond. Runs quiet. */
static int wake_alone(PyObject *loop, PyObject *events)
{
    if (!PyList_Check(events) || PyList_GET_SIZE(events) != 1)
        return 0;
    PyObject *ev = PyList_GET_ITEM(events, 0);   /* (key, mask) */
    PyObject *fd = PyTuple_Check(ev) && PyTuple_GET_SIZE(ev) == 2 ? PyObject_GetAttrString(PyTuple_GET_ITEM(ev, 0), "fd")
                                                                   : NULL;
    PyObject *ssock = fd ? PyObject_GetAttrString(loop, "_ssock") : NULL;
    PyObject *own = ssock ? PyObject_CallMethod(ssock, "fileno", NULL) : NULL;
    PyObject *ready = own ? PyObject_GetAttr(loop, S_ready) : NULL;
    PyObject *first = ready && PyObject_Length(ready) == 1 ? PySequence_GetItem(ready, 0) : NULL;
    PyObject *cb = first ? PyObject_GetAttr(first, S_callback) : NULL;
    PyObject *timers = cb ? PyObject_GetAttrString(loop, "_scheduled") : NULL;
    int alone = cb && sw_trace_api_is_quiet(cb) && PyObject_RichCompareBool(fd, own, Py_EQ) == 1 && timers &&
                PyList_Check(timers);
    if (alone && PyList_GET_SIZE(timers)) {
        PyObject *when = PyObject_GetAttrString(PyList_GET_ITEM(timers, 0), "_when");
        PyObject *now = when ? PyObject_CallMethod(loop, "time", NULL) : NULL;
        double w = when ? PyFloat_AsDouble(when) : 0, n = now ? PyFloat_AsDouble(now) : 0;
        alone = when && now && !PyErr_Occurred() && w > n + 0.001;
        Py_XDECREF(when);
        Py_XDECREF(now);
    }
    Py_XDECREF(fd);
    Py_XDECREF(ssock);
    Py_XDECREF(own);
    Py_XDECREF(ready);
    Py_XDECREF(first);
    Py_XDECREF(cb);
    Py_XDECREF(timers);
    sw_err_drop();
    return alone;
}

/* A loop's pass begins (its _process_events) on a thread quiet since
 * stackwatch woke it (hook_eval.c wake_quiet): the first pass stays quiet
 * if it is the wake's alone (until the loop waits again: hook_eval.c);
 * any other pass is the program's: the quiet ends. */
static void wake_pass(sw_tracer_thread *t, PyObject *loop, PyObject *events)
{
    sw_exc_state exc;
    sw_exc_save(&exc);
    int keep = t->wake_quiet_gen == sw_S.gen && t->wake_quiet_phase == 1 && wake_alone(loop, events);
    sw_exc_restore(&exc);
    if (keep) {
        t->wake_quiet_phase = 2;
        return;
    }
    t->wake_quiet_gen = 0;
    sw_quiet_exit(&sw_T);
}

/* BaseSelectorEventLoop._process_events(self, event_list): the handles it
 * adds to the loop's ready queue are those of the fds found ready (I/O):
 * kept in io_ready until they run (in this pass of the loop; the loop's
 * left there are forgotten at its next). */
static PyObject *wrap_events(sw_task_wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    sw_tracer_thread *t = &sw_TT;
    if (SW_UNLIKELY(t->wake_quiet_gen) && PyVectorcall_NARGS(nargsf) >= 2)
        wake_pass(t, args[0], args[1]);
    if (PyVectorcall_NARGS(nargsf) < 1 || unwanted())
        return PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    sw_exc_state exc;
    sw_exc_save(&exc);
    PyObject *ready = tables() == 0 ? PyObject_GetAttr(args[0], S_ready) : NULL;
    Py_ssize_t before = ready ? PyObject_Length(ready) : -1;
    if (ready && PyDict_GET_SIZE(io_ready))
        forget_io_of(args[0]);
    sw_err_drop();
    sw_exc_restore(&exc);
    PyObject *r = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    if (r && before >= 0) {
        sw_exc_save(&exc);
        Py_ssize_t after = PyObject_Length(ready);
        for (Py_ssize_t i = before; i < after; i++) {
            PyObject *h = PySequence_GetItem(ready, i);
            int added = h ? PyDict_SetItem(io_ready, h, args[0]) : -1;
            Py_XDECREF(h);
            if (added < 0)
                break;
        }
        sw_err_drop();
        sw_exc_restore(&exc);
    }
    Py_XDECREF(ready);
    return r;
}

/* The (task id, native id) of this thread's running task while it is in
 * a call_soon_threadsafe of a loop of another thread, until the handle it
 * makes is kept (wrap_init, before the loop can see it), else NULL. */
static __thread PyObject *scheduling __attribute__((tls_model("initial-exec")));

/* loop.call_soon_threadsafe(...) from a thread not the loop's: the handle
 * made is kept (from_thread) with the task that scheduled it. */
static PyObject *wrap_threadsafe(sw_task_wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) < 1 || unwanted() || scheduling)
        return PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    sw_exc_state exc;
    sw_exc_save(&exc);
    PyObject *owner = PyObject_GetAttr(args[0], S_thread_id);   /* the loop's thread (None: not running) */
    if (owner && PyLong_Check(owner) && PyLong_AsUnsignedLong(owner) != PyThread_get_thread_ident() &&
        tables() == 0)
        scheduling = Py_BuildValue("(KL)", (unsigned long long)sw_task_running(), (long long)syscall(SYS_gettid));
    Py_XDECREF(owner);
    sw_err_drop();
    sw_exc_restore(&exc);
    PyObject *h = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    Py_CLEAR(scheduling);
    return h;
}

/* A handle's run (cb: its callback, borrowed, or NULL). */
static PyObject *run_handle(sw_task_wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                            PyObject *cb)
{
    PyObject *task = NULL;
    uint64_t tid = 0, prev = 0;
    int acted = 0;
    {
        sw_exc_state exc;
        sw_exc_save(&exc);
        task = cb ? stepped_task(cb) : NULL;
        sw_err_drop();
        tid = task ? task_id(task, NULL, NULL, 1) : 0;
        if (tid)
            prev = sw_tasks_switch(tid, &acted);
        if (acted && woken_by && PyDict_GET_SIZE(woken_by))
            told(tid);
        sw_err_drop();
        sw_exc_restore(&exc);
    }
    PyObject *r;
    if (!task && on_behalf(w, args, nargsf, kwnames, &r))
        return r;
    if (!task && io_ready && PyDict_GET_SIZE(io_ready) && tables_gen == sw_S.gen) {
        int found = PyDict_Contains(io_ready, args[0]) == 1 && PyDict_DelItem(io_ready, args[0]) == 0;
        PyErr_Clear();   /* (none: a handle's hash is its address) */
        if (found) {
            int outer = by_io;
            by_io = 1;
            r = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
            by_io = outer;
            return r;
        }
    }
    r = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    if (acted) {
        sw_exc_state exc;
        sw_exc_save(&exc);
        after_step(task, tid);
        sw_tasks_switch(prev, &acted);
        sw_err_drop();
        sw_exc_restore(&exc);
    }
    Py_XDECREF(task);
    return r;
}

/* Handle._run(self): a step of a task runs as the task; a handle of
 * stackwatch's (its callback _native.quiet: task_hooks._live_at_start's
 * listing on a loop's own thread) runs quiet whole, Handle._run too. */
static PyObject *wrap_run(sw_task_wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n < 1 || unwanted())
        return PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    sw_exc_state exc;
    sw_exc_save(&exc);
    PyObject *cb = slot_of(args[0], S_callback, &callback_slot);
    sw_err_drop();
    sw_exc_restore(&exc);
    int quiet = sw_trace_api_is_quiet(cb);
    if (quiet)
        sw_quiet_enter(&sw_T);
    PyObject *r = run_handle(w, args, nargsf, kwnames, cb);
    if (quiet)
        sw_quiet_exit(&sw_T);
    Py_XDECREF(cb);
    return r;
}

static PyObject *wrap_init(sw_task_wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *r = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (scheduling && r && n >= 1 && from_thread && tables_gen == sw_S.gen) {   /* call_soon_threadsafe's handle */
        sw_exc_state exc;
        sw_exc_save(&exc);
        PyDict_SetItem(from_thread, args[0], scheduling);
        Py_CLEAR(scheduling);
        sw_err_drop();
        sw_exc_restore(&exc);
    }
    if (!r || n < 2 || !blocked || PyDict_GET_SIZE(blocked) == 0 || tables_gen != sw_S.gen || unwanted())
        return r;
    sw_exc_state exc;
    sw_exc_save(&exc);
    PyObject *task = stepped_task(args[1]);
    uint64_t tid = task && task_waits(task) ? sw_tasks_known(task) : 0;   /* a blocked task's wakeup: set */
    PyObject *key = tid ? PyLong_FromUnsignedLongLong(tid) : NULL;
    PyObject *channel = key ? PyDict_GetItemWithError(blocked, key) : NULL;   /* borrowed */
    if (channel) {
        Py_INCREF(channel);
        PyDict_DelItem(blocked, key);
        if (behalf || behalf_thread) {   /* on a task's behalf: told by the woken task at its next step */
            PyObject *by = Py_BuildValue("(KOKL)", (unsigned long long)behalf, channel,
                                         (unsigned long long)sw_clock_ns(CLOCK_MONOTONIC), behalf_thread);
            if (by)
                PyDict_SetItem(woken_by, key, by);
            Py_XDECREF(by);
        } else {   /* by the running task, or (by_io) by I/O readiness: the loop only passed it on */
            sw_task_record_here(SW_K_TASK_WAKE, (long long)tid, by_io ? REASON_IO + 1 : 0, 0,
                                PyUnicode_Check(channel) ? PyUnicode_AsUTF8(channel) : NULL, NULL);
        }
        Py_DECREF(channel);
    }
    Py_XDECREF(key);
    Py_XDECREF(task);
    sw_err_drop();
    sw_exc_restore(&exc);
    return r;
}

/* 1 if the task loop.create_task makes now runs its first step at once
 * (3.12+: the loop runs, and its task factory is asyncio's eager one,
 * made by create_eager_task_factory). */
static int eager(PyObject *loop)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *factory = PyObject_GetAttr(loop, S_task_factory);
    PyObject *qn = factory && factory != Py_None ? PyObject_GetAttr(factory, S_qualname) : NULL;
    int r = qn && PyUnicode_Check(qn) &&
            PyUnicode_CompareWithASCIIString(qn, "create_eager_task_factory.<locals>.factory") == 0 &&
            call_true(loop, S_is_running);
    Py_XDECREF(qn);
    Py_XDECREF(factory);
    sw_err_drop();
    return r;
#else
    (void)loop;
    return 0;
#endif
}

/* The creation of an eager task: recorded (unnamed yet) before it is
 * made, so that its first step, run as it is made, runs as the task
 * (then named, TASK_NAME, and ended or blocked as after a step). */
static PyObject *create_eager(sw_task_wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                              PyObject *coro)
{
    uint64_t tid = tables() == 0 ? sw_tasks_reserve() : 0;
    uint64_t prev = 0;
    int acted = 0;
    if (tid) {
        sw_task_record_here(SW_K_TASK_CREATE, (long long)tid, 2, 0, NULL, NULL);
        prev = sw_tasks_switch(tid, &acted);
    }
    sw_err_drop();
    PyObject *task = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    if (!tid)
        return task;
    sw_exc_state exc;
    sw_exc_save(&exc);
    if (task && is_task(task) && sw_tasks_bind(task, tid)) {
        PyObject *name = NULL;
        seen(task, tid, 1, coro, &name);
        if (name && PyUnicode_Check(name))
            sw_task_record(SW_K_TASK_NAME, NULL, (long long)tid, 0, 0, PyUnicode_AsUTF8(name), NULL);
        Py_XDECREF(name);
        after_step(task, tid);
    } else {   /* not made after all: it ends there */
        sw_task_record(SW_K_TASK_EXIT, NULL, (long long)tid, 1, 0, task ? NULL : "create_task failed", NULL);
    }
    if (acted)
        sw_tasks_switch(prev, &acted);
    sw_err_drop();
    sw_exc_restore(&exc);
    return task;
}

static PyObject *wrap_create(sw_task_wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n < 1 || unwanted())
        return PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    PyObject *coro = n > 1 ? args[1] : NULL;
    for (Py_ssize_t i = 0; !coro && kwnames && i < PyTuple_GET_SIZE(kwnames); i++)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), "coro") == 0)
            coro = args[n + i];
    if (eager(args[0]))
        return create_eager(w, args, nargsf, kwnames, coro);
    PyObject *task = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    if (!task)
        return task;
    sw_exc_state exc;
    sw_exc_save(&exc);
    PyObject *name = NULL;
    uint64_t tid = is_task(task) ? task_id(task, coro, &name, 0) : 0;
    if (tid) {
        sw_task_record_here(SW_K_TASK_CREATE, (long long)tid, 2, 0,
                            name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL, NULL);
        if (task_done(task))   /* eager all the same (a factory of its own) and ended at once */
            exited(task, tid);
    }
    Py_XDECREF(name);
    sw_err_drop();
    sw_exc_restore(&exc);
    return task;
}

/* A channel's name (new reference): stackwatch.name()'s, else its class
 * and address (task_hooks.channel_name). */
static PyObject *channel_name(PyObject *obj)
{
    if (names_data && PyDict_Check(names_data) && PyDict_GET_SIZE(names_data) && Py_TYPE(obj)->tp_weaklistoffset) {
        PyObject *wr = PyWeakref_NewRef(obj, NULL);
        PyObject *given = wr ? PyDict_GetItemWithError(names_data, wr) : NULL;   /* borrowed */
        Py_XDECREF(wr);
        sw_err_drop();
        if (given && PyTuple_Check(given) && PyTuple_GET_SIZE(given) >= 1)
            return Py_NewRef(PyTuple_GET_ITEM(given, 0));
    }
    /* The last one made, for the same object (its name is its type, held,
     * and address: the same for whatever object has both) */
    static PyObject *last_type;
    static void *last_obj;
    static PyObject *last;
    if (last && last_obj == (void *)obj && last_type == (PyObject *)Py_TYPE(obj))
        return Py_NewRef(last);
    const char *tn = Py_TYPE(obj)->tp_name, *dot = strrchr(tn, '.');
    PyObject *name = PyUnicode_FromFormat("%s %p", dot ? dot + 1 : tn, (void *)obj);
    if (name) {
        Py_XSETREF(last, Py_NewRef(name));
        last_obj = obj;
        Py_XSETREF(last_type, Py_NewRef((PyObject *)Py_TYPE(obj)));
    }
    return name;
}

/* A message sent (kind TASK_SEND) or received on channel `queue`. */
static void message(int kind, PyObject *queue, PyObject *item)
{
    PyObject *ch = channel_name(queue);
    value_text t;
    const char *r = text_of(item, &t);
    if (ch && r)
        sw_task_record_here(kind, 0, 0, 0, PyUnicode_AsUTF8(ch), r);
    Py_XDECREF(ch);
    Py_XDECREF(t.held);
    sw_err_drop();
}

static PyObject *wrap_put(sw_task_wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *r = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    if (r && PyVectorcall_NARGS(nargsf) == 2 && !kwnames && !unwanted()) {
        sw_exc_state exc;
        sw_exc_save(&exc);
        message(SW_K_TASK_SEND, args[0], args[1]);
        sw_exc_restore(&exc);
    }
    return r;
}

static PyObject *wrap_get(sw_task_wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *item = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    if (item && PyVectorcall_NARGS(nargsf) == 1 && !unwanted()) {
        sw_exc_state exc;
        sw_exc_save(&exc);
        message(SW_K_TASK_RECEIVE, args[0], item);
        sw_exc_restore(&exc);
    }
    return item;
}

static PyObject *wrap_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    sw_task_wrapper *w = (sw_task_wrapper *)self;
    switch (w->kind) {
    case WRAP_RUN:
        return wrap_run(w, args, nargsf, kwnames);
    case WRAP_INIT:
        return wrap_init(w, args, nargsf, kwnames);
    case WRAP_PUT:
        return wrap_put(w, args, nargsf, kwnames);
    case WRAP_GET:
        return wrap_get(w, args, nargsf, kwnames);
    case WRAP_THREADSAFE:
        return wrap_threadsafe(w, args, nargsf, kwnames);
    case WRAP_EVENTS:
        return wrap_events(w, args, nargsf, kwnames);
    default:
        return wrap_create(w, args, nargsf, kwnames);
    }
}

/* As a function in a class: bound to an instance, called with it first. */
static PyObject *wrap_bind(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    return obj && obj != Py_None ? PyMethod_New(self, obj) : Py_NewRef(self);
}

static void wrap_dealloc(PyObject *self)
{
    Py_XDECREF(((sw_task_wrapper *)self)->orig);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject wrap_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stackwatch._native.asyncio_wrapper",
    .tp_basicsize = sizeof(sw_task_wrapper),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(sw_task_wrapper, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = wrap_bind,
    .tp_dealloc = wrap_dealloc,
    .tp_doc = "a method of asyncio, of a queue or of threading wrapped to record task events (ext/tracer/task_wrappers.h)",
};

PyObject *sw_task_wrapper_new(int kind, PyObject *orig, vectorcallfunc call)
{
    if (!PyCallable_Check(orig))
        return PyErr_Format(PyExc_TypeError, "task wrapper: the original must be callable");
    if (PyType_Ready(&wrap_type) < 0)
        return NULL;
    sw_task_wrapper *w = PyObject_New(sw_task_wrapper, &wrap_type);
    if (!w)
        return NULL;
    w->kind = kind;
    w->orig = Py_NewRef(orig);
    w->vectorcall = call;
    return (PyObject *)w;
}

/* hooks.asyncio_wrap(kind, original): the wrapper of Handle._run ("run"),
 * Handle.__init__ ("init"), BaseEventLoop.create_task ("create_task"),
 * BaseEventLoop.call_soon_threadsafe ("call_soon_threadsafe"),
 * BaseSelectorEventLoop._process_events ("process_events"), or a queue's
 * _put ("put") or _get ("get"). */
static PyObject *asyncio_wrap(PyObject *self, PyObject *args)
{
    (void)self;
    const char *kind;
    PyObject *orig;
    if (!PyArg_ParseTuple(args, "sO", &kind, &orig))
        return NULL;
    static const char *const kinds[] = {"run", "init", "create_task", "put", "get", "call_soon_threadsafe",
                                         "process_events"};
    int k = -1;
    for (int i = 0; i < (int)(sizeof kinds / sizeof kinds[0]); i++)
        if (strcmp(kind, kinds[i]) == 0)
            k = i;
    if (k < 0)
        return PyErr_Format(PyExc_ValueError, "asyncio_wrap: no wrapper of kind %s", kind);
    return sw_task_wrapper_new(k, orig, wrap_vectorcall);
}

/* hooks.asyncio_setup(task_types, namer, names, block_of, skip): what
 * the wrappers use (see the statics above). */
static PyObject *asyncio_setup(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *types, *nm, *names, *bo, *sk;
    if (!PyArg_ParseTuple(args, "O!OOOO!", &PyTuple_Type, &types, &nm, &names, &bo, &PyTuple_Type, &sk))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(sk); i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(sk, i)))
            return PyErr_Format(PyExc_TypeError, "asyncio_setup: skip must be a tuple of str");
    if (!S_self && !(S_self = PyUnicode_InternFromString("__self__")))
        return NULL;
    if (!S_coro && !(S_coro = PyUnicode_InternFromString("_coro")))
        return NULL;
    if (!S_qualname && !(S_qualname = PyUnicode_InternFromString("__qualname__")))
        return NULL;
    if (!S_get_name && !(S_get_name = PyUnicode_InternFromString("get_name")))
        return NULL;
    if (!S_exception && !(S_exception = PyUnicode_InternFromString("_exception")))
        return NULL;
    if (!S_result && !(S_result = PyUnicode_InternFromString("_result")))
        return NULL;
    if (!S_fut_waiter && !(S_fut_waiter = PyUnicode_InternFromString("_fut_waiter")))
        return NULL;
    if (!S_callback && !(S_callback = PyUnicode_InternFromString("_callback")))
        return NULL;
    if (!S_done && !(S_done = PyUnicode_InternFromString("done")))
        return NULL;
    if (!S_cancelled && !(S_cancelled = PyUnicode_InternFromString("cancelled")))
        return NULL;
    if (!S_task_factory && !(S_task_factory = PyUnicode_InternFromString("_task_factory")))
        return NULL;
    if (!S_space && !(S_space = PyUnicode_InternFromString(" ")))
        return NULL;
    if (!S_args && !(S_args = PyUnicode_InternFromString("_args")))
        return NULL;
    if (!S_is_running && !(S_is_running = PyUnicode_InternFromString("is_running")))
        return NULL;
    if (!S_thread_id && !(S_thread_id = PyUnicode_InternFromString("_thread_id")))
        return NULL;
    if (!S_ready && !(S_ready = PyUnicode_InternFromString("_ready")))
        return NULL;
    Py_XSETREF(task_types, Py_NewRef(types));
    task_fields_find(types);
    Py_XSETREF(namer, Py_NewRef(nm));
    Py_XSETREF(names_data, Py_NewRef(names));
    Py_XSETREF(block_of, Py_NewRef(bo));
    Py_XSETREF(skip, Py_NewRef(sk));
    for (int i = 0; i < SKIP_CACHE; i++)
        Py_CLEAR(skip_cache[i].code);
    Py_RETURN_NONE;
}

/* hooks.asyncio_at_start(task, reason, channel, frame): an asyncio task
 * alive as task events start is defined; one that waits (reason >= 0, a
 * TASK_BLOCK reason; channel a str or None; frame where it waits or None)
 * blocks then, as itself (a switch to it and back), so that its wake is
 * known; unless its block is known already (listed late, by its own loop's
 * thread: task_hooks._live_at_start, after a step of it blocked). */
static PyObject *asyncio_at_start(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *task, *channel, *f;
    int reason;
    if (!PyArg_ParseTuple(args, "OiOO", &task, &reason, &channel, &f))
        return NULL;
    if (!task_types || PyObject_IsInstance(task, task_types) != 1 || unwanted()) {
        sw_err_drop();
        Py_RETURN_NONE;
    }
    uint64_t tid = task_id(task, NULL, NULL, 0);
    PyObject *key = tid && reason >= 0 ? PyLong_FromUnsignedLongLong(tid) : NULL;
    int acted = 0;
    if (key && tables() == 0 && PyDict_Contains(blocked, key) == 0 && PyDict_SetItem(blocked, key, channel) == 0) {
        uint64_t prev = sw_tasks_switch(tid, &acted);
        sw_task_record(SW_K_TASK_BLOCK, PyFrame_Check(f) ? (PyFrameObject *)f : NULL, reason, 0, 0,
                        PyUnicode_Check(channel) ? PyUnicode_AsUTF8(channel) : NULL, NULL);
        if (acted)
            sw_tasks_switch(prev, &acted);
    }
    Py_XDECREF(key);
    sw_err_drop();
    Py_RETURN_NONE;
}

/* hooks.asyncio_wake_quiet(ident, code) -> whether done: thread `ident`,
 * an event loop's that stackwatch wakes next (task_hooks._live_at_start,
 * by the loop's self-pipe), is quiet from its next frame (hook_eval.c
 * wake_quiet) if it waits now in code (its selector's select: idle), a
 * session records, and no other thread is to be; ident 0: not any more. */
static PyObject *asyncio_wake_quiet(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long ident;
    PyObject *code;
    if (!PyArg_ParseTuple(args, "kO", &ident, &code))
        return NULL;
    int waits = 0;
    if (ident && sw_S.gen && !sw_S.quiet_wake && PyCode_Check(code)) {
        for (PyThreadState *ts = PyInterpreterState_ThreadHead(PyThreadState_Get()->interp); ts;
             ts = PyThreadState_Next(ts)) {
            if (ts->thread_id != ident)
                continue;
            PyFrameObject *f = PyThreadState_GetFrame(ts);
            PyCodeObject *co = f ? PyFrame_GetCode(f) : NULL;
            waits = co && (PyObject *)co == code;
            Py_XDECREF(co);
            Py_XDECREF(f);
            break;
        }
    }
    if (waits || !ident) {
        sw_S.quiet_wake = ident;
        sw_S.quiet_wake_code = waits ? code : NULL;
        sw_session_fast_refresh();
    }
    return PyBool_FromLong(waits);
}

/* hooks.asyncio_on_behalf(task, native_id, fn, *args) -> fn(*args), run on
 * behalf of task `task` (0: the thread itself) of thread native_id: a task
 * it wakes was woken by that task (told at its next step). For asyncio's
 * copy of a concurrent.futures Future's outcome: by the task that set it. */
static PyObject *asyncio_on_behalf(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n < 3)
        return PyErr_Format(PyExc_TypeError, "asyncio_on_behalf(task, native_id, fn, *args)");
    unsigned long long tid = PyLong_AsUnsignedLongLong(args[0]);
    long long thread = PyLong_AsLongLong(args[1]);
    if (PyErr_Occurred())
        return NULL;
    uint64_t outer = behalf;
    long long outer_thread = behalf_thread;
    behalf = tid;
    behalf_thread = thread;
    PyObject *r = PyObject_Vectorcall(args[2], args + 3, (size_t)(n - 3), NULL);
    behalf = outer;
    behalf_thread = outer_thread;
    return r;
}

/* hooks.asyncio_reset(): forgets the blocked tasks and the names seen (a
 * next session gives new ids). */
static PyObject *asyncio_reset(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_CLEAR(blocked);
    forget_names();
    Py_CLEAR(woken_by);
    Py_CLEAR(from_thread);
    Py_CLEAR(io_ready);
    by_io = 0;
    if (stepped)
        memset(stepped, 0, stepped_cap);
    behalf = 0;
    behalf_thread = 0;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"asyncio_wrap", asyncio_wrap, METH_VARARGS,
     "asyncio_wrap(kind, original) -> the wrapper of Handle._run (run), Handle.__init__ (init), "
     "BaseEventLoop.create_task (create_task), BaseEventLoop.call_soon_threadsafe (call_soon_threadsafe), "
     "BaseSelectorEventLoop._process_events (process_events) or a queue's _put (put) or _get (get) that records "
     "task events"},
    {"asyncio_setup", asyncio_setup, METH_VARARGS,
     "asyncio_setup(task_types, namer, names, block_of, skip): what the asyncio wrappers use"},
    {"asyncio_at_start", asyncio_at_start, METH_VARARGS,
     "asyncio_at_start(task, reason, channel, frame): a task alive as task events start (blocked: reason >= 0)"},
    {"asyncio_on_behalf", (PyCFunction)(void (*)(void))asyncio_on_behalf, METH_FASTCALL,
     "asyncio_on_behalf(task, native_id, fn, *args) -> fn(*args), a wake it makes by task `task` of that thread"},
    {"asyncio_wake_quiet", asyncio_wake_quiet, METH_VARARGS,
     "asyncio_wake_quiet(ident, code) -> whether thread ident, a loop's waiting in code, is quiet once woken"},
    {"asyncio_reset", asyncio_reset, METH_NOARGS, "asyncio_reset(): forgets the blocked tasks and names seen"},
    {NULL, NULL, 0, NULL},
};

int sw_task_wrappers_add_hooks(PyObject *hooks)
{
    return PyModule_AddFunctions(hooks, methods);
}
