/*
 * freeze.h - every thread of a live process stopped where it is, and let
 * go again: PTRACE_SEIZE and PTRACE_INTERRUPT on each task (no signal is
 * sent, so the target's signal handlers and its wait status never see
 * it), then PTRACE_DETACH. While frozen, nothing in the target runs, so a
 * write into its memory (pending.h) cannot race with its own threads.
 * The thread that freezes must be the one that thaws (ptrace's rule).
 */
#ifndef SW_FREEZE_H
#define SW_FREEZE_H

#include "base/base.h"

typedef struct sw_frozen {
    int pid;
    int n, cap;
    int *tids;       /* the tasks seized, each stopped */
} sw_frozen;

/* Stops every thread of pid, including threads started meanwhile. Returns
 * 0; or, having thawed what it stopped, SW_EIO with err (permission: what
 * grants it). */
int sw_freeze(sw_frozen *f, int pid, char *err, size_t errlen);

/* Stops the one thread tid of process pid (the remote unwinder's
 * blocking sample, unwind.h). Returns 0 with f holding it; SW_EARG if the
 * thread is gone; SW_EIO with err if it cannot be stopped (permission:
 * what grants it; already traced). Thawed with sw_thaw either way. */
int sw_freeze_thread(sw_frozen *f, int pid, int tid, char *err, size_t errlen);

/* Lets every frozen thread go on and frees f. */
void sw_thaw(sw_frozen *f);

#endif
