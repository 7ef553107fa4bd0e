/*
 * layout_facts.h - a layout checked against what the target itself says
 * of its build, so that a build the layout does not describe (a debug or
 * free-threaded build of a known release, another patch release that
 * moved a field) is refused naming what differs, never read wrong.
 *
 * The facts: marks of a build kind that changes object layouts (symbols
 * only such builds define: Py_REF_DEBUG's _Py_NegativeRefcount,
 * Py_TRACE_REFS's _Py_PrintReferences, Py_GIL_DISABLED's
 * _Py_MergeZeroLocalRefcount), and the instance sizes of the target's own
 * static type objects (tp_basicsize of int, float, tuple, bytes, str,
 * cell, and frame (3.9/3.10) or code (3.11+)), each of which the layout
 * implies through the offset of a field its reader uses; each type
 * object's type must be PyType_Type at the layout's ob_type. A fact that
 * cannot be read (no such symbol, memory absent from a core) is skipped.
 */
#ifndef SW_LAYOUT_FACTS_H
#define SW_LAYOUT_FACTS_H

#include "layout.h"
#include "mem.h"

/* The address of the interpreter's symbol name in the target: 0 and
 * *addr, or nonzero if it has none (target.h: sw_target_symbol). */
typedef int (*sw_symbol_fn)(const void *ud, const char *name, uint64_t *addr);

/* Checks layout l against the target read through m and its symbols.
 * Returns 0 (*checked: how many facts were read and agree), or
 * SW_EVERSION with every difference found in err ("PyFloat_Type.tp_basicsize
 * is 40, the layout says 24 (float value at 16)"; "a debug build
 * (_Py_NegativeRefcount: Py_REF_DEBUG)"), joined by "; ". */
int sw_layout_check_facts(sw_mem *m, const sw_py_layout *l, sw_symbol_fn symbol, const void *ud,
                          unsigned *checked, char *err, size_t errlen);

#endif
