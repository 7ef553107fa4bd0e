/*
 * dispatch.c - the event dispatch state shared by every backend, the
 * hand-over of an event to handlers, probes and LTTng, the file tracer's filters
 * as a consumer, and the path from "a consumer changed" to the switching
 * function (dispatch.h).
 */
#include "dispatch.h"

#include "ext/dispatch/handlers.h"
#include "ext/dispatch/lttng_events.h"
#include "ext/dispatch/probes.h"
#include "ext/shared/globs.h"
#include "ext/shared/tstate.h"

sw_dispatch sw_D = {.extra_index = -1};

static void (*switch_fn)(void);
static char **file_lines;   /* where the file tracer records line/instruction events; NULL: everywhere */

void sw_emit(int kind, const sw_evdata *d)
{
    uint32_t bit = SW_EVB(kind);
    if (!((sw_D.probes | sw_D.lttng | sw_D.handlers) & bit))
        return;   /* no consumer here (the file tracer records on its own): no save, no busy mark */
    sw_tstate *t = &sw_T;
    sw_exc_state es;
    sw_exc_save(&es);
    sw_busy_enter(t);
    if (sw_D.probes & bit)
        sw_probes_emit(kind, d);
    if (sw_D.lttng & bit)
        sw_lttng_emit(kind, d);
    if (sw_D.handlers & bit)
        sw_handlers_emit(kind, d);
    sw_busy_exit(t);
    sw_exc_restore(&es);
}

void sw_emit_frame(int kind, PyCodeObject *co)
{
    sw_emit_frame_at(kind, co, co ? co->co_firstlineno : -1);
}

void sw_emit_frame_at(int kind, PyCodeObject *co, int line)
{
    sw_emit_frame_rec(kind, co, line, 0);
}

void sw_emit_frame_rec(int kind, PyCodeObject *co, int line, int unrecorded)
{
    sw_evdata d = {.code = co, .line = line, .unrecorded = unrecorded};
    sw_emit(kind, &d);
}

void sw_dispatch_set_switch(void (*apply)(void))
{
    switch_fn = apply;
}

void sw_dispatch_changed(void)
{
    sw_D.slow = sw_D.handlers | sw_D.probes | sw_D.lttng;
    sw_D.mask = sw_D.slow | sw_D.file;
    sw_D.hooks_gen++;
    if (switch_fn)
        switch_fn();
}

int sw_dispatch_file_set(uint32_t mask, PyObject *lines)
{
    char **g;
    if (sw_globs_copy(lines, "lines", &g) < 0)
        return -1;
    if ((mask & SW_MASK_LINES) && sw_dispatch_extra_index() < 0) {
        sw_globs_free(g);
        return -1;
    }
    sw_globs_free(file_lines);
    file_lines = g;
    sw_D.file = mask;
    sw_handlers_cache_reset();
    return 0;
}

int sw_dispatch_file_lines_match(const char *filename)
{
    return !file_lines || sw_globs_match(file_lines, filename);
}

int sw_dispatch_file_lines_everywhere(void)
{
    return !file_lines;
}

int sw_dispatch_extra_index(void)
{
    if (sw_D.extra_index < 0) {
        sw_D.extra_index = sw_request_extra_index(NULL);
        if (sw_D.extra_index < 0) {
            PyErr_SetString(PyExc_RuntimeError, "no free code-object extra slot for stackwatch's event filters");
            return -1;
        }
    }
    return 0;
}

static PyObject *py_masks(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_BuildValue("{s:k,s:k,s:k,s:k,s:k}", "all", (unsigned long)sw_D.mask, "handlers",
                         (unsigned long)sw_D.handlers, "probes", (unsigned long)sw_D.probes, "file",
                         (unsigned long)sw_D.file, "slow", (unsigned long)sw_D.slow);
}

static PyMethodDef methods[] = {
    {"dispatch_masks", py_masks, METH_NOARGS, "dispatch_masks() -> dict of event masks"},
    {NULL, NULL, 0, NULL},
};

int sw_dispatch_add_to_module(PyObject *m)
{
    return PyModule_AddFunctions(m, methods);
}
