/*
 * globs.h - lists of fnmatch patterns copied out of Python sequences: the
 * session's include/exclude, handlers' `where`, the file tracer's line
 * filter. A list is a NULL-terminated array of plain C strings (PyMem_Raw),
 * so it can be matched without touching Python objects.
 */
#ifndef SW_GLOBS_H
#define SW_GLOBS_H

#include "ext/shared/compat.h"

#include "base/base.h"

/* Copies a sequence of str into *out: NULL for None (or NULL) and for an
 * empty sequence. Returns 0, or -1 with an exception naming `what`. */
int sw_globs_copy(PyObject *seq, const char *what, char ***out);

/* Frees a list (NULL is fine). */
void sw_globs_free(char **g);

/* Matching them: sw_globs_match() and sw_glob_match() of base/glob.h. */

#endif
