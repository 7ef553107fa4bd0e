/*
 * elf.c - a bounded reader of ELF files: symbols, build id, PT_LOAD
 * segments (see elf.h). Every offset and size taken from the file is
 * checked against the bytes read, overflow-safe, before it is used.
 */
#define _GNU_SOURCE
#include "elf.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef SW_HAVE_ZLIB
#  include <zlib.h>
#endif

#define MAX_SECTIONS 65535u
#define MAX_NOTES 256u

typedef struct symtab {
    size_t off, count;          /* Elf64_Sym entries at off */
    size_t str_off, str_len;    /* its string table */
} symtab;

struct sw_elf {
    unsigned char *data;
    size_t len;
    Elf64_Ehdr eh;
    sw_elf_segment seg[SW_ELF_MAX_SEGMENTS];
    size_t nseg;
    symtab tabs[2];             /* [0] .dynsym, [1] .symtab (count 0 if absent) */
    size_t shoff, shnum;        /* the section headers, when valid */
    size_t shstr_off, shstr_len;
    unsigned char build_id[SW_ELF_MAX_BUILD_ID];
    size_t build_id_len;
};

/* 1 if [off, off + size) lies inside the file. */
static int inside(const sw_elf *e, uint64_t off, uint64_t size)
{
    return off <= e->len && size <= e->len - off;
}

static void shdr_at(const sw_elf *e, size_t i, Elf64_Shdr *sh)
{
    memcpy(sh, e->data + e->shoff + i * sizeof *sh, sizeof *sh);
}

/* A NUL-terminated string at offset i of a string table, or NULL. */
static const char *str_at(const sw_elf *e, size_t tab_off, size_t tab_len, uint64_t i)
{
    if (i >= tab_len)
        return NULL;
    const char *s = (const char *)e->data + tab_off + i;
    return memchr(s, 0, tab_len - i) ? s : NULL;
}

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return SW_EFORMAT; } while (0)

static int read_header(sw_elf *e, char *err, size_t errlen)
{
    if (e->len < sizeof(Elf64_Ehdr) || memcmp(e->data, ELFMAG, SELFMAG) != 0)
        FAIL("not an ELF file");
    if (e->data[EI_CLASS] != ELFCLASS64 || e->data[EI_DATA] != ELFDATA2LSB)
        FAIL("not a 64-bit little-endian ELF file");
    memcpy(&e->eh, e->data, sizeof e->eh);
    return SW_OK;
}

static int read_segments(sw_elf *e, char *err, size_t errlen)
{
    const Elf64_Ehdr *h = &e->eh;
    if (h->e_phnum == 0)
        return SW_OK;
    if (h->e_phentsize != sizeof(Elf64_Phdr) || !inside(e, h->e_phoff, (uint64_t)h->e_phnum * sizeof(Elf64_Phdr)))
        FAIL("program headers outside the file");
    for (size_t i = 0; i < h->e_phnum; i++) {
        Elf64_Phdr p;
        memcpy(&p, e->data + h->e_phoff + i * sizeof p, sizeof p);
        if (p.p_type != PT_LOAD)
            continue;
        if (e->nseg == SW_ELF_MAX_SEGMENTS)
            FAIL("more than %u PT_LOAD segments", SW_ELF_MAX_SEGMENTS);
        if (p.p_filesz > p.p_memsz || p.p_vaddr + p.p_memsz < p.p_vaddr)
            FAIL("PT_LOAD segment %zu has impossible sizes", i);
        if (!inside(e, p.p_offset, p.p_filesz))
            FAIL("PT_LOAD segment %zu lies outside the file", i);
        e->seg[e->nseg++] = (sw_elf_segment){p.p_vaddr, p.p_memsz, p.p_offset, p.p_filesz, p.p_align, p.p_flags};
    }
    return SW_OK;
}

/* Section headers, symbol tables. A file without sections (stripped of
 * them) is valid: it has no symbols. */
static int read_sections(sw_elf *e, char *err, size_t errlen)
{
    const Elf64_Ehdr *h = &e->eh;
    if (h->e_shoff == 0)
        return SW_OK;
    if (h->e_shentsize != sizeof(Elf64_Shdr) || !inside(e, h->e_shoff, sizeof(Elf64_Shdr)))
        FAIL("section headers outside the file");
    e->shoff = h->e_shoff;
    Elf64_Shdr first;
    shdr_at(e, 0, &first);
    uint64_t shnum = h->e_shnum ? h->e_shnum : first.sh_size;   /* extended numbering */
    uint64_t shstrndx = h->e_shstrndx == SHN_XINDEX ? first.sh_link : h->e_shstrndx;
    if (shnum > MAX_SECTIONS || !inside(e, h->e_shoff, shnum * sizeof(Elf64_Shdr)))
        FAIL("section headers outside the file");
    e->shnum = (size_t)shnum;
    if (shstrndx != SHN_UNDEF && shstrndx < shnum) {
        Elf64_Shdr s;
        shdr_at(e, (size_t)shstrndx, &s);
        if (s.sh_type == SHT_STRTAB && inside(e, s.sh_offset, s.sh_size)) {
            e->shstr_off = s.sh_offset;
            e->shstr_len = s.sh_size;
        }
    }
    for (size_t i = 0; i < e->shnum; i++) {
        Elf64_Shdr s;
        shdr_at(e, i, &s);
        if (s.sh_type != SHT_SYMTAB && s.sh_type != SHT_DYNSYM)
            continue;
        symtab *t = &e->tabs[s.sh_type == SHT_DYNSYM ? 0 : 1];
        if (t->count)
            continue;   /* the first table of each kind */
        if (s.sh_entsize != sizeof(Elf64_Sym) || !inside(e, s.sh_offset, s.sh_size) || s.sh_link >= e->shnum)
            FAIL("symbol table %zu is malformed", i);
        Elf64_Shdr str;
        shdr_at(e, s.sh_link, &str);
        if (str.sh_type != SHT_STRTAB || !inside(e, str.sh_offset, str.sh_size))
            FAIL("the string table of symbol table %zu is malformed", i);
        *t = (symtab){s.sh_offset, s.sh_size / sizeof(Elf64_Sym), str.sh_offset, str.sh_size};
    }
    return SW_OK;
}

/* The notes in [off, off + len): keeps a GNU build id. */
static void read_notes(sw_elf *e, size_t off, size_t len)
{
    size_t p = off, end = off + len;
    for (unsigned n = 0; n < MAX_NOTES && end - p >= sizeof(Elf64_Nhdr); n++) {
        Elf64_Nhdr nh;
        memcpy(&nh, e->data + p, sizeof nh);
        p += sizeof nh;
        uint64_t name_sz = ((uint64_t)nh.n_namesz + 3) & ~3ull, desc_sz = ((uint64_t)nh.n_descsz + 3) & ~3ull;
        if (name_sz > end - p || desc_sz > end - p - name_sz)
            return;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(e->data + p, "GNU", 4) == 0 &&
            nh.n_descsz > 0 && nh.n_descsz <= SW_ELF_MAX_BUILD_ID) {
            memcpy(e->build_id, e->data + p + name_sz, nh.n_descsz);
            e->build_id_len = nh.n_descsz;
            return;
        }
        p += name_sz + desc_sz;
    }
}

/* The build id, from the PT_NOTE segments, else the SHT_NOTE sections. */
static void find_build_id(sw_elf *e)
{
    const Elf64_Ehdr *h = &e->eh;
    if (h->e_phentsize == sizeof(Elf64_Phdr) && inside(e, h->e_phoff, (uint64_t)h->e_phnum * sizeof(Elf64_Phdr))) {
        for (size_t i = 0; i < h->e_phnum && !e->build_id_len; i++) {
            Elf64_Phdr p;
            memcpy(&p, e->data + h->e_phoff + i * sizeof p, sizeof p);
            if (p.p_type == PT_NOTE && inside(e, p.p_offset, p.p_filesz))
                read_notes(e, p.p_offset, p.p_filesz);
        }
    }
    for (size_t i = 0; i < e->shnum && !e->build_id_len; i++) {
        Elf64_Shdr s;
        shdr_at(e, i, &s);
        if (s.sh_type == SHT_NOTE && inside(e, s.sh_offset, s.sh_size))
            read_notes(e, s.sh_offset, s.sh_size);
    }
}

#undef FAIL

size_t sw_elf_build_id_in_head(const unsigned char *head, size_t len, unsigned char *id, size_t cap)
{
    sw_elf e;
    memset(&e, 0, sizeof e);
    e.data = (unsigned char *)(uintptr_t)head;   /* only read */
    e.len = len;
    char err[8];
    if (read_header(&e, err, sizeof err) != SW_OK)
        return 0;
    find_build_id(&e);   /* the PT_NOTE segments inside head (no sections: shnum 0) */
    size_t n = e.build_id_len < cap ? e.build_id_len : cap;
    memcpy(id, e.build_id, n);
    return e.build_id_len;
}

/* Takes ownership of data (malloc'ed, len bytes). */
static int build(unsigned char *data, size_t len, sw_elf **out, char *err, size_t errlen)
{
    *out = NULL;
    sw_elf *e = calloc(1, sizeof *e);
    if (!e) {
        free(data);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    e->data = data;
    e->len = len;
    int rc = read_header(e, err, errlen);
    if (rc == SW_OK)
        rc = read_segments(e, err, errlen);
    if (rc == SW_OK)
        rc = read_sections(e, err, errlen);
    if (rc != SW_OK) {
        sw_elf_free(e);
        return rc;
    }
    find_build_id(e);
    *out = e;
    return SW_OK;
}

int sw_elf_from_bytes(const void *data, size_t len, sw_elf **out, char *err, size_t errlen)
{
    unsigned char *copy = malloc(len ? len : 1);
    if (!copy) {
        *out = NULL;
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    if (len)
        memcpy(copy, data, len);
    return build(copy, len, out, err, errlen);
}

int sw_elf_open(const char *path, sw_elf **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        errno = e;
        return SW_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > SW_ELF_MAX_FILE) {
        int e = errno;
        close(fd);
        snprintf(err, errlen, "%s: not a regular file of at most %llu bytes", path,
                 (unsigned long long)SW_ELF_MAX_FILE);
        errno = e;
        return SW_EFORMAT;
    }
    size_t len = (size_t)st.st_size, got = 0;
    unsigned char *data = malloc(len ? len : 1);
    if (!data) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    /* The file may change size under the reader: only what was read counts. */
    while (got < len) {
        ssize_t r = read(fd, data + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(data);
            close(fd);
            snprintf(err, errlen, "%s: %s", path, strerror(e));
            errno = e;
            return SW_EIO;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    int rc = build(data, got, out, err, errlen);
    if (rc == SW_EFORMAT) {
        /* Name the file in the reason. */
        char reason[160];
        snprintf(reason, sizeof reason, "%s", err);
        snprintf(err, errlen, "%s: %s", path, reason);
    }
    return rc;
}

void sw_elf_free(sw_elf *e)
{
    if (!e)
        return;
    free(e->data);
    free(e);
}

uint16_t sw_elf_type(const sw_elf *e)
{
    return e->eh.e_type;
}

const sw_elf_segment *sw_elf_segments(const sw_elf *e, size_t *n)
{
    *n = e->nseg;
    return e->seg;
}

size_t sw_elf_symbol_count(const sw_elf *e)
{
    return e->tabs[0].count + e->tabs[1].count;
}

int sw_elf_symbol_at(const sw_elf *e, size_t i, sw_elf_symbol *out)
{
    int which = i >= e->tabs[0].count;
    const symtab *t = &e->tabs[which];
    if (which)
        i -= e->tabs[0].count;
    if (i >= t->count)
        return SW_EARG;
    Elf64_Sym s;
    memcpy(&s, e->data + t->off + i * sizeof s, sizeof s);
    const char *name = str_at(e, t->str_off, t->str_len, s.st_name);
    if (!name || !name[0])
        return SW_EARG;
    *out = (sw_elf_symbol){name, s.st_value, s.st_size, (uint8_t)ELF64_ST_TYPE(s.st_info),
                           (uint8_t)ELF64_ST_BIND(s.st_info), s.st_shndx, (uint8_t)!which};
    return SW_OK;
}

int sw_elf_find_symbol(const sw_elf *e, const char *name, sw_elf_symbol *out)
{
    size_t n = sw_elf_symbol_count(e);
    for (size_t i = 0; i < n; i++) {
        sw_elf_symbol s;
        if (sw_elf_symbol_at(e, i, &s) == SW_OK && s.shndx != SHN_UNDEF && strcmp(s.name, name) == 0) {
            *out = s;
            return SW_OK;
        }
    }
    return SW_EARG;
}

size_t sw_elf_build_id(const sw_elf *e, const unsigned char **id)
{
    *id = e->build_id;
    return e->build_id_len;
}

int sw_elf_read_vaddr(const sw_elf *e, uint64_t vaddr, void *buf, size_t len)
{
    for (size_t i = 0; i < e->nseg; i++) {
        const sw_elf_segment *s = &e->seg[i];
        if (vaddr >= s->vaddr && vaddr - s->vaddr <= s->filesz && len <= s->filesz - (vaddr - s->vaddr)) {
            memcpy(buf, e->data + s->offset + (vaddr - s->vaddr), len);
            return SW_OK;
        }
    }
    return SW_EARG;
}

/* The header of the section named name with file bytes inside the file:
 * 1, or 0 if there is none. */
static int find_section(const sw_elf *e, const char *name, Elf64_Shdr *out)
{
    for (size_t i = 0; i < e->shnum && e->shstr_len; i++) {
        shdr_at(e, i, out);
        const char *n = str_at(e, e->shstr_off, e->shstr_len, out->sh_name);
        if (n && strcmp(n, name) == 0 && out->sh_type != SHT_NOBITS && inside(e, out->sh_offset, out->sh_size))
            return 1;
    }
    return 0;
}

const unsigned char *sw_elf_section(const sw_elf *e, const char *name, size_t *len, uint64_t *addr)
{
    Elf64_Shdr s;
    if (!find_section(e, name, &s) || (s.sh_flags & SHF_COMPRESSED))
        return NULL;   /* (a compressed one's bytes: sw_elf_section_bytes) */
    *len = (size_t)s.sh_size;
    if (addr)
        *addr = s.sh_addr;
    return e->data + s.sh_offset;
}

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return SW_EFORMAT; } while (0)

int sw_elf_section_bytes(const sw_elf *e, const char *name, const unsigned char **bytes, size_t *len,
                         unsigned char **owned, char *err, size_t errlen)
{
    Elf64_Shdr s;
    *owned = NULL;
    *bytes = NULL;
    if (!find_section(e, name, &s)) {
        snprintf(err, errlen, "no %s", name);
        return SW_EARG;
    }
    if (!(s.sh_flags & SHF_COMPRESSED)) {
        *bytes = e->data + s.sh_offset;
        *len = (size_t)s.sh_size;
        return SW_OK;
    }
    Elf64_Chdr ch;
    if (s.sh_size < sizeof ch)
        FAIL("%s: compressed, but shorter than its header", name);
    memcpy(&ch, e->data + s.sh_offset, sizeof ch);
    if (ch.ch_type != ELFCOMPRESS_ZLIB)
        FAIL("%s: compressed with a method other than zlib (%u)", name, (unsigned)ch.ch_type);
    if (ch.ch_size == 0 || ch.ch_size > SW_ELF_MAX_INFLATED)
        FAIL("%s: %llu bytes once inflated (at most %llu are read)", name, (unsigned long long)ch.ch_size,
             (unsigned long long)SW_ELF_MAX_INFLATED);
#ifdef SW_HAVE_ZLIB
    /* The buffer grows with what the stream gives (up to the header's
     * size), so a header that lies about a huge size costs nothing. */
    size_t cap = (size_t)(ch.ch_size < 2 * s.sh_size + 4096 ? ch.ch_size : 2 * s.sh_size + 4096), done = 0;
    unsigned char *out = NULL;
    z_stream z;
    memset(&z, 0, sizeof z);
    z.next_in = (Bytef *)(e->data + s.sh_offset + sizeof ch);   /* (zlib reads it only) */
    z.avail_in = (uInt)(s.sh_size - sizeof ch);                 /* (a file is under 4 GiB) */
    int rc = inflateInit(&z);
    while (rc == Z_OK) {
        unsigned char *grown = realloc(out, cap);
        if (!grown) {
            rc = Z_MEM_ERROR;
            break;
        }
        out = grown;
        z.next_out = out + done;
        z.avail_out = (uInt)(cap - done);
        rc = inflate(&z, Z_FINISH);
        done = (size_t)z.total_out;
        if (rc == Z_BUF_ERROR && z.avail_out == 0 && cap < ch.ch_size) {
            cap = cap > ch.ch_size / 2 ? (size_t)ch.ch_size : cap * 2;   /* room for more */
            rc = Z_OK;
        }
    }
    inflateEnd(&z);
    if (rc != Z_STREAM_END || done != ch.ch_size) {
        free(out);
        if (rc == Z_MEM_ERROR) {
            snprintf(err, errlen, "out of memory inflating %s", name);
            return SW_ENOMEM;
        }
        FAIL("%s: its zlib stream is damaged or not of the size its header gives", name);
    }
    *bytes = *owned = out;
    *len = (size_t)ch.ch_size;
    return SW_OK;
#else
    snprintf(err, errlen, "%s is compressed and this stackwatch was built without zlib", name);
    return SW_EARG;
#endif
}

#undef FAIL

int sw_elf_debuglink(const sw_elf *e, const char **name, uint32_t *crc)
{
    size_t len;
    const unsigned char *s = sw_elf_section(e, ".gnu_debuglink", &len, NULL);
    const unsigned char *end = s ? memchr(s, 0, len) : NULL;
    if (!end || end == s)
        return SW_EARG;
    size_t n = (size_t)(end - s), at = (n + 1 + 3) & ~(size_t)3;   /* the CRC: after the name's padding to 4 */
    if (at > len || len - at < 4 || memchr(s, '/', n) || strcmp((const char *)s, ".") == 0 ||
        strcmp((const char *)s, "..") == 0)
        return SW_EARG;   /* cut short, or a path rather than a file's name */
    memcpy(crc, s + at, 4);
    *name = (const char *)s;
    return SW_OK;
}

uint32_t sw_elf_file_crc(const sw_elf *e)
{
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < e->len; i++)
        crc = table[(crc ^ e->data[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}
