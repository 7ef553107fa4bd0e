/*
 * sampler_trace.c - the session's writer lent to the sampler, and taken
 * back when the session stops (sampler_trace.h).
 */
#include "ext/tracer/session.h"   /* first: Python.h before any system header */

#include "sampler_trace.h"

/* The borrower's way to stop writing. Kept across sessions and forks: it
 * is the sampler's one function, which does nothing when no sampler of
 * this process writes. */
static void (*borrower_detach)(void);

sw_writer *sw_session_writer(uint64_t *mono0_ns, void (*detach)(void))
{
    if (!sw_S.gen || !sw_S.w)
        return NULL;
    borrower_detach = detach;
    *mono0_ns = sw_S.clock.mono0_ns;
    return sw_S.w;
}

void sw_session_writer_reclaim(void)
{
    if (borrower_detach)
        borrower_detach();
}
