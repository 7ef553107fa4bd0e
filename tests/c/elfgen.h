/*
 * elfgen.h - a small, valid ELF64 file built in memory with known content,
 * for the ELF reader's round-trip test (elf/test_elf.c) and as the fuzz
 * seed of the ELF half of the fuzz target (make_seed.c, fuzzelf.h):
 *
 *   PT_LOAD  file [0, size) at 0x400000, memsz size + 0x100
 *   PT_NOTE  a GNU build id of 20 bytes 0x01, 0x02, ... 0x14
 *   .dynsym  dyn_func (FUNC GLOBAL 0x401000, 16), dyn_obj (OBJECT GLOBAL 0x402000, 8)
 *   .symtab  static_func (FUNC LOCAL 0x401100, 4)
 *   .rodata  "\0" "3.10.99" "\0"
 */
#ifndef SW_ELFGEN_H
#define SW_ELFGEN_H

#include <elf.h>
#include <stdint.h>
#include <string.h>

#define ELFGEN_MAX 4096u
#define ELFGEN_BASE 0x400000ull

static size_t elfgen_put(unsigned char *buf, size_t *at, const void *p, size_t n)
{
    size_t start = *at;
    memcpy(buf + start, p, n);
    *at += n;
    return start;
}

static void elfgen_align(size_t *at, size_t a)
{
    *at = (*at + a - 1) / a * a;
}

/* Writes the file into buf (ELFGEN_MAX bytes, zeroed here); returns its size. */
static size_t elfgen_build(unsigned char *buf)
{
    memset(buf, 0, ELFGEN_MAX);
    size_t at = sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Phdr);
    /* The build id note. */
    Elf64_Nhdr nh = {4, 20, NT_GNU_BUILD_ID};
    size_t note = elfgen_put(buf, &at, &nh, sizeof nh);
    elfgen_put(buf, &at, "GNU", 4);
    for (unsigned char i = 1; i <= 20; i++)
        buf[at++] = i;
    size_t note_len = at - note;
    static const char dynstr[] = "\0dyn_func\0dyn_obj";
    static const char strtab[] = "\0static_func";
    static const char shstr[] = "\0.dynsym\0.dynstr\0.symtab\0.strtab\0.shstrtab\0.note.gnu.build-id\0.rodata";
    static const char rodata[] = "\0" "3.10.99";
    size_t dynstr_off = elfgen_put(buf, &at, dynstr, sizeof dynstr);
    size_t strtab_off = elfgen_put(buf, &at, strtab, sizeof strtab);
    size_t shstr_off = elfgen_put(buf, &at, shstr, sizeof shstr);
    size_t rodata_off = elfgen_put(buf, &at, rodata, sizeof rodata);
    elfgen_align(&at, 8);
    Elf64_Sym dyn[3] = {{0},
                        {1, ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), 0, 1, 0x401000, 16},
                        {10, ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT), 0, 1, 0x402000, 8}};
    size_t dynsym_off = elfgen_put(buf, &at, dyn, sizeof dyn);
    Elf64_Sym st[2] = {{0}, {1, ELF64_ST_INFO(STB_LOCAL, STT_FUNC), 0, 1, 0x401100, 4}};
    size_t symtab_off = elfgen_put(buf, &at, st, sizeof st);
    elfgen_align(&at, 8);
    /* Sections: 0 null, 1 .dynsym, 2 .dynstr, 3 .symtab, 4 .strtab,
     * 5 .shstrtab, 6 .note.gnu.build-id, 7 .rodata. */
    Elf64_Shdr sh[8];
    memset(sh, 0, sizeof sh);
    sh[1] = (Elf64_Shdr){1, SHT_DYNSYM, SHF_ALLOC, 0, dynsym_off, sizeof dyn, 2, 1, 8, sizeof(Elf64_Sym)};
    sh[2] = (Elf64_Shdr){9, SHT_STRTAB, SHF_ALLOC, 0, dynstr_off, sizeof dynstr, 0, 0, 1, 0};
    sh[3] = (Elf64_Shdr){17, SHT_SYMTAB, 0, 0, symtab_off, sizeof st, 4, 1, 8, sizeof(Elf64_Sym)};
    sh[4] = (Elf64_Shdr){25, SHT_STRTAB, 0, 0, strtab_off, sizeof strtab, 0, 0, 1, 0};
    sh[5] = (Elf64_Shdr){33, SHT_STRTAB, 0, 0, shstr_off, sizeof shstr, 0, 0, 1, 0};
    sh[6] = (Elf64_Shdr){43, SHT_NOTE, SHF_ALLOC, ELFGEN_BASE + note, note, note_len, 0, 0, 4, 0};
    sh[7] = (Elf64_Shdr){62, SHT_PROGBITS, SHF_ALLOC, ELFGEN_BASE + rodata_off, rodata_off, sizeof rodata, 0, 0, 1, 0};
    size_t shoff = elfgen_put(buf, &at, sh, sizeof sh);
    size_t size = at;
    Elf64_Ehdr eh;
    memset(&eh, 0, sizeof eh);
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_DYN;
    eh.e_machine = EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = sizeof eh;
    eh.e_shoff = shoff;
    eh.e_ehsize = sizeof eh;
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = 2;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = 8;
    eh.e_shstrndx = 5;
    memcpy(buf, &eh, sizeof eh);
    Elf64_Phdr ph[2] = {{PT_LOAD, PF_R | PF_X, 0, ELFGEN_BASE, ELFGEN_BASE, size, size + 0x100, 0x1000},
                        {PT_NOTE, PF_R, note, ELFGEN_BASE + note, ELFGEN_BASE + note, note_len, note_len, 4}};
    memcpy(buf + sizeof eh, ph, sizeof ph);
    return size;
}

#endif
