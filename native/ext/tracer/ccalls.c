/*
 * ccalls.c - optional recording of calls to builtin and extension functions
 * (--c-calls), as C_CALL / C_RETURN events.
 *
 * What counts as a C call is what sys.setprofile reports as c_call: calls of
 * builtin functions and methods (PyCFunction) and of method descriptors
 * (e.g. list.append called on a list). Such a function is named
 * "<module>.<name>" for module functions and "<type>.<name>" for methods,
 * the type being that of the object it is bound to.
 *
 * Mechanism: on 3.12+ sys.monitoring CALL, C_RETURN and C_RAISE events with
 * stackwatch's own tool id (src/stackwatch/events/monitoring.py), so that other tools
 * keep working; on 3.9-3.11 the C profile hook, installed on each thread
 * when it attaches, but never over a profile function that is already
 * installed (cProfile's, a user's): that thread's C calls are then not
 * recorded and stop() reports it. The same hook, on 3.9-3.12, hands the
 * calls and returns of Cython's profiled functions to cython_frames.c
 * (--cython): one profile function per thread serves both.
 *
 * Each thread keeps a stack of its open C calls and whether each was
 * recorded, so returns pair with calls; a C call that started before
 * tracing (its return arrives with nothing open) is ignored.
 */
#include "ccalls.h"

#include "ext/dispatch/dispatch.h"
#include "ext/shared/hookerr.h"
#include "ext/tracer/cython_frames.h"
#include "ext/tracer/session.h"
#include "ext/tracer/switch.h"

#include <string.h>

/* ---- code ids of C functions: (PyMethodDef*, bound type) -> id ---- */

typedef struct { const void *ml, *type; uint32_t id; } centry;
static centry *table;
static size_t table_cap, table_len;
static uint64_t table_gen;

static size_t slot_of(const void *ml, const void *type, size_t cap)
{
    uintptr_t h = (uintptr_t)ml * 0x9E3779B97F4A7C15ull ^ (uintptr_t)type * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h >> 17) & (cap - 1);
}

static int table_grow(void)
{
    size_t cap = table_cap ? table_cap * 2 : 256;
    centry *t = PyMem_RawCalloc(cap, sizeof *t);
    if (!t)
        return -1;
    for (size_t i = 0; i < table_cap; i++) {
        if (!table[i].ml)
            continue;
        size_t s = slot_of(table[i].ml, table[i].type, cap);
        while (t[s].ml)
            s = (s + 1) & (cap - 1);
        t[s] = table[i];
    }
    PyMem_RawFree(table);
    table = t;
    table_cap = cap;
    return 0;
}

static void table_reset(void)
{
    PyMem_RawFree(table);
    table = NULL;
    table_cap = table_len = 0;
}

/* The PyMethodDef and the object a C callable is bound to, or 0 if the
 * callable is not a C function. self_arg is the first argument for an
 * unbound method descriptor. */
static int c_function(PyObject *callable, PyObject *self_arg, PyMethodDef **ml, PyObject **self)
{
    if (PyCFunction_Check(callable)) {
        *ml = ((PyCFunctionObject *)callable)->m_ml;
        *self = PyCFunction_GET_SELF(callable);
        return 1;
    }
    if (Py_IS_TYPE(callable, &PyMethodDescr_Type)) {
        *ml = ((PyMethodDescrObject *)callable)->d_method;
        *self = self_arg;
        return 1;
    }
    return 0;
}

static void c_qualname(PyMethodDef *ml, PyObject *callable, PyObject *self, char *qual, size_t n)
{
    if (!self || PyModule_Check(self)) {
        PyObject *mod = PyCFunction_Check(callable) ? ((PyCFunctionObject *)callable)->m_module : NULL;
        const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
        if (!m)
            PyErr_Clear();
        snprintf(qual, n, "%s%s%s", m ? m : "", m ? "." : "", ml->ml_name);
    } else {
        PyTypeObject *tp = PyType_Check(self) ? (PyTypeObject *)self : Py_TYPE(self);
        snprintf(qual, n, "%s.%s", _PyType_Name(tp), ml->ml_name);
    }
}

static uint32_t define(PyMethodDef *ml, PyObject *callable, PyObject *self)
{
    char qual[512];
    const char *file = "<built-in>";
    c_qualname(ml, callable, self, qual, sizeof qual);
    uint32_t id = sw_S.next_code;
    if (id > SW_ID_MASK || sw_writer_define_code(sw_S.w, id, SW_CODE_C, ml->ml_name, qual, file, 0) != 0)
        return SW_ID_SKIP;
    sw_S.next_code++;
    return id;
}

static uint32_t c_id(PyMethodDef *ml, PyObject *callable, PyObject *self)
{
    const void *type = (self && !PyModule_Check(self)) ? (PyType_Check(self) ? (void *)self : (void *)Py_TYPE(self)) : NULL;
    if (table_gen != sw_S.gen) {
        table_reset();
        table_gen = sw_S.gen;
    }
    if (table_cap) {
        size_t s = slot_of(ml, type, table_cap);
        while (table[s].ml) {
            if (table[s].ml == ml && table[s].type == type)
                return table[s].id;
            s = (s + 1) & (table_cap - 1);
        }
    }
    if ((table_len + 1) * 2 > table_cap && table_grow() < 0)
        return SW_ID_SKIP;
    sw_exc_state es;
    sw_exc_save(&es);
    uint32_t id = define(ml, callable, self);
    sw_exc_restore(&es);
    if (id & SW_ID_SKIP)
        return id;
    size_t s = slot_of(ml, type, table_cap);
    while (table[s].ml)
        s = (s + 1) & (table_cap - 1);
    table[s] = (centry){ml, type, id};
    table_len++;
    return id;
}

/* Pushes whether the C call that starts now is recorded. */
static int push_open(sw_tracer_thread *t, uint8_t recorded)
{
    if (t->c_depth == t->c_cap) {
        uint32_t cap = t->c_cap ? t->c_cap * 2 : 64;
        uint8_t *p = PyMem_RawRealloc(t->c_rec, cap);
        if (!p) {
            sw_hook_error("out of memory recording C calls");
            return -1;
        }
        t->c_rec = p;
        t->c_cap = cap;
    }
    t->c_rec[t->c_depth++] = recorded;
    return 0;
}

/* caller: the code object making the call (its C calls are left out when
 * its own frames are, e.g. stackwatch's own code). */
/* Other consumers (handlers, probes) of C-call events. */
static void emit_c(int kind, PyObject *caller, PyObject *callable, PyObject *self_arg)
{
    PyMethodDef *ml;
    PyObject *self;
    if (!c_function(callable, self_arg, &ml, &self))
        return;
    char qual[512];
    sw_exc_state es;
    sw_exc_save(&es);
    c_qualname(ml, callable, self, qual, sizeof qual);
    PyErr_Clear();
    sw_evdata d = {.code = (caller && PyCode_Check(caller)) ? (PyCodeObject *)caller : NULL,
                   .line = -1, .name = qual};
    sw_emit(kind, &d);
    sw_exc_restore(&es);
}

static void on_c_call(PyObject *caller, PyObject *callable, PyObject *self_arg)
{
    sw_tracer_thread *t = &sw_TT;
    if (sw_T.calls_off)
        return;
    if (sw_D.slow & SW_EVB(SW_K_C_CALL))
        emit_c(SW_K_C_CALL, caller, callable, self_arg);
    if (!sw_S.gen || !sw_S.c_calls)
        return;
    if (SW_UNLIKELY(t->session != sw_S.gen) && !sw_thread_attach(t))
        return;
    PyMethodDef *ml;
    PyObject *self;
    if (!c_function(callable, self_arg, &ml, &self))
        return;
    if (t->c_gen != sw_S.gen) {
        t->c_gen = sw_S.gen;
        t->c_depth = 0;
    }
    uint32_t id = SW_ID_SKIP;
    if (!(caller && PyCode_Check(caller) && (sw_code_id((PyCodeObject *)caller, NULL) & SW_ID_SKIP)) &&
        !(sw_S.max_depth && t->tb->depth >= sw_S.max_depth))
        id = c_id(ml, callable, self);
    int rec = !(id & SW_ID_SKIP);
    if (push_open(t, (uint8_t)rec) < 0 || !rec)
        return;
    sw_tbuf_enter(t->tb, sw_event_now(t->tb), SW_OP_C_CALL, id);
}

static void on_c_return(int kind, PyObject *caller, PyObject *callable, PyObject *self_arg)
{
    sw_tracer_thread *t = &sw_TT;
    if (sw_T.calls_off)   /* (its call was not seen either: nothing to pair) */
        return;
    if (sw_D.slow & SW_EVB(kind))
        emit_c(kind, caller, callable, self_arg);
    if (!sw_S.gen || !sw_S.c_calls || t->session != sw_S.gen || t->c_gen != sw_S.gen || !t->c_depth)
        return;  /* a C call that started before tracing did */
    PyMethodDef *ml;
    PyObject *self;
    if (!c_function(callable, self_arg, &ml, &self))
        return;
    if (t->c_rec[--t->c_depth])
        sw_tbuf_exit(t->tb, sw_event_now(t->tb), SW_OP_C_RETURN);
}

#if PY_VERSION_HEX >= 0x030C0000

/* sys.monitoring callbacks: CALL(code, offset, callable, arg0) and
 * C_RETURN / C_RAISE(code, offset, callable, arg0). arg0 is
 * sys.monitoring.MISSING when there are no arguments. */
static PyObject *mon_call(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n >= 4)
        on_c_call(args[0], args[2], args[3]);
    Py_RETURN_NONE;
}

static PyObject *mon_c_return(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n >= 4)
        on_c_return(SW_K_C_RETURN, args[0], args[2], args[3]);
    Py_RETURN_NONE;
}

static PyObject *mon_c_raise(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n >= 4)
        on_c_return(SW_K_C_RAISE, args[0], args[2], args[3]);
    Py_RETURN_NONE;
}

static PyMethodDef mon_call_def = {"mon_call", (PyCFunction)(void (*)(void))mon_call, METH_FASTCALL,
                                    "sys.monitoring CALL callback"};
static PyMethodDef mon_c_return_def = {"mon_c_return", (PyCFunction)(void (*)(void))mon_c_return,
                                        METH_FASTCALL, "sys.monitoring C_RETURN callback"};
static PyMethodDef mon_c_raise_def = {"mon_c_raise", (PyCFunction)(void (*)(void))mon_c_raise, METH_FASTCALL,
                                       "sys.monitoring C_RAISE callback"};

int sw_ccalls_add_hooks(PyObject *hooks)
{
    return sw_hooks_add_monitoring_callback(hooks, SW_MON(CALL), &mon_call_def) < 0 ||
                   sw_hooks_add_monitoring_callback(hooks, SW_MON(C_RETURN), &mon_c_return_def) < 0 ||
                   sw_hooks_add_monitoring_callback(hooks, SW_MON(C_RAISE), &mon_c_raise_def) < 0
               ? -1
               : 0;
}

#else

int sw_ccalls_add_hooks(PyObject *hooks) { (void)hooks; return 0; }

#endif

#if PY_VERSION_HEX < 0x030D0000  /* 3.9 - 3.12: the C profile hook */

/* Whether the session wants the hook on the threads it attaches, and
 * whether other consumers want it on every thread (C calls come from
 * sys.monitoring on 3.12). */
static int session_wants(void)
{
#  if PY_VERSION_HEX >= 0x030C0000
    return sw_S.gen && sw_S.cython;
#  else
    return sw_S.gen && (sw_S.c_calls || sw_S.cython);
#  endif
}

static int others_want(void)
{
#  if PY_VERSION_HEX >= 0x030C0000
    return 0;
#  else
    return (sw_D.slow & SW_MASK_C_CALLS) != 0;
#  endif
}

#  if PY_VERSION_HEX >= 0x030C0000
/* 3.12: the hook set on the thread state as _PyEval_SetProfile sets it,
 * keeping CPython's count of threads with a profile function, but without
 * turning on the legacy profiler's sys.monitoring events for all code
 * (every Python call would then reach the hook: 12x the traced cost of a
 * call). Cython's functions call the thread's profile function themselves.
 * Once another profiler sets a profile function on any thread, the
 * events are on and the hook also sees Python frames, which it passes. */
#    undef _PyGC_FINALIZED   /* the public macro; the internal header defines its own */
#    include <internal/pycore_interp.h>
static int set_profile(PyThreadState *ts, Py_tracefunc fn)
{
    ts->interp->sys_profiling_threads += (fn != NULL) - (ts->c_profilefunc != NULL);
    ts->c_profilefunc = fn;
    Py_CLEAR(ts->c_profileobj);
    return 0;
}
#  else
#    define set_profile(ts, fn) _PyEval_SetProfile((ts), (fn), NULL)
#  endif

static int profile_cb(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj;
    if (what == PyTrace_CALL || what == PyTrace_RETURN) {
        sw_cython_profile(frame, what);
        return 0;
    }
#  if PY_VERSION_HEX < 0x030C0000
    if (what == PyTrace_C_CALL) {
        PyCodeObject *code = frame ? PyFrame_GetCode(frame) : NULL;
        on_c_call((PyObject *)code, arg, NULL);
        Py_XDECREF(code);
    }
    else if (what == PyTrace_C_RETURN || what == PyTrace_C_EXCEPTION) {
        PyCodeObject *code = frame ? PyFrame_GetCode(frame) : NULL;
        on_c_return(what == PyTrace_C_RETURN ? SW_K_C_RETURN : SW_K_C_RAISE, (PyObject *)code, arg, NULL);
        Py_XDECREF(code);
    }
#  else
    (void)arg;
#  endif
    return 0;
}

/* Thread states where the hook was installed, to report at stop any whose
 * hook another profiler replaced (cProfile.enable(), sys.setprofile()). */
static PyThreadState **hooked;
static size_t nhooked, hooked_cap;

static void remember(PyThreadState *ts)
{
    if (nhooked == hooked_cap) {
        size_t cap = hooked_cap ? hooked_cap * 2 : 16;
        PyThreadState **h = PyMem_RawRealloc(hooked, cap * sizeof *h);
        if (!h)
            return;
        hooked = h;
        hooked_cap = cap;
    }
    hooked[nhooked++] = ts;
}

/* Installs the hook on ts (any thread's state; the GIL is held). */
static void hook_thread(PyThreadState *ts)
{
    sw_exc_state es;
    sw_exc_save(&es);
    if (set_profile(ts, profile_cb) < 0)
        PyErr_Clear();
    else
        remember(ts);
    sw_exc_restore(&es);
}

void sw_ccalls_thread_attach(sw_tracer_thread *t)
{
    (void)t;
    if (!session_wants() && !others_want())
        return;
    PyThreadState *ts = PyThreadState_Get();
    if (ts->c_profilefunc && ts->c_profilefunc != profile_cb) {
        sw_hook_error("--c-calls / --cython: a thread already has a profile function (cProfile or "
                      "sys.setprofile); its C calls and Cython functions are not recorded");
        return;
    }
    hook_thread(ts);
}

/* A thread where the hook was installed and another profiler replaced it
 * (cProfile.enable(), sys.setprofile()) is the session's error. */
static void report_replaced(PyThreadState *ts)
{
    for (size_t i = 0; i < nhooked; i++) {
        if (hooked[i] == ts) {
            sw_hook_error("--c-calls / --cython: another profiler (cProfile, sys.setprofile) "
                          "replaced stackwatch's profile hook on a thread while tracing; that "
                          "thread's later C calls and Cython functions are missing");
            return;
        }
    }
}

/* The hook off every thread (and the replaced ones reported). */
static void unhook_all(void)
{
    PyThreadState *me = PyThreadState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts; ts = PyThreadState_Next(ts)) {
        if (ts->c_profilefunc == profile_cb) {
            if (set_profile(ts, NULL) < 0)
                PyErr_Clear();
        } else {
            report_replaced(ts);
        }
    }
    nhooked = 0;
}

/* The hook on every thread while other consumers want C-call events
 * (threads started later get it from the frame hook,
 * sw_ccalls_thread_attach); off when neither they nor the session's
 * --c-calls want it. */
void sw_ccalls_sync(void)
{
    if (!others_want()) {
        if (!session_wants())
            unhook_all();
        return;
    }
    PyThreadState *me = PyThreadState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts; ts = PyThreadState_Next(ts)) {
        if (ts->c_profilefunc == NULL)
            hook_thread(ts);
    }
}

void sw_ccalls_check(void)
{
    if (others_want())
        return;   /* still wanted by another consumer: not the session's hook alone */
    PyThreadState *me = PyThreadState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts; ts = PyThreadState_Next(ts))
        if (ts->c_profilefunc != profile_cb)
            report_replaced(ts);
}

#else

void sw_ccalls_thread_attach(sw_tracer_thread *t) { (void)t; }
void sw_ccalls_sync(void) {}
void sw_ccalls_check(void) {}

#endif
