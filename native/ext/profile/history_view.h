/*
 * history_view.h - call trees over time (native/profile/history.h) seen
 * from Python: the entries of a history and the merged tree of a time
 * window, of a running profile or of a profile file; and a Sampler's
 * history options, given before it starts. Includes Python.h.
 *
 * Work on a running profile's history is done under the profile's lock
 * without the GIL (the sampler thread never needs the GIL, so it cannot
 * deadlock).
 */
#ifndef SW_HISTORY_VIEW_H
#define SW_HISTORY_VIEW_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "profile/profile.h"

/* {"entries": [{"start_ns", "end_ns", "samples", "threads": [id]}],
 * "evicted": n, "evicted_samples": n, "dropped": n} of history h (NULL: an
 * empty one); dropped counts the samples not in the history. The caller
 * holds the lock of h's profile, if any. NULL with an exception. */
PyObject *sw_py_history_entries(const sw_history *h, unsigned long long dropped);

/* window(start_ns, stop_ns, thread_id=None) -> CallTree: the merged tree of
 * the entries of h (NULL: none) overlapping the window, of one thread or
 * all (thread_id None). lock: the profile h belongs to, locked while
 * merging; NULL for a history nobody else changes (a file's). */
PyObject *sw_py_history_window(const sw_history *h, sw_profile *lock, PyObject *args, PyObject *kw);

/* History options of a Sampler, given before it starts (set_history). */
typedef struct sw_history_opts {
    long long cycle_ns;          /* 0: no history */
    unsigned long long maxlen;   /* 0: unbounded */
    char **omit;                 /* globs */
    size_t nomit;
} sw_history_opts;

/* Sampler.set_history(cycle_ns, maxlen, omit=()): fills *o (freeing what
 * it held). Returns 0, or -1 with an exception. */
int sw_history_opts_parse(sw_history_opts *o, PyObject *args, PyObject *kw);
void sw_history_opts_clear(sw_history_opts *o);
/* Applies *o to a new profile at start (the cycles start now). Returns an
 * SW_E* code. */
int sw_history_opts_apply(const sw_history_opts *o, sw_profile *p);
/* Ends the open cycle now (when sampling stops). p may be NULL. */
void sw_history_stopped(sw_profile *p);

#endif
