/*
 * kernel_trace.h - the kernel's events of the traced process written into
 * the session's trace (stackwatch run --kernel): an attachment of the
 * session (attachments.h), like the sampler. The kernel reader
 * (native/kernel) runs a thread of its own; its system calls become
 * SYSCALL records, its switches OFF_CPU / ON_CPU, its wakeups WAKEUP,
 * its page faults PAGE_FAULT records, its lost records KERNEL_LOST records, of a
 * THREAD_RECORDS stream (trace/thread_records.h), on the trace's clock
 * (CLOCK_MONOTONIC minus mono0_ns: the trace's calibration).
 *
 * Order (with the GIL): started right after the session (trace_api.c
 * start); detached by the session when it stops, before END: the reader
 * stops, its last records are written and its counts kept for
 * sw_kernel_trace_end_keys, which the session adds to END.
 */
#ifndef SW_KERNEL_TRACE_H
#define SW_KERNEL_TRACE_H

#include "trace/trace.h"

/* Starts recording `what` (a comma-separated list of "syscalls",
 * "sched", "faults") into the running session. Returns
 * 0 (msg: "" or "note: ..." to say, e.g. that tracefs was mounted), or -1
 * with one line in msg saying what is missing (nothing is recorded then;
 * the session goes on). */
int sw_kernel_trace_start(const char *what, char *msg, size_t len);
/* Adds the counts of the reader detached last (END keys kernel.*) to kv,
 * once, and sets *calls and *lost (system calls written, kernel records
 * lost); returns 0 when no reader ran in this session (nothing added). */
int sw_kernel_trace_end_keys(sw_bytes *kv, uint64_t *calls, uint64_t *lost);

#endif
