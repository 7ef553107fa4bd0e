/*
 * fuzzelf.h - the ELF half of the fuzz target (fuzz_reader.c calls
 * exercise_elf on every input; the seed corpus has a small ELF file from
 * elfgen.h). Besides ASan/UBSan reports, it aborts when a promise of
 * elf/elf.h is broken: a refusal without a message, a symbol without a
 * name, a build id longer than its bound, a segment or a section outside
 * the input, a read at a virtual address that returns bytes not in it, a
 * .gnu_debuglink name that is empty or holds a '/', a section's bytes
 * (sw_elf_section_bytes, inflated where compressed) larger than the input
 * or over the bound; the
 * input is also read as a DWARF .debug_line section (dwarf_line.h): a
 * refusal without a message, a row without a file. The input is also
 * read as call frame information (exercise_cfi: as an .eh_frame, and as
 * its .eh_frame_hdr too): every lookup and the expressions of every row
 * found stay within it (elf/cfi.h).
 */
#ifndef SW_FUZZELF_H
#define SW_FUZZELF_H

#include "elf/elf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void elf_fail(const char *what)
{
    fprintf(stderr, "fuzz_reader (elf): %s\n", what);
    abort();
}

/* Every row of a line table names a file. */
static void exercise_lines(const sw_dwarf_lines *d)
{
    const char *f;
    uint32_t l;
    for (uint64_t a = 0; d && a < 0x10000; a += 61)
        if (sw_dwarf_lines_find(d, a, &f, &l) == SW_OK && !f)
            elf_fail("a row without a file");
}

static int cfi_no_read(void *ud, uint64_t addr, uint64_t *v)
{
    (void)ud;
    *v = addr;   /* any value: the evaluator must cope */
    return addr & 1;
}

static void exercise_cfi(const uint8_t *data, size_t len)
{
    char err[128];
    for (int with_hdr = 0; with_hdr < 2; with_hdr++) {
        sw_cfi *c;
        err[0] = 0;
        if (sw_cfi_new(data, len, 0x1000, with_hdr ? data : NULL, len, 0x1000, &c, err, sizeof err) != SW_OK) {
            if (!err[0])
                elf_fail("CFI refused without a message");
            continue;
        }
        uint64_t regs[SW_CFI_NREGS] = {0};
        for (uint64_t k = 0; k < 64; k++) {
            sw_cfi_row r;
            uint64_t pc = 0x1000 + k * (len / 64 + 1), v;
            if (sw_cfi_find(c, pc, &r) != SW_OK)
                continue;
            if (pc < r.start || pc >= r.end)
                elf_fail("a CFI row for an address outside its FDE");
            if (r.cfa_is_expr)
                sw_cfi_eval(r.cfa_expr, r.cfa_expr_len, regs, 0x1ffffu, 0, 0, cfi_no_read, NULL, &v);
            for (int i = 0; i < SW_CFI_NREGS; i++)
                if (r.regs[i].kind == SW_CFI_EXPR || r.regs[i].kind == SW_CFI_VAL_EXPR)
                    sw_cfi_eval(r.regs[i].expr, r.regs[i].expr_len, regs, 0x1ffffu, 1, pc, cfi_no_read, NULL, &v);
        }
        sw_cfi_free(c);
    }
}

static void exercise_elf(const uint8_t *data, size_t len)
{
    /* The input as a .debug_line section (and as its string sections). */
    sw_dwarf_lines *lines = NULL;
    char lerr[256] = "";
    int lrc = sw_dwarf_lines_parse(data, len, data, len, data, len, &lines, lerr, sizeof lerr);
    if (lrc != SW_OK && !lerr[0])
        elf_fail("a .debug_line refused without a message");
    exercise_lines(lines);
    sw_dwarf_lines_free(lines);

    exercise_cfi(data, len);
    sw_elf *e;
    char err[256] = "";
    if (sw_elf_from_bytes(data, len, &e, err, sizeof err) != SW_OK) {
        if (!err[0])
            elf_fail("refused without a message");
        return;
    }
    size_t n = sw_elf_symbol_count(e);
    for (size_t i = 0; i < n; i++) {
        sw_elf_symbol s;
        if (sw_elf_symbol_at(e, i, &s) != SW_OK)
            continue;
        if (!s.name || !s.name[0])
            elf_fail("a symbol without a name");
        sw_elf_symbol again;
        if (sw_elf_find_symbol(e, s.name, &again) == SW_OK && strcmp(again.name, s.name) != 0)
            elf_fail("found another symbol than the one asked for");
    }
    const unsigned char *id;
    if (sw_elf_build_id(e, &id) > SW_ELF_MAX_BUILD_ID)
        elf_fail("build id longer than its bound");
    size_t nseg;
    const sw_elf_segment *seg = sw_elf_segments(e, &nseg);
    for (size_t i = 0; i < nseg; i++) {
        if (seg[i].offset > len || seg[i].filesz > len - seg[i].offset || seg[i].filesz > seg[i].memsz)
            elf_fail("a segment outside the input");
        unsigned char b[8];
        size_t k = seg[i].filesz < sizeof b ? (size_t)seg[i].filesz : sizeof b;
        if (k && (sw_elf_read_vaddr(e, seg[i].vaddr, b, k) != SW_OK || memcmp(b, data + seg[i].offset, k) != 0))
            elf_fail("a read at a segment's start differs from the input");
    }
    sw_dwarf_lines *own = NULL;
    err[0] = 0;
    if (sw_elf_lines(e, &own, err, sizeof err) != SW_OK && !err[0])
        elf_fail("line tables refused without a message");
    exercise_lines(own);
    sw_dwarf_lines_free(own);
    const char *link;
    uint32_t crc;
    if (sw_elf_debuglink(e, &link, &crc) == SW_OK && (!link[0] || strchr(link, '/')))
        elf_fail("a debug link that is no file's name");
    static const char *names[] = {".rodata", ".dynsym", ".symtab", ".note.gnu.build-id", ".shstrtab"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t sl;
        const unsigned char *p = sw_elf_section(e, names[i], &sl, NULL);
        if (p && sl > len)
            elf_fail("a section larger than the input");
        const unsigned char *b;
        unsigned char *owned;
        err[0] = 0;
        int rc = sw_elf_section_bytes(e, names[i], &b, &sl, &owned, err, sizeof err);
        if (rc != SW_OK && !err[0])
            elf_fail("a section's bytes refused without a message");
        if (rc == SW_OK && (!b || (owned ? sl > SW_ELF_MAX_INFLATED : sl > len)))
            elf_fail("a section's bytes larger than the input or over the inflated bound");
        free(owned);
    }
    sw_elf_free(e);
}

#endif
