/*
 * codecache.h - what the reader knows about code objects, by address, so
 * that the names and file of a function are read once, not per sample.
 *
 * An entry is confirmed against the code object's header as just read (the
 * name, qualname and filename pointers, the first line and, 3.11+, the size
 * of its frames): a code object
 * freed and another allocated at the same address is noticed and read
 * again. Confirming costs a read, so a caller may trust an entry confirmed
 * a few sampling rounds ago (sw_codecache_fresh): the price is that a
 * replaced code object can be misnamed for those few rounds.
 * An entry may also carry a stamp (sw_codecache_stamp): the value of the
 * target's counter of code objects made (3.12: _Py_next_func_version),
 * read before the check that confirmed it; while the counter still reads
 * that value no code object was made since, so none can have taken the
 * entry's address (pystack.c "Code objects by counter").
 * Strings are read after the header that points to them, so the code
 * object may have been freed in between (its module imported, its frame
 * returned), and its strings with it: an entry whose strings were just
 * read is unsettled, and trusted only once its code object is seen alive
 * and unchanged after that (sw_codecache_settle). And a code object freed
 * and another made at its address can have its strings where the old
 * one's were (the allocator reuses freed blocks in order: a module's
 * code, named by the interned "<module>", and the next module's, their
 * file names of one length): a header equal pointer for pointer is then
 * confirmed by its file name read again too (sw_codecache_check_filename).
 * Entries never move: a pointer returned stays valid until
 * sw_codecache_trim() drops them all.
 */
#ifndef SW_CODECACHE_H
#define SW_CODECACHE_H

#include "base/base.h"
#include "layout.h"
#include "mem.h"

typedef struct sw_codecache sw_codecache;

/* max_entries: beyond this, sw_codecache_trim() empties the cache. NULL if
 * out of memory. */
sw_codecache *sw_codecache_new(uint32_t max_entries);
void sw_codecache_free(sw_codecache *c);

/* The info for the code object at addr if it was confirmed in sampling
 * round `round` or in the `ttl` rounds before it; else NULL. */
sw_sample_code *sw_codecache_fresh(sw_codecache *c, uint64_t addr, uint64_t round, uint32_t ttl);
/* The same for info, an entry of this cache (sw_codecache_find): 1 if
 * fresh so, else 0 (no second lookup of its address). */
int sw_codecache_is_fresh(sw_codecache *c, sw_sample_code *info, uint64_t round, uint32_t ttl);

/* The info for the code object at addr if cached at all (no counting, no
 * age check); else NULL. */
sw_sample_code *sw_codecache_find(sw_codecache *c, uint64_t addr);

/* The info for the code object at addr, whose first l->code_size bytes
 * (hdr) were just read, marked confirmed in `round`. Reads its strings on a
 * miss, which leaves the entry unsettled (sw_codecache_settle). Returns NULL
 * if hdr is not a code object or its strings cannot be read. */
sw_sample_code *sw_codecache_get(sw_codecache *c, sw_mem *m, const sw_py_layout *l, uint64_t addr,
                               const unsigned char *hdr, uint64_t round);
/* The same, given the entry sw_codecache_find gave for addr since the
 * cache was last trimmed (known; NULL: looked up here), so that a caller
 * that looked it up already does not look it up again. */
sw_sample_code *sw_codecache_get_known(sw_codecache *c, sw_mem *m, const sw_py_layout *l, sw_sample_code *known,
                                     uint64_t addr, const unsigned char *hdr, uint64_t round);

/* 1 if info's entry is settled: its code object was seen alive and
 * unchanged after its strings (and line table, if read with them) were
 * read. An unsettled entry is never trusted without a read (see
 * sw_codecache_fresh, sw_codecache_stamped, sw_codecache_known). */
int sw_codecache_settled(const sw_sample_code *info);

/* Settles info's entry with hdr, the first l->code_size bytes of its code
 * object read after its strings were: 1 if the object is alive (a live
 * object's reference count, the code type) and its header the one the
 * strings were read from, so that they were its own when read; else 0,
 * and the entry is distrusted (read again when next met). */
int sw_codecache_settle(sw_codecache *c, const sw_py_layout *l, sw_sample_code *info, const unsigned char *hdr);

/* Where info's filename str object is, and in *span how many bytes of it
 * to read for sw_codecache_check_filename; 0 if it cannot be checked so
 * (its characters apart from its header: a legacy str, before 3.12). */
uint64_t sw_codecache_filename_at(const sw_sample_code *info, uint32_t *span);

/* obj: the `got` bytes at info's filename pointer (sw_codecache_filename_at),
 * read with or after a header that confirmed the entry. 1 if they still
 * hold the file name the entry was made with; else the entry's strings are
 * read again from its pointers, and it is unsettled: 0, or -1 if they
 * cannot be read (the entry is then distrusted). */
int sw_codecache_check_filename(sw_codecache *c, sw_mem *m, const sw_py_layout *l, sw_sample_code *info,
                                const unsigned char *obj, size_t got);

/* Reads and decodes info's line table now if it was not yet (else on its
 * first sw_codecache_line), so that it can be settled with the strings. */
void sw_codecache_read_lines(sw_sample_code *info, sw_mem *m, const sw_py_layout *l);

/* Makes the entry for addr (if any) confirmable only by reading its
 * strings again: a code object run with other globals than before is
 * likely a new one at the address (a module's code: freed once the module
 * is imported), whose name, qualname, filename and line table objects may
 * have been allocated where the old one's were (the allocator reuses
 * freed blocks in order), so that a header equal pointer for pointer
 * would keep the old strings. */
void sw_codecache_distrust(sw_codecache *c, uint64_t addr);

/* 1 if the entry for addr is confirmed by hdr, the first l->code_size
 * bytes of the code object there as just read (the header of the code
 * object the entry was made from, or of one just like it); else 0. Reads
 * nothing, changes nothing. */
int sw_codecache_known(const sw_codecache *c, const sw_py_layout *l, uint64_t addr, const unsigned char *hdr);

/* Stamps the entry info (of this cache) with stamp (0: none). An entry
 * made or rebuilt by sw_codecache_get has none. */
void sw_codecache_stamp(sw_sample_code *info, uint32_t stamp);

/* The info for the code object at addr if its entry carries stamp (not
 * 0); else NULL. */
sw_sample_code *sw_codecache_stamped(sw_codecache *c, uint64_t addr, uint32_t stamp);

/* 3.11+: the size of the frames of the code object `info` (an entry of
 * this cache), in pointer-sized words, as its header gave it (layout.h
 * code_nlocalsplus); 0 where the layout does not tell it. */
uint32_t sw_codecache_frame_words(const sw_sample_code *info);

/* The line being run by a frame of the code object `info` (an entry of
 * this cache), whose current instruction as read from the frame is
 * `instr`: the f_lasti int (3.9/3.10, zero-extended) or the instruction
 * pointer (3.11+), as the layout says. The line table is read and decoded
 * on the entry's first use (and again after the entry is rebuilt). Returns
 * 0 where the line cannot be told (no table, unreadable, an instruction
 * without a line), the first line before the first instruction. */
int32_t sw_codecache_line(sw_codecache *c, sw_sample_code *info, sw_mem *m, const sw_py_layout *l, uint64_t instr);

/* 3.11/3.12 (the layout's op_return_*): 1 if the instruction at instr,
 * a frame's prev_instr, of the code object `info` (an entry of this cache)
 * is one that returns (the frame is returning, or returned and left as it
 * was); 0 if not, or where it cannot be told. The code object's
 * instructions are read on the entry's first use and kept (their opcodes
 * change in place, specialized or instrumented, but a return stays a
 * return and no other instruction becomes one). */
int sw_codecache_returns_at(sw_codecache *c, sw_sample_code *info, sw_mem *m, const sw_py_layout *l, uint64_t instr);

/* Empties the cache if it holds more than max_entries. Call between
 * samples only: it frees every entry. Returns 1 if it did, else 0. */
int sw_codecache_trim(sw_codecache *c);

uint64_t sw_codecache_hits(const sw_codecache *c);
uint64_t sw_codecache_misses(const sw_codecache *c);

#endif
