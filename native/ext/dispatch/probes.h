/*
 * probes.h - the USDT probes (provider "stackwatch") as consumers of the
 * dispatch layer's events: delivery, which events the attached probes
 * want, and the Python functions of the semaphore watcher. GIL held.
 */
#ifndef SW_PROBES_H
#define SW_PROBES_H

#include "ext/dispatch/dispatch.h"

/* Fires the probe of `kind`, if a tool is attached to it. Never raises. */
void sw_probes_emit(int kind, const sw_evdata *d);

/* The events whose probes are attached now (read from the semaphores). */
uint32_t sw_probes_poll(void);

/* Adds PROBE_NAMES, PROBES_AVAILABLE and the watcher's functions to the
 * module. Returns 0, or -1 with an exception set. */
int sw_probes_add_to_module(PyObject *m);

#endif
