/*
 * sampler_trace.c - the session's writer for the sampler (sampler_trace.h).
 */
#include "session.h"

#include "sampler_trace.h"

sw_writer *sw_session_writer(uint64_t *mono0_ns)
{
    if (!sw_S.gen || !sw_S.w)
        return NULL;
    *mono0_ns = sw_S.clock.mono0_ns;
    return sw_S.w;
}
