/*
 * lttng_events.h - LTTng-UST tracepoints (`stackwatch run --lttng`) as a
 * consumer of the dispatch layer: Python frame entries and exits handed to
 * the provider library libstackwatch_lttng.so (native/lttng), loaded at run
 * time from _native's own folder. GIL held, but for sw_lttng_emit_kernel.
 */
#ifndef SW_LTTNG_EVENTS_H
#define SW_LTTNG_EVENTS_H

#include "ext/dispatch/dispatch.h"

/* Fires the tracepoint of `kind` (a Python frame event). Never raises. */
void sw_lttng_emit(int kind, const sw_evdata *d);

/* A native function's entry (exit 0) or exit (1), recorded by the trace
 * (ext/tracer/native_frames.c): its code's name, file and line, its
 * address. Never raises. */
void sw_lttng_emit_native(int exit, const char *name, const char *file, int line, void *addr);

/* A kernel event recorded by `--kernel` (lttng_provider.h
 * SW_LTTNG_SYSCALL_ENTRY ...: thread tid at ts, CLOCK_MONOTONIC ns, on
 * CPU cpu), emitted while --lttng is on. Any thread, no GIL (the kernel
 * reader's). Never raises. */
void sw_lttng_emit_kernel(int kind, uint32_t tid, uint64_t ts, uint32_t cpu, int64_t a, int64_t b, int64_t c,
                          const char *s1, const char *s2);

/* Adds lttng_load(), lttng_enable() and lttng_disable() to the module.
 * Returns 0, or -1 with an exception set. */
int sw_lttng_add_to_module(PyObject *m);

#endif
