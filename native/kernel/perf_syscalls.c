/*
 * perf_syscalls.c - this process's system calls (raw_syscalls
 * tracepoints), scheduler switches and wakeups (sched tracepoints and
 * PERF_RECORD_SWITCH) and page faults (a software event), through per-CPU
 * perf rings read by a thread of its own (perf_syscalls.h).
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

/* The event sources: which one a sample came from (its identifier). */
enum source {
    SRC_ENTER, SRC_EXIT, SRC_SWITCH, SRC_WAKEUP,   /* tracepoints */
    SRC_WAKEUP_NEW,  /* sched_wakeup_new: a thread started, woken by the one that started it */
    SRC_FAULT,                                     /* the software page-fault event */
    SRC_SWITCHES,   /* without the privilege: a dummy event's PERF_RECORD_SWITCH only */
    SRC_SWITCH_IN, SRC_SWITCH_OUT,                 /* PERF_RECORD_SWITCH records */
    SRC_SWITCH_CPU,  /* sched_switch of any task on one CPU: who ran before a switch in */
    NSOURCES
};

typedef struct tracepoint {
    uint64_t id;
    tp_field f1;             /* sys_enter, sys_exit: long id; sched_switch: prev_pid; sched_wakeup: pid */
    tp_field f2;             /* sys_exit: long ret; sched_switch: prev_state; sched_wakeup: target_cpu */
    tp_field peer;           /* sched_switch: next_pid (the task that runs next; size 0: none) */
    tp_field comm;           /* sched_switch: next_comm; sched_waking: comm (the wakee's) */
    tp_field prev_comm;      /* sched_switch: prev_comm */
} tracepoint;

/* A record read from a ring, waiting to be handled in time order. */
typedef struct pending {
    uint64_t t;
    uint32_t tid;
    uint8_t src;             /* enum source */
    uint32_t cpu;
    uint64_t a, b;           /* ENTER: nr; EXIT: nr, ret; SWITCH: prev_state; WAKEUP: pid, cpu; FAULT: addr */
    uint32_t peer;           /* SWITCH: the task that runs next; SWITCH_IN: the task that ran before */
    char comm[16];           /* SWITCH, SWITCH_IN: its name ("": not seen); WAKEUP: the wakee's (NUL-terminated) */
} pending;

/* A thread's state: its open call, whether it is off CPU. */
typedef struct open_call {
    uint64_t enter_ns;
    long nr;
    int open;
    int off;                 /* switched out, not yet back */
    int seen;                /* a record of the thread was handled */
    uint32_t waker;          /* the thread of this process that woke it while off (0: none) */
    uint64_t woken_ns;
} open_call;

/* A finished event, held until its thread has no system call open that
 * began before it (the call's record comes at its entry time). */
typedef struct out_item {
    uint64_t t, seq;
    int is_call;
    sw_syscall call;
    sw_kevent ev;
} out_item;

typedef struct ring {
    int fd;                  /* the enter event of the CPU: owns the ring */
    struct perf_event_mmap_page *meta;
    uint8_t *data;
    uint64_t size;           /* data bytes, a power of two */
    /* The CPU's last sched_switch (any task's, SRC_SWITCH_CPU): a switch
     * in of ours read next in this ring is its second half. */
    uint32_t last_prev, last_next;
    char last_prev_comm[16];  /* "": none seen */
} ring;

struct sw_syscalls {
    ring *rings;
    unsigned nrings;
    int *fds;                /* every event opened (the rings' included) */
    size_t nfds, fds_cap;
    size_t map_bytes;
    unsigned what;           /* SW_KERNEL_* */
    int unprivileged;        /* sched from the threads' own switch records, user-mode faults */
    tracepoint tps[SRC_FAULT];   /* by source: the tracepoints asked for */
    uint64_t *ids;           /* every event's identifier */
    uint8_t *id_src;         /* and its source */
    size_t nids, ids_cap, id_src_cap;
    sw_hashtab id_index;
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
    out_item *out;           /* finished, held (out_item) */
    size_t nout, out_cap;
    uint64_t seq;
    uint64_t last_wake_t;    /* the last wakeup handled: the same one may come twice (waker's and wakee's) */
    uint32_t last_wake_tid, last_wake_pid;
    uint8_t *scratch;        /* a record that wraps around its ring */
    sw_syscalls_stats st;
    pthread_mutex_t stats_lock;
};

/* ---- tracefs: the tracepoints' ids and formats, read once ---- */

static const char *const tracefs_dirs[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};

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

/* Each tracepoint source: its name in tracefs and its fields (declaration
 * and size; a second field of size 0: none), the other task's pid and
 * the name (comm) it carries (NULL: none). */
static const struct tp_desc {
    const char *path;
    const char *f1;
    unsigned size1;
    const char *f2;
    unsigned size2;
    const char *peer, *comm, *prev_comm;
} tp_descs[SRC_FAULT] = {
    [SRC_ENTER] = {"raw_syscalls/sys_enter", "long id", 8, NULL, 0, NULL, NULL, NULL},
    [SRC_EXIT] = {"raw_syscalls/sys_exit", "long id", 8, "long ret", 8, NULL, NULL, NULL},
    [SRC_SWITCH] = {"sched/sched_switch", "pid_t prev_pid", 4, "long prev_state", 8, "pid_t next_pid",
                    "char next_comm[16]", "char prev_comm[16]"},
    /* sched_waking, not sched_wakeup: the latter fires on the wakee's CPU,
     * often in its idle task's context when the wakee was queued there
     * (ttwu's wake list), so a ring that follows only this process's
     * threads missed most wakeups on a quiet machine; sched_waking always
     * fires in the waker. */
    [SRC_WAKEUP] = {"sched/sched_waking", "pid_t pid", 4, "int target_cpu", 4, NULL, "char comm[16]", NULL},
    /* A new thread is made runnable by wake_up_new_task, in the thread
     * that started it, which fires sched_wakeup_new (not sched_waking). */
    [SRC_WAKEUP_NEW] = {"sched/sched_wakeup_new", "pid_t pid", 4, "int target_cpu", 4, NULL, "char comm[16]", NULL},
};

static int load_tracepoint(const char *dir, const struct tp_desc *d, tracepoint *tp)
{
    char path[256], text[8192];
    snprintf(path, sizeof path, "%s/events/%s/id", dir, d->path);
    if (sw_read_text(path, text, sizeof text))
        return -1;
    char *end;
    unsigned long long id = strtoull(text, &end, 10);
    if (end == text)
        return -1;
    tp->id = id;
    snprintf(path, sizeof path, "%s/events/%s/format", dir, d->path);
    if (sw_read_text(path, text, sizeof text) || find_field(text, d->f1, &tp->f1) || tp->f1.size != d->size1)
        return -1;
    if (d->f2 && (find_field(text, d->f2, &tp->f2) || tp->f2.size != d->size2))
        return -1;
    if (d->peer && (find_field(text, d->peer, &tp->peer) || tp->peer.size != 4))
        return -1;
    if (d->comm && (find_field(text, d->comm, &tp->comm) || tp->comm.size != 16))
        return -1;
    if (d->prev_comm && (find_field(text, d->prev_comm, &tp->prev_comm) || tp->prev_comm.size != 16))
        return -1;
    return 0;
}

/* Whether source src is asked for. */
static int wants(const sw_syscalls *s, int src)
{
    switch (src) {
    case SRC_ENTER:
    case SRC_EXIT: return (s->what & SW_KERNEL_SYSCALLS) != 0;
    case SRC_SWITCH:
    case SRC_WAKEUP:
    case SRC_WAKEUP_NEW: return (s->what & SW_KERNEL_SCHED) && !s->unprivileged;
    case SRC_SWITCHES: return (s->what & SW_KERNEL_SCHED) && s->unprivileged;
    case SRC_FAULT: return (s->what & SW_KERNEL_FAULTS) != 0;
    default: return 0;
    }
}

static int load_tracepoints_in(sw_syscalls *s, const char *dir)
{
    for (int src = 0; src < SRC_FAULT; src++)
        if (wants(s, src) && load_tracepoint(dir, &tp_descs[src], &s->tps[src]))
            return -1;
    return 0;
}

static int load_tracepoints(sw_syscalls *s, char *note, size_t notelen)
{
    int any = 0;
    for (int src = 0; src < SRC_FAULT; src++)
        any |= wants(s, src);
    if (!any)
        return 0;   /* page faults, own switches: no tracepoint */
    for (int attempt = 0; attempt < 2; attempt++) {
        for (size_t i = 0; i < sizeof tracefs_dirs / sizeof *tracefs_dirs; i++)
            if (!load_tracepoints_in(s, tracefs_dirs[i]))
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

/* Every record carries its event's identifier first (a sample) or last
 * (sample_id_all), then pid and tid, time and CPU; tracepoints add their
 * raw record, page faults their address. */
#define SAMPLE_COMMON (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU)

static int open_event(const sw_syscalls *s, int src, pid_t tid, int cpu, size_t wakeup)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    if (src == SRC_FAULT) {
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_PAGE_FAULTS;
        a.sample_type = SAMPLE_COMMON | PERF_SAMPLE_ADDR;
    } else if (src == SRC_SWITCHES) {
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_DUMMY;
        a.sample_type = SAMPLE_COMMON;
    } else {
        a.type = PERF_TYPE_TRACEPOINT;
        a.config = s->tps[src == SRC_SWITCH_CPU ? SRC_SWITCH : src].id;
        a.sample_type = SAMPLE_COMMON | PERF_SAMPLE_RAW;
    }
    a.context_switch = src == SRC_SWITCH || src == SRC_SWITCHES;   /* PERF_RECORD_SWITCH: when it comes back */
    /* Without the privilege (kernel.perf_event_paranoid 2) a process may
     * watch itself in user mode only: its own switches, its faults in user
     * code. */
    a.exclude_kernel = (unsigned)s->unprivileged;
    a.exclude_hv = (unsigned)s->unprivileged;
    a.sample_period = 1;
    a.inherit = src != SRC_SWITCH_CPU;   /* (that one follows a CPU, not a task) */
    a.sample_id_all = 1;     /* LOST records carry pid, tid and time too */
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC;
    a.watermark = 1;
    a.wakeup_watermark = (uint32_t)wakeup;
    return (int)syscall(SYS_perf_event_open, &a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static const char *source_name(int src)
{
    return src <= SRC_EXIT        ? "raw_syscalls tracepoints"
           : src == SRC_SWITCH_CPU ? "CPU-wide sched_switch tracepoint"
           : src == SRC_FAULT     ? "page-fault event"
           : src == SRC_SWITCHES ? "context-switch records"
                                  : "sched tracepoints";
}

/* kernel.perf_event_paranoid, as text ("?" when unreadable). */
static void read_paranoid(char *buf, size_t cap)
{
    snprintf(buf, cap, "?");
    if (!sw_read_text("/proc/sys/kernel/perf_event_paranoid", buf, cap))
        buf[strcspn(buf, "\n")] = 0;
}

static void say_refused(char *err, size_t errlen, int src, int e)
{
    char paranoid[32];
    read_paranoid(paranoid, sizeof paranoid);
    if (e == EACCES || e == EPERM)
        snprintf(err, errlen,
                 "perf_event_open of the %s was refused (%s): it needs root or "
                 "CAP_PERFMON (kernel.perf_event_paranoid is %s)",
                 source_name(src), strerror(e), paranoid);
    else
        snprintf(err, errlen, "perf_event_open of the %s failed: %s", source_name(src), strerror(e));
}

/* Remembers which source the event fd's samples come from. */
static int add_id(sw_syscalls *s, int fd, int src)
{
    uint64_t id;
    if (ioctl(fd, PERF_EVENT_IOC_ID, &id))
        return SW_EIO;
    uint64_t *k = sw_array_grow(s->ids, &s->ids_cap, s->nids + 1, sizeof *k, 32);
    if (!k)
        return SW_ENOMEM;
    s->ids = k;
    uint8_t *v = sw_array_grow(s->id_src, &s->id_src_cap, s->nids + 1, 1, 32);
    if (!v)
        return SW_ENOMEM;
    s->id_src = v;
    if (sw_hashtab_add(&s->id_index, sw_hash_u64(id), (uint32_t)s->nids))
        return SW_ENOMEM;
    s->ids[s->nids] = id;
    s->id_src[s->nids++] = (uint8_t)src;
    return SW_OK;
}

/* Keeps the event fd of source src (closed at the end, its samples known
 * by its id). */
static int keep_event(sw_syscalls *s, int fd, int src, char *err, size_t errlen)
{
    if (add_fd(s, fd))
        return SW_ENOMEM;
    int rc = add_id(s, fd, src);
    if (rc)
        snprintf(err, errlen, "cannot read a perf event's id: %s", strerror(errno));
    return rc;
}

/* Sends the records of event fd into ring r (its CPU's). */
static int redirect(int fd, const ring *r, char *err, size_t errlen)
{
    if (r->fd >= 0 && !ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r->fd))
        return SW_OK;
    snprintf(err, errlen, "cannot redirect a perf event to its CPU's ring: %s", strerror(errno));
    return SW_EIO;
}

/* Opens the events asked for of thread tid on every CPU, into the rings
 * (the first call, for this process's main thread, creates them: the
 * first event of each CPU owns its ring). */
static int open_thread(sw_syscalls *s, pid_t tid, int first, char *err, size_t errlen)
{
    for (unsigned c = 0; c < s->nrings; c++) {
        if (!first && s->rings[c].fd < 0)
            continue;   /* an offline CPU: no ring */
        ring *r = &s->rings[c];
        int owner = first;
        for (int src = 0; src < SRC_SWITCH_IN; src++) {
            if (!wants(s, src))
                continue;
            int fd = open_event(s, src, tid, (int)c, r->size / 4);
            if (fd < 0) {
                if (!first && (errno == ESRCH || errno == ENOENT))
                    return SW_OK;   /* the thread ended meanwhile */
                if ((errno == ENODEV || errno == EINVAL) && c > 0 && first && owner)
                    break;   /* an offline CPU */
                say_refused(err, errlen, src, errno);
                return SW_EIO;
            }
            int rc = keep_event(s, fd, src, err, errlen);
            if (rc)
                return rc;
            if (owner) {
                void *m = mmap(NULL, s->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                if (m == MAP_FAILED) {
                    snprintf(err, errlen, "cannot map a perf ring of %zu bytes: %s", s->map_bytes, strerror(errno));
                    return SW_EIO;
                }
                r->fd = fd;
                r->meta = m;
                r->data = (uint8_t *)m + sysconf(_SC_PAGESIZE);
                r->size = s->map_bytes - (size_t)sysconf(_SC_PAGESIZE);
                owner = 0;
            } else if ((rc = redirect(fd, r, err, errlen))) {
                return rc;
            }
        }
    }
    return SW_OK;
}

/* The task that ran before each switch in of ours is not one of ours
 * (mostly): its sched_switch fires in it, outside the events that follow
 * this process. One sched_switch event per CPU for any task, into that
 * CPU's ring, tells it (the machine's every switch costs a record there;
 * those not into a thread of ours are dropped as they are read). */
static int open_cpu_switches(sw_syscalls *s, char *err, size_t errlen)
{
    for (unsigned c = 0; c < s->nrings; c++) {
        ring *r = &s->rings[c];
        if (r->fd < 0)
            continue;   /* an offline CPU */
        int fd = open_event(s, SRC_SWITCH_CPU, -1, (int)c, 0);
        if (fd < 0) {
            say_refused(err, errlen, SRC_SWITCH_CPU, errno);
            return SW_EIO;
        }
        int rc = keep_event(s, fd, SRC_SWITCH_CPU, err, errlen);
        if (rc || (rc = redirect(fd, r, err, errlen)))
            return rc;
    }
    return SW_OK;
}

/* Opens what `what` asks for, with the privilege or (unprivileged) what
 * a process may see of itself without it. *refused: the failure was a
 * missing privilege. */
static int open_reader(sw_syscalls **out, unsigned what, int unprivileged, size_t ring_bytes, char *err,
                       size_t errlen, char *note, size_t notelen, int *refused)
{
    *out = NULL;
    *refused = 0;
    err[0] = 0;
    sw_syscalls *s = calloc(1, sizeof *s);
    if (!s)
        return SW_ENOMEM;
    s->stop_fd = -1;
    s->what = what;
    s->unprivileged = unprivileged;
    pthread_mutex_init(&s->stats_lock, NULL);
    s->pid = getpid();
    if (load_tracepoints(s, note, notelen)) {
        char paranoid[32];
        read_paranoid(paranoid, sizeof paranoid);
        snprintf(err, errlen, "the %s tracepoints are not readable in tracefs (/sys/kernel/tracing): "
                              "it needs root or CAP_PERFMON, and tracefs mounted (kernel.perf_event_paranoid is %s)",
                 (s->what & SW_KERNEL_SYSCALLS) ? "raw_syscalls" : "sched", paranoid);
        *refused = 1;
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
    if (rc == SW_OK && wants(s, SRC_SWITCH))
        rc = open_cpu_switches(s, err, errlen);
    if (rc) {
        if (!err[0])
            snprintf(err, errlen, "%s", sw_strerror(rc));
        *refused = strstr(err, "was refused") != NULL;
        sw_syscalls_free(s);
        return rc;
    }
    s->st.cpus = s->nrings;
    *out = s;
    return SW_OK;
}

int sw_syscalls_open(sw_syscalls **out, unsigned what, size_t ring_bytes, char *err, size_t errlen, char *note,
                     size_t notelen)
{
    char dummy[128];
    if (!note || !notelen) {
        note = dummy;
        notelen = sizeof dummy;
    }
    note[0] = 0;
    what &= SW_KERNEL_SYSCALLS | SW_KERNEL_SCHED | SW_KERNEL_FAULTS;
    if (!what)
        what = SW_KERNEL_SYSCALLS;
    int refused;
    int rc = open_reader(out, what, 0, ring_bytes, err, errlen, note, notelen, &refused);
    if (rc == SW_OK || !refused || (what & SW_KERNEL_SYSCALLS))
        return rc;   /* system calls have no unprivileged way */
    /* Refused: what a process may always see of itself, said in the note. */
    char why[320];
    snprintf(why, sizeof why, "%s", err);
    rc = open_reader(out, what, 1, ring_bytes, err, errlen, note, notelen, &refused);
    if (rc != SW_OK) {
        snprintf(err, errlen, "%s", why);
        return rc;
    }
    snprintf(note, notelen, "%s; recorded instead:%s%s", why,
             (what & SW_KERNEL_SCHED) ? " each thread's own switches (off CPU preempted or waiting; no wakeups)" : "",
             (what & SW_KERNEL_FAULTS) ? ((what & SW_KERNEL_SCHED) ? ", page faults in user mode" : " page faults in user mode") : "");
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

static uint64_t rd_field(const uint8_t *raw, tp_field f)
{
    return f.size == 8 ? rd64(raw + f.offset) : (uint64_t)(int64_t)(int32_t)rd32(raw + f.offset);
}

/* A task's name as a tracepoint holds it (16 bytes, NUL-padded, any
 * bytes) into out: terminated, printable ASCII ('?' for any other byte). */
static void copy_comm(char out[16], const uint8_t *comm)
{
    size_t i = 0;
    for (; i < 15 && comm[i]; i++)
        out[i] = comm[i] >= 0x20 && comm[i] < 0x7f ? (char)comm[i] : '?';
    out[i] = 0;
}

/* A CPU-wide sched_switch sample (any task's) of ring r, `len` bytes:
 * kept as the CPU's last switch. */
static void take_cpu_switch(sw_syscalls *s, ring *r, const uint8_t *rec, size_t len)
{
    const tracepoint *tp = &s->tps[SRC_SWITCH];
    uint32_t raw_size = len >= 44 ? rd32(rec + 40) : 0;
    const uint8_t *raw = rec + 44;
    uint16_t type = 0;
    if (raw_size >= 2)
        memcpy(&type, raw, 2);
    if (len < 44 || raw_size > len - 44 || raw_size < 2 || type != tp->id || tp->f1.offset + tp->f1.size > raw_size ||
        tp->peer.offset + tp->peer.size > raw_size || tp->prev_comm.offset + tp->prev_comm.size > raw_size) {
        count(s, &s->st.malformed, 1);
        r->last_prev_comm[0] = 0;
        return;
    }
    r->last_prev = (uint32_t)rd_field(raw, tp->f1);
    r->last_next = (uint32_t)rd_field(raw, tp->peer);
    copy_comm(r->last_prev_comm, raw + tp->prev_comm.offset);
    if (!r->last_prev_comm[0])
        snprintf(r->last_prev_comm, sizeof r->last_prev_comm, "?");   /* seen, nameless */
}

/* One PERF_RECORD_SAMPLE of `len` bytes (header included), validated. */
static void take_sample(sw_syscalls *s, ring *r, const uint8_t *rec, size_t len)
{
    /* header 8, identifier 8, pid 4, tid 4, time 8, [addr 8], cpu 4, res 4,
     * [raw size 4, raw bytes] */
    if (len < 40) {
        count(s, &s->st.malformed, 1);
        return;
    }
    uint32_t i = sw_hashtab_get_u64(&s->id_index, s->ids, rd64(rec + 8));
    if (i == SW_HT_NONE) {
        count(s, &s->st.malformed, 1);
        return;
    }
    int src = s->id_src[i];
    if (src == SRC_SWITCH_CPU) {
        take_cpu_switch(s, r, rec, len);
        return;
    }
    uint32_t pid = rd32(rec + 16), tid = rd32(rec + 20);
    pending p = {.t = rd64(rec + 24), .tid = tid, .src = (uint8_t)src};
    if (pid != (uint32_t)s->pid || tid == atomic_load(&s->reader_tid))
        return;   /* a child process's (inherited), or our own reading */
    if (src == SRC_FAULT) {
        if (len < 48) {
            count(s, &s->st.malformed, 1);
            return;
        }
        p.a = rd64(rec + 32);
        p.cpu = rd32(rec + 40);
    } else {
        p.cpu = rd32(rec + 32);
        uint32_t raw_size = len >= 44 ? rd32(rec + 40) : 0;
        const uint8_t *raw = rec + 44;
        const tracepoint *tp = &s->tps[src];
        uint16_t type = 0;
        if (raw_size >= 2)
            memcpy(&type, raw, 2);
        if (len < 44 || raw_size > len - 44 || raw_size < 2 || type != tp->id ||
            tp->f1.offset + tp->f1.size > raw_size ||
            (tp_descs[src].f2 && tp->f2.offset + tp->f2.size > raw_size) ||
            (tp_descs[src].peer && tp->peer.offset + tp->peer.size > raw_size) ||
            (tp_descs[src].comm && tp->comm.offset + tp->comm.size > raw_size)) {
            count(s, &s->st.malformed, 1);
            return;
        }
        p.a = rd_field(raw, tp->f1);
        if (tp_descs[src].f2)
            p.b = rd_field(raw, tp->f2);
        if (tp_descs[src].peer)
            p.peer = (uint32_t)rd_field(raw, tp->peer);
        if (tp_descs[src].comm)
            copy_comm(p.comm, raw + tp->comm.offset);
        if (src == SRC_SWITCH) {   /* a: prev_pid, b: prev_state */
            if ((uint32_t)p.a != tid)
                return;
            p.a = p.b;
        }
    }
    count(s, &s->st.records, 1);
    if (add_pending(s, &p))
        count(s, &s->st.unpaired, 1);
}

/* A PERF_RECORD_SWITCH: a thread of ours comes back to a CPU (its
 * switches out are read from sched_switch, which says why). */
static void take_switch(sw_syscalls *s, ring *r, const uint8_t *rec, size_t len, uint16_t misc)
{
    /* header 8, then sample_id: pid 4, tid 4, time 8, cpu 4, res 4, identifier 8 */
    int out = (misc & PERF_RECORD_MISC_SWITCH_OUT) != 0;
    if (out && !s->unprivileged)
        return;   /* sched_switch tells it, with the reason */
    if (len < 40) {
        count(s, &s->st.malformed, 1);
        return;
    }
    uint32_t pid = rd32(rec + 8), tid = rd32(rec + 12);
    if (pid != (uint32_t)s->pid || tid == atomic_load(&s->reader_tid))
        return;
    pending p = {.t = rd64(rec + 16), .tid = tid, .src = out ? SRC_SWITCH_OUT : SRC_SWITCH_IN, .cpu = rd32(rec + 24),
                 .a = (misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0};
    if (!out && r->last_prev_comm[0] && r->last_next == tid) {
        /* the CPU's sched_switch just before, into this thread: who ran */
        p.peer = r->last_prev;
        memcpy(p.comm, r->last_prev_comm, sizeof p.comm);
        r->last_prev_comm[0] = 0;
    }
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
            take_sample(s, r, rec, h.size);
        } else if (h.type == PERF_RECORD_SWITCH) {
            take_switch(s, r, rec, h.size, h.misc);
        } else if (h.type == PERF_RECORD_LOST && h.size >= 24) {
            r->last_prev_comm[0] = 0;   /* the CPU's last switch may be among them */
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
    return (int)x->src - (int)y->src;   /* an enter before an exit of the same time */
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
    s->calls[s->ntids] = (open_call){0};
    return &s->calls[s->ntids++];
}

const char *sw_sched_reason(uint64_t prev_state)
{
    uint64_t st = prev_state & 0xff;   /* 0x100 and up: preempted (sched_switch prints "R+") */
    return st == 0 ? "preempted" : (st & 1) ? "sleeping" : (st & 2) ? "blocked" : "other";
}

/* Holds a finished event (out_item) until its thread's order allows it. */
static void hold(sw_syscalls *s, const sw_syscall *call, const sw_kevent *ev)
{
    out_item *o = sw_array_grow(s->out, &s->out_cap, s->nout + 1, sizeof *o, 256);
    if (!o) {
        count(s, &s->st.unpaired, 1);
        return;
    }
    s->out = o;
    o = &s->out[s->nout++];
    memset(o, 0, sizeof *o);
    o->seq = s->seq++;
    o->is_call = call != NULL;
    if (call) {
        o->call = *call;
        o->t = call->enter_ns;
    } else {
        o->ev = *ev;
        o->t = ev->t_ns;
    }
}

static int cmp_out(const void *a, const void *b)
{
    const out_item *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Hands the sink the held events, in time order, whose thread has no
 * system call open since before them (all: at the end). */
static void release(sw_syscalls *s, int all)
{
    if (s->nout > 1)
        qsort(s->out, s->nout, sizeof *s->out, cmp_out);
    size_t kept = 0;
    for (size_t k = 0; k < s->nout; k++) {
        out_item *o = &s->out[k];
        uint32_t tid = o->is_call ? o->call.tid : o->ev.tid;
        uint32_t i = all ? SW_HT_NONE : sw_hashtab_get_u64(&s->tid_index, s->tids, tid);
        if (i != SW_HT_NONE && s->calls[i].open && s->calls[i].enter_ns <= o->t) {
            s->out[kept++] = *o;
            continue;
        }
        if (o->is_call) {
            count(s, &s->st.calls, 1);
            if (s->sink.syscall)
                s->sink.syscall(s->sink.ud, &o->call);
        } else {
            uint64_t *n = o->ev.kind == SW_KEV_OFF_CPU  ? &s->st.off_cpu
                          : o->ev.kind == SW_KEV_WAKEUP ? &s->st.wakeups
                          : o->ev.kind == SW_KEV_FAULT  ? &s->st.faults
                                                        : NULL;
            if (n)
                count(s, n, 1);
            if (s->sink.event)
                s->sink.event(s->sink.ud, &o->ev);
        }
    }
    s->nout = kept;
}

/* One record, in time order, of a thread whose state is c. */
static void handle(sw_syscalls *s, const pending *p, open_call *c)
{
    sw_kevent ev = {.tid = p->tid, .cpu = p->cpu, .t_ns = p->t};
    int first = !c->seen;
    c->seen = 1;
    switch (p->src) {
    case SRC_ENTER:
        if (c->open)
            count(s, &s->st.unpaired, 1);   /* its exit was lost */
        c->enter_ns = p->t;
        c->nr = (long)p->a;
        c->open = 1;
        return;
    case SRC_EXIT: {
        if (!c->open || c->nr != (long)p->a) {
            count(s, &s->st.unpaired, 1);   /* its enter was lost, or was before the start */
            c->open = 0;
            return;
        }
        c->open = 0;
        sw_syscall call = {p->tid, (long)p->a, sw_syscall_name((long)p->a), (int64_t)p->b, c->enter_ns, p->t};
        hold(s, &call, NULL);
        return;
    }
    case SRC_SWITCH:
    case SRC_SWITCH_OUT:   /* unprivileged: preempted or not, no state */
        ev.kind = SW_KEV_OFF_CPU;
        ev.a = p->src == SRC_SWITCH ? p->a : 0;
        ev.reason = p->src == SRC_SWITCH ? sw_sched_reason(p->a) : p->a ? "preempted" : "waiting";
        ev.peer = p->peer;
        memcpy(ev.comm, p->comm, sizeof ev.comm);
        c->off = 1;
        c->waker = 0;
        break;
    case SRC_SWITCH_IN:
        /* The thread's first record: it was off CPU before (it slept
         * since before the start) or it never ran (a thread started
         * since: its first run). Otherwise a switch in while on CPU: its
         * switch out was lost. */
        if (!c->off && !first)
            return;
        ev.kind = SW_KEV_ON_CPU;
        ev.peer = p->peer;
        memcpy(ev.comm, p->comm, sizeof ev.comm);
        ev.a = c->waker;
        ev.b = c->waker ? p->t - c->woken_ns : 0;
        c->off = 0;
        c->waker = 0;
        break;
    case SRC_WAKEUP:
    case SRC_WAKEUP_NEW: {
        if (p->t == s->last_wake_t && p->tid == s->last_wake_tid && (uint32_t)p->a == s->last_wake_pid)
            return;   /* seen through the wakee's event too */
        s->last_wake_t = p->t;
        s->last_wake_tid = p->tid;
        s->last_wake_pid = (uint32_t)p->a;
        ev.kind = SW_KEV_WAKEUP;
        ev.a = (uint32_t)p->a;
        memcpy(ev.comm, p->comm, sizeof ev.comm);
        ev.cpu = (uint32_t)p->b;
        uint32_t wi = sw_hashtab_get_u64(&s->tid_index, s->tids, (uint32_t)p->a);
        if (p->src == SRC_WAKEUP_NEW && (uint32_t)p->a != p->tid) {
            /* a new thread (its tid may be an ended one's: a fresh
             * state), before any record of its own: its first switch in,
             * its first run, names this thread as its waker (c, the
             * waker's state, may move: not used after) */
            open_call *w = call_of(s, (uint32_t)p->a);
            if (w)
                *w = (open_call){.waker = p->tid, .woken_ns = p->t};
        } else if (wi != SW_HT_NONE && s->calls[wi].off && (uint32_t)p->a != p->tid) {
            s->calls[wi].waker = p->tid;
            s->calls[wi].woken_ns = p->t;
        }
        break;
    }
    case SRC_FAULT:
        ev.kind = SW_KEV_FAULT;
        ev.a = p->a;
        break;
    default:
        return;
    }
    hold(s, NULL, &ev);
}

/* Handles the pending records up to time `until` (all: UINT64_MAX). */
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
        handle(s, p, c);
    }
    memmove(s->pend, s->pend + k, (s->npend - k) * sizeof *s->pend);
    s->npend -= k;
    release(s, until == UINT64_MAX);
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
    free(s->out);
    free(s->ids);
    free(s->id_src);
    sw_hashtab_free(&s->id_index);
    sw_hashtab_free(&s->tid_index);
    pthread_mutex_destroy(&s->stats_lock);
    free(s);
}
