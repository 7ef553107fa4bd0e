/*
 * elfcore.c - a bounded reader of ELF core files (see elfcore.h). The ELF
 * header, the program headers and the notes are read with pread and
 * checked against the file's size; the segments' bytes stay in the file.
 */
#define _GNU_SOURCE
#include "elfcore.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/procfs.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef NT_FILE
#  define NT_FILE 0x46494c45
#endif

/* The registers of NT_PRSTATUS are kept where they are x86-64's. */
#if defined(__x86_64__)
#  define SW_CORE_HAS_GREGS (sizeof(((prstatus_t *)0)->pr_reg) == SW_CORE_GREGS * 8)
#else
#  define SW_CORE_HAS_GREGS 0
#endif

struct sw_core {
    int fd;
    uint64_t size;               /* of the core file */
    sw_core_segment *seg;
    size_t nseg;
    sw_core_file *files;
    size_t nfiles;
    char *paths;                 /* the NT_FILE note's names, which files[].path point into */
    int pid;
    char command[17];
    uint64_t vdso;               /* NT_AUXV's AT_SYSINFO_EHDR, or 0 */
    sw_core_thread *threads;
    size_t nthreads, capthreads;
};

#define FAIL(rc, ...) do { snprintf(err, errlen, __VA_ARGS__); return (rc); } while (0)

static int read_at(const sw_core *c, uint64_t off, void *buf, size_t len)
{
    if (off > c->size || len > c->size - off)
        return SW_EFORMAT;
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(c->fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return SW_EIO;
        got += (size_t)r;
    }
    return SW_OK;
}

/* NT_FILE: count, page size, count (start, end, page offset), then count
 * NUL-terminated names. */
static int read_file_note(sw_core *c, const unsigned char *d, size_t len)
{
    uint64_t count, page;
    if (len < 16)
        return SW_EFORMAT;
    memcpy(&count, d, 8);
    memcpy(&page, d + 8, 8);
    if (count > SW_CORE_MAX_FILES || count * 24 > len - 16 || page == 0 || page > (1u << 30))
        return SW_EFORMAT;
    size_t names = 16 + (size_t)count * 24;
    c->paths = malloc(len - names + 1);
    c->files = calloc(count ? count : 1, sizeof *c->files);
    if (!c->paths || !c->files)
        return SW_ENOMEM;
    memcpy(c->paths, d + names, len - names);
    c->paths[len - names] = 0;   /* the last name ends inside, whatever the file says */
    size_t at = 0, plen = len - names;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t v[3];
        memcpy(v, d + 16 + i * 24, sizeof v);
        if (at > plen || v[1] < v[0] || v[2] > UINT64_MAX / page)
            return SW_EFORMAT;
        c->files[i] = (sw_core_file){v[0], v[1], v[2] * page, c->paths + at};
        at += strlen(c->paths + at) + 1;
    }
    c->nfiles = (size_t)count;
    return SW_OK;
}

static int read_notes(sw_core *c, const unsigned char *d, size_t len)
{
    size_t p = 0;
    while (len - p >= sizeof(Elf64_Nhdr)) {
        Elf64_Nhdr nh;
        memcpy(&nh, d + p, sizeof nh);
        p += sizeof nh;
        uint64_t name_sz = ((uint64_t)nh.n_namesz + 3) & ~3ull, desc_sz = ((uint64_t)nh.n_descsz + 3) & ~3ull;
        if (name_sz > len - p || desc_sz > len - p - name_sz)
            return SW_EFORMAT;
        const unsigned char *desc = d + p + name_sz;
        if (nh.n_type == NT_FILE && !c->files) {
            int rc = read_file_note(c, desc, nh.n_descsz);
            if (rc != SW_OK)
                return rc;
        } else if (nh.n_type == NT_PRSTATUS && nh.n_descsz >= sizeof(prstatus_t) && SW_CORE_HAS_GREGS &&
                   c->nthreads < SW_CORE_MAX_THREADS) {
            prstatus_t st;
            memcpy(&st, desc, sizeof st);
            sw_core_thread *v = sw_array_grow(c->threads, &c->capthreads, c->nthreads + 1, sizeof *v, 16);
            if (!v)
                return SW_ENOMEM;
            c->threads = v;
            sw_core_thread *t = &c->threads[c->nthreads++];
            t->tid = st.pr_pid;
            memcpy(t->gregs, &st.pr_reg, sizeof t->gregs);
        } else if (nh.n_type == NT_AUXV) {
            for (size_t i = 0; i + 16 <= nh.n_descsz; i += 16) {   /* (type, value) pairs */
                uint64_t kv[2];
                memcpy(kv, desc + i, sizeof kv);
                if (kv[0] == AT_NULL)
                    break;
                if (kv[0] == AT_SYSINFO_EHDR)
                    c->vdso = kv[1];
            }
        } else if (nh.n_type == NT_PRPSINFO && nh.n_descsz >= sizeof(prpsinfo_t)) {
            prpsinfo_t ps;
            memcpy(&ps, desc, sizeof ps);
            c->pid = ps.pr_pid;
            memcpy(c->command, ps.pr_fname, sizeof ps.pr_fname < 16 ? sizeof ps.pr_fname : 16);
            c->command[16] = 0;
        }
        p += name_sz + desc_sz;
    }
    return SW_OK;
}

static int by_vaddr(const void *a, const void *b)
{
    const sw_core_segment *x = a, *y = b;
    return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

static int read_headers(sw_core *c, char *err, size_t errlen)
{
    Elf64_Ehdr h;
    if (read_at(c, 0, &h, sizeof h) != SW_OK || memcmp(h.e_ident, ELFMAG, SELFMAG) != 0)
        FAIL(SW_EFORMAT, "not an ELF file");
    if (h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_ident[EI_DATA] != ELFDATA2LSB)
        FAIL(SW_EFORMAT, "not a 64-bit little-endian ELF file");
    if (h.e_type != ET_CORE)
        FAIL(SW_EFORMAT, "an ELF file but not a core file (type %u)", h.e_type);
    if (h.e_phentsize != sizeof(Elf64_Phdr) || h.e_phnum == 0 || h.e_phnum == PN_XNUM)
        FAIL(SW_EFORMAT, "a core file without sane program headers");
    Elf64_Phdr *ph = malloc((size_t)h.e_phnum * sizeof *ph);
    c->seg = malloc((size_t)h.e_phnum * sizeof *c->seg);
    if (!ph || !c->seg) {
        free(ph);
        FAIL(SW_ENOMEM, "out of memory");
    }
    if (read_at(c, h.e_phoff, ph, (size_t)h.e_phnum * sizeof *ph) != SW_OK) {
        free(ph);
        FAIL(SW_EFORMAT, "program headers outside the file");
    }
    int rc = SW_OK;
    uint64_t notes_read = 0;
    for (size_t i = 0; i < h.e_phnum && rc == SW_OK; i++) {
        const Elf64_Phdr *p = &ph[i];
        if (p->p_type == PT_LOAD) {
            if (p->p_filesz > p->p_memsz || p->p_vaddr + p->p_memsz < p->p_vaddr)
                continue;   /* impossible: left out */
            uint64_t have = p->p_offset > c->size ? 0 : c->size - p->p_offset;   /* a core cut short holds less */
            c->seg[c->nseg++] = (sw_core_segment){p->p_vaddr, p->p_memsz, p->p_offset,
                                                  p->p_filesz < have ? p->p_filesz : have, p->p_flags};
        } else if (p->p_type == PT_NOTE && p->p_filesz) {
            if (p->p_filesz > SW_CORE_MAX_NOTES - notes_read) {
                rc = SW_EFORMAT;
                break;
            }
            notes_read += p->p_filesz;
            unsigned char *d = malloc(p->p_filesz);
            if (!d)
                rc = SW_ENOMEM;
            else if (read_at(c, p->p_offset, d, p->p_filesz) != SW_OK)
                rc = SW_EFORMAT;
            else
                rc = read_notes(c, d, p->p_filesz);
            free(d);
        }
    }
    free(ph);
    if (rc == SW_ENOMEM)
        FAIL(rc, "out of memory");
    if (rc != SW_OK)
        FAIL(rc, "a core file with malformed notes");
    qsort(c->seg, c->nseg, sizeof *c->seg, by_vaddr);
    return SW_OK;
}

int sw_core_open(const char *path, sw_core **out, char *err, size_t errlen)
{
    *out = NULL;
    sw_core *c = calloc(1, sizeof *c);
    if (!c)
        FAIL(SW_ENOMEM, "out of memory");
    c->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (c->fd < 0 || fstat(c->fd, &st) != 0) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        sw_core_free(c);
        errno = e;
        return SW_EIO;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        sw_core_free(c);
        return SW_EFORMAT;
    }
    c->size = (uint64_t)st.st_size;
    char why[160];
    int rc = read_headers(c, why, sizeof why);
    if (rc != SW_OK) {
        snprintf(err, errlen, "%s: %s", path, why);
        sw_core_free(c);
        return rc;
    }
    *out = c;
    return SW_OK;
}

#undef FAIL

void sw_core_free(sw_core *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c->seg);
    free(c->files);
    free(c->paths);
    free(c->threads);
    free(c);
}

const sw_core_segment *sw_core_segments(const sw_core *c, size_t *n)
{
    *n = c->nseg;
    return c->seg;
}

const sw_core_file *sw_core_files(const sw_core *c, size_t *n)
{
    *n = c->nfiles;
    return c->files;
}

const sw_core_thread *sw_core_threads(const sw_core *c, size_t *n)
{
    *n = c->nthreads;
    return c->threads;
}

int sw_core_pid(const sw_core *c)
{
    return c->pid;
}

const char *sw_core_command(const sw_core *c)
{
    return c->command;
}

uint64_t sw_core_vdso(const sw_core *c)
{
    return c->vdso;
}

/* The segment holding addr, or NULL. */
static const sw_core_segment *segment_at(const sw_core *c, uint64_t addr)
{
    size_t lo = 0, hi = c->nseg;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->seg[mid].vaddr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return NULL;
    const sw_core_segment *s = &c->seg[lo - 1];
    return addr - s->vaddr < s->memsz ? s : NULL;
}

size_t sw_core_read(const sw_core *c, uint64_t addr, void *buf, size_t len)
{
    size_t done = 0;
    while (done < len) {
        const sw_core_segment *s = segment_at(c, addr + done);
        if (!s)
            break;
        uint64_t in = addr + done - s->vaddr;
        if (in >= s->filesz)
            break;   /* not dumped */
        uint64_t n = s->filesz - in;
        if (n > len - done)
            n = len - done;
        if (read_at(c, s->offset + in, (char *)buf + done, (size_t)n) != SW_OK)
            break;
        done += (size_t)n;
    }
    return done;
}
