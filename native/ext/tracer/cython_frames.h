/*
 * cython_frames.h - the functions of Cython modules compiled with
 * profile=True recorded as Python frames (`stackwatch run --cython`,
 * cython_frames.c). Cython calls them without the evaluator, so the
 * frame-evaluation hook never sees them; they report themselves to the
 * profilers instead: on 3.9-3.12 to the C profile function (ccalls.c
 * installs it on every thread and hands their calls and returns here), on
 * 3.13 to sys.monitoring PY_START / PY_RESUME / PY_RETURN / PY_YIELD /
 * PY_UNWIND (callbacks of a second tool id, set by
 * src/stackwatch/events/monitoring.py).
 */
#ifndef SW_CYTHON_FRAMES_H
#define SW_CYTHON_FRAMES_H

#include "ext/tracer/frame_compat.h"

#if PY_VERSION_HEX < 0x030D0000
/* The C profile function's PyTrace_CALL / PyTrace_RETURN of frame: a
 * Cython function's when frame is not the thread's running frame (a
 * Python function's frame is: the hook records those). Never raises. */
void sw_cython_profile(PyFrameObject *frame, int what);
#endif

/* 3.13: adds hooks.cython_callbacks ({event bit: callback}, for the
 * second tool id); nothing before. Returns 0, or -1 with an exception
 * set. */
int sw_cython_add_hooks(PyObject *hooks);

#endif
