/*
 * sampler_layout.h - the sw_py_layout of the CPython this extension is
 * compiled for, filled with offsetof() from its headers (some internal,
 * hence a translation unit of its own: sampler_layout.c includes them with
 * Py_BUILD_CORE defined before Python.h, which no other file wants).
 */
#ifndef SW_SAMPLER_LAYOUT_H
#define SW_SAMPLER_LAYOUT_H

#include "procmem/procmem.h"

/* Fills l for the running interpreter's version. Never fails; the result
 * still goes through sw_layout_validate when a reader is made. */
void sw_sampler_layout_fill(sw_py_layout *l);

/* Where glibc's struct pthread (what pthread_self() points to) holds the
 * thread's kernel tid, found once in this process, or SW_NO_OFFSET: for
 * layouts of versions whose thread states have no native thread id (before
 * 3.11), read by a process on the same machine. Call with the GIL held. */
uint32_t sw_sampler_thread_tid_offset(void);

/* 3.13: the addresses in this process of interp's counter of code objects
 * made and of the count of interpreters made (sw_pystack_set_code_counter);
 * 3.12: the address of its counter (a global libpython does not export,
 * found among its data by making a few code objects: each takes its
 * version from it, *interps 0). Call with the GIL held. SW_EARG on other
 * versions, or if not found. */
int sw_sampler_code_counter(void *interp, uint64_t *counter, uint64_t *interps);

#endif
