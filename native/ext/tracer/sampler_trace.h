/*
 * sampler_trace.h - what the sampler needs of the tracing session to write
 * its samples into the trace file (stackwatch run --sample): the session's
 * writer and clock origin. Kept apart so that sampler.c does not depend on
 * the session's internals.
 */
#ifndef SW_SAMPLER_TRACE_H
#define SW_SAMPLER_TRACE_H

#include "trace/writer.h"

/* The running session's writer and its CLOCK_MONOTONIC origin (META
 * mono0_ns), or NULL when no session records. Called with the GIL. */
sw_writer *sw_session_writer(uint64_t *mono0_ns);

/* Stops the sampler writing into the session's file, if one runs, and
 * writes its last samples: called by the session's stop before the writer
 * closes, so that no sample is ever written through a closed or freed
 * writer (whatever order the Python layer stops things in). With the GIL. */
void sw_sampler_trace_detach(void);

#endif
