/*
 * kernel_trace.h - the kernel's events of the traced process written into
 * the session's trace (stackwatch run --kernel): a borrower of the
 * session's writer, like the sampler (sampler_trace.h). The kernel reader
 * (native/kernel) runs a thread of its own; its system calls become
 * SYSCALL records, its lost records KERNEL_LOST records, of a
 * THREAD_RECORDS side stream (trace/thread_records.h), on the trace's
 * clock (CLOCK_MONOTONIC minus mono0_ns, the trace's calibration).
 *
 * Order: started by the session once its writer is open; stopped when the
 * session stops, before the writer closes (its last records and its
 * counts, END keys kernel.*, go in first). Called with the GIL.
 */
#ifndef SW_KERNEL_TRACE_H
#define SW_KERNEL_TRACE_H

#include "trace/trace.h"

/* Starts recording `what` ("syscalls") into writer w. Returns 0, or -1
 * with one line in msg saying what is missing (nothing is recorded then;
 * the session goes on). A note (tracefs mounted) may be left in msg on
 * success too. */
int sw_kernel_trace_start(sw_writer *w, uint64_t mono0_ns, const char *what, char *msg, size_t len);
/* Stops the reader, writes its last records and adds its counts to kv
 * (END keys). Nothing when it was not started. */
void sw_kernel_trace_stop(sw_bytes *kv);
/* In a fork child: forgets the parent's reader (its thread is not here). */
void sw_kernel_trace_forget(void);

#endif
