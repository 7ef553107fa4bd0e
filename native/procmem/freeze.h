/*
 * freeze.h - every thread of a live process stopped where it is, and let
 * go again: PTRACE_SEIZE and PTRACE_INTERRUPT on each task (no signal is
 * sent, so the target's signal handlers and its wait status never see
 * it), then PTRACE_DETACH. While frozen, nothing in the target runs, so a
 * write into its memory (pending.h) cannot race with its own threads.
 * The thread that freezes must be the one that thaws (ptrace's rule).
 *
 * A thread asleep in the kernel uninterruptibly after the interrupt
 * (state D: I/O on a stuck file system, a parent waiting for its vfork
 * child) is waited for SW_FREEZE_WAIT_NS at most, every wait bounded
 * (freeze.c wait_stop says how); if its stop does not come, the freeze
 * fails with SW_ESTATE, every thread stopped so far let go. That thread
 * stays seized, its stop pending (a tracee that is not stopped cannot be
 * detached): the freezing thread's next sw_thaw lets it go once it has
 * stopped, a later freeze fails at once while it has not, and the
 * kernel lets it go if the freezing thread ends first.
 */
#ifndef SW_FREEZE_H
#define SW_FREEZE_H

#include "base/base.h"

#include <signal.h>

/* How long a freeze waits for one thread's stop. A stop takes 0.13-0.35
 * ms here, up to 26 ms at load 20-30. */
#define SW_FREEZE_WAIT_NS 200000000ull

/* The signal a timer sends the freezing thread to end a wait for a stop
 * at that bound (freeze.c wait_timed); its action is set to a no-op the
 * first time, if it was at its default (else threads are polled). */
#define SW_FREEZE_SIGNAL (SIGRTMAX - 4)

typedef struct sw_frozen {
    int pid;
    int n, cap;
    int *tids;       /* the tasks seized, each stopped */
    int *sigs;       /* each one's signal held by its stop (0: none), given back at the thaw */
    int ended;       /* threads found ended, not stopped (zombies: they run nothing more) */
} sw_frozen;

/* Stops every thread of pid, including threads started meanwhile, but
 * not those that have ended (zombies: a main thread ended before the
 * others; they run nothing). Returns 0; or, having thawed what it
 * stopped, SW_EIO with err (permission: what grants it, or the tracer
 * that has it already; every thread ended: the process is exiting), or
 * SW_ESTATE with err if a thread did not stop in time. */
int sw_freeze(sw_frozen *f, int pid, char *err, size_t errlen);

/* Stops the one thread tid of process pid (the remote unwinder's
 * blocking sample, unwind.h). Returns 0 with f holding it; SW_EARG if the
 * thread is gone (err set if it has ended but not yet gone: a zombie); SW_EIO with err if it cannot be stopped (permission:
 * what grants it; already traced); SW_ESTATE with err if it did not stop
 * in time. Thawed with sw_thaw either way. */
int sw_freeze_thread(sw_frozen *f, int pid, int tid, char *err, size_t errlen);

/* Lets every frozen thread go on and frees f; and the late threads of
 * this thread's earlier freezes that have stopped since. */
void sw_thaw(sw_frozen *f);

/* sw_freeze_thread and sw_thaw on a thread of its own, which ends before
 * this returns: whether tid can be stopped, leaving nothing seized even if
 * it does not stop in time (the kernel lets a tracer's tracees go when it
 * ends). Returns sw_freeze_thread's code. */
int sw_freeze_check(int pid, int tid, char *err, size_t errlen);

/* How many threads this thread seized are still to stop (tests). */
int sw_freeze_late(void);

/* Tests: fn(tid) is called between each thread's seize and its interrupt
 * (NULL: nothing). */
void sw_freeze_set_seize_hook(void (*fn)(int tid));

#endif
