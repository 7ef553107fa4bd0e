/*
 * unwind.c - a thread of another process stopped and its native stack
 * unwound from outside, with the CFI of its mapped files (see unwind.h).
 *
 * The process's file mappings (/proc/PID/maps) are read at the first use
 * and again, at most once per capture, when an address is in none of them
 * (a library loaded since). Each file's .eh_frame and .eh_frame_hdr are
 * copied out of it once (the rest of the file is not kept) with its load
 * bias; the vDSO, which is no file, is read from the target's memory.
 */
#define _GNU_SOURCE
#include "unwind.h"
#include "coremem.h"
#include "freeze.h"
#include "target.h"

#include "elf/elf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__) && defined(__x86_64__)
#  include <sys/ptrace.h>
#  include <sys/user.h>
#  define SW_UNWIND_OK 1
#else
#  define SW_UNWIND_OK 0
#endif

#define MAX_MAPS 65536u
#define MAX_FILES 4096u
#define PATH_LEN 512
#define STACK_BLOCK 8192u            /* bytes of stack read at a time */
#define VDSO_MAX (1u << 20)
#define ALL_REGS ((1u << SW_CFI_NREGS) - 1)
/* rbx, rbp, r12-r15: what a callee keeps for its caller (the others are
 * not known in a caller's frame), and rsp. */
#define CALLEE_SAVED (1u << 3 | 1u << 6 | 1u << 7 | 1u << 12 | 1u << 13 | 1u << 14 | 1u << 15)

typedef struct file {
    char *path;                      /* as the target sees it ("[vdso]" for the vDSO) */
    char *open_path;                 /* through /proc/PID/root */
    int state;                       /* 0: not read yet, 1: read, -1: unreadable */
    unsigned char *sections;         /* .eh_frame then .eh_frame_hdr, copied */
    unsigned char *image;            /* the vDSO: its ELF image, read from the target's memory */
    size_t image_len;
    sw_cfi *cfi;                     /* NULL: no CFI */
    uint64_t bias;
} file;

typedef struct map {
    uint64_t start, end, offset;
    uint32_t file;
    uint8_t exec;
} map;

struct sw_unwinder {
    int pid;
    sw_mem *mem;
    sw_coremem *core;                /* a core file's process, else NULL */
    map *maps;
    size_t nmaps, capmaps;
    file *files;
    size_t nfiles, capfiles;
    int maps_read;                   /* 1 once read */
    int maps_fresh;                  /* 1: read during this capture already */
    sw_frozen frozen;
    int stopped;
    uint64_t stopped_at;
    int held;                        /* sw_unwind_set_held: the caller stops the threads */
    uint64_t blk_addr;               /* the stack block read last */
    size_t blk_len;
    unsigned char blk[STACK_BLOCK];
    char err[256];
    sw_unwind_stats st;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int sw_unwind_supported(char *err, size_t errlen)
{
#if SW_UNWIND_OK
    if (errlen)
        err[0] = 0;
    return 1;
#else
    snprintf(err, errlen, "native frames from outside need Linux on x86-64");
    return 0;
#endif
}

sw_unwinder *sw_unwinder_new(int pid, sw_mem *mem)
{
    sw_unwinder *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->pid = pid;
    u->mem = mem;
    return u;
}

sw_unwinder *sw_unwinder_new_core(sw_coremem *core, sw_mem *mem)
{
    sw_unwinder *u = sw_unwinder_new(0, mem);
    if (u)
        u->core = core;
    return u;
}

void sw_unwinder_free(sw_unwinder *u)
{
    if (!u)
        return;
    sw_unwind_release(u);
    for (size_t i = 0; i < u->nfiles; i++) {
        free(u->files[i].path);
        free(u->files[i].open_path);
        free(u->files[i].sections);
        free(u->files[i].image);
        sw_cfi_free(u->files[i].cfi);
    }
    free(u->files);
    free(u->maps);
    free(u);
}

const char *sw_unwind_error(const sw_unwinder *u)
{
    return u->err;
}

void sw_unwind_get_stats(const sw_unwinder *u, sw_unwind_stats *out)
{
    *out = u->st;
}

/* ---- the target's files ---- */

/* The index of the file at path, added if new (read from open_path, or
 * NULL: through /proc/PID/root); -1 if out of room. */
static long file_index(sw_unwinder *u, const char *path, const char *open)
{
    for (size_t i = u->nfiles; i-- > 0;)
        if (strcmp(u->files[i].path, path) == 0)
            return (long)i;
    if (u->nfiles == MAX_FILES)
        return -1;
    file *v = sw_array_grow(u->files, &u->capfiles, u->nfiles + 1, sizeof *v, 32);
    if (!v)
        return -1;
    u->files = v;
    file *f = &u->files[u->nfiles];
    memset(f, 0, sizeof *f);
    char open_path[PATH_LEN + 32];
    snprintf(open_path, sizeof open_path, "/proc/%d/root%s", u->pid, path);
    f->path = strdup(path);
    f->open_path = strdup(open ? open : path[0] == '/' ? open_path : path);
    if (!f->path || !f->open_path) {
        free(f->path);
        free(f->open_path);
        return -1;
    }
    return (long)u->nfiles++;
}

static int by_start(const void *a, const void *b)
{
    const map *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* A core's file mappings: its NT_FILE note, each file as found here
 * (none: unreadable, its addresses then without CFI or symbols), and its
 * vDSO, read from the core's bytes as from a live process's memory. */
static void read_core_maps(sw_unwinder *u)
{
    size_t n;
    const sw_core_file *cf = sw_core_files(sw_coremem_core(u->core), &n);
    u->nmaps = 0;
    for (size_t i = 0; i < n && i < MAX_MAPS; i++) {
        char local[PATH_LEN], err[256];
        if (cf[i].end <= cf[i].start)
            continue;
        if (sw_coremem_local(u->core, cf[i].path, local, sizeof local, err, sizeof err) != SW_OK)
            local[0] = 0;
        long fi = file_index(u, cf[i].path, local);
        map *v = fi < 0 ? NULL : sw_array_grow(u->maps, &u->capmaps, u->nmaps + 1, sizeof *v, 64);
        if (!v)
            break;
        u->maps = v;
        u->maps[u->nmaps++] = (map){cf[i].start, cf[i].end, cf[i].offset, (uint32_t)fi, 1};
    }
    /* the vDSO, no file: the core's segment at its address (NT_AUXV) */
    const sw_core *c = sw_coremem_core(u->core);
    uint64_t vdso = sw_core_vdso(c);
    const sw_core_segment *seg = sw_core_segments(c, &n);
    for (size_t i = 0; vdso && i < n; i++) {
        long fi = seg[i].vaddr == vdso && seg[i].memsz <= VDSO_MAX ? file_index(u, "[vdso]", "[vdso]") : -1;
        map *v = fi < 0 ? NULL : sw_array_grow(u->maps, &u->capmaps, u->nmaps + 1, sizeof *v, 64);
        if (v) {
            u->maps = v;
            u->maps[u->nmaps++] = (map){vdso, vdso + seg[i].memsz, 0, (uint32_t)fi, 1};
            break;
        }
    }
    if (u->nmaps)
        qsort(u->maps, u->nmaps, sizeof *u->maps, by_start);
}

/* (Re-)reads /proc/PID/maps: the mappings of files and of the vDSO. */
static void read_maps(sw_unwinder *u)
{
    u->maps_read = u->maps_fresh = 1;
    if (u->core) {
        read_core_maps(u);
        return;
    }
    char path[64], line[PATH_LEN + 128];
    snprintf(path, sizeof path, "/proc/%d/maps", u->pid);
    FILE *fp = fopen(path, "re");
    if (!fp)
        return;
    u->nmaps = 0;
    for (unsigned lines = 0; lines < MAX_MAPS && fgets(line, sizeof line, fp); lines++) {
        sw_maps_entry m;
        if (sw_target_maps_line(line, &m) != SW_OK || (m.path[0] != '/' && strcmp(m.path, "[vdso]") != 0))
            continue;
        long fi = file_index(u, m.path, NULL);
        map *v = fi < 0 ? NULL : sw_array_grow(u->maps, &u->capmaps, u->nmaps + 1, sizeof *v, 64);
        if (!v)
            break;
        u->maps = v;
        u->maps[u->nmaps++] = (map){m.start, m.end, m.offset, (uint32_t)fi, (uint8_t)(m.perms[2] == 'x')};
    }
    fclose(fp);
}

/* The mapping holding addr (maps are in address order), or NULL. */
static const map *find_map(const sw_unwinder *u, uint64_t addr)
{
    size_t lo = 0, hi = u->nmaps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u->maps[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < u->nmaps && u->maps[lo].start <= addr ? &u->maps[lo] : NULL;
}

/* Reads file fi's ELF file (the vDSO: from memory): its load bias, from
 * the mapping of a PT_LOAD segment's page-aligned file offset, and a copy
 * of its CFI sections. */
static void load_file(sw_unwinder *u, uint32_t fi)
{
    file *f = &u->files[fi];
    f->state = -1;
    sw_elf *e = NULL;
    char err[256];
    if (strcmp(f->path, "[vdso]") == 0) {
        for (size_t i = 0; i < u->nmaps && !e; i++) {
            const map *m = &u->maps[i];
            if (m->file != fi || m->end - m->start > VDSO_MAX)
                continue;
            unsigned char *buf = malloc((size_t)(m->end - m->start));
            size_t n = buf ? sw_mem_read_upto(u->mem, m->start, buf, (size_t)(m->end - m->start)) : 0;
            if (n && sw_elf_from_bytes(buf, n, &e, err, sizeof err) == SW_OK) {
                f->image = buf;   /* kept: its symbols name its functions (sw_unwind_object) */
                f->image_len = n;
            } else {
                free(buf);
            }
        }
    } else {
        sw_elf_open(f->open_path, &e, err, sizeof err);
    }
    if (!e)
        return;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    size_t nseg;
    const sw_elf_segment *seg = sw_elf_segments(e, &nseg);
    int found = 0;
    for (size_t i = 0; i < nseg && !found; i++)
        for (size_t k = 0; k < u->nmaps && !found; k++)
            if (u->maps[k].file == fi && u->maps[k].offset == (seg[i].offset & ~(page - 1))) {
                f->bias = u->maps[k].start - (seg[i].vaddr & ~(page - 1));
                found = 1;
            }
    size_t len = 0, hlen = 0;
    uint64_t addr = 0, haddr = 0;
    const unsigned char *eh = sw_elf_section(e, ".eh_frame", &len, &addr);
    const unsigned char *hdr = sw_elf_section(e, ".eh_frame_hdr", &hlen, &haddr);
    if (!hdr)
        hlen = 0;
    if (found && eh && (f->sections = malloc(len + hlen + 1))) {
        memcpy(f->sections, eh, len);
        if (hdr)
            memcpy(f->sections + len, hdr, hlen);
        if (sw_cfi_new(f->sections, len, addr, hdr ? f->sections + len : NULL, hlen, haddr, &f->cfi, err,
                       sizeof err) != SW_OK) {
            free(f->sections);
            f->sections = NULL;
        }
        u->st.files += f->cfi != NULL;
    }
    if (found)
        f->state = 1;
    sw_elf_free(e);
}

/* The readable file mapped executable at pc, or NULL. */
static file *file_at(sw_unwinder *u, uint64_t pc)
{
    if (!u->maps_read)
        read_maps(u);
    const map *m = find_map(u, pc);
    if (!m && !u->maps_fresh) {
        read_maps(u);
        m = find_map(u, pc);
    }
    if (!m || !m->exec)
        return NULL;
    if (u->files[m->file].state == 0)
        load_file(u, m->file);
    return u->files[m->file].state == 1 ? &u->files[m->file] : NULL;
}

int sw_unwind_object(sw_unwinder *u, uint64_t pc, sw_unwind_object_info *out)
{
    const file *f = file_at(u, pc);
    if (!f)
        return SW_EARG;
    *out = (sw_unwind_object_info){f->path, f->open_path, f->bias, f->image, f->image_len};
    return SW_OK;
}

/* ---- unwinding ---- */

/* The 8 bytes at addr of the target, through the block of stack read
 * last (the frames of a stack are near one another). 0 or -1. */
static int read8(void *ud, uint64_t addr, uint64_t *v)
{
    sw_unwinder *u = ud;
    if (addr >= u->blk_addr && u->blk_len >= 8 && addr - u->blk_addr <= u->blk_len - 8) {
        memcpy(v, u->blk + (addr - u->blk_addr), 8);
        return 0;
    }
    uint64_t base = addr & ~4095ull;
    size_t n = sw_mem_read_upto(u->mem, base, u->blk, STACK_BLOCK);
    u->blk_addr = base;
    u->blk_len = n;
    if (n >= 8 && addr - base <= n - 8) {
        memcpy(v, u->blk + (addr - base), 8);
        return 0;
    }
    return sw_mem_read(u->mem, addr, v, 8) == SW_OK ? 0 : -1;
}

/* One step with the CFI row: the caller's registers into nregs/nvalid.
 * 1, or 0 where the stack ends (the return address undefined) or the
 * rules cannot be followed. */
static int step_cfi(sw_unwinder *u, const sw_cfi_row *row, const uint64_t *regs, uint32_t valid, uint64_t *nregs,
                    uint32_t *nvalid)
{
    uint64_t cfa;
    if (row->cfa_is_expr) {
        if (sw_cfi_eval(row->cfa_expr, row->cfa_expr_len, regs, valid, 0, 0, read8, u, &cfa) != SW_OK)
            return 0;
    } else {
        if (!(valid & (1u << row->cfa_reg)))
            return 0;
        cfa = regs[row->cfa_reg] + (uint64_t)row->cfa_off;
    }
    if (row->regs[SW_CFI_RA].kind == SW_CFI_UNDEF)
        return 0;   /* the outermost frame */
    memcpy(nregs, regs, SW_CFI_NREGS * sizeof *nregs);
    *nvalid = (valid & CALLEE_SAVED) | 1u << SW_CFI_RA | 1u << SW_CFI_RSP;
    nregs[SW_CFI_RSP] = cfa;   /* (unless a rule says otherwise) */
    for (int r = 0; r < SW_CFI_NREGS; r++) {
        const sw_cfi_rule *ru = &row->regs[r];
        uint64_t v = 0;
        int ok = 1;
        switch (ru->kind) {
        case SW_CFI_SAME:
            if (r != SW_CFI_RA)
                continue;
            ok = 0;   /* a return address must be stated */
            break;
        case SW_CFI_UNDEF: ok = 0; break;
        case SW_CFI_OFFSET: ok = read8(u, cfa + (uint64_t)ru->off, &v) == 0; break;
        case SW_CFI_VAL_OFFSET: v = cfa + (uint64_t)ru->off; break;
        case SW_CFI_REGISTER:
            ok = (valid >> ru->reg) & 1;
            v = regs[ru->reg];
            break;
        case SW_CFI_EXPR:
        case SW_CFI_VAL_EXPR:
            ok = sw_cfi_eval(ru->expr, ru->expr_len, regs, valid, 1, cfa, read8, u, &v) == SW_OK &&
                 (ru->kind == SW_CFI_VAL_EXPR || read8(u, v, &v) == 0);
            break;
        }
        if (ok) {
            nregs[r] = v;
            *nvalid |= 1u << r;
        } else {
            *nvalid &= ~(1u << r);
        }
    }
    return (*nvalid >> SW_CFI_RA) & 1;
}

/* One step by the frame-pointer chain: rbp points at the saved rbp, the
 * return address above it. 1, or 0. */
static int step_fp(sw_unwinder *u, const uint64_t *regs, uint32_t valid, uint64_t *nregs, uint32_t *nvalid)
{
    uint64_t bp = regs[SW_CFI_RBP], saved, ra;
    if (!(valid & (1u << SW_CFI_RBP)) || bp < regs[SW_CFI_RSP] || (bp & 7) || read8(u, bp, &saved) != 0 ||
        read8(u, bp + 8, &ra) != 0)
        return 0;
    memcpy(nregs, regs, SW_CFI_NREGS * sizeof *nregs);
    nregs[SW_CFI_RBP] = saved;
    nregs[SW_CFI_RSP] = bp + 16;
    nregs[SW_CFI_RA] = ra;
    *nvalid = 1u << SW_CFI_RBP | 1u << SW_CFI_RSP | 1u << SW_CFI_RA;
    return 1;
}

int sw_unwind_regs(sw_unwinder *u, const uint64_t *in, uint64_t *pcs, uint8_t *flags, int max, int *truncated)
{
    uint64_t regs[SW_CFI_NREGS], nregs[SW_CFI_NREGS];
    uint32_t valid = ALL_REGS, nvalid = 0;
    memcpy(regs, in, sizeof regs);
    *truncated = 0;
    u->blk_len = 0;   /* the stack has changed since */
    int n = 0, exact = 1;   /* exact: pcs[n] is not a return address (the leaf, or after a signal frame) */
    for (;;) {
        uint64_t pc = regs[SW_CFI_RA];
        if (!((valid >> SW_CFI_RA) & 1) || pc == 0)
            break;
        if (n == max) {
            *truncated = 1;
            break;
        }
        pcs[n] = pc;
        if (flags)
            flags[n] = 0;
        n++;
        uint64_t look = exact ? pc : pc - 1;   /* a return address: the call before it */
        file *f = file_at(u, look);
        sw_cfi_row row;
        int moved;
        if (f && f->cfi && look >= f->bias && sw_cfi_find(f->cfi, look - f->bias, &row) == SW_OK) {
            moved = step_cfi(u, &row, regs, valid, nregs, &nvalid);
            exact = row.signal_frame;
        } else {
            if (flags)
                flags[n - 1] |= SW_UNWIND_BY_FP;
            u->st.by_fp++;
            moved = step_fp(u, regs, valid, nregs, &nvalid);
            exact = 0;
        }
        /* The stack unwinds upwards: a caller's stack pointer below or at
         * its callee's is a loop or a corrupt stack. */
        if (!moved || !((nvalid >> SW_CFI_RSP) & 1) || nregs[SW_CFI_RSP] <= regs[SW_CFI_RSP])
            break;
        memcpy(regs, nregs, sizeof regs);
        valid = nvalid;
    }
    u->st.frames += (uint64_t)n;
    return n;
}

void sw_unwind_regs_of_user(const uint64_t *g, uint64_t *regs)
{
    /* struct user_regs_struct: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax
     * rcx rdx rsi rdi orig_rax rip cs eflags rsp ... */
    static const unsigned char from[SW_CFI_NREGS] = {10, 12, 11, 5, 13, 14, 4, 19, 9, 8, 7, 6, 3, 2, 1, 0, 16};
    for (int i = 0; i < SW_CFI_NREGS; i++)
        regs[i] = g[from[i]];
}

int sw_unwind_capture(sw_unwinder *u, int tid, uint64_t *pcs, uint8_t *flags, int max, int *truncated)
{
    *truncated = 0;
    uint64_t regs[SW_CFI_NREGS];
    if (u->core) {
        size_t n;
        const sw_core_thread *t = sw_core_threads(sw_coremem_core(u->core), &n);
        for (size_t i = 0; i < n; i++) {
            if (t[i].tid == tid) {
                u->maps_fresh = 0;
                sw_unwind_regs_of_user(t[i].gregs, regs);
                u->st.captures++;
                return sw_unwind_regs(u, regs, pcs, flags, max, truncated);
            }
        }
        snprintf(u->err, sizeof u->err, "the core has no registers of thread %d", tid);
        u->st.stop_failed++;
        return SW_EARG;
    }
#if SW_UNWIND_OK
    u->maps_fresh = 0;
    sw_unwind_release(u);
    if (!u->maps_read) {
        /* The first time: every executable file's CFI read before any
         * thread is stopped, not while one is (libpython's file alone is
         * tens of MB). */
        read_maps(u);
        for (size_t i = 0; i < u->nmaps; i++)
            if (u->maps[i].exec && u->files[u->maps[i].file].state == 0)
                load_file(u, u->maps[i].file);
        u->maps_fresh = 0;
    }
    if (!u->held) {
        int rc = sw_freeze_thread(&u->frozen, u->pid, tid, u->err, sizeof u->err);
        if (rc != SW_OK) {
            u->st.stop_failed++;
            return rc;
        }
        u->stopped = 1;
        u->stopped_at = now_ns();
    }
    struct user_regs_struct ur;
    uint64_t g[SW_CORE_GREGS];
    _Static_assert(sizeof ur == sizeof g, "struct user_regs_struct is x86-64's");
    if (ptrace(PTRACE_GETREGS, tid, 0, &ur) != 0) {
        snprintf(u->err, sizeof u->err, "thread %d: its registers cannot be read", tid);
        sw_unwind_release(u);
        u->st.stop_failed++;
        return SW_EIO;
    }
    memcpy(g, &ur, sizeof g);
    sw_unwind_regs_of_user(g, regs);
    u->st.captures++;
    return sw_unwind_regs(u, regs, pcs, flags, max, truncated);
#else
    (void)tid;
    (void)pcs;
    (void)flags;
    (void)max;
    (void)regs;
    sw_unwind_supported(u->err, sizeof u->err);
    return SW_EIO;
#endif
}

void sw_unwind_set_held(sw_unwinder *u, int held)
{
    sw_unwind_release(u);
    u->held = held;
}

void sw_unwind_release(sw_unwinder *u)
{
    if (!u->stopped)
        return;
    sw_thaw(&u->frozen);
    u->stopped = 0;
    u->st.stop_ns += now_ns() - u->stopped_at;
}
