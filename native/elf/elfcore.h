/*
 * elfcore.h - reading an ELF core file (a crash's core, or gdb's gcore):
 * its PT_LOAD segments (the process's memory the core holds), the files
 * its process had mapped (the NT_FILE note: address range, file offset,
 * path), its pid and command (NT_PRPSINFO), its threads' registers
 * (NT_PRSTATUS, x86-64) and where its vDSO is (NT_AUXV). The core is untrusted: the
 * headers and notes are read once, bounded and checked; the segments'
 * bytes are read from the file on demand (a core can be far larger than
 * what is read of it). 64-bit little-endian cores only.
 */
#ifndef SW_ELFCORE_H
#define SW_ELFCORE_H

#include "base/base.h"

#define SW_CORE_MAX_SEGMENTS 65535u   /* (extended numbering, PN_XNUM, is refused) */
#define SW_CORE_MAX_FILES 65536u
#define SW_CORE_MAX_NOTES (64u << 20)   /* bytes of notes read */
#define SW_CORE_MAX_THREADS 65536u
#define SW_CORE_GREGS 27u               /* x86-64's elf_gregset_t: struct user_regs_struct */

typedef struct sw_core sw_core;

/* A part of the process's memory the core holds: [vaddr, vaddr + filesz)
 * is at offset in the core; the rest of memsz was not dumped. */
typedef struct sw_core_segment {
    uint64_t vaddr, memsz, offset, filesz;
    uint32_t flags;          /* PF_R | PF_W | PF_X */
} sw_core_segment;

/* A file mapping of the process: [start, end) maps the file's bytes from
 * offset on. path lives as long as the sw_core. */
typedef struct sw_core_file {
    uint64_t start, end, offset;
    const char *path;
} sw_core_file;

/* A thread of the process at the dump (NT_PRSTATUS): its id and its
 * general registers, in the kernel's order (struct user_regs_struct on
 * x86-64; none are read on other machines). */
typedef struct sw_core_thread {
    int tid;
    uint64_t gregs[SW_CORE_GREGS];
} sw_core_thread;

/* Opens the core at path. Returns 0 with *out, or SW_EIO (unreadable;
 * errno kept), SW_EFORMAT (not a core file, or malformed) or SW_ENOMEM,
 * with the reason in err. */
int sw_core_open(const char *path, sw_core **out, char *err, size_t errlen);
void sw_core_free(sw_core *c);

/* Sorted by vaddr. */
const sw_core_segment *sw_core_segments(const sw_core *c, size_t *n);
/* In the note's order (by address). */
const sw_core_file *sw_core_files(const sw_core *c, size_t *n);

/* In the notes' order (the thread that dumped first). */
const sw_core_thread *sw_core_threads(const sw_core *c, size_t *n);

/* The process's pid (0 if the core does not say) and command name (its
 * first 15 bytes, "" if unknown). */
int sw_core_pid(const sw_core *c);
const char *sw_core_command(const sw_core *c);

/* The address of the process's vDSO (its auxiliary vector's
 * AT_SYSINFO_EHDR, NT_AUXV), 0 if the core does not say. */
uint64_t sw_core_vdso(const sw_core *c);

/* Copies up to len bytes of the process's memory at addr from the core's
 * own bytes; returns how many, contiguous from addr (0: not in the core). */
size_t sw_core_read(const sw_core *c, uint64_t addr, void *buf, size_t len);

#endif
