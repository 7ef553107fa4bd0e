/*
 * switch.c - the one owner of switching the interpreter's mechanisms on
 * and off. Whenever a consumer of the dispatch layer changes (a handler
 * added or removed, probes attached or detached, a tracing session started
 * or stopped), dispatch.c recomputes the event masks and calls
 * switch_mechanisms() (registered at module init: the dispatch layer never
 * includes the tracer), which turns on exactly the mechanisms the union of
 * the masks needs (kinds.h says which mechanism delivers each kind) and
 * turns the others off:
 *
 *   in C:   the PEP 523 frame-evaluation hook (hook_eval.c); on 3.9-3.11
 *           the C trace and profile hooks of every thread (events.c,
 *           ccalls.c); the slots of every Python class (objects.c);
 *   through one Python entry, src/stackwatch/events/switch.py apply():
 *           sys.monitoring events (3.12+; on 3.13 also those of Cython's
 *           functions, under a second tool id), gc.callbacks, the wrapper of
 *           threading.Thread._bootstrap_inner and, on 3.9-3.11, the
 *           replacement of sys.settrace, which are reachable from Python
 *           only. The entry is told what to turn on; it reads nothing else.
 *
 * _native.hooks is that entry's interface, used by nothing else: the
 * callables it hands to those mechanisms (monitoring_callbacks,
 * cython_callbacks, gc_callback, thread_event, wrap_settrace) and the C helpers of the
 * sys.monitoring local events (init_gap_begin/end, lines_local_begin/end,
 * lines_codes). Each file that owns a callable adds it (*_add_hooks).
 *
 * Runs with the GIL held; never raises (a problem is printed as a warning).
 */
#include "switch.h"

#include "ext/dispatch/dispatch.h"
#include "ext/tracer/ccalls.h"
#include "ext/tracer/cython_frames.h"
#include "ext/tracer/events.h"
#include "ext/tracer/task_wrappers.h"
#include "ext/tracer/tasks.h"
#include "ext/tracer/task_conditions.h"
#include "ext/tracer/task_imports.h"
#include "ext/tracer/task_locks.h"
#include "ext/tracer/hook_eval.h"
#include "ext/tracer/exit_line.h"
#include "ext/tracer/init_gap.h"
#include "ext/tracer/lines_local.h"
#include "ext/tracer/objects.h"
#include "ext/tracer/session.h"

static PyObject *monitoring_callbacks;   /* hooks.monitoring_callbacks */

int sw_hooks_add_monitoring_callback(PyObject *hooks, uint32_t event, PyMethodDef *def)
{
    (void)hooks;
    return sw_hooks_add_callback_to(monitoring_callbacks, event, def);
}

int sw_hooks_add_callback_to(PyObject *dict, uint32_t event, PyMethodDef *def)
{
    PyObject *fn = PyCFunction_NewEx(def, NULL, NULL);
    PyObject *key = fn ? PyLong_FromUnsignedLong(event) : NULL;
    int rc = key ? PyDict_SetItem(dict, key, fn) : -1;
    Py_XDECREF(key);
    Py_XDECREF(fn);
    return rc;
}

/* The Python half: what to turn on, as keyword arguments of
 * stackwatch.events.switch.apply(). */
static void apply_in_python(uint32_t mask, uint32_t slow, int session)
{
    uint32_t events = 0, local = 0, gap = 0;
    PyObject *key = Py_NewRef(Py_None);
#if PY_VERSION_HEX >= 0x030C0000
    events = sw_monitoring_events(mask);
    local = events & (SW_MON(LINE) | SW_MON(INSTRUCTION));
    if (local && sw_lines_local_restricted()) {
        events &= ~local;   /* local events of the code objects consumers want */
        Py_SETREF(key, sw_lines_local_key());
    } else {
        local = 0;
    }
    if ((events | local) & (SW_MON(LINE) | SW_MON(INSTRUCTION)))
        sw_events_monitoring_refs();
    /* The line a frame leaves from is noted for its return's consumers
     * (exit_line.c). */
    if (slow & SW_EXIT_LINE_KINDS)
        events |= SW_EXIT_LINE_EVENTS;
#endif
#if PY_VERSION_HEX >= 0x030D0000
    if (session || (slow & SW_MASK_CALLS)) {
        gap = SW_INIT_GAP_LOCAL_EVENTS;
        events |= SW_INIT_GAP_GLOBAL_EVENTS;
    }
#else
    (void)slow;
    (void)session;
#endif
#if PY_VERSION_HEX >= 0x030C0000
    int settrace = 0;
#else
    int settrace = (mask & SW_MASK_TRACE_HOOK) != 0;
#endif
    PyObject *mod = key ? PyImport_ImportModule("stackwatch.events.switch") : NULL;
    PyObject *fn = mod ? PyObject_GetAttrString(mod, "apply") : NULL;
    PyObject *args = fn ? PyTuple_New(0) : NULL;
    /* 3.13: Cython's functions report to sys.monitoring (cython_frames.c). */
    int cython = PY_VERSION_HEX >= 0x030D0000 && session && sw_S.cython;
    PyObject *kw = args ? Py_BuildValue("{s:k,s:k,s:k,s:O,s:N,s:N,s:N,s:N,s:N}", "monitoring_events", (unsigned long)events,
                                        "local_lines", (unsigned long)local, "init_gap", (unsigned long)gap,
                                        "lines_key", key, "gc_callback",
                                        PyBool_FromLong((mask & SW_MASK_GC_CALLBACK) != 0), "thread_wrapper",
                                        PyBool_FromLong((mask & SW_MASK_THREAD_WRAPPER) != 0), "settrace",
                                        PyBool_FromLong(settrace), "task_hooks",
                                        PyBool_FromLong((mask & SW_MASK_TASK_HOOKS) != 0), "cython",
                                        PyBool_FromLong(cython))
                            : NULL;
    /* stackwatch's work, not the program's: none of its calls is recorded,
     * but the task events of the tasks alive as task events start are
     * (task_hooks.py _live_at_start) */
    sw_quiet_enter(&sw_T);
    PyObject *r = kw ? PyObject_Call(fn, args, kw) : NULL;
    sw_quiet_exit(&sw_T);
    if (!r) {
        PyErr_WriteUnraisable(fn ? fn : Py_None);
        PyErr_Clear();
    }
    Py_XDECREF(r);
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(fn);
    Py_XDECREF(mod);
    Py_XDECREF(key);
}

static void switch_mechanisms(void)
{
    uint32_t mask = sw_D.mask, slow = sw_D.slow;
    int session = sw_session_calls();   /* (a session with no calls needs no frame mechanism) */
    sw_session_fast_refresh();
    sw_hook_eval_sync(session);
    sw_events_thread_sync();
    sw_ccalls_sync();
    sw_events_check();
    sw_objects_sync((mask & SW_MASK_CLASS_SLOTS) != 0);
    apply_in_python(mask, slow, session);
}

int sw_switch_add_to_module(PyObject *m)
{
    PyObject *hooks = PyModule_New("stackwatch._native.hooks");
    if (!hooks)
        return -1;
    if (PyModule_AddStringConstant(hooks, "__doc__",
                                   "The mechanisms' side of the switching owner (native/ext/tracer/switch.c): "
                                   "what stackwatch.events.switch hands to sys.monitoring, gc.callbacks, "
                                   "threading and sys.settrace. Used by nothing else.") < 0 ||
        !(monitoring_callbacks = PyDict_New()) ||
        PyModule_AddObject(hooks, "monitoring_callbacks", Py_NewRef(monitoring_callbacks)) < 0 ||
        sw_ccalls_add_hooks(hooks) < 0 || sw_cython_add_hooks(hooks) < 0 || sw_events_add_hooks(hooks) < 0 || sw_tasks_add_hooks(hooks) < 0 || sw_task_locks_add_hooks(hooks) < 0 || sw_task_conditions_add_hooks(hooks) < 0 || sw_task_imports_add_hooks(hooks) < 0 || sw_task_wrappers_add_hooks(hooks) < 0 || sw_init_gap_add_hooks(hooks) < 0 ||
        sw_exit_line_add_hooks(hooks) < 0 ||
        sw_lines_local_add_hooks(hooks) < 0 || PyModule_AddObject(m, "hooks", hooks) < 0) {
        Py_DECREF(hooks);
        return -1;
    }
    sw_dispatch_set_switch(switch_mechanisms);
    return 0;
}
