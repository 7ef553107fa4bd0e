/*
 * events.c - events that do not come from the frame evaluator: line,
 * instruction and exception events (sys.monitoring callbacks on 3.12+, a
 * C trace function per thread on 3.9-3.11), garbage collection
 * (a gc.callbacks entry) and thread start/exit (reported by the Python
 * layer, which wraps threading.Thread's bootstrap). The callables handed
 * to those mechanisms are in _native.hooks (switch.c).
 *
 * Line and instruction events are opt-in per code object: on 3.12+ they
 * are local events of the matching code objects when every consumer names
 * files (lines_local.c), else global and a location no consumer wants
 * returns sys.monitoring.DISABLE at its first event; on 3.9-3.11 a frame whose code
 * no consumer wants gets f_trace_lines / f_trace_opcodes cleared when it
 * starts.
 */
#include "events.h"

#include "ext/dispatch/dispatch.h"
#include "ext/dispatch/handlers.h"
#include "ext/shared/hookerr.h"
#include "ext/tracer/thread_state.h"
#include "ext/tracer/file_events.h"
#include "ext/tracer/switch.h"

#include <string.h>
#include <unistd.h>

#if PY_VERSION_HEX >= 0x030C0000
static PyObject *mon_disable;   /* sys.monitoring.DISABLE */
#endif
static PyObject *opnames;       /* dis.opname (3.9-3.11: never looked up, the names are left out) */

static const char *opname(long op)
{
    if (opnames && PyTuple_Check(opnames) && op >= 0 && op < PyTuple_GET_SIZE(opnames)) {
        PyObject *s = PyTuple_GET_ITEM(opnames, op);
        return PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
    }
    return NULL;
}

/* Does the file tracer want `kind` events located in co? */
static int file_wants(int kind, PyCodeObject *co)
{
    if (!(sw_D.file & SW_EVB(kind)))
        return 0;
    if (kind == SW_K_LINE || kind == SW_K_INSTRUCTION)
        return sw_file_wants_lines(co);
    return sw_file_wants_code(co);
}

int sw_events_wanted_in(int kind, PyCodeObject *co)
{
    uint32_t bit = SW_EVB(kind);
    if (sw_D.probes & bit)
        return 1;
    if (file_wants(kind, co))
        return 1;
    return (sw_D.handlers & bit) && sw_handlers_want(kind, co);
}

static void emit_located(int kind, PyCodeObject *co, int line, long long a, long long b, const char *name)
{
    if (sw_T.calls_off)
        return;
    sw_evdata d = {.code = co, .line = line, .a = a, .b = b, .name = name};
    if (file_wants(kind, co))
        sw_file_record_ext(kind, &d);
    sw_emit(kind, &d);
}

static const char *exc_type_name(PyObject *exc)
{
    if (!exc)
        return NULL;
    PyTypeObject *tp = PyExceptionInstance_Check(exc) ? Py_TYPE(exc)
                       : PyExceptionClass_Check(exc) ? (PyTypeObject *)exc : NULL;
    return tp ? tp->tp_name : NULL;
}

#if PY_VERSION_HEX >= 0x030C0000

/* The line of the instruction at `offset`, or of the first one after it
 * that has a line: an exception handler's first instruction has none (the
 * line is then that of its `except` clause, as frame.f_lineno says). The
 * compiler's own cleanup handlers (the one that ends an `except` block left
 * by a raise) have no line up to the code's end: then the last line before
 * the offset, the statement the handler cleans up after. -1 if no
 * instruction has a line. */
static int line_of(PyCodeObject *co, long offset)
{
    long end = (long)Py_SIZE(co) * 2;   /* bytes of the code units */
    for (long o = offset; o >= 0 && o < end; o += 2) {
        int line = PyCode_Addr2Line(co, (int)o);
        if (line >= 0)
            return line;
    }
    for (long o = offset - 2; o >= 0 && o < end; o -= 2) {
        int line = PyCode_Addr2Line(co, (int)o);
        if (line >= 0)
            return line;
    }
    return -1;
}

/* LINE(code, line_number) */
static PyObject *mon_line(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n < 2 || !PyCode_Check(args[0]))
        Py_RETURN_NONE;
    PyCodeObject *co = (PyCodeObject *)args[0];
    if (!sw_events_wanted_in(SW_K_LINE, co))
        return Py_NewRef(mon_disable ? mon_disable : Py_None);
    emit_located(SW_K_LINE, co, (int)PyLong_AsLong(args[1]), 0, 0, NULL);
    PyErr_Clear();
    Py_RETURN_NONE;
}

/* INSTRUCTION(code, instruction_offset) */
static PyObject *mon_instruction(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n < 2 || !PyCode_Check(args[0]))
        Py_RETURN_NONE;
    PyCodeObject *co = (PyCodeObject *)args[0];
    if (!sw_events_wanted_in(SW_K_INSTRUCTION, co))
        return Py_NewRef(mon_disable ? mon_disable : Py_None);
    long off = PyLong_AsLong(args[1]);
    long op = -1;
    PyObject *code = PyCode_GetCode(co);
    if (code && PyBytes_Check(code) && off >= 0 && off < PyBytes_GET_SIZE(code))
        op = (unsigned char)PyBytes_AS_STRING(code)[off];
    Py_XDECREF(code);
    PyErr_Clear();
    emit_located(SW_K_INSTRUCTION, co, line_of(co, off), off, op, opname(op));
    Py_RETURN_NONE;
}

/* RAISE / EXCEPTION_HANDLED (code, instruction_offset, exception) */
static PyObject *mon_exc(int kind, PyObject *const *args, Py_ssize_t n)
{
    if (n < 3 || !PyCode_Check(args[0]))
        Py_RETURN_NONE;
    PyCodeObject *co = (PyCodeObject *)args[0];
    if (!sw_events_wanted_in(kind, co))
        Py_RETURN_NONE;  /* not DISABLE: these events cannot be disabled */
    long off = PyLong_AsLong(args[1]);
    PyErr_Clear();
    emit_located(kind, co, line_of(co, off), off, 0, exc_type_name(args[2]));
    Py_RETURN_NONE;
}

static PyObject *mon_raise(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    return mon_exc(SW_K_RAISE, args, n);
}

static PyObject *mon_handled(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    return mon_exc(SW_K_HANDLED, args, n);
}

static PyMethodDef mon_line_def = {"mon_line", (PyCFunction)(void (*)(void))mon_line, METH_FASTCALL,
                                    "sys.monitoring LINE callback"};
static PyMethodDef mon_instruction_def = {"mon_instruction", (PyCFunction)(void (*)(void))mon_instruction,
                                           METH_FASTCALL, "sys.monitoring INSTRUCTION callback"};
static PyMethodDef mon_raise_def = {"mon_raise", (PyCFunction)(void (*)(void))mon_raise, METH_FASTCALL,
                                     "sys.monitoring RAISE callback"};
static PyMethodDef mon_handled_def = {"mon_handled", (PyCFunction)(void (*)(void))mon_handled, METH_FASTCALL,
                                       "sys.monitoring EXCEPTION_HANDLED callback"};

static int add_version_hooks(PyObject *hooks)
{
    return sw_hooks_add_monitoring_callback(hooks, SW_MON(LINE), &mon_line_def) < 0 ||
                   sw_hooks_add_monitoring_callback(hooks, SW_MON(INSTRUCTION), &mon_instruction_def) < 0 ||
                   sw_hooks_add_monitoring_callback(hooks, SW_MON(RAISE), &mon_raise_def) < 0 ||
                   sw_hooks_add_monitoring_callback(hooks, SW_MON(EXCEPTION_HANDLED), &mon_handled_def) < 0
               ? -1
               : 0;
}

void sw_events_monitoring_refs(void)
{
    if (mon_disable && opnames)
        return;
    PyObject *mon = PySys_GetObject("monitoring");   /* borrowed */
    PyObject *disable = mon ? PyObject_GetAttrString(mon, "DISABLE") : NULL;
    PyObject *dis = disable ? PyImport_ImportModule("dis") : NULL;
    PyObject *names = dis ? PyObject_GetAttrString(dis, "opname") : NULL;
    PyObject *t = names ? PySequence_Tuple(names) : NULL;
    if (t) {
        Py_XSETREF(mon_disable, Py_NewRef(disable));
        Py_XSETREF(opnames, Py_NewRef(t));
    } else {
        PyErr_Clear();   /* the callbacks do without: no DISABLE, no names */
    }
    Py_XDECREF(t);
    Py_XDECREF(names);
    Py_XDECREF(dis);
    Py_XDECREF(disable);
}

void sw_events_thread_sync(void) {}
void sw_events_check(void) {}

#else  /* 3.9 - 3.11: a C trace function on every thread */

static int trace_cb(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj;
    if (sw_T.calls_off || !frame)
        return 0;
    PyCodeObject *co = PyFrame_GetCode(frame);
    Py_DECREF(co);  /* the frame keeps it alive */
    switch (what) {
    case PyTrace_CALL:
        frame->f_trace_lines = (char)sw_events_wanted_in(SW_K_LINE, co);
        frame->f_trace_opcodes = (char)sw_events_wanted_in(SW_K_INSTRUCTION, co);
        break;
    case PyTrace_LINE:
        emit_located(SW_K_LINE, co, PyFrame_GetLineNumber(frame), 0, 0, NULL);
        break;
    case PyTrace_OPCODE: {
        long op = -1;
#if PY_VERSION_HEX >= 0x030B0000
        int off = PyFrame_GetLasti(frame);    /* in bytes */
        PyObject *code = PyCode_GetCode(co);  /* new reference */
#else
        int off = frame->f_lasti;
#  if PY_VERSION_HEX >= 0x030A0000
        off *= 2;   /* f_lasti counts code units in 3.10 */
#  endif
        PyObject *code = Py_NewRef(co->co_code);
#endif
        if (code && PyBytes_Check(code) && off >= 0 && off < PyBytes_GET_SIZE(code))
            op = (unsigned char)PyBytes_AS_STRING(code)[off];
        Py_XDECREF(code);
        PyErr_Clear();
        emit_located(SW_K_INSTRUCTION, co, PyFrame_GetLineNumber(frame), off, op, opname(op));
        break;
    }
    case PyTrace_EXCEPTION: {
        /* Reported in every frame the exception passes through; it was
         * raised in this one only if the traceback has just this frame. */
        PyObject *tb = (arg && PyTuple_Check(arg) && PyTuple_GET_SIZE(arg) == 3) ? PyTuple_GET_ITEM(arg, 2) : NULL;
        if (tb && PyTraceBack_Check(tb) && ((PyTracebackObject *)tb)->tb_next)
            break;
        if (!sw_events_wanted_in(SW_K_RAISE, co))
            break;
        emit_located(SW_K_RAISE, co, PyFrame_GetLineNumber(frame), 0, 0,
                     exc_type_name(PyTuple_GET_ITEM(arg, 0)));
        break;
    }
    }
    return 0;
}

/* Installs or removes the trace function on every thread as sw_D asks.
 * A thread whose trace function is someone else's (coverage, a debugger)
 * keeps it: its line events are then not reported, and it is said (the
 * session's error, and a warning, also from sw_events_check()). */
static int trace_on;
static int warned[2];
static const char *const conflict_msgs[2] = {
    "line/instruction/exception events: a thread already has a trace function (a debugger or "
    "coverage); its events are not reported",
    "line/instruction/exception events: another trace function (a debugger, coverage or "
    "sys.settrace) replaced stackwatch's on a thread; its events were not reported meanwhile",
};

/* Thread states stackwatch put its trace function on (while trace_on): an
 * empty slot on one of them means another tool's trace function came and
 * went (set and removed from C, e.g. by coverage's C tracer). */
#define MAX_MARKED 256
static PyThreadState *marked[MAX_MARKED];
static int nmarked;

static int was_marked(PyThreadState *ts)
{
    for (int i = 0; i < nmarked; i++)
        if (marked[i] == ts)
            return 1;
    return 0;
}

static void install(PyThreadState *ts)
{
    if (_PyEval_SetTrace(ts, trace_cb, NULL) < 0) {
        PyErr_Clear();
        return;
    }
    if (!was_marked(ts) && nmarked < MAX_MARKED)
        marked[nmarked++] = ts;
}

/* Recorded as the session's error, and said once on stderr, written to
 * file descriptor 2: sys.stderr may be Python code (a capturing test
 * runner), and a debugger that has just installed itself must not see a
 * frame of stackwatch's. */
static void conflict(int which)
{
    sw_hook_error(conflict_msgs[which]);
    if (!warned[which]) {
        warned[which] = 1;
        char buf[320];
        int n = snprintf(buf, sizeof buf, "stackwatch: warning: %s\n", conflict_msgs[which]);
        if (n > 0 && write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1) < 0)
            warned[which] = 1;
    }
}

void sw_events_thread_sync(void)
{
    int want = (sw_D.mask & SW_MASK_TRACE_HOOK) != 0;
    if (!want && !trace_on)
        return;
    PyThreadState *me = PyThreadState_Get();
    sw_exc_state es;
    sw_exc_save(&es);
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts; ts = PyThreadState_Next(ts)) {
        if (want && ts->c_tracefunc == NULL) {
            if (trace_on && ts == me && was_marked(ts))
                conflict(1);
            install(ts);
        } else if (want && ts->c_tracefunc != trace_cb) {
            conflict(trace_on && was_marked(ts));
        } else if (!want && ts->c_tracefunc == trace_cb) {
            if (_PyEval_SetTrace(ts, NULL, NULL) < 0)
                PyErr_Clear();
        }
    }
    trace_on = want;
    if (!want)
        nmarked = 0;
    sw_exc_restore(&es);
}

/* While the trace function is wanted: puts it back on threads whose trace
 * slot is free again (another tool's trace function was removed) and
 * reports threads where another one replaced it; an empty slot where
 * stackwatch's was is reported too (see marked; only for this thread: a
 * thread state of an exited thread may have been reused by a new one). */
void sw_events_check(void)
{
    if (!trace_on)
        return;
    PyThreadState *me = PyThreadState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts; ts = PyThreadState_Next(ts)) {
        if (ts->c_tracefunc == NULL) {
            if (ts == me && was_marked(ts))
                conflict(1);
            install(ts);
        } else if (ts->c_tracefunc != trace_cb) {
            conflict(1);
        }
    }
}

/* sys.settrace while stackwatch's trace function is on: the real one, then
 * sw_events_check(), so that a tool that installs a trace function is
 * reported and stackwatch's comes back when it removes it. */
static PyObject *real_settrace;

static PyObject *py_settrace(PyObject *self, PyObject *fn)
{
    (void)self;
    if (!real_settrace)
        return PyErr_Format(PyExc_RuntimeError, "stackwatch: sys.settrace is not available");
    PyObject *r = PyObject_CallOneArg(real_settrace, fn);
    if (!r)
        return NULL;
    Py_DECREF(r);
    sw_events_check();
    Py_RETURN_NONE;
}

static PyMethodDef settrace_def = {
    "settrace", py_settrace, METH_O,
    "settrace(function)\n--\n\nsys.settrace, while stackwatch's line events are on"};
static PyObject *settrace_fn;   /* the replacement, one object */

/* hooks.wrap_settrace(real) -> the function to put in place of
 * sys.settrace: it calls `real` and then checks the threads' hooks. */
static PyObject *py_wrap_settrace(PyObject *self, PyObject *real)
{
    (void)self;
    if (!settrace_fn && !(settrace_fn = PyCFunction_NewEx(&settrace_def, NULL, NULL)))
        return NULL;
    Py_XSETREF(real_settrace, Py_NewRef(real));
    return Py_NewRef(settrace_fn);
}

/* A thread that started after the sync: called from the frame hook. */
void sw_events_thread_attach(void)
{
    PyThreadState *ts = PyThreadState_Get();
    if (trace_on && ts->c_tracefunc == NULL) {
        sw_exc_state es;
        sw_exc_save(&es);
        install(ts);
        sw_exc_restore(&es);
    }
}

static PyMethodDef version_methods[] = {
    {"wrap_settrace", py_wrap_settrace, METH_O,
     "wrap_settrace(real) -> the function to put in place of sys.settrace while line events are on"},
    {NULL, NULL, 0, NULL},
};

static int add_version_hooks(PyObject *hooks)
{
    return PyModule_AddFunctions(hooks, version_methods);
}

#endif

/* gc.callbacks entry: (phase, info) with phase "start" or "stop". */
static PyObject *gc_callback(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *phase, *info;
    if (!PyArg_ParseTuple(args, "OO", &phase, &info))
        return NULL;
    int start = PyUnicode_Check(phase) && PyUnicode_CompareWithASCIIString(phase, "start") == 0;
    int kind = start ? SW_K_GC_START : SW_K_GC_DONE;
    if (!(sw_D.mask & SW_EVB(kind)) || sw_T.busy)
        Py_RETURN_NONE;
    long long v[3] = {-1, 0, 0};
    static const char *keys[3] = {"generation", "collected", "uncollectable"};
    for (int i = 0; i < 3 && PyDict_Check(info); i++) {
        PyObject *x = PyDict_GetItemString(info, keys[i]);
        if (x && PyLong_Check(x))
            v[i] = PyLong_AsLongLong(x);
    }
    PyErr_Clear();
    sw_evdata d = {.line = -1, .a = v[0], .b = v[1], .c = v[2]};
    if (sw_D.file & SW_EVB(kind))
        sw_file_record_ext(kind, &d);
    sw_emit(kind, &d);
    Py_RETURN_NONE;
}

/* hooks.thread_event(start: bool, name: str, native_id: int), from the
 * Python layer's wrapper of Thread._bootstrap_inner. */
static PyObject *thread_event(PyObject *self, PyObject *args)
{
    (void)self;
    int start;
    const char *name;
    long long native_id;
    if (!PyArg_ParseTuple(args, "psL", &start, &name, &native_id))
        return NULL;
    int kind = start ? SW_K_THREAD_START : SW_K_THREAD_EXIT;
    if (!(sw_D.mask & SW_EVB(kind)))
        Py_RETURN_NONE;
    sw_evdata d = {.line = -1, .name = name, .a = native_id};
    if (sw_D.file & SW_EVB(kind))
        sw_file_record_ext(kind, &d);
    sw_emit(kind, &d);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"gc_callback", gc_callback, METH_VARARGS, "gc.callbacks entry"},
    {"thread_event", thread_event, METH_VARARGS,
     "thread_event(start, name, native_id): from the wrapper of threading.Thread._bootstrap_inner"},
    {NULL, NULL, 0, NULL},
};

int sw_events_add_hooks(PyObject *hooks)
{
    if (PyModule_AddFunctions(hooks, methods) < 0)
        return -1;
    return add_version_hooks(hooks);
}
