/*
 * switch.h - the one owner of switching the interpreter's mechanisms on
 * and off (switch.c), and _native.hooks, the interface of its Python half
 * (src/stackwatch/events/switch.py).
 */
#ifndef SW_SWITCH_H
#define SW_SWITCH_H

#include "ext/tracer/frame_compat.h"

#include <stdint.h>

/* Makes _native.hooks (every file of the tracer that hands a callable to
 * a mechanism adds it there) and registers the owner with the dispatch
 * layer, which calls it whenever a consumer changes. Returns 0, or -1 with
 * an exception set. */
int sw_switch_add_to_module(PyObject *m);

/* For the files that add to _native.hooks: `def` becomes the sys.monitoring
 * callback of `event` (a sys.monitoring event bit) in
 * hooks.monitoring_callbacks. Returns 0, or -1 with an exception set. */
int sw_hooks_add_monitoring_callback(PyObject *hooks, uint32_t event, PyMethodDef *def);
/* The same into another dict of callbacks by event bit (a second tool
 * id's: hooks.cython_callbacks, cython_frames.c). */
int sw_hooks_add_callback_to(PyObject *dict, uint32_t event, PyMethodDef *def);

#endif
