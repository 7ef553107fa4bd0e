/*
 * dispatch.c - the event dispatch state shared by every backend, and the
 * path from "a consumer changed" to "the right hooks are on".
 */
#include "dispatch.h"

#include "ext/tracer/session.h"

sw_dispatch sw_D = {.extra_index = -1};

const char *const sw_kind_names[SW_K_COUNT] = {
    "call", "return", "yield", "resume", "unwind", "c_call", "c_return", "c_raise",
    "line", "instruction", "raise", "handled", "gc_start", "gc_done",
    "new_start", "new_done", "delete_start", "delete_done", "thread_start", "thread_exit",
};

void sw_emit(int kind, const sw_evdata *d)
{
    uint32_t bit = SW_EVB(kind);
    sw_tstate *t = &sw_T;
    sw_exc_state es;
    sw_exc_save(&es);
    sw_busy_enter(t);
    if (sw_D.probes & bit)
        sw_probes_emit(kind, d);
    if (sw_D.handlers & bit)
        sw_handlers_emit(kind, d);
    sw_busy_exit(t);
    sw_exc_restore(&es);
}

void sw_emit_frame(int kind, PyCodeObject *co)
{
    sw_evdata d = {.code = co, .line = co ? co->co_firstlineno : -1};
    sw_emit(kind, &d);
}

void sw_dispatch_changed(void)
{
    sw_D.slow = sw_D.handlers | sw_D.probes;
    sw_D.mask = sw_D.slow | sw_D.file;
    sw_D.hooks_gen++;
    sw_session_fast_refresh();
    sw_hook_eval_sync(sw_S.gen != 0);
    sw_events_thread_sync();
    sw_ccalls_sync();
    /* The mechanisms (hooks, sys.monitoring events, gc.callbacks, thread
     * wrappers) are switched by the Python layer. */
    PyObject *mod = PyImport_ImportModule("stackwatch.events.switch");
    PyObject *r = mod ? PyObject_CallMethod(mod, "_refresh", NULL) : NULL;
    if (!r) {
        PyErr_WriteUnraisable(mod ? mod : Py_None);
        PyErr_Clear();
    }
    Py_XDECREF(r);
    Py_XDECREF(mod);
}
