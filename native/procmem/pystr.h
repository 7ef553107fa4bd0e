/*
 * pystr.h - reading a Python str object (PEP 393 layout) from memory and
 * turning it into UTF-8, with every length bounded.
 */
#ifndef SW_PYSTR_H
#define SW_PYSTR_H

#include "layout.h"
#include "mem.h"

/* Longest string read, in code points; longer ones are cut and end with
 * "...". */
#define SW_STR_MAX_CHARS 1024u
/* Size of an output buffer that always suffices. */
#define SW_STR_BUF (SW_STR_MAX_CHARS * 4u + 8u)

/* Reads the str at addr into out (NUL-terminated UTF-8; lone surrogates
 * become U+FFFD). out must hold SW_STR_BUF bytes. Returns the number of
 * bytes before the NUL, or -1 if addr does not hold a readable str. */
long sw_pystr_read(sw_mem *m, const sw_py_layout *l, uint64_t addr, char *out);

/* sw_pystr_read, also setting *span (if not NULL) to how many bytes from
 * addr hold the whole object, characters included, when the characters
 * follow its header (a compact str, not cut); else to 0. Those bytes,
 * read again, are what sw_pystr_same takes. */
long sw_pystr_read_span(sw_mem *m, const sw_py_layout *l, uint64_t addr, char *out, uint32_t *span);

/* 1 if obj, the first `got` bytes of an object read at addr, is a compact
 * str lying wholly within them whose UTF-8 is the n bytes utf8 (no more
 * than SW_STR_MAX_CHARS code points); else 0. An ASCII one is compared
 * as it lies. */
int sw_pystr_same(const sw_py_layout *l, uint64_t addr, const unsigned char *obj, size_t got, const char *utf8,
                  size_t n);

/* Copies the UTF-8 string s into dst (size bytes, NUL-terminated), cut at
 * a character boundary if longer. */
void sw_utf8_copy_cut(char *dst, size_t size, const char *s);

#endif
