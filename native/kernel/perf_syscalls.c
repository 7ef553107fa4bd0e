/*
 * perf_syscalls.c - this process's system calls from the raw_syscalls
 * tracepoints, through per-CPU perf rings read by a thread of its own
 * (perf_syscalls.h).
 */
#define _GNU_SOURCE
#include "perf_syscalls.h"

#include "syscall_names.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Records newer than this (before the start of a reading round) wait for
 * the next round: an exit's enter may sit in a ring read earlier in the
 * round. */
#define HOLD_NS 2000000u
#define POLL_MS 20

/* One field of a tracepoint's record: where it is. */
typedef struct tp_field {
    unsigned offset, size;
} tp_field;

typedef struct tracepoint {
    uint64_t id;
    tp_field nr;             /* sys_enter and sys_exit: long id */
    tp_field ret;            /* sys_exit: long ret */
} tracepoint;

/* A record read from a ring, waiting to be paired in time order. */
typedef struct pending {
    uint64_t t;
    uint32_t tid;
    uint8_t exit;
    long nr;
    int64_t ret;
} pending;

/* A thread's open call. */
typedef struct open_call {
    uint64_t enter_ns;
    long nr;
    int open;
} open_call;

typedef struct ring {
    int fd;                  /* the enter event of the CPU: owns the ring */
    struct perf_event_mmap_page *meta;
    uint8_t *data;
    uint64_t size;           /* data bytes, a power of two */
} ring;

struct sw_syscalls {
    ring *rings;
    unsigned nrings;
    int *fds;                /* every event opened (the rings' included) */
    size_t nfds, fds_cap;
    size_t map_bytes;
    tracepoint enter, exit;
    pid_t pid;
    int stop_fd;             /* eventfd: stop the thread */
    pthread_t thread;
    int running;
    _Atomic uint32_t reader_tid;
    sw_syscall_sink sink;
    pending *pend;
    size_t npend, pend_cap;
    uint64_t *tids;          /* thread table: keys */
    open_call *calls;        /* and their open calls */
    size_t ntids, tids_cap, calls_cap;
    sw_hashtab tid_index;
    uint8_t *scratch;        /* a record that wraps around its ring */
    sw_syscalls_stats st;
    pthread_mutex_t stats_lock;
};

/* ---- tracefs: the tracepoints' ids and formats, read once ---- */

static const char *const tracefs_dirs[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};

static int read_text(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    buf[n] = 0;
    return n ? 0 : -1;
}

/* The offset and size of the field declared as `decl` ("long id") in a
 * tracepoint's format text; -1 when it is not there. */
static int find_field(const char *fmt, const char *decl, tp_field *out)
{
    char key[64];
    snprintf(key, sizeof key, "field:%s;", decl);
    const char *p = strstr(fmt, key);
    unsigned off, size;
    if (!p || !(p = strstr(p, "offset:")) || sscanf(p, "offset:%u;\tsize:%u;", &off, &size) != 2)
        return -1;
    out->offset = off;
    out->size = size;
    return 0;
}

static int load_tracepoint(const char *dir, const char *name, tracepoint *tp, int is_exit)
{
    char path[256], text[4096];
    snprintf(path, sizeof path, "%s/events/raw_syscalls/%s/id", dir, name);
    if (read_text(path, text, sizeof text))
        return -1;
    char *end;
    unsigned long long id = strtoull(text, &end, 10);
    if (end == text)
        return -1;
    tp->id = id;
    snprintf(path, sizeof path, "%s/events/raw_syscalls/%s/format", dir, name);
    if (read_text(path, text, sizeof text) || find_field(text, "long id", &tp->nr) || tp->nr.size != 8)
        return -1;
    if (is_exit && (find_field(text, "long ret", &tp->ret) || tp->ret.size != 8))
        return -1;
    return 0;
}

static int load_tracepoints(sw_syscalls *s, char *note, size_t notelen)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        for (size_t i = 0; i < sizeof tracefs_dirs / sizeof *tracefs_dirs; i++)
            if (!load_tracepoint(tracefs_dirs[i], "sys_enter", &s->enter, 0) &&
                !load_tracepoint(tracefs_dirs[i], "sys_exit", &s->exit, 1))
                return 0;
        /* Not mounted: mount it where the kernel expects it (root only). */
        struct stat sb;
        if (attempt || stat(tracefs_dirs[0], &sb) || mount("tracefs", tracefs_dirs[0], "tracefs", 0, NULL))
            break;
        snprintf(note, notelen, "mounted tracefs at %s", tracefs_dirs[0]);
    }
    return -1;
}

/* ---- opening ---- */

static int add_fd(sw_syscalls *s, int fd)
{
    int *f = sw_array_grow(s->fds, &s->fds_cap, s->nfds + 1, sizeof *f, 16);
    if (!f) {
        close(fd);
        return SW_ENOMEM;
    }
    s->fds = f;
    s->fds[s->nfds++] = fd;
    return SW_OK;
}

static int open_event(const tracepoint *tp, pid_t tid, int cpu, size_t wakeup)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_TRACEPOINT;
    a.config = tp->id;
    a.sample_period = 1;
    a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_RAW;
    a.inherit = 1;
    a.sample_id_all = 1;     /* LOST records carry pid, tid and time too */
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC;
    a.watermark = 1;
    a.wakeup_watermark = (uint32_t)wakeup;
    return (int)syscall(SYS_perf_event_open, &a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static void say_refused(char *err, size_t errlen, int e)
{
    char paranoid[32] = "?";
    if (!read_text("/proc/sys/kernel/perf_event_paranoid", paranoid, sizeof paranoid))
        paranoid[strcspn(paranoid, "\n")] = 0;
    if (e == EACCES || e == EPERM)
        snprintf(err, errlen,
                 "perf_event_open of the raw_syscalls tracepoints was refused (%s): it needs root or "
                 "CAP_PERFMON (kernel.perf_event_paranoid is %s)",
                 strerror(e), paranoid);
    else
        snprintf(err, errlen, "perf_event_open of the raw_syscalls tracepoints failed: %s", strerror(e));
}

/* Opens enter and exit events of thread tid on every CPU, into the rings
 * (the first call, for this process's main thread, creates them). */
static int open_thread(sw_syscalls *s, pid_t tid, int first, char *err, size_t errlen)
{
    for (unsigned c = 0; c < s->nrings; c++) {
        if (!first && s->rings[c].fd < 0)
            continue;   /* an offline CPU: no ring */
        int fe = open_event(&s->enter, tid, (int)c, s->rings[0].size / 4);
        if (fe < 0) {
            if (!first && (errno == ESRCH || errno == ENOENT))
                return SW_OK;   /* the thread ended meanwhile */
            if (errno == ENODEV || errno == EINVAL) {
                if (c > 0 && first)
                    continue;   /* an offline CPU */
            }
            say_refused(err, errlen, errno);
            return SW_EIO;
        }
        if (add_fd(s, fe))
            return SW_ENOMEM;
        int fx = open_event(&s->exit, tid, (int)c, s->rings[0].size / 4);
        if (fx < 0) {
            say_refused(err, errlen, errno);
            return SW_EIO;
        }
        if (add_fd(s, fx))
            return SW_ENOMEM;
        ring *r = &s->rings[c];
        if (first) {
            void *m = mmap(NULL, s->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fe, 0);
            if (m == MAP_FAILED) {
                snprintf(err, errlen, "cannot map a perf ring of %zu bytes: %s", s->map_bytes, strerror(errno));
                return SW_EIO;
            }
            r->fd = fe;
            r->meta = m;
            r->data = (uint8_t *)m + sysconf(_SC_PAGESIZE);
            r->size = s->map_bytes - (size_t)sysconf(_SC_PAGESIZE);
        } else if (r->fd < 0 || ioctl(fe, PERF_EVENT_IOC_SET_OUTPUT, r->fd)) {
            snprintf(err, errlen, "cannot redirect a perf event to its CPU's ring: %s", strerror(errno));
            return SW_EIO;
        }
        if (ioctl(fx, PERF_EVENT_IOC_SET_OUTPUT, r->fd)) {
            snprintf(err, errlen, "cannot redirect a perf event to its CPU's ring: %s", strerror(errno));
            return SW_EIO;
        }
    }
    return SW_OK;
}

int sw_syscalls_open(sw_syscalls **out, size_t ring_bytes, char *err, size_t errlen, char *note, size_t notelen)
{
    *out = NULL;
    if (note && notelen)
        note[0] = 0;
    err[0] = 0;
    sw_syscalls *s = calloc(1, sizeof *s);
    if (!s)
        return SW_ENOMEM;
    s->stop_fd = -1;
    pthread_mutex_init(&s->stats_lock, NULL);
    s->pid = getpid();
    char dummy[128];
    if (load_tracepoints(s, note ? note : dummy, note ? notelen : sizeof dummy)) {
        snprintf(err, errlen, "the raw_syscalls tracepoints are not readable in tracefs (/sys/kernel/tracing): "
                              "it needs root, and tracefs mounted");
        sw_syscalls_free(s);
        return SW_EIO;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    long page = sysconf(_SC_PAGESIZE);
    if (ncpu < 1 || ncpu > 4096 || page < 4096) {
        snprintf(err, errlen, "cannot count the CPUs");
        sw_syscalls_free(s);
        return SW_EIO;
    }
    size_t pages = 1;
    size_t want = ring_bytes ? ring_bytes : 512 * 1024;
    while (pages * (size_t)page < want && pages < 65536)
        pages *= 2;
    s->map_bytes = (pages + 1) * (size_t)page;
    s->nrings = (unsigned)ncpu;
    s->rings = calloc(s->nrings, sizeof *s->rings);
    s->scratch = malloc(pages * (size_t)page);
    if (!s->rings || !s->scratch) {
        sw_syscalls_free(s);
        return SW_ENOMEM;
    }
    for (unsigned c = 0; c < s->nrings; c++) {
        s->rings[c].fd = -1;
        s->rings[c].size = pages * (size_t)page;
    }
    int rc = open_thread(s, s->pid, 1, err, errlen);
    /* The threads that run already (the new ones inherit the events). */
    DIR *d = rc ? NULL : opendir("/proc/self/task");
    struct dirent *e;
    while (d && rc == SW_OK && (e = readdir(d))) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (end != e->d_name && !*end && tid > 0 && tid != s->pid)
            rc = open_thread(s, (pid_t)tid, 0, err, errlen);
    }
    if (d)
        closedir(d);
    if (rc) {
        if (!err[0])
            snprintf(err, errlen, "%s", sw_strerror(rc));
        sw_syscalls_free(s);
        return rc;
    }
    s->st.cpus = s->nrings;
    *out = s;
    return SW_OK;
}

/* ---- reading ---- */

static uint64_t now_ns(void) { return sw_clock_ns(CLOCK_MONOTONIC); }

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void count(sw_syscalls *s, uint64_t *field, uint64_t n)
{
    pthread_mutex_lock(&s->stats_lock);
    *field += n;
    pthread_mutex_unlock(&s->stats_lock);
}

static int add_pending(sw_syscalls *s, const pending *p)
{
    pending *g = sw_array_grow(s->pend, &s->pend_cap, s->npend + 1, sizeof *g, 1024);
    if (!g)
        return SW_ENOMEM;
    s->pend = g;
    s->pend[s->npend++] = *p;
    return SW_OK;
}

/* One PERF_RECORD_SAMPLE of `len` bytes (header included), validated. */
static void take_sample(sw_syscalls *s, const uint8_t *rec, size_t len)
{
    /* header 8, pid 4, tid 4, time 8, raw size 4, raw bytes */
    if (len < 28) {
        count(s, &s->st.malformed, 1);
        return;
    }
    uint32_t pid = rd32(rec + 8), tid = rd32(rec + 12);
    uint64_t t = rd64(rec + 16);
    uint32_t raw_size = rd32(rec + 24);
    const uint8_t *raw = rec + 28;
    if (raw_size > len - 28 || raw_size < 2) {
        count(s, &s->st.malformed, 1);
        return;
    }
    if (pid != (uint32_t)s->pid || tid == atomic_load(&s->reader_tid))
        return;   /* a child process's (inherited), or our own reading */
    uint16_t type;
    memcpy(&type, raw, 2);
    pending p = {t, tid, 0, 0, 0};
    const tracepoint *tp = type == s->enter.id ? &s->enter : type == s->exit.id ? &s->exit : NULL;
    if (!tp || tp->nr.offset + 8 > raw_size || (tp == &s->exit && tp->ret.offset + 8 > raw_size)) {
        count(s, &s->st.malformed, 1);
        return;
    }
    p.exit = tp == &s->exit;
    p.nr = (long)rd64(raw + tp->nr.offset);
    if (p.exit)
        p.ret = (int64_t)rd64(raw + tp->ret.offset);
    count(s, &s->st.records, 1);
    if (add_pending(s, &p))
        count(s, &s->st.unpaired, 1);
}

/* Reads what ring r holds into the pending list. */
static void drain(sw_syscalls *s, ring *r)
{
    if (!r->meta)
        return;
    uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = r->meta->data_tail;
    if (head - tail > r->size) {   /* cannot be: start over at head */
        count(s, &s->st.malformed, 1);
        tail = head;
    }
    uint64_t mask = r->size - 1;
    while (tail < head) {
        uint64_t left = head - tail;
        if (left < sizeof(struct perf_event_header))
            break;
        struct perf_event_header h;
        uint64_t off = tail & mask;
        for (size_t k = 0; k < sizeof h; k++)
            ((uint8_t *)&h)[k] = r->data[(off + k) & mask];
        if (h.size < sizeof h || h.size > left || (h.size & 7)) {
            count(s, &s->st.malformed, 1);
            tail = head;
            break;
        }
        const uint8_t *rec;
        if (off + h.size <= r->size) {
            rec = r->data + off;
        } else {   /* wraps: copy it whole */
            size_t first = (size_t)(r->size - off);
            memcpy(s->scratch, r->data + off, first);
            memcpy(s->scratch + first, r->data, h.size - first);
            rec = s->scratch;
        }
        if (h.type == PERF_RECORD_SAMPLE) {
            take_sample(s, rec, h.size);
        } else if (h.type == PERF_RECORD_LOST && h.size >= 24) {
            /* id, lost, then sample_id: pid, tid, time */
            uint64_t lost = rd64(rec + 16);
            uint64_t t = h.size >= 40 ? rd64(rec + 32) : 0;
            count(s, &s->st.lost, lost);
            if (s->sink.lost)
                s->sink.lost(s->sink.ud, t, lost);
        }
        tail += h.size;
    }
    __atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
}

static int cmp_pending(const void *a, const void *b)
{
    const pending *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (int)x->exit - (int)y->exit;   /* an enter before an exit of the same time */
}

static open_call *call_of(sw_syscalls *s, uint32_t tid)
{
    uint32_t i = sw_hashtab_get_u64(&s->tid_index, s->tids, tid);
    if (i != SW_HT_NONE)
        return &s->calls[i];
    uint64_t *k = sw_array_grow(s->tids, &s->tids_cap, s->ntids + 1, sizeof *k, 64);
    if (!k)
        return NULL;
    s->tids = k;
    open_call *c = sw_array_grow(s->calls, &s->calls_cap, s->ntids + 1, sizeof *c, 64);
    if (!c)
        return NULL;
    s->calls = c;
    if (sw_hashtab_add(&s->tid_index, sw_hash_u64(tid), (uint32_t)s->ntids))
        return NULL;
    s->tids[s->ntids] = tid;
    s->calls[s->ntids] = (open_call){0, 0, 0};
    return &s->calls[s->ntids++];
}

/* Pairs the pending records up to time `until` (all: UINT64_MAX). */
static void pair(sw_syscalls *s, uint64_t until)
{
    if (s->npend > 1)
        qsort(s->pend, s->npend, sizeof *s->pend, cmp_pending);
    size_t k = 0;
    for (; k < s->npend && s->pend[k].t <= until; k++) {
        const pending *p = &s->pend[k];
        open_call *c = call_of(s, p->tid);
        if (!c) {
            count(s, &s->st.unpaired, 1);
            continue;
        }
        if (!p->exit) {
            if (c->open)
                count(s, &s->st.unpaired, 1);   /* its exit was lost */
            *c = (open_call){p->t, p->nr, 1};
            continue;
        }
        if (!c->open || c->nr != p->nr) {
            count(s, &s->st.unpaired, 1);   /* its enter was lost, or was before the start */
            c->open = 0;
            continue;
        }
        c->open = 0;
        sw_syscall call = {p->tid, p->nr, sw_syscall_name(p->nr), p->ret, c->enter_ns, p->t};
        count(s, &s->st.calls, 1);
        if (s->sink.syscall)
            s->sink.syscall(s->sink.ud, &call);
    }
    memmove(s->pend, s->pend + k, (s->npend - k) * sizeof *s->pend);
    s->npend -= k;
}

static void read_round(sw_syscalls *s, uint64_t until)
{
    for (unsigned c = 0; c < s->nrings; c++)
        drain(s, &s->rings[c]);
    pair(s, until);
}

/* The kernel reports records lost in a ring with the next record it
 * writes there: at the end, after the rings are read, this thread makes a
 * system call on each CPU in turn (its own records are left out), so that
 * a loss just before the stop is reported too. */
static void flush_lost(sw_syscalls *s)
{
    for (unsigned c = 0; c < s->nrings; c++)
        drain(s, &s->rings[c]);
    cpu_set_t old, one;
    if (sched_getaffinity(0, sizeof old, &old))
        return;
    for (unsigned c = 0; c < s->nrings && c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &old))
            continue;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        if (sched_setaffinity(0, sizeof one, &one) == 0)
            syscall(SYS_getppid);
    }
    sched_setaffinity(0, sizeof old, &old);
}

static void *reader_main(void *arg)
{
    sw_syscalls *s = arg;
    atomic_store(&s->reader_tid, (uint32_t)syscall(SYS_gettid));
    struct pollfd *pf = calloc(s->nrings + 1, sizeof *pf);
    if (!pf)
        return NULL;
    unsigned n = 0;
    pf[n++] = (struct pollfd){s->stop_fd, POLLIN, 0};
    for (unsigned c = 0; c < s->nrings; c++)
        if (s->rings[c].fd >= 0)
            pf[n++] = (struct pollfd){s->rings[c].fd, POLLIN, 0};
    for (;;) {
        int rc = poll(pf, n, POLL_MS);
        if (rc < 0 && errno != EINTR)
            break;
        if (pf[0].revents)
            break;
        for (unsigned i = 1; i < n; i++)
            if (pf[i].revents & (POLLHUP | POLLERR | POLLNVAL))
                pf[i].fd = -1;   /* its task ended: no more wakeups from it (still read each round) */
        uint64_t t = now_ns();
        read_round(s, t > HOLD_NS ? t - HOLD_NS : 0);
    }
    free(pf);
    flush_lost(s);
    return NULL;
}

int sw_syscalls_start(sw_syscalls *s, const sw_syscall_sink *sink)
{
    if (s->running)
        return SW_ESTATE;
    s->sink = *sink;
    s->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (s->stop_fd < 0)
        return SW_EIO;
    for (size_t i = 0; i < s->nfds; i++)
        ioctl(s->fds[i], PERF_EVENT_IOC_ENABLE, 0);
    if (pthread_create(&s->thread, NULL, reader_main, s)) {
        close(s->stop_fd);
        s->stop_fd = -1;
        return SW_ENOMEM;
    }
    s->running = 1;
    return SW_OK;
}

void sw_syscalls_stop(sw_syscalls *s)
{
    if (!s || !s->running)
        return;
    uint64_t one = 1;
    ssize_t w = write(s->stop_fd, &one, sizeof one);
    (void)w;
    pthread_join(s->thread, NULL);
    s->running = 0;
    for (size_t i = 0; i < s->nfds; i++)
        ioctl(s->fds[i], PERF_EVENT_IOC_DISABLE, 0);
    read_round(s, UINT64_MAX);
    uint64_t unfinished = 0;
    for (size_t i = 0; i < s->ntids; i++)
        unfinished += s->calls[i].open;
    count(s, &s->st.unfinished, unfinished);
    s->sink = (sw_syscall_sink){0};
}

void sw_syscalls_stats_get(sw_syscalls *s, sw_syscalls_stats *out)
{
    pthread_mutex_lock(&s->stats_lock);
    *out = s->st;
    pthread_mutex_unlock(&s->stats_lock);
}

void sw_syscalls_free(sw_syscalls *s)
{
    if (!s)
        return;
    sw_syscalls_stop(s);
    for (unsigned c = 0; s->rings && c < s->nrings; c++)
        if (s->rings[c].meta)
            munmap(s->rings[c].meta, s->map_bytes);
    for (size_t i = 0; i < s->nfds; i++)
        close(s->fds[i]);
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    free(s->fds);
    free(s->rings);
    free(s->scratch);
    free(s->pend);
    free(s->tids);
    free(s->calls);
    sw_hashtab_free(&s->tid_index);
    pthread_mutex_destroy(&s->stats_lock);
    free(s);
}
