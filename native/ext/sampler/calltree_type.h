/*
 * calltree_type.h - the Python side of call trees over time: the types
 * stackwatch._native.CallTree (one call tree with its own function table)
 * and stackwatch._native.ProfileFile (a profile file read back,
 * native/profile/profile_file.h), and the helpers sampler.c uses to expose its
 * profile's history (native/profile/history.h). Includes Python.h.
 */
#ifndef SW_CALLTREE_TYPE_H
#define SW_CALLTREE_TYPE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "profile/aggregate.h"

/* Registers CallTree, ProfileFile, read_profile and render_trees. */
int sw_calltree_type_add_to_module(PyObject *m);

/* A call tree as nested dicts (sampler.c). */
PyObject *tree_to_dicts(const sw_calltree *t);

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
/* Ends the open cycle now (when sampling stops). */
void sw_history_stopped(sw_profile *p);

/* Sampler.history() -> {"entries": [{"start_ns", "end_ns", "samples",
 * "threads": [id]}], "evicted": n, "evicted_samples": n, "dropped": n}
 * (entries and samples no longer kept; samples not in the history) */
PyObject *sw_py_history_entries(sw_profile *p);
/* Sampler.window(start_ns, stop_ns, thread_id=None) -> CallTree */
PyObject *sw_py_history_window(sw_profile *p, PyObject *args, PyObject *kw);
/* Sampler.save_bytes(info, threads) -> bytes of a profile file: info a dict
 * with "mode", "interval_ns", "cycle_ns", "maxlen", "start_ns", "stop_ns",
 * "failed", "missed"; threads a list of dicts as Profiler.threads() gives
 * (thread_id, native_id, name, samples, off_cpu, cpu_ns). */
PyObject *sw_py_profile_file_bytes(sw_profile *p, PyObject *args, PyObject *kw);

#endif
