/*
 * lttng_tracepoints.h - the LTTng-UST tracepoint definitions of provider
 * "stackwatch" (lttng_provider.h lists them), in the form lttng-ust's macros read:
 * this header is included several times by <lttng/tracepoint-event.h>,
 * hence its guard. Only lttng_provider.c includes it.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER stackwatch

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "lttng/lttng_tracepoints.h"

#if !defined(SW_LTTNG_TRACEPOINTS_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define SW_LTTNG_TRACEPOINTS_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT_CLASS(stackwatch, frame,
    LTTNG_UST_TP_ARGS(const char *, function, const char *, file, int, line),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_string(function, function)
        lttng_ust_field_string(file, file)
        lttng_ust_field_integer(int, line, line)))

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(stackwatch, frame, stackwatch, function_entry,
    LTTNG_UST_TP_ARGS(const char *, function, const char *, file, int, line))

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(stackwatch, frame, stackwatch, function_exit,
    LTTNG_UST_TP_ARGS(const char *, function, const char *, file, int, line))

#endif

#include <lttng/tracepoint-event.h>
