/*
 * ccalls.h - calls of builtin and extension functions as C_CALL / C_RETURN
 * events (ccalls.c): recorded into the file (--c-calls) and handed to the
 * dispatch layer's other consumers. 3.12+: sys.monitoring CALL / C_RETURN /
 * C_RAISE callbacks; 3.9-3.11: the C profile hook of every thread, which
 * on 3.9-3.12 also hands Cython's profiled functions to cython_frames.c
 * (--cython).
 */
#ifndef SW_CCALLS_H
#define SW_CCALLS_H

#include "ext/tracer/thread_state.h"

/* 3.9-3.12: the hook on this thread when C calls (3.9-3.11) or Cython's
 * functions are wanted (it attaches to the session, or the
 * frame hook meets it first); nothing on 3.13. */
void sw_ccalls_thread_attach(sw_tracer_thread *t);
/* 3.9-3.12: the hook on every thread while C-call events are wanted
 * (3.9-3.11: another consumer's; the session's --c-calls and --cython
 * hook the threads as they attach), off everywhere when nothing wants it;
 * nothing on 3.13. Called by the switching owner. */
void sw_ccalls_sync(void);
/* 3.9-3.12, before the session writes its end: records as its error that
 * another profiler replaced the hook on a thread. */
void sw_ccalls_check(void);
/* 3.12+: adds the sys.monitoring callbacks to _native.hooks. Returns 0, or
 * -1 with an exception set. */
int sw_ccalls_add_hooks(PyObject *hooks);

#endif
