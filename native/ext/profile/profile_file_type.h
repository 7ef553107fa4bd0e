/*
 * profile_file_type.h - profile files (.swprof, native/profile/
 * profile_file.h) from Python: the type stackwatch._native.ProfileFile (a
 * file read back: its info, threads, history and windows), read_profile(),
 * is_profile(), and the bytes of a running profile's file. Includes
 * Python.h.
 */
#ifndef SW_PROFILE_FILE_TYPE_H
#define SW_PROFILE_FILE_TYPE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "profile/profile.h"

/* Adds ProfileFile, read_profile and is_profile to the module. Returns 0,
 * or -1 with an exception. */
int sw_profile_file_type_add_to_module(PyObject *m);

/* Sampler.save_bytes(info, threads) -> bytes of the profile file of p (its
 * history, under its lock): info a dict with "mode", "interval_ns",
 * "cycle_ns", "maxlen", "start_ns", "stop_ns", "failed", "missed"; threads
 * a list of dicts as Profiler.threads() gives (thread_id, native_id, name,
 * samples, off_cpu, cpu_ns). p NULL: RuntimeError (not started). */
PyObject *sw_py_profile_file_bytes(sw_profile *p, PyObject *args, PyObject *kw);

#endif
