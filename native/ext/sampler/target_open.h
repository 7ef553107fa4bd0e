/*
 * target_open.h - another Python process opened for reading, with the
 * layout of its release bound to it: the one way `dump` (dump_process.c)
 * and the sampler pointed at a pid (sampler.c, `record --pid`, `top`)
 * get there, and the one place that turns a refusal into a Python
 * exception with its one sentence.
 *
 * The layout is this extension's own for its own release, a generated one
 * for a known release (procmem/layouts_known.h), or for another 3.13
 * release the target's _Py_DebugOffsets (procmem/debug_offsets.h);
 * source "debug_offsets" forces the last for a 3.13 target (for the
 * tests). Support is decided by the target's release, not this one's.
 * Includes Python.h.
 */
#ifndef SW_TARGET_OPEN_H
#define SW_TARGET_OPEN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "procmem/procmem.h"

/* Opens process pid and binds the layout of its release: fills *t (open:
 * the caller closes it), *l, *interp (its main interpreter) and *used
 * ("own", "generated" or "debug_offsets"). Returns 0, or -1 with a Python
 * exception set: ProcessLookupError (no such process), PermissionError
 * (with what grants it), ValueError (not a Python process, a release that
 * cannot be read, this very process) or RuntimeError. Releases the GIL
 * while it reads /proc. */
int sw_target_open_bound(int pid, const char *source, sw_target *t, sw_py_layout *l, uint64_t *interp,
                         const char **used);

/* The same for the process of the core file at core (exe: NULL or the
 * python executable that ran; procmem/coremem.h). A file that is not a
 * core, or a core whose interpreter files are not here: ValueError. */
int sw_target_open_core_bound(const char *core, const char *exe, const char *source, sw_target *t, sw_py_layout *l,
                              uint64_t *interp, const char **used);

/* The exception for a refusal of kind why with message msg; returns NULL. */
PyObject *sw_target_raise(sw_target_why why, const char *msg);

#endif
