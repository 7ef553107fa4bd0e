/*
 * mem.c - fault-safe reads of a process's memory (see mem.h).
 */
#define _GNU_SOURCE
#include "mem.h"
#include "coremem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define BATCH 256            /* iovecs per process_vm_readv (IOV_MAX is 1024) */
#define LOW_ADDR 4096u       /* addresses below this are never valid */

static int bad_range(uint64_t addr, size_t len)
{
    return addr < LOW_ADDR || addr + len < addr || (uint64_t)(uintptr_t)addr != addr;
}

int sw_mem_open(sw_mem *m, int pid, uint64_t probe_addr, size_t probe_len, char *err, size_t errlen)
{
    char buf[64];
    m->pid = pid;
    m->fd = -1;
    m->core = NULL;
    m->reads = m->failed = m->refused = 0;
    m->refusing = 0;
    if (probe_len > sizeof buf)
        probe_len = sizeof buf;
    if (sw_mem_read(m, probe_addr, buf, probe_len) == 0)
        return SW_OK;
    int e1 = errno;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", pid);
    m->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (m->fd >= 0 && sw_mem_read(m, probe_addr, buf, probe_len) == 0)
        return SW_OK;
    int e2 = errno;
    sw_mem_close(m);
    snprintf(err, errlen, "cannot read the memory of process %d: process_vm_readv: %s; %s: %s", pid,
             strerror(e1), path, strerror(e2));
    return SW_EIO;
}

void sw_mem_open_core(sw_mem *m, struct sw_coremem *core)
{
    m->pid = 0;
    m->fd = -1;
    m->core = core;
    m->reads = m->failed = m->refused = 0;
    m->refusing = 0;
}

void sw_mem_close(sw_mem *m)
{
    if (m->fd >= 0)
        close(m->fd);
    m->fd = -1;
}

static ssize_t read_one(sw_mem *m, uint64_t addr, void *buf, size_t len)
{
    m->reads++;
    if (m->core) {
        size_t n = sw_coremem_read(m->core, addr, buf, len);
        return n ? (ssize_t)n : -1;
    }
    if (m->fd >= 0)
        return pread(m->fd, buf, len, (off_t)addr);
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    return process_vm_readv(m->pid, &local, 1, &remote, 1, 0);
}

int sw_mem_write(sw_mem *m, uint64_t addr, const void *buf, size_t len)
{
    if (len == 0)
        return SW_OK;
    if (bad_range(addr, len) || m->core)
        return SW_EIO;
    struct iovec local = {(void *)(uintptr_t)buf, len}, remote = {(void *)(uintptr_t)addr, len};
    return process_vm_writev(m->pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? SW_OK : SW_EIO;
}

int sw_mem_read_u64(sw_mem *m, uint64_t addr, uint64_t *value)
{
    uint64_t v;
    if (sw_mem_read(m, addr, &v, sizeof v) != SW_OK)
        return SW_EIO;
    *value = v;
    return SW_OK;
}

int sw_mem_read(sw_mem *m, uint64_t addr, void *buf, size_t len)
{
    if (len == 0)
        return SW_OK;
    if (m->refusing) {
        m->refused++;
        return SW_EIO;
    }
    if (bad_range(addr, len)) {
        m->failed++;
        errno = EFAULT;
        return SW_EIO;
    }
    if (read_one(m, addr, buf, len) == (ssize_t)len)
        return SW_OK;
    m->failed++;
    return SW_EIO;
}

size_t sw_mem_read_upto(sw_mem *m, uint64_t addr, void *buf, size_t len)
{
    if (len && m->refusing) {
        m->refused++;
        return 0;
    }
    if (len == 0 || bad_range(addr, len)) {
        if (len)
            m->failed++;
        return 0;
    }
    ssize_t r = read_one(m, addr, buf, len);
    if (r <= 0) {
        m->failed++;
        return 0;
    }
    return (size_t)r;
}

/* Requests that follow one another in a batch, each at a higher address
 * than the last one's end, less than a page after it, are read as one range
 * of the target (the bytes between go to a scratch buffer): the kernel
 * pins and walks the pages of each remote range separately, so a remote
 * range costs about as much as a page (measured here: ~0.9 us for another
 * range, ~0.7 us for another page, ~2.5 us for the call). A gap under a
 * page holds no page that neither request touches, so the range is
 * readable when both are. */
#define COALESCE_GAP 4096u

/* One batch of a readv: the requests from *i on gathered into at most
 * BATCH remote ranges (and their local buffers), *i moved past them. */
typedef struct batch {
    struct iovec local[2 * BATCH], remote[BATCH];
    size_t idx[BATCH], upto[BATCH];   /* each request and the local bytes up to its end */
    size_t k, nl, nr, total;
} batch;

/* Gathers into b up to BATCH plausible requests starting at *i; `gap`
 * takes the bytes between coalesced requests. A request that is empty is
 * ok at once, one out of range is not (counted failed once: *seen is the
 * first request not classified before). */
static void gather(sw_mem *m, sw_mem_req *reqs, size_t n, size_t *i, size_t *seen, batch *b, unsigned char *gap)
{
    b->k = b->nl = b->nr = b->total = 0;
    for (; *i < n && b->k < BATCH && b->nr < BATCH; (*i)++) {
        sw_mem_req *r = &reqs[*i];
        r->ok = 0;
        if (r->len == 0) {
            r->ok = 1;
            continue;
        }
        if (bad_range(r->addr, r->len)) {
            m->failed += *i >= *seen;
            continue;
        }
        const size_t nr = b->nr;
        uint64_t end = nr ? (uint64_t)(uintptr_t)b->remote[nr - 1].iov_base + b->remote[nr - 1].iov_len : 0;
        if (nr && r->addr >= end && r->addr - end < COALESCE_GAP) {
            if (r->addr > end) {
                b->local[b->nl++] = (struct iovec){gap, (size_t)(r->addr - end)};
                b->total += (size_t)(r->addr - end);
            }
            b->remote[nr - 1].iov_len += (size_t)(r->addr + r->len - end);
        } else {
            b->remote[b->nr++] = (struct iovec){(void *)(uintptr_t)r->addr, r->len};
        }
        b->local[b->nl++] = (struct iovec){r->buf, r->len};
        b->total += r->len;
        b->idx[b->k] = *i;
        b->upto[b->k++] = b->total;
    }
    if (*i > *seen)
        *seen = *i;
}

/* After the batch's process_vm_readv returned got: its requests read
 * whole are ok. Returns b->k if all were, else the index in the batch of
 * the one the kernel stopped in (it stops at the first byte it cannot
 * read), counted failed. */
static size_t batch_read(sw_mem *m, sw_mem_req *reqs, const batch *b, ssize_t got)
{
    size_t done = got > 0 ? (size_t)got : 0, j = 0;
    for (; j < b->k && b->upto[j] <= done; j++)
        reqs[b->idx[j]].ok = 1;
    m->failed += j < b->k;
    return j;
}

static size_t count_ok(const sw_mem_req *reqs, size_t n)
{
    size_t good = 0;
    for (size_t j = 0; j < n; j++)
        good += (size_t)reqs[j].ok;
    return good;
}

/* Every read refused (sw_mem.refusing): none ok. */
static size_t refuse(sw_mem *m, sw_mem_req *reqs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        reqs[i].ok = reqs[i].len == 0;
    const size_t good = count_ok(reqs, n);
    m->refused += good < n;   /* (empty requests need no read) */
    return good;
}

size_t sw_mem_readv(sw_mem *m, sw_mem_req *reqs, size_t n)
{
    if (m->refusing)
        return refuse(m, reqs, n);
    if (m->fd >= 0 || m->core) {
        for (size_t i = 0; i < n; i++)
            reqs[i].ok = sw_mem_read(m, reqs[i].addr, reqs[i].buf, reqs[i].len) == 0;
        return count_ok(reqs, n);
    }
    unsigned char gap[COALESCE_GAP];   /* (what the kernel writes there is never read) */
    batch b;
    size_t i = 0, seen = 0;    /* requests before `seen` were classified already */
    while (i < n) {
        gather(m, reqs, n, &i, &seen, &b, gap);
        if (b.k == 0)
            continue;
        m->reads++;
        ssize_t got = process_vm_readv(m->pid, b.local, (unsigned long)b.nl, b.remote, (unsigned long)b.nr, 0);
        /* (after a failure, on with the request after the one it stopped in) */
        const size_t j = batch_read(m, reqs, &b, got);
        if (j + 1 < b.k)
            i = b.idx[j + 1];
    }
    return count_ok(reqs, n);
}

struct sw_mem_plan {
    batch b;
    unsigned char gap[COALESCE_GAP];
};

sw_mem_plan *sw_mem_plan_new(void)
{
    return calloc(1, sizeof(sw_mem_plan));
}

void sw_mem_plan_free(sw_mem_plan *p)
{
    free(p);
}

int sw_mem_plan_make(sw_mem *m, sw_mem_req *reqs, size_t n, sw_mem_plan *p, sw_mem_iov *out)
{
    if (m->refusing || m->fd >= 0 || m->core)
        return SW_ESTATE;
    size_t i = 0, seen = 0;
    gather(m, reqs, n, &i, &seen, &p->b, p->gap);
    if (i < n)
        return SW_EARG;   /* (more than one system call's) */
    out->local = p->b.local;
    out->nlocal = (unsigned long)p->b.nl;
    out->remote = p->b.remote;
    out->nremote = (unsigned long)p->b.nr;
    return SW_OK;
}

long sw_mem_plan_done(sw_mem *m, sw_mem_req *reqs, size_t n, const sw_mem_plan *p, long got)
{
    m->reads += p->b.k != 0;
    if (batch_read(m, reqs, &p->b, (ssize_t)got) + 1 < p->b.k)
        return -1;   /* (the requests after the one it stopped in were not read) */
    return (long)count_ok(reqs, n);
}
