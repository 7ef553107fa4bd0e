/*
 * task_locks.c - threading's locks as channels of task events
 * (task_locks.h). While task events are wanted, the lock types
 * (_thread.lock, _thread.RLock: immutable, so through their dicts) have
 * this file's acquire, release, __enter__ and __exit__, which call the
 * types' own. An acquire first tries without blocking (the uncontended
 * path: one call more); only when the lock is held does it record the
 * thread's block (TASK_BLOCK, reason lock, on the lock's channel name),
 * wait as asked, and once it has the lock record who ended its wait
 * (TASK_WOKEN): the thread and task whose release came last (a release
 * notes itself while a thread waits on that lock: which waiter a release
 * lets in only the waiter knows), or itself when it gave up (a timeout).
 * Acquires made by threading's own code (Condition's waiters, a thread's
 * state lock: their waits are recorded as conditions and joins) are
 * not recorded.
 */
#include "task_locks.h"

#include "base/base.h"
#include "ext/dispatch/dispatch.h"
#include "ext/tracer/session.h"
#include "ext/tracer/task_wrappers.h"
#include "ext/tracer/tasks.h"

#include <string.h>

/* The methods set in each lock type, and the type's own. */
enum { M_ACQUIRE, M_RELEASE, M_ENTER, M_EXIT, M_COUNT };
static const char *const method_names[M_COUNT] = {"acquire", "release", "__enter__", "__exit__"};

typedef struct {
    PyTypeObject *tp;          /* the type (held, kept after: a method of ours bound before, e.g. by a
                                * Condition, is called after) */
    int set;                   /* ours are in it now */
    PyObject *own[M_COUNT];    /* the type's own methods (held, kept after) */
} wrapped_type;

#define SW_LOCK_TYPES 2
static wrapped_type types[SW_LOCK_TYPES];
static PyObject *own_file;     /* threading's file: its acquires are not recorded */
static PyObject *name_of;      /* the channel name of a lock (events/task_hooks.channel_name) */

/* A lock threads wait on, and its last release since they began. */
typedef struct {
    void *lock;                /* its address (only compared) */
    int waiters;
    int released;              /* a release came since the entry was made */
    unsigned long releaser;    /* that release's native thread id, task, and time (trace clock; 0: none) */
    uint64_t releaser_task, t_release;
} lock_wait;

/* The locks waited on now (as many as there are: the array grows; a
 * lock's entry goes when its last waiter has it). */
static lock_wait *waits;
static size_t nwaits, waits_cap;

static lock_wait *wait_of(void *lock)
{
    for (size_t i = 0; i < nwaits; i++)
        if (waits[i].lock == lock)
            return &waits[i];
    return NULL;
}

static wrapped_type *type_of(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    for (int i = 0; i < SW_LOCK_TYPES; i++)   /* its own type first: every acquire and release asks */
        if (types[i].tp == tp)
            return &types[i];
    for (int i = 0; i < SW_LOCK_TYPES; i++)
        if (types[i].tp && PyType_IsSubtype(tp, types[i].tp))
            return &types[i];
    return NULL;
}

/* The type's own method m called with self first. */
static PyObject *call_own(wrapped_type *w, int m, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *small[8], **stack = small;
    if (nargs + nkw + 1 > 8 && !(stack = PyMem_Malloc((size_t)(nargs + nkw + 1) * sizeof *stack)))
        return PyErr_NoMemory();
    stack[0] = self;
    if (nargs + nkw)
        memcpy(stack + 1, args, (size_t)(nargs + nkw) * sizeof *stack);
    PyObject *own = Py_NewRef(w->own[m]);
    PyObject *r = PyObject_Vectorcall(own, stack, (size_t)nargs + 1, kwnames);
    Py_DECREF(own);
    if (stack != small)
        PyMem_Free(stack);
    return r;
}

/* acquire(False) through the type's own C function (the uncontended
 * path: no call machinery between). */
static PyObject *no_args;   /* (False,) */
typedef PyObject *(*fast_kw_fn)(PyObject *, PyObject *const *, Py_ssize_t, PyObject *);
typedef PyObject *(*fast_fn)(PyObject *, PyObject *const *, Py_ssize_t);

static PyObject *try_acquire(wrapped_type *w, PyObject *self)
{
    PyObject *own = w->own[M_ACQUIRE], *no[1] = {Py_False};
    if (PyObject_TypeCheck(own, &PyMethodDescr_Type) && no_args) {
        PyMethodDef *md = ((PyMethodDescrObject *)own)->d_method;
        int flags = md->ml_flags & (METH_VARARGS | METH_KEYWORDS | METH_FASTCALL | METH_NOARGS | METH_O);
        if (flags == (METH_VARARGS | METH_KEYWORDS))
            return ((PyCFunctionWithKeywords)(void (*)(void))md->ml_meth)(self, no_args, NULL);
        if (flags == (METH_FASTCALL | METH_KEYWORDS))
            return ((fast_kw_fn)(void (*)(void))md->ml_meth)(self, no, 1, NULL);
        if (flags == METH_FASTCALL)
            return ((fast_fn)(void (*)(void))md->ml_meth)(self, no, 1);
    }
    return call_own(w, M_ACQUIRE, self, no, 1, NULL);
}

/* release() through the type's own C function when it takes no argument
 * (every release: the queue's lock is released at each put and get). */
static PyObject *call_release(wrapped_type *w, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    PyObject *own = w->own[M_RELEASE];
    if (!nargs && !kwnames && PyObject_TypeCheck(own, &PyMethodDescr_Type)) {
        PyMethodDef *md = ((PyMethodDescrObject *)own)->d_method;
        if ((md->ml_flags & (METH_VARARGS | METH_KEYWORDS | METH_FASTCALL | METH_NOARGS | METH_O)) == METH_NOARGS)
            return md->ml_meth(self, NULL);
    }
    return call_own(w, M_RELEASE, self, args, nargs, kwnames);
}

/* 1 if the caller (the running frame) is threading's own code (read
 * without a frame object: a queue's lock is contended at most of its
 * acquires, each through Condition.__enter__). */
static int called_by_threading(void)
{
    PyCodeObject *co = own_file ? sw_task_running_code() : NULL;   /* borrowed */
    int r = co && PyUnicode_Check(co->co_filename) && PyUnicode_Compare(co->co_filename, own_file) == 0;
    PyErr_Clear();
    return r;
}

/* The lock's channel name (new reference), never NULL unless out of memory. */
static PyObject *channel_of(PyObject *lock)
{
    PyObject *s = name_of ? PyObject_CallOneArg(name_of, lock) : NULL;
    if (!s || !PyUnicode_Check(s)) {
        PyErr_Clear();
        Py_XDECREF(s);
        s = PyUnicode_FromFormat("%s %p", Py_TYPE(lock)->tp_name, (void *)lock);
    }
    return s;
}

/* The trace clock (ticks; 0 when no trace is written). */
static uint64_t trace_now(void)
{
    return sw_S.gen ? sw_clock_now(&sw_S.clock) : 0;
}

/* ns from ticks `then` to now (0 when either is unknown). */
static long long ns_since(uint64_t then)
{
    uint64_t now = trace_now();
    if (!then || now <= then || !(sw_S.clock.hz > 0))
        return 0;
    return (long long)((double)(now - then) * 1e9 / sw_S.clock.hz);
}

/* An acquire that would block: recorded, unless threading's own. */
static PyObject *acquire_contended(wrapped_type *w, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames)
{
    PyObject *name = NULL;
    int own = called_by_threading();
    lock_wait *lw = own ? NULL : wait_of(self);
    if (!lw && !own) {
        lock_wait *grown = sw_array_grow(waits, &waits_cap, nwaits + 1, sizeof *waits, 16);
        if (grown) {   /* (out of memory: not recorded) */
            waits = grown;
            lw = &waits[nwaits++];
            *lw = (lock_wait){.lock = self};
        }
    }
    int listed = lw != NULL;
    if (lw) {
        lw->waiters++;
        name = channel_of(self);
        const char *s = name ? PyUnicode_AsUTF8(name) : NULL;
        PyErr_Clear();
        sw_task_record(SW_K_TASK_BLOCK, PyEval_GetFrame(), 0 /* lock */, 0, 0, s ? s : "", NULL);
    }
    PyObject *r = call_own(w, M_ACQUIRE, self, args, nargs, kwnames);
    lw = listed ? wait_of(self) : NULL;   /* (the array may have moved meanwhile) */
    if (lw) {
        sw_exc_state exc;
        sw_exc_save(&exc);
        const char *s = name ? PyUnicode_AsUTF8(name) : NULL;
        PyErr_Clear();
        if (r == Py_True && lw->released)   /* the last release let it in */
            sw_task_record(SW_K_TASK_WOKEN, PyEval_GetFrame(), (long long)lw->releaser_task,
                           ns_since(lw->t_release), (long long)lw->releaser, s ? s : "", NULL);
        else   /* it gave up (a timeout, an error): its own */
            sw_task_record(SW_K_TASK_WOKEN, PyEval_GetFrame(), (long long)sw_task_running(), 0,
                           (long long)PyThread_get_thread_native_id(), s ? s : "", NULL);
        if (--lw->waiters == 0)
            *lw = waits[--nwaits];
        sw_exc_restore(&exc);
    }
    Py_XDECREF(name);
    return r;
}

/* 1 if timeout (NULL: none given) is one the type's own acquire takes
 * (-1, or from 0 to a day's worth: beyond, its own judges), so that the
 * try without blocking may come first; else it is left to refuse it. */
static int valid_timeout(PyObject *timeout)
{
    if (!timeout)
        return 1;
    double t = PyFloat_AsDouble(timeout);
    if (t == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return t == -1.0 || (t >= 0 && t <= 86400.0);
}

/* acquire(blocking=True, timeout=-1), as the type's own. */
static PyObject *lock_acquire(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    wrapped_type *w = type_of(self);
    if (!w)
        return PyErr_Format(PyExc_TypeError, "acquire: not a lock stackwatch wraps");
    int blocking = 1;
    PyObject *timeout = nargs >= 2 ? args[1] : NULL;
    if (nargs >= 1)
        blocking = PyObject_IsTrue(args[0]);
    for (Py_ssize_t i = 0; kwnames && i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_CompareWithASCIIString(k, "blocking") == 0)
            blocking = PyObject_IsTrue(args[nargs + i]);
        else if (PyUnicode_CompareWithASCIIString(k, "timeout") == 0)
            timeout = args[nargs + i];
    }
    if (blocking < 0)
        return NULL;
    if (!blocking && nargs == 1 && !kwnames && args[0] == Py_False)   /* acquire(False): threading's _is_owned
                                                                        * at each notify and wait */
        return try_acquire(w, self);
    if (!blocking || !(sw_D.mask & SW_EVB(SW_K_TASK_BLOCK)) || !valid_timeout(timeout))
        return call_own(w, M_ACQUIRE, self, args, nargs, kwnames);   /* (its own refuses a bad timeout) */
    PyObject *r = try_acquire(w, self);   /* uncontended: taken here */
    if (r != Py_False)
        return r;
    Py_DECREF(r);
    return acquire_contended(w, self, args, nargs, kwnames);
}

/* release(), as the type's own; noted while a thread waits on the lock. */
static PyObject *lock_release(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    wrapped_type *w = type_of(self);
    if (!w)
        return PyErr_Format(PyExc_TypeError, "release: not a lock stackwatch wraps");
    lock_wait *lw = nwaits ? wait_of(self) : NULL;
    if (lw) {
        lw->released = 1;
        lw->releaser = PyThread_get_thread_native_id();
        lw->releaser_task = sw_task_running();
        lw->t_release = trace_now();
    }
    return call_release(w, self, args, PyVectorcall_NARGS(nargsf), kwnames);
}

static PyObject *lock_enter(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    (void)args;
    (void)nargsf;
    (void)kwnames;
    return lock_acquire(self, NULL, 0, NULL);
}

static PyObject *lock_exit(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    (void)args;
    (void)nargsf;
    (void)kwnames;
    PyObject *r = lock_release(self, NULL, 0, NULL);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

#define SW_FASTCALL_KW(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL | METH_KEYWORDS
static PyMethodDef ours[M_COUNT] = {
    {"acquire", SW_FASTCALL_KW(lock_acquire), "acquire(blocking=True, timeout=-1): the lock's own, its waits recorded (stackwatch task events)"},
    {"release", SW_FASTCALL_KW(lock_release), "release(): the lock's own, noted for the thread it lets in (stackwatch task events)"},
    {"__enter__", SW_FASTCALL_KW(lock_enter), "acquire()"},
    {"__exit__", SW_FASTCALL_KW(lock_exit), "release()"},
};

static int is_ours(PyObject *o, int m)
{
    return o && PyObject_TypeCheck(o, &PyMethodDescr_Type) && ((PyMethodDescrObject *)o)->d_method == &ours[m];
}

/* Sets ours in type tp (slot w), keeping its own. */
static int wrap_type(wrapped_type *w, PyTypeObject *tp)
{
    PyObject *dict = tp->tp_dict;
    if (!dict || !PyDict_Check(dict)) {
        PyErr_Format(PyExc_TypeError, "lock_wrap: %s has no dict", tp->tp_name);
        return -1;
    }
    PyObject *own[M_COUNT];
    for (int m = 0; m < M_COUNT; m++) {
        own[m] = PyDict_GetItemString(dict, method_names[m]);   /* borrowed */
        if (!own[m] || is_ours(own[m], m)) {
            PyErr_Format(PyExc_TypeError, "lock_wrap: %s has no %s of its own", tp->tp_name, method_names[m]);
            return -1;
        }
    }
    for (int m = 0; m < M_COUNT; m++)
        Py_XSETREF(w->own[m], Py_NewRef(own[m]));
    Py_XSETREF(w->tp, (PyTypeObject *)Py_NewRef((PyObject *)tp));
    w->set = 1;
    for (int m = 0; m < M_COUNT; m++) {
        PyObject *d = PyDescr_NewMethod(tp, &ours[m]);
        if (!d || PyDict_SetItemString(dict, method_names[m], d) < 0) {
            Py_XDECREF(d);
            PyType_Modified(tp);
            return -1;
        }
        Py_DECREF(d);
    }
    PyType_Modified(tp);
    return 0;
}

/* Puts the type's own back (where ours still are). */
static void unwrap_type(wrapped_type *w)
{
    PyObject *dict = w->tp->tp_dict;
    for (int m = 0; m < M_COUNT; m++)
        if (is_ours(PyDict_GetItemString(dict, method_names[m]), m) &&
            PyDict_SetItemString(dict, method_names[m], w->own[m]) < 0)
            PyErr_Clear();
    PyType_Modified(w->tp);
    w->set = 0;
}

/* hooks.lock_wrap(types, on, own_file, name_of): sets (on) or puts back
 * (off) the methods of the lock types (a tuple of at most SW_LOCK_TYPES);
 * own_file: threading's file, whose acquires are not recorded; name_of(lock)
 * -> its channel name. */
static PyObject *lock_wrap(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *tps, *file, *namer;
    int on;
    if (!PyArg_ParseTuple(args, "O!pOO", &PyTuple_Type, &tps, &on, &file, &namer))
        return NULL;
    if (!on) {
        for (int i = 0; i < SW_LOCK_TYPES; i++)
            if (types[i].set)
                unwrap_type(&types[i]);
        nwaits = 0;
        Py_RETURN_NONE;
    }
    if (PyTuple_GET_SIZE(tps) > SW_LOCK_TYPES)
        return PyErr_Format(PyExc_ValueError, "lock_wrap: at most %d types", SW_LOCK_TYPES);
    if (!no_args && !(no_args = PyTuple_Pack(1, Py_False)))
        return NULL;
    Py_XSETREF(own_file, PyUnicode_Check(file) ? Py_NewRef(file) : NULL);
    Py_XSETREF(name_of, namer != Py_None ? Py_NewRef(namer) : NULL);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tps); i++) {
        PyObject *tp = PyTuple_GET_ITEM(tps, i);
        if (!PyType_Check(tp))
            return PyErr_Format(PyExc_TypeError, "lock_wrap: not a type");
        if (!types[i].set && wrap_type(&types[i], (PyTypeObject *)tp) < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"lock_wrap", lock_wrap, METH_VARARGS,
     "lock_wrap(types, on, own_file, name_of): the lock types' acquire and release record their waits (on), or "
     "are their own again"},
    {NULL, NULL, 0, NULL},
};

int sw_task_locks_add_hooks(PyObject *hooks)
{
    return PyModule_AddFunctions(hooks, methods);
}
