/*
 * task_conditions.c - threading.Condition's wait and notify as task events,
 * in C (task_conditions.h). A queue.Queue waits and notifies with its lock
 * held: in Python, these wrappers ran bytecode there, where the thread
 * could hand the GIL over while every other thread of the queue waited on
 * its lock (the thread program's wall went to 2-5x the trace's where
 * callgrind counted 1.2-1.4x). Here no Python runs, but once per
 * Condition and caller's code:
 *
 * - wait: the thread blocks (TASK_BLOCK) on what its caller waits for: a
 *   queue (its get, put, join), an Event, a Semaphore, else the Condition
 *   itself (task_hooks._cond_what reads it from the caller's frame; kept
 *   here by Condition and caller's code, since a frame's locals cost); it
 *   is listed as waiting on the Condition (its native id) until it returns;
 * - notify(n): the first n threads listed are woken (TASK_WAKE, by the
 *   notifying thread), and are no longer listed; a wait that returns still
 *   listed (it timed out) is ended by the thread itself (TASK_WOKEN, as it
 *   returns), so that every block has its wake.
 *
 * The frames of notify_all and wait_for (threading's own) are not callers.
 * A location is the first frame outwards that is the program's own. Never
 * raises into the program.
 */
#include "task_conditions.h"

#include "ext/dispatch/dispatch.h"
#include "ext/tracer/session.h"
#include "ext/tracer/task_wrappers.h"
#include "ext/tracer/tasks.h"

enum { COND_WAIT, COND_NOTIFY };

static PyObject *what_of;      /* task_hooks._cond_what(cond, frame or None) -> (reason, channel name) */
static PyObject *own_file;     /* threading's file */
static PyObject *own_names;    /* frozenset: threading's functions that call wait or notify for the caller */
static PyObject *waiting;      /* {Condition's address: [native ids of the threads in its wait(), in order]} */
static uint64_t waiting_gen;   /* the session `waiting` belongs to */
static uint64_t names_gen;     /* +1 at each stackwatch.name(): the channel names kept are stale */

/* What a Condition's callers wait for, kept by Condition and caller's
 * code (both compared by address; the Condition weakly held, the code
 * held: its address is never another code's), in either of two slots (a
 * queue's two Conditions and its get and put are four entries: two of
 * them in one slot, each taking the other's place, called
 * task_hooks._cond_what at every wait and notify, ~20k instructions,
 * in some processes and not others, as the addresses fell). */
#define WHAT_CACHE 64
static struct {
    void *cond;
    PyObject *cond_ref;
    PyCodeObject *code;
    uint64_t gen;
    int reason;
    PyObject *channel;
} what_cache[WHAT_CACHE];

static int wanted(void)
{
    return (sw_D.mask & (SW_EVB(SW_K_TASK_BLOCK) | SW_EVB(SW_K_TASK_WAKE))) && what_of;
}

/* The session's table of waiting threads (made anew for a new session);
 * 0, or -1. */
static int tables(void)
{
    if (waiting_gen != sw_S.gen || !waiting) {
        Py_XSETREF(waiting, PyDict_New());
        waiting_gen = sw_S.gen;
    }
    return waiting ? 0 : -1;
}

/* The frame that called wait or notify (new reference), threading's own
 * callers of them skipped (notify_all, wait_for); NULL: none. */
static PyFrameObject *caller(void)
{
    PyFrameObject *f = PyEval_GetFrame();
    Py_XINCREF(f);
    while (f) {
        PyCodeObject *co = PyFrame_GetCode(f);
        int own = PySet_Contains(own_names, co->co_name) == 1 &&
                  PyUnicode_Compare(co->co_filename, own_file) == 0;
        Py_DECREF(co);
        if (!own)
            break;
        Py_SETREF(f, PyFrame_GetBack(f));
    }
    PyErr_Clear();
    return f;
}

/* (reason, channel name: a new reference) of a wait or notify of cond
 * called from f. 0, or -1 when it cannot be told. */
static int what(PyObject *cond, PyFrameObject *f, int *reason, PyObject **channel)
{
    PyCodeObject *co = f ? PyFrame_GetCode(f) : NULL;
    size_t first = (((uintptr_t)cond >> 4) ^ (((uintptr_t)co >> 4) * 31u)) % WHAT_CACHE, slot = first;
    for (int way = 0; way < 2; way++, slot = first ^ 1) {
        if (what_cache[slot].cond == (void *)cond && what_cache[slot].code == co && what_cache[slot].gen == names_gen) {
            PyObject *o = sw_tasks_weak_target(what_cache[slot].cond_ref);
            Py_XDECREF(o);
            if (o == cond) {
                Py_XDECREF(co);
                *reason = what_cache[slot].reason;
                *channel = Py_NewRef(what_cache[slot].channel);
                return 0;
            }
        }
    }
    /* (a miss: kept in a slot with no entry of the names now, else in turn) */
    static unsigned turn;
    int held0 = what_cache[first].cond && what_cache[first].gen == names_gen;
    int held1 = what_cache[first ^ 1].cond && what_cache[first ^ 1].gen == names_gen;
    slot = !held0 ? first : !held1 ? first ^ 1 : first ^ (turn++ & 1u);
    PyObject *r = PyObject_CallFunctionObjArgs(what_of, cond, f ? (PyObject *)f : Py_None, NULL);
    PyObject *ref = r ? PyWeakref_NewRef(cond, NULL) : NULL;
    int ok = ref && PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2 && PyLong_Check(PyTuple_GET_ITEM(r, 0)) &&
             PyUnicode_Check(PyTuple_GET_ITEM(r, 1));
    if (ok) {
        *reason = (int)PyLong_AsLong(PyTuple_GET_ITEM(r, 0));
        *channel = Py_NewRef(PyTuple_GET_ITEM(r, 1));
        what_cache[slot].cond = cond;
        Py_XSETREF(what_cache[slot].cond_ref, Py_NewRef(ref));
        Py_XINCREF(co);
        Py_XSETREF(what_cache[slot].code, co);
        what_cache[slot].gen = names_gen;
        what_cache[slot].reason = *reason;
        Py_XSETREF(what_cache[slot].channel, Py_NewRef(*channel));
    }
    Py_XDECREF(ref);
    Py_XDECREF(r);
    Py_XDECREF(co);
    PyErr_Clear();
    return ok ? 0 : -1;
}

/* The thread `me` no longer waits on the Condition at `key`. Returns 1
 * when it was still listed (no notify took it off: its wait timed out),
 * else 0. */
static int forget(PyObject *key, PyObject *me)
{
    int listed = 0;
    PyObject *ids = waiting ? PyDict_GetItemWithError(waiting, key) : NULL;   /* borrowed */
    if (ids && PyList_Check(ids)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ids); i++)
            if (PyObject_RichCompareBool(PyList_GET_ITEM(ids, i), me, Py_EQ) == 1) {
                PyList_SetSlice(ids, i, i + 1, NULL);
                listed = 1;
                break;
            }
        if (PyList_GET_SIZE(ids) == 0)
            PyDict_DelItem(waiting, key);
    }
    PyErr_Clear();
    return listed;
}

static PyObject *cond_wait(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    sw_task_wrapper *w = (sw_task_wrapper *)self;
    if (PyVectorcall_NARGS(nargsf) < 1 || !wanted())
        return PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    PyObject *key = NULL, *me = NULL;
    sw_exc_state exc;
    sw_exc_save(&exc);
    PyFrameObject *f = caller();
    PyObject *channel = NULL;
    int reason;
    if (tables() == 0 && what(args[0], f, &reason, &channel) == 0) {   /* (the lock is held: no notify comes
                                                                            * before this thread is listed) */
        key = PyLong_FromVoidPtr(args[0]);
        me = PyLong_FromUnsignedLong(PyThread_get_thread_native_id());
        PyObject *fresh = key && me ? PyList_New(0) : NULL;
        PyObject *ids = fresh ? PyDict_SetDefault(waiting, key, fresh) : NULL;   /* borrowed */
        if (ids && PyList_Check(ids) && PyList_Append(ids, me) == 0) {
            sw_task_record_here(SW_K_TASK_BLOCK, reason, 0, 0, PyUnicode_AsUTF8(channel), NULL);
        } else {
            Py_CLEAR(key);
        }
        Py_XDECREF(fresh);
    }
    Py_XDECREF(f);
    PyErr_Clear();
    sw_exc_restore(&exc);
    PyObject *r = PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
    if (key) {
        sw_exc_save(&exc);   /* (r NULL: its exception, put back after) */
        if (forget(key, me))   /* no notify ended it (a timeout): it ends its wait itself, now */
            sw_task_record_here(SW_K_TASK_WOKEN, (long long)sw_task_running(), 0,
                                (long long)PyThread_get_thread_native_id(), PyUnicode_AsUTF8(channel), NULL);
        PyErr_Clear();
        sw_exc_restore(&exc);
    }
    Py_XDECREF(channel);
    Py_XDECREF(key);
    Py_XDECREF(me);
    return r;
}

/* notify's n: its second positional argument or keyword n, else 1; -1
 * when it is no int (notify then fails as the program's). */
static Py_ssize_t notify_count(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *n = nargs >= 2 ? args[1] : NULL;
    for (Py_ssize_t i = 0; !n && kwnames && i < PyTuple_GET_SIZE(kwnames); i++)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), "n") == 0)
            n = args[nargs + i];
    if (!n)
        return 1;
    Py_ssize_t count = PyLong_Check(n) ? PyLong_AsSsize_t(n) : -1;
    PyErr_Clear();
    return count;
}

static PyObject *cond_notify(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    sw_task_wrapper *w = (sw_task_wrapper *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1 || !wanted() || !waiting || waiting_gen != sw_S.gen || PyDict_GET_SIZE(waiting) == 0)
        return PyObject_Vectorcall(w->orig, args, nargsf, kwnames);   /* (nobody waits: nobody is woken) */
    sw_exc_state exc;
    sw_exc_save(&exc);
    PyObject *key = PyLong_FromVoidPtr(args[0]);
    PyObject *ids = key ? PyDict_GetItemWithError(waiting, key) : NULL;   /* borrowed */
    Py_ssize_t count = ids && PyList_Check(ids) && PyList_GET_SIZE(ids) ? notify_count(args, nargs, kwnames) : 0;
    if (count > 0) {
        Py_INCREF(ids);
        PyFrameObject *f = caller();
        PyObject *channel = NULL;
        int reason;
        if (what(args[0], f, &reason, &channel) == 0) {
            const char *ch = PyUnicode_AsUTF8(channel);
            Py_ssize_t woken = count < PyList_GET_SIZE(ids) ? count : PyList_GET_SIZE(ids);
            for (Py_ssize_t i = 0; i < woken; i++)   /* the first n waiters are woken (they are in order) */
                sw_task_record_here(SW_K_TASK_WAKE, 0, 0, PyLong_AsLongLong(PyList_GET_ITEM(ids, i)), ch, NULL);
            PyList_SetSlice(ids, 0, woken, NULL);
            if (PyList_GET_SIZE(ids) == 0)
                PyDict_DelItem(waiting, key);
        }
        Py_XDECREF(channel);
        Py_XDECREF(f);
        Py_DECREF(ids);
    }
    Py_XDECREF(key);
    PyErr_Clear();
    sw_exc_restore(&exc);
    return PyObject_Vectorcall(w->orig, args, nargsf, kwnames);
}

/* hooks.cond_wrap(kind, original): the wrapper of Condition.wait ("wait")
 * or Condition.notify ("notify"). */
static PyObject *cond_wrap(PyObject *self, PyObject *args)
{
    (void)self;
    const char *kind;
    PyObject *orig;
    if (!PyArg_ParseTuple(args, "sO", &kind, &orig))
        return NULL;
    if (strcmp(kind, "wait") == 0)
        return sw_task_wrapper_new(COND_WAIT, orig, cond_wait);
    if (strcmp(kind, "notify") == 0)
        return sw_task_wrapper_new(COND_NOTIFY, orig, cond_notify);
    return PyErr_Format(PyExc_ValueError, "cond_wrap: no wrapper of kind %s", kind);
}

/* hooks.cond_setup(what_of, threading_file, own_names): what the wrappers
 * use; the threads listed as waiting are forgotten (a new recording). */
static PyObject *cond_setup(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *wo, *file, *names;
    if (!PyArg_ParseTuple(args, "OUO!", &wo, &file, &PyFrozenSet_Type, &names))
        return NULL;
    if (!PyCallable_Check(wo))
        return PyErr_Format(PyExc_TypeError, "cond_setup: what_of must be callable");
    Py_XSETREF(what_of, Py_NewRef(wo));
    Py_XSETREF(own_file, Py_NewRef(file));
    Py_XSETREF(own_names, Py_NewRef(names));
    Py_CLEAR(waiting);
    names_gen++;
    Py_RETURN_NONE;
}

/* hooks.task_names_changed(): stackwatch.name() named something: the
 * channel names kept are made again. */
static PyObject *task_names_changed(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    names_gen++;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"cond_wrap", cond_wrap, METH_VARARGS,
     "cond_wrap(kind, original) -> the wrapper of Condition.wait (wait) or notify (notify) that records task events"},
    {"cond_setup", cond_setup, METH_VARARGS,
     "cond_setup(what_of, threading_file, own_names): what the Condition wrappers use"},
    {"task_names_changed", task_names_changed, METH_NOARGS,
     "task_names_changed(): stackwatch.name() named something (the channel names kept are stale)"},
    {NULL, NULL, 0, NULL},
};

int sw_task_conditions_add_hooks(PyObject *hooks)
{
    return PyModule_AddFunctions(hooks, methods);
}
