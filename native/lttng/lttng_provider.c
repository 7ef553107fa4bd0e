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

SW_LTTNG_EXPORT void stackwatch_lttng_kernel(int kind, uint32_t tid, uint64_t ts, uint32_t cpu, int64_t a, int64_t b,
                                             int64_t c, const char *s1, const char *s2)
{
    switch (kind) {
    case SW_LTTNG_SYSCALL_ENTRY:
        lttng_ust_tracepoint(stackwatch, syscall_entry, tid, ts, a, s1);
        break;
    case SW_LTTNG_SYSCALL_EXIT:
        lttng_ust_tracepoint(stackwatch, syscall_exit, tid, ts, a, s1, b);
        break;
    case SW_LTTNG_OFF_CPU:
        lttng_ust_tracepoint(stackwatch, off_cpu, tid, ts, cpu, s1, a, b, s2);
        break;
    case SW_LTTNG_ON_CPU:
        lttng_ust_tracepoint(stackwatch, on_cpu, tid, ts, cpu, a, b, c, s1);
        break;
    case SW_LTTNG_WAKEUP:
        lttng_ust_tracepoint(stackwatch, wakeup, tid, ts, cpu, a, s1);
        break;
    case SW_LTTNG_PAGE_FAULT:
        lttng_ust_tracepoint(stackwatch, page_fault, tid, ts, cpu, (uint64_t)a);
        break;
    default:
        break;
    }
}
