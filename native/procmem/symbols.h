/*
 * symbols.h - names of native code addresses of this process, for the
 * profiler's native frames: the shared object an address is in (dladdr)
 * and the function symbol covering it, from the object file's .symtab
 * (static functions too), else its separate debug file's (found by build
 * id or .gnu_debuglink, as gdb finds it), else its .dynsym, read once per
 * object with bounded parsing; the vDSO's from its image in the target's
 * memory. Results are cached per address.
 *
 * A symbol is handed out as an sw_sample_code, so a native frame goes
 * through the sample sinks like a Python one: name "symbol [native]",
 * a C++ symbol demangled as c++filt shows it (demangle.h: "ns::f(int)
 * [native]"; an address without a symbol: "?? [native]"), filename the object's
 * path, firstlineno 0, addr the symbol's start; for another process
 * (sw_symbols_new_remote), where the object's DWARF line tables (or its
 * separate debug file's) cover the symbol's start, filename and
 * firstlineno are that source file and line, and library the object's
 * path (base/sample.h); the same for this process when made by
 * sw_symbols_new_lines. Entries stay valid until sw_symbols_free. Not
 * for use in a signal handler (dladdr locks, files are opened); used by
 * one thread at a time.
 */
#ifndef SW_SYMBOLS_H
#define SW_SYMBOLS_H

#include "base/base.h"

typedef struct sw_symbols sw_symbols;

sw_symbols *sw_symbols_new(void);   /* NULL if out of memory */

/* This process's, with source lines as another process's (above, and
 * sw_symbols_lookup_line's: the line of each pc, cached with it), for the
 * profiler's --lines mode, where each line run is a node of its own: an
 * object's line tables are then read by the first lookup in it (on the
 * sampling thread, once, unless read ahead: sw_symbols_source). */
sw_symbols *sw_symbols_new_lines(void);

/* Names the addresses of another process instead: the file its unwinder
 * (unwind.h, which must outlive s) finds mapped there, read through
 * /proc/PID/root, with that mapping's load bias; with source lines
 * (above, and sw_symbols_lookup_line's). */
struct sw_unwinder;
sw_symbols *sw_symbols_new_remote(struct sw_unwinder *u);

void sw_symbols_free(sw_symbols *s);

/* The function at code address pc (pc - 1 for a return address, so a
 * call at a function's very end is named right). *is_eval is set to 1 if
 * it is CPython's bytecode interpreter (_PyEval_EvalFrameDefault and its
 * split-off parts), whose activations the merge replaces by the Python
 * frames they run. NULL if out of memory. */
sw_sample_code *sw_symbols_lookup(sw_symbols *s, uint64_t pc, int *is_eval);

/* The source file and line of code address addr (a function's start, as
 * sw_symbols_lookup's addr, or any address in it) from the DWARF line
 * tables (.debug_line) of the object holding it (or of its separate debug
 * file, under the target's root for another process), read once per
 * object: 0, or SW_EARG when the
 * object has no debug information or none of its rows covers addr.
 * *file lives as long as s. */
int sw_symbols_source(sw_symbols *s, uint64_t addr, const char **file, uint32_t *line);

/* The same for a frame whose caller was found by frame pointers
 * (by_fp: unwind.h's SW_UNWIND_BY_FP): named "symbol" SW_UNWIND_FP_MARK
 * " [native]", an entry of its own. */
sw_sample_code *sw_symbols_lookup_marked(sw_symbols *s, uint64_t pc, int by_fp, int *is_eval);

/* The same, and with line not NULL the line of pc itself (0 unless the
 * symbol has a source: another process's, or this one's made by
 * sw_symbols_new_lines, with line tables), cached with the address. */
sw_sample_code *sw_symbols_lookup_line(sw_symbols *s, uint64_t pc, int by_fp, int *is_eval, int32_t *line);

/* This process's symbols (sw_symbols_new's) have no source line when looked up (an
 * object's line tables can take the sampling thread a second to read:
 * libpython's .debug_line is megabytes). Calls fn(ud, symbol, file, line)
 * for each symbol looked up so far that has none, whose object's line
 * tables (or its separate debug file's) cover its start: for the caller
 * to name it so once sampling stopped (at export). Symbols that have a
 * source (another process's, or sw_symbols_new_lines') are skipped. */
typedef void (*sw_symbols_source_fn)(void *ud, sw_sample_code *symbol, const char *file, uint32_t line);
void sw_symbols_sources_later(sw_symbols *s, sw_symbols_source_fn fn, void *ud);

/* Counters: objects whose symbol table was read, addresses looked up, and
 * those without a symbol. */
void sw_symbols_counts(const sw_symbols *s, uint64_t *objects, uint64_t *lookups, uint64_t *unknown);

/* Parses the ELF file at path (a 64-bit little-endian object) and
 * returns the name of the function symbol covering file-relative address
 * `vaddr` (as the object's symbols give addresses), or NULL. For tests:
 * the same bounded parser the lookups use, without caching. The result is
 * written to out (at most outlen bytes). */
const char *sw_symbols_elf_lookup(const char *path, uint64_t vaddr, char *out, size_t outlen);

#endif
