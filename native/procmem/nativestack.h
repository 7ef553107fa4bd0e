/*
 * nativestack.h - stopping another thread of this process for an instant
 * (Linux x86-64, in-process only): to capture its native (C) stack, for
 * the profiler's native mode, or only to park it, so that its Python stack
 * can be read while it cannot change (the in-process sampler redoes a torn
 * walk so: pystack.c "Torn stacks").
 *
 * The sampler thread sends the target thread a real-time signal
 * (rt_tgsigqueueinfo, carrying a request number); for a capture the
 * handler unwinds its own stack with backtrace() (libgcc's .eh_frame
 * unwinder: CPython builds without frame pointers unwind too) and stores
 * the return addresses in the one request slot; then, for either kind of
 * request, it waits, parked in the handler, until the sampler has read the
 * thread's Python stack and releases it, so that what is read is of one
 * instant. Both sides spin for a few tens of microseconds before they
 * sleep on a futex (the sampler only for a park, where the thread was
 * just running): a sleep's wake-up on a busy machine cost a park 6-12
 * times its time. The handler never waits longer than SW_NSTACK_PARK_MAX_NS,
 * never allocates, and is installed with SA_RESTART, so system calls the
 * signal interrupts are restarted (or, for sleeps and waits, retried by
 * CPython after EINTR). A signal that is not the sampler's current
 * request (a late one, after a timeout) is recognised by its request
 * number and ignored; a signal of the same number from anyone else goes
 * to the handler that was installed before.
 *
 * A read request (sw_nstack_read) asks the thread instead to make one
 * read of its own memory in the handler and to go on at once, not parked.
 *
 * While a thread is parked it may hold any lock of the process (malloc's,
 * the GIL): the sampler then only reads memory (system calls) until it
 * releases it.
 *
 * One request at a time, process-wide: a request holds a lock from the
 * signal until the release, so several samplers (any number parking, at
 * most one in native mode) take turns.
 */
#ifndef SW_NATIVESTACK_H
#define SW_NATIVESTACK_H

#include "base/base.h"
#include "mem.h"

#define SW_NSTACK_MAX 256                        /* return addresses kept per capture (leaf-most) */
#define SW_NSTACK_PARK_MAX_NS 50000000ull        /* a parked thread goes on after 50 ms regardless */
#define SW_NSTACK_WAIT_NS 20000000ull            /* the sampler waits 20 ms for a thread to answer */

/* 1 if native stacks can be captured on this platform (Linux x86-64 with
 * backtrace()), else 0 with the reason in err. */
int sw_nstack_supported(char *err, size_t errlen);

/* Installs the signal handler (on first use: later calls count users).
 * Returns 0, SW_ESTATE if another sampler uses it already, or SW_EIO with
 * the reason in err. In a child forked while a sampler of the parent used
 * it, that user is gone: the child's first install takes over. */
int sw_nstack_install(char *err, size_t errlen);

/* Undoes sw_nstack_install once no signal sent can still arrive; if one
 * could (a thread that never answered), the handler stays installed: it
 * ignores such signals instead of letting their default action end the
 * process. */
void sw_nstack_uninstall(void);

/* The signal number used (SIGRTMAX - 3). */
int sw_nstack_signal(void);

/* Asks thread `tid` (of this process) for its native stack and waits until
 * it is parked in the handler with it. On success returns the number of
 * return addresses (leaf first; pcs[0] is the interrupted instruction
 * itself), copied to pcs (at most SW_NSTACK_MAX; *truncated is 1 if the
 * stack was deeper), and the thread stays parked until
 * sw_nstack_release(). Returns SW_ESTATE if the thread did not answer in
 * time (it blocks the signal, or is stuck), another negative SW_E* code if
 * it could not be asked (it has exited); then nothing is to be released. */
int sw_nstack_capture(int tid, uint64_t *pcs, int *truncated);

/* 1 if thread tid of this process blocks the capture signal and has it
 * pending (from /proc/self/task/TID/status), else 0: a thread inside the
 * handler (late to answer), whose mask blocks the signal it took, is 0. */
int sw_nstack_blocked(int tid);

/* Parking only (any number of users): installs the handler like
 * sw_nstack_install, without the native capturer's exclusivity. */
int sw_nstack_park_install(char *err, size_t errlen);
void sw_nstack_park_uninstall(void);

/* Asks thread `tid` (of this process) to park, and waits up to wait_ns
 * until it is. SW_OK: the thread stays parked until sw_nstack_release().
 * SW_ESTATE if it did not answer in time, another negative SW_E* code if it
 * could not be asked (it has exited); then nothing is to be released. */
int sw_nstack_park(int tid, uint64_t wait_ns);

/* Asks thread `tid` (of this process) to make one read of its own memory
 * in the handler, process_vm_readv of the iovecs given (mem.h
 * sw_mem_plan_make), and to go on at once, not parked: what is read is of
 * the instant it took the signal, and the thread spends only the call
 * there (a park holds it for the sampler's walk). Waits up to wait_ns for
 * the answer. Returns what the call returned (bytes read; 0 if it
 * failed), or SW_ESTATE if the thread did not answer in time, another
 * negative SW_E* code if it could not be asked. */
long sw_nstack_read(int tid, const sw_mem_iov *iov, uint64_t wait_ns);

/* 1 if thread tid of this process runs under a seccomp mode or filter
 * (from /proc/self/task/TID/status), 0 if not, -1 if that cannot be told
 * now (the file not read): a filter may forbid the system call of
 * sw_nstack_read, and end the thread for it. */
int sw_nstack_seccomp(int tid);

/* 1 if the signal's handler in place is this module's (the program may
 * have put its own there since: Python's signal.signal), else 0. */
int sw_nstack_handler_current(void);

/* Lets the parked thread (of a capture or a park) go on. Returns 1 if it
 * was still parked (what was read meanwhile is of one instant), 0 if it
 * had gone on already (it waited longer than SW_NSTACK_PARK_MAX_NS: what
 * was read may be torn). */
int sw_nstack_release(void);

/* Counters: signals sent, captures that timed out, late signals ignored. */
typedef struct sw_nstack_stats {
    uint64_t sent, timeouts, late;
} sw_nstack_stats;
void sw_nstack_get_stats(sw_nstack_stats *out);

#endif
