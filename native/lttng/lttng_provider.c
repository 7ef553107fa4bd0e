/*
 * lttng_provider.c - libstackwatch_lttng.so (lttng_provider.h): the tracepoint provider
 * "stackwatch" and the two functions the tracer calls through dlsym. A
 * tracepoint no LTTng session has enabled costs a load and a branch.
 */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "lttng/lttng_tracepoints.h"

#include "lttng/lttng_provider.h"

#define SW_LTTNG_EXPORT __attribute__((visibility("default")))

SW_LTTNG_EXPORT void stackwatch_lttng_function_entry(const char *function, const char *file, int line)
{
    lttng_ust_tracepoint(stackwatch, function_entry, function, file, line);
}

SW_LTTNG_EXPORT void stackwatch_lttng_function_exit(const char *function, const char *file, int line)
{
    lttng_ust_tracepoint(stackwatch, function_exit, function, file, line);
}
