/*
 * threadstate.c - thread states and CPU times from the kernel (see
 * threadstate.h).
 *
 * Cost per probe, measured on this 2-core VM (Linux 6.18): a pread of the
 * kept-open syscall file 0.85 us for a running thread, 1.8 us for a
 * sleeping one (the kernel waits until it is off the CPU to read its
 * registers); the CPU clock 0.64 us (another process: a pread of its kept
 * schedstat file). Opening a file each time would add ~5 us, hence the
 * kept descriptors.
 */
#define _GNU_SOURCE
#include "threadstate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A /proc file of a thread kept open. */
typedef struct kept {
    int fd;                  /* or -1 */
    dev_t dev;               /* identity of fd, checked before closing it */
    ino_t ino;
} kept;

enum { FILE_SYSCALL, FILE_SCHEDSTAT, NFILES };
static const char *const file_names[NFILES] = {"syscall", "schedstat"};

typedef struct entry {
    uint32_t tid;            /* 0: free slot */
    kept files[NFILES];      /* the syscall file; for another process the schedstat file */
    uint64_t cpu_ns;         /* CPU time at the previous probe */
    uint64_t cpu_round;      /* ... the round it was read in */
    int has_cpu;
    uint64_t seen;           /* last round probed */
} entry;

struct sw_threadstate {
    int pid;
    int own;                 /* pid is this process: CPU clocks work */
    uint32_t max_fds, open_fds;
    uint32_t cpu_every;      /* sw_threadstate_set_cpu_every */
    int stopped;             /* sw_threadstate_set_stopped */
    entry *slots;            /* open addressing by tid, linear probing */
    uint32_t cap, used;      /* cap is a power of two, used <= cap / 2 */
    uint32_t seen_this_round;
    uint64_t round;
    uint64_t first_round;    /* round of the first probe, or UINT64_MAX */
    int marked;              /* sw_threadstate_mark_start was called */
    sw_threadstate_stats st;
};

sw_threadstate *sw_threadstate_new(int pid, uint32_t max_fds)
{
    sw_threadstate *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->cap = 64;
    t->slots = calloc(t->cap, sizeof *t->slots);
    if (!t->slots) {
        free(t);
        return NULL;
    }
    t->pid = pid;
    t->own = pid == (int)getpid();
    t->max_fds = max_fds;
    t->first_round = UINT64_MAX;
    t->round = UINT64_MAX;
    return t;
}

/* Closes a kept file if it is still the one opened (see threadstate.h). */
static void drop_fd(sw_threadstate *t, kept *k)
{
    if (k->fd < 0)
        return;
    struct stat sb;
    if (fstat(k->fd, &sb) == 0 && sb.st_dev == k->dev && sb.st_ino == k->ino)
        close(k->fd);
    k->fd = -1;
    t->open_fds--;
}

static void drop_fds(sw_threadstate *t, entry *e)
{
    for (int f = 0; f < NFILES; f++)
        drop_fd(t, &e->files[f]);
}

void sw_threadstate_free(sw_threadstate *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; i < t->cap; i++)
        if (t->slots[i].tid)
            drop_fds(t, &t->slots[i]);
    free(t->slots);
    free(t);
}

static uint32_t slot_of(uint32_t tid, uint32_t cap)
{
    return (tid * 2654435761u) & (cap - 1);
}

static void place(entry *slots, uint32_t cap, const entry *e)
{
    uint32_t i = slot_of(e->tid, cap);
    while (slots[i].tid)
        i = (i + 1) & (cap - 1);
    slots[i] = *e;
}

/* Rebuilds the table into `cap` slots, keeping the entries seen in
 * `keep_round` (all if keep_round is UINT64_MAX); closes the others. */
static int rebuild(sw_threadstate *t, uint32_t cap, uint64_t keep_round)
{
    entry *ns = calloc(cap, sizeof *ns);
    if (!ns)
        return SW_ENOMEM;
    uint32_t used = 0;
    for (uint32_t i = 0; i < t->cap; i++) {
        entry *e = &t->slots[i];
        if (!e->tid)
            continue;
        if (keep_round != UINT64_MAX && e->seen != keep_round) {
            drop_fds(t, e);
            continue;
        }
        place(ns, cap, e);
        used++;
    }
    free(t->slots);
    t->slots = ns;
    t->cap = cap;
    t->used = used;
    return SW_OK;
}

/* The entry of tid, added if new; NULL if out of memory. */
static entry *lookup(sw_threadstate *t, uint32_t tid, int *is_new)
{
    uint32_t i = slot_of(tid, t->cap);
    while (t->slots[i].tid) {
        if (t->slots[i].tid == tid) {
            *is_new = 0;
            return &t->slots[i];
        }
        i = (i + 1) & (t->cap - 1);
    }
    if ((t->used + 1) * 2 > t->cap) {
        if (rebuild(t, t->cap * 2, UINT64_MAX) != SW_OK)
            return NULL;
        return lookup(t, tid, is_new);
    }
    t->slots[i] = (entry){.tid = tid, .files = {{-1, 0, 0}, {-1, 0, 0}}};
    t->used++;
    *is_new = 1;
    return &t->slots[i];
}

static int open_file(sw_threadstate *t, uint32_t tid, int which)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%u/%s", t->pid, tid, file_names[which]);
    t->st.opens++;
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* Reads file `which` of e's thread into buf (NUL-terminated), through its
 * kept descriptor (opening one if there is room, else opening and closing
 * it), and parses it with parse(text, ctx). The value parse returns, or
 * fail (no such thread any more, not allowed, not parsed). */
static uint32_t read_kept(sw_threadstate *t, entry *e, int which, uint32_t (*parse)(const char *, void *),
                          void *ctx, uint32_t fail)
{
    char buf[256];
    kept *k = &e->files[which];
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = k->fd, temporary = 0;
        if (fd < 0) {
            fd = open_file(t, e->tid, which);
            if (fd < 0)
                return fail;
            temporary = 1;
            struct stat sb;
            if (t->open_fds < t->max_fds && fstat(fd, &sb) == 0) {
                *k = (kept){fd, sb.st_dev, sb.st_ino};
                t->open_fds++;
                temporary = 0;
            }
        }
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        if (temporary)
            close(fd);
        if (n > 0) {
            buf[n] = 0;
            uint32_t v = parse(buf, ctx);
            if (v != fail)
                return v;
        }
        if (temporary)
            return fail;
        /* The kept file failed (the thread ended and its id was reused, or
         * the descriptor is no longer ours): open it again, once. */
        drop_fd(t, k);
    }
    return fail;
}

uint32_t sw_threadstate_parse(const char *text, uint64_t gil_lo, uint64_t gil_hi)
{
    if (strncmp(text, "running", 7) == 0)
        return SW_STATE_RUNNING;
    char *end;
    errno = 0;
    long nr = strtol(text, &end, 10);
    if (end == text || errno)
        return SW_STATE_UNKNOWN;
    if (nr < 0)
        return SW_STATE_IDLE;   /* blocked, but not in a system call */
#ifdef SYS_futex
    if (nr == SYS_futex && gil_hi > gil_lo) {
        const char *p = end;
        errno = 0;
        unsigned long long uaddr = strtoull(p, &end, 16);
        if (end == p || errno)
            return SW_STATE_UNKNOWN;
        if (uaddr >= gil_lo && uaddr < gil_hi)
            return SW_STATE_GIL_WAIT;
    }
#endif
    return SW_STATE_IDLE;
}

typedef struct gil_range {
    uint64_t lo, hi;
    int stopped;
} gil_range;

static uint32_t parse_state(const char *text, void *ctx)
{
    const gil_range *g = ctx;
    /* A thread the reader stopped outside a system call was running (or
     * runnable): the kernel says "-1" for it, not "running". */
    if (g->stopped && text[0] == '-')
        return SW_STATE_RUNNING;
    return sw_threadstate_parse(text, g->lo, g->hi);
}

/* schedstat's first field, the CPU time in ns. */
static uint32_t parse_cpu(const char *text, void *ctx)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || errno)
        return 1;
    *(uint64_t *)ctx = v;
    return 0;
}

static int read_cpu(sw_threadstate *t, entry *e, uint64_t *ns)
{
    if (t->own) {
        /* The kernel's per-thread CPU clock id: ~tid << 3 | PERTHREAD(4) |
         * SCHED(2), as glibc's pthread_getcpuclockid makes it. */
        uint32_t u = (~e->tid << 3) | 6u;
        clockid_t c;
        _Static_assert(sizeof c == sizeof u, "clockid_t is 32 bits on Linux");
        memcpy(&c, &u, sizeof c);
        struct timespec ts;
        if (clock_gettime(c, &ts) != 0)
            return -1;
        *ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        return 0;
    }
    return read_kept(t, e, FILE_SCHEDSTAT, parse_cpu, ns, 1) == 0 ? 0 : -1;
}

static uint32_t probe(sw_threadstate *t, uint32_t tid, uint64_t round, const uint64_t *gil, uint64_t *cpu_delta);

int sw_threadstate_mark_start(sw_threadstate *t)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", t->pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char *end;
        errno = 0;
        unsigned long tid = strtoul(de->d_name, &end, 10);
        if (end == de->d_name || *end || errno || !tid || tid > UINT32_MAX)
            continue;   /* (".", "..") */
        int is_new;
        entry *e = lookup(t, (uint32_t)tid, &is_new);
        if (!e)
            break;
        uint64_t now;
        if (read_cpu(t, e, &now) == 0) {
            e->cpu_ns = now;
            e->cpu_round = 0;
            e->has_cpu = 1;
            n++;
        }
    }
    closedir(d);
    t->marked = 1;
    return n;
}

uint32_t sw_threadstate_probe(sw_threadstate *t, uint32_t tid, uint64_t round, uint64_t gil_lo, uint64_t gil_hi,
                              uint64_t *cpu_delta)
{
    const uint64_t gil[2] = {gil_lo, gil_hi};
    return probe(t, tid, round, gil, cpu_delta);
}

uint32_t sw_threadstate_probe_running(sw_threadstate *t, uint32_t tid, uint64_t round, uint64_t *cpu_delta)
{
    return probe(t, tid, round, NULL, cpu_delta);
}

/* The probe; gil NULL: the thread is known to run, its state not read. */
static uint32_t probe(sw_threadstate *t, uint32_t tid, uint64_t round, const uint64_t *gil, uint64_t *cpu_delta)
{
    *cpu_delta = SW_NO_CPU;
    t->st.probes++;
    if (t->first_round == UINT64_MAX)
        t->first_round = round;
    if (round != t->round) {
        t->round = round;
        t->seen_this_round = 0;
    }
    int is_new = 0;
    entry *e = tid ? lookup(t, tid, &is_new) : NULL;
    if (!e) {
        t->st.unknown++;
        t->st.no_cpu++;
        return SW_STATE_UNKNOWN;
    }
    if (e->seen != round) {
        e->seen = round;
        t->seen_this_round++;
    }
    uint32_t state = SW_STATE_RUNNING;
    if (gil) {
        gil_range g = {gil[0], gil[1], t->stopped};
        state = read_kept(t, e, FILE_SYSCALL, parse_state, &g, SW_STATE_UNKNOWN);
        if (state == SW_STATE_UNKNOWN)
            t->st.unknown++;
    }
    if (t->cpu_every > 1 && e->has_cpu && round - e->cpu_round < t->cpu_every) {
        *cpu_delta = 0;       /* (in the next read's delta) */
        return state;
    }
    uint64_t now;
    if (read_cpu(t, e, &now) != 0) {
        t->st.no_cpu++;
        e->has_cpu = 0;
        return state;
    }
    if (e->has_cpu && now >= e->cpu_ns)
        *cpu_delta = now - e->cpu_ns;
    else if (is_new && round == t->first_round && !t->marked)
        *cpu_delta = 0;       /* its CPU time so far predates the sampling (after a mark, one not
                                 marked was born since: new) */
    else
        *cpu_delta = now;     /* a new thread (or a new one with a reused id) */
    e->cpu_ns = now;
    e->cpu_round = round;
    e->has_cpu = 1;
    return state;
}

void sw_threadstate_set_cpu_every(sw_threadstate *t, uint32_t every)
{
    t->cpu_every = every;
}

void sw_threadstate_set_stopped(sw_threadstate *t, int stopped)
{
    t->stopped = stopped;
}

void sw_threadstate_sweep(sw_threadstate *t, uint64_t round)
{
    if (round != t->round || t->seen_this_round == t->used)
        return;
    uint32_t cap = t->cap;
    while (cap > 64 && t->seen_this_round * 8 < cap)
        cap /= 2;
    rebuild(t, cap, round);   /* out of memory: the stale entries stay until the next sweep */
}

void sw_threadstate_get_stats(const sw_threadstate *t, sw_threadstate_stats *out)
{
    *out = t->st;
}
