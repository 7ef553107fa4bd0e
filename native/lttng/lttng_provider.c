/*
 * lttng_provider.c - libstackwatch_lttng.so (lttng_provider.h): the tracepoint provider
 * "stackwatch" and the functions the tracer calls through dlsym. A
 * tracepoint no LTTng session has enabled costs a load and a branch.
 */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "lttng/lttng_provider.h"
#include "lttng/lttng_tracepoints.h"

#define SW_LTTNG_EXPORT __attribute__((visibility("default")))

SW_LTTNG_EXPORT void stackwatch_lttng_function_entry(const char *function, const char *file, int line)
{
    lttng_ust_tracepoint(stackwatch, function_entry, function, file, line);
}

SW_LTTNG_EXPORT void stackwatch_lttng_function_exit(const char *function, const char *file, int line)
{
    lttng_ust_tracepoint(stackwatch, function_exit, function, file, line);
}

SW_LTTNG_EXPORT void stackwatch_lttng_native(int exit, const char *function, const char *file, int line, uintptr_t addr)
{
    if (exit)
        lttng_ust_tracepoint(stackwatch, native_exit, function, file, line, addr);
    else
        lttng_ust_tracepoint(stackwatch, native_entry, function, file, line, addr);
}

#define SW_LTTNG_TASK_ENUM_(name) SW_LTTNG_TASK_##name,
enum { SW_LTTNG_TASKS(SW_LTTNG_TASK_ENUM_) };

SW_LTTNG_EXPORT void stackwatch_lttng_task(int task, const char *function, const char *file, int line, int64_t a,
                                           int64_t b, int64_t c, const char *s1, const char *s2)
{
    switch (task) {
#define SW_LTTNG_TASK_CASE_(name)                                                                     \
    case SW_LTTNG_TASK_##name:                                                                       \
        lttng_ust_tracepoint(stackwatch, name, function, file, line, a, b, c, s1, s2);               \
        break;
        SW_LTTNG_TASKS(SW_LTTNG_TASK_CASE_)
#undef SW_LTTNG_TASK_CASE_
    default:
        break;
    }
}
