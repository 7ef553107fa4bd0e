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

#include "lttng/lttng_provider.h"

#include <lttng/tracepoint.h>
#include <stdint.h>

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

/* A native function (-finstrument-functions): the Python frames' fields,
 * then its address (lttng_ust_cyg_profile's `addr`). */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(stackwatch, native,
    LTTNG_UST_TP_ARGS(const char *, function, const char *, file, int, line, uintptr_t, addr),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_string(function, function)
        lttng_ust_field_string(file, file)
        lttng_ust_field_integer(int, line, line)
        lttng_ust_field_integer_hex(uintptr_t, addr, addr)))

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(stackwatch, native, stackwatch, native_entry,
    LTTNG_UST_TP_ARGS(const char *, function, const char *, file, int, line, uintptr_t, addr))

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(stackwatch, native, stackwatch, native_exit,
    LTTNG_UST_TP_ARGS(const char *, function, const char *, file, int, line, uintptr_t, addr))

/* A task event: where it happened (function, file, line: "", "", -1 when
 * nowhere), then its record's fields (records.h, by kind: a, b, c the
 * numbers, s1, s2 the strings). */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(stackwatch, task,
    LTTNG_UST_TP_ARGS(const char *, function, const char *, file, int, line, int64_t, a, int64_t, b, int64_t, c,
                      const char *, s1, const char *, s2),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_string(function, function)
        lttng_ust_field_string(file, file)
        lttng_ust_field_integer(int, line, line)
        lttng_ust_field_integer(int64_t, a, a)
        lttng_ust_field_integer(int64_t, b, b)
        lttng_ust_field_integer(int64_t, c, c)
        lttng_ust_field_string(s1, s1)
        lttng_ust_field_string(s2, s2)))

#define SW_LTTNG_TASK_(name)                                                                              \
    LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(stackwatch, task, stackwatch, name,                               \
        LTTNG_UST_TP_ARGS(const char *, function, const char *, file, int, line, int64_t, a, int64_t, b, \
                          int64_t, c, const char *, s1, const char *, s2))
SW_LTTNG_TASKS(SW_LTTNG_TASK_)

/* The kernel events of `--kernel` (lttng_provider.h): the thread they are
 * about and their own time first. */
#define SW_LTTNG_KERNEL_HEAD_ lttng_ust_field_integer(int32_t, tid, tid) lttng_ust_field_integer(uint64_t, ts, ts)

LTTNG_UST_TRACEPOINT_EVENT(stackwatch, syscall_entry,
    LTTNG_UST_TP_ARGS(uint32_t, tid, uint64_t, ts, int64_t, id, const char *, name),
    LTTNG_UST_TP_FIELDS(SW_LTTNG_KERNEL_HEAD_
        lttng_ust_field_integer(int64_t, id, id)
        lttng_ust_field_string(name, name)))

LTTNG_UST_TRACEPOINT_EVENT(stackwatch, syscall_exit,
    LTTNG_UST_TP_ARGS(uint32_t, tid, uint64_t, ts, int64_t, id, const char *, name, int64_t, ret),
    LTTNG_UST_TP_FIELDS(SW_LTTNG_KERNEL_HEAD_
        lttng_ust_field_integer(int64_t, id, id)
        lttng_ust_field_string(name, name)
        lttng_ust_field_integer(int64_t, ret, ret)))

LTTNG_UST_TRACEPOINT_EVENT(stackwatch, off_cpu,
    LTTNG_UST_TP_ARGS(uint32_t, tid, uint64_t, ts, uint32_t, cpu, const char *, reason, int64_t, state,
                      int64_t, next_tid, const char *, next_comm),
    LTTNG_UST_TP_FIELDS(SW_LTTNG_KERNEL_HEAD_
        lttng_ust_field_integer(uint32_t, cpu, cpu)
        lttng_ust_field_string(reason, reason)
        lttng_ust_field_integer(int64_t, state, state)
        lttng_ust_field_integer(int32_t, next_tid, next_tid)
        lttng_ust_field_string(next_comm, next_comm)))

LTTNG_UST_TRACEPOINT_EVENT(stackwatch, on_cpu,
    LTTNG_UST_TP_ARGS(uint32_t, tid, uint64_t, ts, uint32_t, cpu, int64_t, waker, int64_t, woken_ns,
                      int64_t, prev_tid, const char *, prev_comm),
    LTTNG_UST_TP_FIELDS(SW_LTTNG_KERNEL_HEAD_
        lttng_ust_field_integer(uint32_t, cpu, cpu)
        lttng_ust_field_integer(int32_t, waker, waker)
        lttng_ust_field_integer(uint64_t, woken_ns, woken_ns)
        lttng_ust_field_integer(int32_t, prev_tid, prev_tid)
        lttng_ust_field_string(prev_comm, prev_comm)))

LTTNG_UST_TRACEPOINT_EVENT(stackwatch, wakeup,
    LTTNG_UST_TP_ARGS(uint32_t, tid, uint64_t, ts, uint32_t, cpu, int64_t, wakee, const char *, comm),
    LTTNG_UST_TP_FIELDS(SW_LTTNG_KERNEL_HEAD_
        lttng_ust_field_integer(uint32_t, cpu, cpu)
        lttng_ust_field_integer(int32_t, wakee, wakee)
        lttng_ust_field_string(comm, comm)))

LTTNG_UST_TRACEPOINT_EVENT(stackwatch, page_fault,
    LTTNG_UST_TP_ARGS(uint32_t, tid, uint64_t, ts, uint32_t, cpu, uint64_t, address),
    LTTNG_UST_TP_FIELDS(SW_LTTNG_KERNEL_HEAD_
        lttng_ust_field_integer(uint32_t, cpu, cpu)
        lttng_ust_field_integer_hex(uint64_t, address, address)))

#endif

#include <lttng/tracepoint-event.h>
