/*
 * dwarf_line.h - source file and line of a code address, from an ELF
 * file's DWARF line tables (.debug_line, DWARF versions 2 to 5, with the
 * strings of .debug_line_str and .debug_str that version 5 points into).
 * Part of the ELF room, included through elf.h.
 *
 * The sections are untrusted (whatever file a process has mapped): every
 * unit header, every opcode and every string is read through a bounded
 * cursor and checked before use; a malformed unit is refused with a
 * reason, never read out of bounds. The whole table becomes one sorted
 * array of rows (at most SW_DWARF_MAX_ROWS) searched by address; what it
 * needs of the sections is copied, so it outlives the sw_elf it came from.
 * Address sizes of 8 bytes only (64-bit objects), 32- and 64-bit DWARF.
 */
#ifndef SW_DWARF_LINE_H
#define SW_DWARF_LINE_H

#include "base/base.h"

#define SW_DWARF_MAX_ROWS (1u << 24)     /* rows kept of one object's tables */
#define SW_DWARF_MAX_FILES (1u << 20)    /* file names of one object */

typedef struct sw_dwarf_lines sw_dwarf_lines;

/* Parses the line tables in `line` (.debug_line's bytes), whose version 5
 * units name their files by offsets into line_str (.debug_line_str) and
 * str (.debug_str): either may be NULL. Returns 0 with *out, SW_EFORMAT
 * (malformed: the reason in err) or SW_ENOMEM. */
int sw_dwarf_lines_parse(const unsigned char *line, size_t line_len, const unsigned char *line_str,
                         size_t line_str_len, const unsigned char *str, size_t str_len, sw_dwarf_lines **out,
                         char *err, size_t errlen);

void sw_dwarf_lines_free(sw_dwarf_lines *d);

/* The file (its path: the name joined to its directory's when relative,
 * and to the compilation directory's when that is relative too, as
 * addr2line prints it) and line of the row covering address `addr` (a file address,
 * before the load bias): the last row at or before it in its sequence,
 * and of the rows at that row's address the last is_stmt one, as gdb's
 * `info line *ADDR` gives.
 * Returns 0, or SW_EARG when no sequence covers it. *file lives as long as
 * d. */
int sw_dwarf_lines_find(const sw_dwarf_lines *d, uint64_t addr, const char **file, uint32_t *line);

/* The line tables of an ELF file opened by elf.h (its .debug_line,
 * .debug_line_str and .debug_str, inflated where compressed in the file:
 * sw_elf_section_bytes): 0 with *out, SW_EARG when it has no .debug_line
 * (no debug information, or a compressed one and a build without zlib),
 * SW_EFORMAT for a compressed one that does not inflate, or as
 * sw_dwarf_lines_parse. */
typedef struct sw_elf sw_elf;
int sw_elf_lines(const sw_elf *e, sw_dwarf_lines **out, char *err, size_t errlen);

/* Rows kept (for tests). */
size_t sw_dwarf_lines_rows(const sw_dwarf_lines *d);

#endif
