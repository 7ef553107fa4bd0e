/*
 * sampler.h - the sampler's room of the extension (reading the stacks of
 * processes): the type stackwatch._native.Sampler (sampler.c), and the
 * registration of every type and function of the room (dump_process,
 * pending_call, the test entry points) into the module. The types of what
 * it produces (CallTree, ProfileFile, render_trees) are the profile types'
 * room, native/ext/profile/. Includes Python.h.
 */
#ifndef SW_SAMPLER_H
#define SW_SAMPLER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Adds Sampler and the rest of the room to the module (module.c calls it).
 * Returns 0, or -1 with an exception. */
int sw_sampler_add_to_module(PyObject *m);

#endif
