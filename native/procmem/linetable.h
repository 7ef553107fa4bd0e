/*
 * linetable.h - a code object's line table, decoded: which source line
 * each bytecode offset belongs to. Plain bytes in, no Python.h, no memory
 * reads: the caller (codecache.c) copies the table out of the target.
 *
 * Three encodings, by CPython version (see CPython's Objects/lnotab_notes.txt
 * and InternalDocs/locations.md):
 *   SW_LINETABLE_LNOTAB   3.9   co_lnotab: pairs (unsigned byte offset
 *                               increment, signed line increment); a line
 *                               applies from the offset reached onwards
 *   SW_LINETABLE_PAIRS    3.10  co_linetable: pairs (unsigned byte length of
 *                               a range, signed line delta, -128 = no line)
 *   SW_LINETABLE_LOCATIONS 3.11+ co_linetable: location entries (a first
 *                               byte 1CCCCLLL: code, length-1 in code units;
 *                               then varints for lines and columns)
 * The decoded form is one list for all three: ranges in bytecode bytes,
 * each with its line (-1: no line), looked up by binary search.
 */
#ifndef SW_LINETABLE_H
#define SW_LINETABLE_H

#include "base/base.h"

#include <stddef.h>

#define SW_LINETABLE_NONE 0
#define SW_LINETABLE_LNOTAB 1
#define SW_LINETABLE_PAIRS 2
#define SW_LINETABLE_LOCATIONS 3

/* Most bytes of a table the decoder accepts (a bigger one is not decoded). */
#define SW_LINETABLE_MAX_BYTES (1u << 20)

typedef struct sw_linerange {
    uint32_t start;          /* first bytecode byte offset of the range */
    int32_t line;            /* its line, or -1 */
} sw_linerange;

typedef struct sw_linetable {
    sw_linerange *r;         /* sorted by start, starts distinct */
    uint32_t n;
    uint32_t end;            /* offsets >= end have no line (UINT32_MAX: open-ended) */
} sw_linetable;

/* Decodes `len` bytes of a table of `kind` for a code object whose first
 * line is firstlineno into *out (which the caller frees with
 * sw_linetable_free). Returns 0, SW_EARG for an unknown kind or a table
 * over SW_LINETABLE_MAX_BYTES, SW_EFORMAT for a truncated 3.11+ entry, or
 * SW_ENOMEM. A damaged table decodes to wrong lines, never to a read
 * outside `tab`. */
int sw_linetable_decode(int kind, const unsigned char *tab, size_t len, int32_t firstlineno, sw_linetable *out);

/* The line of the instruction at byte offset `offset`, or -1 if none. */
int32_t sw_linetable_line(const sw_linetable *t, uint32_t offset);

void sw_linetable_free(sw_linetable *t);

#endif
