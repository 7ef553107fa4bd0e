/*
 * sampler_trace.h - what the sampler needs of the tracing session to write
 * its samples into the trace file (stackwatch run --sample): the session's
 * writer and clock origin. Kept apart so that the sampler (ext/sampler)
 * does not depend on the session's internals, and the session not on the
 * sampler: the sampler hands over the function that stops it writing.
 */
#ifndef SW_SAMPLER_TRACE_H
#define SW_SAMPLER_TRACE_H

#include "trace/trace.h"

/* The running session's writer and its CLOCK_MONOTONIC origin (META
 * mono0_ns), or NULL when no session records. `detach` (not NULL) stops
 * the borrower writing and writes its last samples: the session calls it
 * when it stops, before the writer closes, so that no sample is ever
 * written through a closed or freed writer (whatever order the Python
 * layer stops things in). Called with the GIL. */
sw_writer *sw_session_writer(uint64_t *mono0_ns, void (*detach)(void));

/* Calls the detach function handed over last, if any (the session stops).
 * With the GIL. */
void sw_session_writer_reclaim(void);

#endif
