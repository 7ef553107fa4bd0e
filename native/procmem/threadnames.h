/*
 * threadnames.h - Python's names of a target's threads (Thread.name), read
 * from its memory without running code there: sys.modules["threading"],
 * its _active dict (thread ident -> Thread) and each Thread's _name.
 * 3.9-3.13 (pyobj.h; 3.9/3.10 with the dict fields of their generated
 * asyncio tables bound in); a thread whose name cannot be read is left out.
 */
#ifndef SW_THREADNAMES_H
#define SW_THREADNAMES_H

#include "layout.h"
#include "mem.h"

#define SW_THREADNAME_MAX 256   /* bytes kept of a name (UTF-8, cut at a character) */

typedef struct sw_threadname {
    uint64_t ident;               /* threading.get_ident() of the thread */
    char name[SW_THREADNAME_MAX];
} sw_threadname;

/* Fills out (room for max) with the names of the threads of the
 * interpreter at interp; *n receives how many. Returns 0, or a negative
 * SW_E* code (layout not usable, threading not imported, memory
 * unreadable) with err. */
int sw_threadnames_read(sw_mem *m, const sw_py_layout *l, uint64_t interp, sw_threadname *out, size_t max,
                        size_t *n, char *err, size_t errlen);

#endif
