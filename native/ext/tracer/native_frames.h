/*
 * native_frames.h - the tracer's side of the native-function runtime
 * (native/cyg/cyg.h, native_frames.c): each thread that attaches to a
 * session hands the runtime library its buffer, and the functions of
 * extensions compiled with -finstrument-functions get code ids of kind
 * SW_CODE_NATIVE, named from their object's symbol tables.
 */
#ifndef SW_NATIVE_FRAMES_H
#define SW_NATIVE_FRAMES_H

#include "ext/tracer/thread_state.h"

/* The next session's --native-include / --native-exclude: sequences of
 * globs (or None) matched against a native function's symbol, its
 * object's file name and path. Returns 0, or -1 with an exception set
 * (then nothing changed). */
int sw_native_frames_filters(PyObject *include, PyObject *exclude);

/* The calling thread attached to the session: its runtime state set (or
 * reset) for it. Never raises. */
void sw_native_frames_attach(sw_tracer_thread *t);
/* The calling thread exits (no GIL needed): its runtime state is freed,
 * after the runtime forgot it. */
void sw_native_frames_detach(sw_tracer_thread *t);

#endif
