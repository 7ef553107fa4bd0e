/*
 * native_frames.h - the tracer's side of the native-function runtime
 * (native/cyg/cyg.h, native_frames.c): each thread that attaches to a
 * session hands the runtime library its buffer, and the functions of
 * extensions compiled with -finstrument-functions get code ids of kind
 * SW_CODE_NATIVE, named from their object's symbol tables.
 */
#ifndef SW_NATIVE_FRAMES_H
#define SW_NATIVE_FRAMES_H

#include "ext/shared/tstate.h"

/* The calling thread attached to the session: its runtime state set (or
 * reset) for it. Never raises. */
void sw_native_frames_attach(sw_tstate *t);
/* The calling thread exits (no GIL needed): its runtime state is freed,
 * after the runtime forgot it. */
void sw_native_frames_detach(sw_tstate *t);

#endif
