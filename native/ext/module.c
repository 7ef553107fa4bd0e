/*
 * module.c - the module stackwatch._native: creates it and adds each
 * room's types and functions, lower rooms first. Nothing else.
 */
#include "ext/shared/compat.h"
#include "ext/shared/pyerr.h"
#include "ext/shared/sigkick.h"

#include "ext/tracefile/trace_type.h"

#include "ext/dispatch/dispatch.h"
#include "ext/dispatch/handlers.h"
#include "ext/dispatch/kinds.h"
#include "ext/dispatch/lttng_events.h"
#include "ext/dispatch/probes.h"
#include "ext/dispatch/task_log.h"

#include "ext/tracer/objects.h"
#include "ext/tracer/switch.h"
#include "ext/tracer/trace_api.h"

#include "ext/profile/calltree_type.h"
#include "ext/profile/profile_file_type.h"
#include "ext/profile/render.h"
#include "ext/profile/trace_tree_view.h"

#include "ext/sampler/sampler.h"

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "stackwatch._native", "stackwatch C core bindings", -1, NULL,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void)
{
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    if (sw_pyerr_add_to_module(m) < 0 ||                   /* ext/shared: TraceError */
        sw_sigkick_add_to_module(m) < 0 ||                 /* ext/shared: fatal signals */
        sw_trace_type_add_to_module(m) < 0 ||              /* ext/tracefile: Trace */
        sw_kinds_add_to_module(m) < 0 || sw_dispatch_add_to_module(m) < 0 ||   /* ext/dispatch */
        sw_handlers_add_to_module(m) < 0 || sw_task_log_add_to_module(m) < 0 || sw_probes_add_to_module(m) < 0 || sw_lttng_add_to_module(m) < 0 ||
        sw_trace_api_add_to_module(m) < 0 ||               /* ext/tracer: start, stop, ... */
        sw_switch_add_to_module(m) < 0 ||                  /* ... hooks, and the switching owner */
        sw_objects_add_to_module(m) < 0 ||
        sw_calltree_type_add_to_module(m) < 0 ||           /* ext/profile: CallTree, */
        sw_profile_file_type_add_to_module(m) < 0 ||       /* ProfileFile, render_trees, */
        sw_render_add_to_module(m) < 0 || sw_trace_tree_view_add_to_module(m) < 0 ||  /* trace_trees */
        sw_sampler_add_to_module(m) < 0) {                 /* ext/sampler: Sampler, dump, ... */
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
