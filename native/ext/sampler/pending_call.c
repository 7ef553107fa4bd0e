/*
 * pending_call.c - _native.pending_call, pending_take_back and
 * attach_stop_address (see pending_call.h).
 */
#include "pending_call.h"
#include "target_open.h"

#include "procmem/procmem.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define RETRY_NS 2000000L   /* between two tries while the queue is locked or full */

typedef struct attach_target {
    sw_target t;
    sw_py_layout l;
    sw_pending_layout pl;
    uint64_t interp;
    int refuse_hooks;   /* push nothing into a process with audit hooks (audit_hooks_ok=False) */
} attach_target;

/* Opens pid with its layouts, or raises. */
static int open_target(attach_target *a, int pid)
{
    char err[1024];
    const char *used;
    a->refuse_hooks = 0;
    if (sw_target_open_bound(pid, "auto", &a->t, &a->l, &a->interp, &used) < 0)
        return -1;
    if (sw_pending_layout_known(a->t.version_hex, &a->pl) != SW_OK) {
        char v[32];
        sw_target_version_str(a->t.version_hex, v, sizeof v);
        sw_layout_known_list(err, sizeof err);
        PyErr_Format(PyExc_ValueError, "process %d runs Python %s, whose pending-calls queue this stackwatch does "
                     "not know (it knows %s)", pid, v, err);
        sw_target_close(&a->t);
        return -1;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* SW_OK if process a has no audit hook, else SW_EARG with err: a
 * PyRun_SimpleString call compiles and runs its text there, raising the
 * audit events "compile" and "exec" with no Python frame of its own on the
 * stack, and a hook that refused them would make the call fail, which the
 * interpreter then raises in the code it interrupted (SystemError: error
 * return without exception set): the program's code would fail. Read
 * with every thread frozen (no hook added between the look and the push). */
static int check_audit_hooks(attach_target *a, char *err, size_t errlen)
{
    const sw_py_layout *l = &a->l;
    uint64_t list = 0, n = 0, head = 0;
    if (l->interp_audit_hooks == SW_NO_OFFSET || !a->t.runtime_addr ||
        sw_mem_read_u64(&a->t.mem, a->interp + l->interp_audit_hooks, &list) != SW_OK ||
        /* (a list's ob_size lies where a tuple's does: PyVarObject's) */
        (list && sw_mem_read_u64(&a->t.mem, list + l->tuple_size, &n) != SW_OK) ||
        sw_mem_read_u64(&a->t.mem, a->t.runtime_addr + l->runtime_audit_hooks, &head) != SW_OK) {
        snprintf(err, errlen, "process %d: cannot tell whether it has audit hooks, which could refuse the code the "
                 "attach runs in it (and fail the program's own code then); --audit-hooks-ok attaches anyway",
                 a->t.pid);
        return SW_EARG;
    }
    if ((int64_t)n > 0 || head) {
        snprintf(err, errlen, "process %d has audit hooks (%s): one that refused the code the attach compiles "
                 "and runs there would fail the program's own code (SystemError); --audit-hooks-ok attaches "
                 "anyway, and record, dump and top --pid read it from outside", a->t.pid,
                 (int64_t)n > 0 && head ? "sys.addaudithook and PySys_AddAuditHook"
                 : head ? "PySys_AddAuditHook" : "sys.addaudithook");
        return SW_EARG;
    }
    return SW_OK;
}

/* One try, every thread frozen: push (take_back 0) or take back (1). */
static int try_frozen(attach_target *a, int take_back, uint64_t func, const char *text, uint64_t arg,
                      sw_pending_call *c, int *removed, char *err, size_t errlen)
{
    sw_frozen f;
    err[0] = '\0';
    int rc = sw_freeze(&f, a->t.pid, err, errlen);
    if (rc != SW_OK)
        return rc;
    if (take_back) {
        rc = sw_pending_take_back(&a->t.mem, &a->pl, a->interp, c, removed, err, errlen);
    } else {
        rc = a->refuse_hooks ? check_audit_hooks(a, err, errlen) : SW_OK;
        if (rc == SW_OK)
            rc = sw_pending_push(&a->t.mem, &a->pl, a->interp, a->l.interp_threads_head, a->l.tstate_next, func,
                                 text, arg, c, err, errlen);
    }
    sw_thaw(&f);
    return rc;
}

/* Tries until done or timeout; returns the last code. */
static int retry(attach_target *a, int take_back, uint64_t func, const char *text, uint64_t arg, double timeout,
                 sw_pending_call *c, int *removed, char *err, size_t errlen)
{
    int rc;
    double end = now_s() + timeout;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        rc = try_frozen(a, take_back, func, text, arg, c, removed, err, errlen);
        if (rc != SW_ESTATE || now_s() > end)
            break;
        struct timespec pause = {0, RETRY_NS};
        nanosleep(&pause, NULL);
    }
    Py_END_ALLOW_THREADS
    return rc;
}

static PyObject *raise_code(int rc, int pid, const char *err, int take_back)
{
    if (rc == SW_ESTATE && *err)   /* a thread that did not stop (freeze.h) */
        PyErr_Format(PyExc_TimeoutError, "%s; %s", err,
                     take_back ? "the call stays queued, for the target's next safe point" : "nothing was changed");
    else if (rc == SW_ESTATE)
        PyErr_Format(PyExc_TimeoutError, "process %d: its pending-calls queue stayed locked or full", pid);
    else if (strstr(err, "ptrace: Operation not permitted"))
        PyErr_SetString(PyExc_PermissionError, err);
    else
        PyErr_SetString(PyExc_RuntimeError, err);
    return NULL;
}

static PyObject *pending_call(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"pid", "func", "text", "arg", "timeout", "audit_hooks_ok", NULL};
    int pid, hooks_ok = 0;
    PyObject *func_obj;
    const char *text = NULL;
    unsigned long long arg = 0;
    double timeout = 2.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iO|zKdp", kwlist, &pid, &func_obj, &text, &arg, &timeout, &hooks_ok))
        return NULL;
    attach_target a;
    if (open_target(&a, pid) < 0)
        return NULL;
    a.refuse_hooks = text && !hooks_ok;   /* (a call of code: PyRun_SimpleString's) */
    uint64_t func = 0;
    if (PyUnicode_Check(func_obj)) {
        const char *name = PyUnicode_AsUTF8(func_obj);
        if (!name || sw_target_symbol(&a.t, name, &func) != SW_OK || !func) {
            sw_target_close(&a.t);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "process %d: its interpreter defines no %s", pid, name);
            return NULL;
        }
    } else {
        func = PyLong_AsUnsignedLongLong(func_obj);
        if (PyErr_Occurred()) {
            sw_target_close(&a.t);
            return NULL;
        }
    }
    char err[512] = "";
    sw_pending_call c;
    int removed = 0;
    int rc = retry(&a, 0, func, text, arg, timeout, &c, &removed, err, sizeof err);
    char version[32];
    sw_target_version_str(a.t.version_hex, version, sizeof version);
    int main_only = (int)a.pl.main_thread_only;
    sw_target_close(&a.t);
    if (rc != SW_OK)
        return raise_code(rc, pid, err, 0);
    return Py_BuildValue("{s:K,s:K,s:i,s:O,s:s}", "func", (unsigned long long)c.func, "arg",
                         (unsigned long long)c.arg, "slot", c.slot, "main_thread_only",
                         main_only ? Py_True : Py_False, "version", version);
}

static PyObject *pending_take_back(PyObject *self, PyObject *args)
{
    (void)self;
    int pid;
    unsigned long long func, arg;
    if (!PyArg_ParseTuple(args, "iKK", &pid, &func, &arg))
        return NULL;
    attach_target a;
    if (open_target(&a, pid) < 0)
        return NULL;
    char err[512] = "";
    sw_pending_call c = {func, arg, -1};
    int removed = 0;
    int rc = retry(&a, 1, 0, NULL, 0, 2.0, &c, &removed, err, sizeof err);
    sw_target_close(&a.t);
    if (rc != SW_OK)
        return raise_code(rc, pid, err, 1);
    return PyBool_FromLong(removed);
}

/* Run by the target's interpreter as a pending call (with the GIL, between
 * two bytecodes): stops the attached session through attached.py. Never
 * raises: a pending call that fails would raise into the target's code. */
static int attach_stop(void *arg)
{
    (void)arg;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *m = PyImport_ImportModule("stackwatch.tracer.attached");
    PyObject *r = m ? PyObject_CallMethod(m, "stop_from_pending", NULL) : NULL;
    Py_XDECREF(r);
    Py_XDECREF(m);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    return 0;
}

/* The target's Python signal handlers that the attach's start-up or stop
 * held (tracer/signal_hold.py): {signum: handler}, the signals that arrived
 * meanwhile (a list the holding handler, held_note, appended to) and an
 * exception a handler raised before the holding began (or NULL). */
static PyObject *held_handlers, *held_arrived, *held_raised, *held_note;

/* Run by the target as a pending call just after the start-up or stop:
 * puts the held handlers back (where the holding one is still installed:
 * the session's stop puts its own stand-ins' SIG_DFL back meanwhile), then
 * raises the exception kept, or runs the held handler of each signal that
 * arrived meanwhile, in the target's code (its frame), as its eval loop
 * would have: what one raises (Ctrl-C's KeyboardInterrupt) is raised
 * there, through this call's -1. */
static int release_signals(void *arg)
{
    (void)arg;
    PyObject *handlers = held_handlers, *arrived = held_arrived, *raised = held_raised, *note = held_note;
    held_handlers = held_arrived = held_raised = held_note = NULL;
    PyObject *sig = PyImport_ImportModule("_signal");
    if (sig && handlers) {
        PyObject *num, *h;
        Py_ssize_t pos = 0;
        while (PyDict_Next(handlers, &pos, &num, &h)) {
            PyObject *now = PyObject_CallMethod(sig, "getsignal", "O", num);
            /* (signal() first runs the handlers of signals just arrived:
             * the holding one still, which notes them) */
            PyObject *r = now == note ? PyObject_CallMethod(sig, "signal", "OO", num, h) : NULL;
            Py_XDECREF(now);
            Py_XDECREF(r);
            PyErr_Clear();
        }
    }
    PyErr_Clear();
    int rc = 0;
    if (raised) {
        PyException_SetTraceback(raised, Py_None);   /* raised here, not in the start-up's frames */
        PyErr_SetObject((PyObject *)Py_TYPE(raised), raised);
        rc = -1;
    } else if (handlers && arrived) {
        for (Py_ssize_t i = 0; i < PyList_Size(arrived) && rc == 0; i++) {
            PyObject *num = PyList_GetItem(arrived, i);
            PyObject *h = num ? PyDict_GetItem(handlers, num) : NULL;
            if (!h)
                continue;
            PyObject *frame = (PyObject *)PyEval_GetFrame();
            Py_INCREF(num);
            Py_INCREF(h);
            PyObject *r = PyObject_CallFunctionObjArgs(h, num, frame ? frame : Py_None, NULL);
            if (!r)
                rc = -1;   /* the rest are not run, as when a handler raises in the eval loop */
            Py_XDECREF(r);
            Py_DECREF(h);
            Py_DECREF(num);
        }
    }
    Py_XDECREF(sig);
    Py_XDECREF(handlers);
    Py_XDECREF(arrived);
    Py_XDECREF(raised);
    Py_XDECREF(note);
    return rc;
}

static PyObject *attach_release_signals(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *handlers, *arrived, *raised, *note;
    if (!PyArg_ParseTuple(args, "O!O!OO", &PyDict_Type, &handlers, &PyList_Type, &arrived, &raised, &note))
        return NULL;
    if (raised != Py_None && !PyExceptionInstance_Check(raised)) {
        PyErr_SetString(PyExc_TypeError, "raised must be an exception or None");
        return NULL;
    }
    if (PyDict_Size(handlers) == 0 && raised == Py_None)
        Py_RETURN_NONE;   /* none held (not the main thread) */
    if (held_handlers) {
        PyErr_SetString(PyExc_RuntimeError, "signals are held already");
        return NULL;
    }
    Py_INCREF(handlers);
    Py_INCREF(arrived);
    Py_INCREF(note);
    held_handlers = handlers;
    held_arrived = arrived;
    held_note = note;
    held_raised = raised == Py_None ? NULL : (Py_INCREF(raised), raised);
    /* Queued after the start-up's own call (3.9-3.12: taken in the same
     * round; else at the next safe point), in the main thread, which alone
     * runs Python signal handlers. A full queue: now, raising here. */
    if (Py_AddPendingCall(release_signals, NULL) != 0 && release_signals(NULL) != 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *attach_stop_address(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)&attach_stop);
}

static PyMethodDef methods[] = {
    {"pending_call", (PyCFunction)(void (*)(void))pending_call, METH_VARARGS | METH_KEYWORDS,
     "pending_call(pid, func, text=None, arg=0, timeout=2.0) -> {func, arg, slot, main_thread_only, version}: "
     "queues func(arg) in process pid's pending calls (text: written into the queue, its address the arg)"},
    {"pending_take_back", pending_take_back, METH_VARARGS,
     "pending_take_back(pid, func, arg) -> bool: removes the call if the target has not taken it yet"},
    {"attach_release_signals", attach_release_signals, METH_VARARGS,
     "attach_release_signals(handlers, arrived, raised, note): after the attach's start-up or stop, at the target's "
     "next safe point, puts back the handlers it held (where note still is) and runs those of the signals that "
     "arrived (or raises `raised`)"},
    {"attach_stop_address", attach_stop_address, METH_NOARGS,
     "attach_stop_address() -> int: the pending-call function that stops an attached session"},
    {NULL, NULL, 0, NULL},
};

int sw_pending_call_add_to_module(PyObject *m)
{
    return PyModule_AddFunctions(m, methods);
}
