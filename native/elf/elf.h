/*
 * elf.h - the public header of native/elf: reading an ELF file's symbols
 * (.dynsym and .symtab, static functions included), its GNU build id, its
 * .gnu_debuglink and its PT_LOAD segments. C11 without Python.h, below procmem and trace.
 *
 * The files read are untrusted (whatever a target process has mapped):
 * the whole file is read into memory once (at most SW_ELF_MAX_FILE bytes),
 * and every header, table, string and note is checked against the bytes
 * read before it is used; a malformed file is refused with a reason, never
 * read out of bounds. 64-bit little-endian files only (what the reader's
 * own machine runs). Core files: elfcore.h; source lines (DWARF
 * .debug_line): dwarf_line.h; call frame information: cfi.h; all
 * included here.
 */
#ifndef SW_ELF_H
#define SW_ELF_H

#include "base/base.h"
#include "cfi.h"
#include "dwarf_line.h"
#include "elfcore.h"

#define SW_ELF_MAX_FILE (1ull << 31)   /* larger files are refused */
#define SW_ELF_MAX_SEGMENTS 64u        /* PT_LOAD segments kept */
#define SW_ELF_MAX_BUILD_ID 64u

typedef struct sw_elf sw_elf;

/* One PT_LOAD segment: file bytes [offset, offset + filesz) appear at
 * virtual address vaddr (plus the load bias), memsz bytes in all. */
typedef struct sw_elf_segment {
    uint64_t vaddr, memsz, offset, filesz, align;
    uint32_t flags;          /* PF_R | PF_W | PF_X */
} sw_elf_segment;

/* One symbol. name points into the sw_elf and lives as long as it. */
typedef struct sw_elf_symbol {
    const char *name;
    uint64_t value;          /* its address before the load bias */
    uint64_t size;
    uint8_t type;            /* STT_* */
    uint8_t bind;            /* STB_* */
    uint16_t shndx;          /* 0 (SHN_UNDEF): defined elsewhere */
    uint8_t dynamic;         /* 1: from .dynsym, 0: from .symtab */
} sw_elf_symbol;

/* Reads and checks the ELF file at path. Returns 0 with *out, or SW_EIO
 * (the file cannot be read; errno kept), SW_EFORMAT (not an ELF file the
 * reader handles, or malformed) or SW_ENOMEM, with the reason in err. */
int sw_elf_open(const char *path, sw_elf **out, char *err, size_t errlen);

/* The same over len bytes in memory (copied). */
int sw_elf_from_bytes(const void *data, size_t len, sw_elf **out, char *err, size_t errlen);

void sw_elf_free(sw_elf *e);

/* ET_EXEC, ET_DYN, ... */
uint16_t sw_elf_type(const sw_elf *e);

/* The PT_LOAD segments, in the file's order; *n receives their number. */
const sw_elf_segment *sw_elf_segments(const sw_elf *e, size_t *n);

/* Every symbol with a name: the .dynsym ones, then the .symtab ones (a
 * symbol in both appears twice). */
size_t sw_elf_symbol_count(const sw_elf *e);
int sw_elf_symbol_at(const sw_elf *e, size_t i, sw_elf_symbol *out);

/* The first defined symbol named name (.dynsym first). 0, or SW_EARG if
 * there is none. */
int sw_elf_find_symbol(const sw_elf *e, const char *name, sw_elf_symbol *out);

/* The GNU build id (NT_GNU_BUILD_ID note): its length (0 if none) and
 * bytes in *id. */
size_t sw_elf_build_id(const sw_elf *e, const unsigned char **id);

/* The GNU build id in the first bytes of an ELF file (head: its first len
 * bytes, such as the first page of its mapping at file offset 0, which a
 * core holds): its length (0 if none lies there), copied into id (at most
 * cap bytes). */
size_t sw_elf_build_id_in_head(const unsigned char *head, size_t len, unsigned char *id, size_t cap);

/* The .gnu_debuglink section: the file name (no directory) of the
 * separate debug file holding what was stripped from this one, and the
 * CRC-32 that file's bytes must have (sw_elf_file_crc). 0, or SW_EARG if
 * there is none or it is malformed (cut short, or a name with a '/').
 * *name lives as long as e. */
int sw_elf_debuglink(const sw_elf *e, const char **name, uint32_t *crc);

/* The CRC-32 of the whole file as .gnu_debuglink gives it (the ISO-HDLC
 * CRC-32 of zlib and gdb, not base's CRC-32C). */
uint32_t sw_elf_file_crc(const sw_elf *e);

/* Copies len bytes at virtual address vaddr (before the load bias) from
 * the file bytes of the PT_LOAD segment holding them: initialised data
 * and read-only data as the file has it. 0, or SW_EARG if any byte is
 * outside a segment's file bytes. */
int sw_elf_read_vaddr(const sw_elf *e, uint64_t vaddr, void *buf, size_t len);

/* The file bytes of the section named name (none for SHT_NOBITS): NULL if
 * there is none, or it is compressed in the file (SHF_COMPRESSED: see
 * sw_elf_section_bytes); *len and (if addr is not NULL) *addr receive its
 * size and virtual address. */
const unsigned char *sw_elf_section(const sw_elf *e, const char *name, size_t *len, uint64_t *addr);

#define SW_ELF_MAX_INFLATED (1ull << 30)   /* a compressed section larger than this once inflated is refused */

/* The contents of the section named name: its file bytes, or for a
 * section compressed in the file (SHF_COMPRESSED with zlib, as `gcc -gz`
 * and Debian's debug packages write their .debug_* sections) the bytes
 * inflated into *owned, which the caller frees (NULL otherwise). 0 with
 * *bytes and *len; SW_EARG (none, or compressed and this build has no
 * zlib), SW_EFORMAT (another method, a size over SW_ELF_MAX_INFLATED, a
 * damaged stream or one of another size than its header's) or
 * SW_ENOMEM, with the reason in err. */
int sw_elf_section_bytes(const sw_elf *e, const char *name, const unsigned char **bytes, size_t *len,
                         unsigned char **owned, char *err, size_t errlen);

#endif
