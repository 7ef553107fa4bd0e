/*
 * test_threadstate.c - thread states and CPU times from the kernel
 * (native/procmem/threadstate.h), on real threads of this process: a
 * spinning thread is running, a sleeping one idle, one blocked on a mutex
 * or condition variable inside a "GIL" struct waits for the GIL (and is
 * idle when the GIL is elsewhere); CPU deltas are bracketed by the
 * thread's own CPU clock; first-round, new-thread, sweep, descriptor cap
 * and descriptor-reuse rules; the parser on every form of the file.
 */
#define _GNU_SOURCE
#include "check.h"
#include "procmem/threadstate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>

/* ---- the parser ---- */

TEST(parse_every_form)
{
    CHECK_EQ_U64(sw_threadstate_parse("running\n", 0, 0), SW_STATE_RUNNING);
    char buf[200];
    snprintf(buf, sizeof buf, "%d 0x7f0000001008 0x189 0x0 0x0 0x0 0x0 0x7ffd00 0x7f00ab\n", (int)SYS_futex);
    CHECK_EQ_U64(sw_threadstate_parse(buf, 0x7f0000001000, 0x7f0000001100), SW_STATE_GIL_WAIT);
    CHECK_EQ_U64(sw_threadstate_parse(buf, 0x7f0000001000, 0x7f0000001008), SW_STATE_IDLE);   /* just past */
    CHECK_EQ_U64(sw_threadstate_parse(buf, 0x7f0000001009, 0x7f0000001100), SW_STATE_IDLE);   /* just before */
    CHECK_EQ_U64(sw_threadstate_parse(buf, 0, 0), SW_STATE_IDLE);                             /* GIL unknown */
    snprintf(buf, sizeof buf, "%d 0x0 0x0 0x7f9386692ea0 0x0 0x0 0x7ffd7ad636e7 0x7f93\n", (int)SYS_clock_nanosleep);
    CHECK_EQ_U64(sw_threadstate_parse(buf, 0, ~0ull), SW_STATE_IDLE);
    CHECK_EQ_U64(sw_threadstate_parse("-1 0x7ffd7ad636e7 0x7f9386692ea0\n", 0, ~0ull), SW_STATE_IDLE);
    CHECK_EQ_U64(sw_threadstate_parse("", 0, 0), SW_STATE_UNKNOWN);
    CHECK_EQ_U64(sw_threadstate_parse("garbage", 0, 0), SW_STATE_UNKNOWN);
    snprintf(buf, sizeof buf, "%d zz\n", (int)SYS_futex);
    CHECK_EQ_U64(sw_threadstate_parse(buf, 1, 2), SW_STATE_UNKNOWN);
    CHECK_EQ_U64(sw_threadstate_parse("99999999999999999999999 0x1\n", 0, 0), SW_STATE_UNKNOWN);
}

/* ---- live threads ---- */

typedef struct fake_gil {
    long before;                 /* the GIL struct's first bytes */
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    long after;
} fake_gil;

typedef struct worker {
    pthread_t th;
    atomic_uint tid;
    atomic_int stop;
    int kind;                    /* SPIN, SLEEP, COND, MUTEX */
    fake_gil *gil;
} worker;

enum { SPIN, SLEEP, COND, MUTEX };

static void *work(void *arg)
{
    worker *w = arg;
    atomic_store(&w->tid, (unsigned)syscall(SYS_gettid));
    switch (w->kind) {
    case SPIN:
        while (!atomic_load(&w->stop))
            ;
        break;
    case SLEEP:
        while (!atomic_load(&w->stop)) {
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
        break;
    case COND:
        pthread_mutex_lock(&w->gil->mutex);
        while (!atomic_load(&w->stop))
            pthread_cond_wait(&w->gil->cond, &w->gil->mutex);
        pthread_mutex_unlock(&w->gil->mutex);
        break;
    case MUTEX:   /* the test holds the mutex until it stops us */
        pthread_mutex_lock(&w->gil->mutex);
        pthread_mutex_unlock(&w->gil->mutex);
        break;
    }
    return NULL;
}

static int start(worker *w, int kind, fake_gil *g)
{
    memset(w, 0, sizeof *w);
    w->kind = kind;
    w->gil = g;
    if (pthread_create(&w->th, NULL, work, w) != 0)
        return 0;
    while (!atomic_load(&w->tid))
        sched_yield();
    return 1;
}

static void stop(worker *w)
{
    atomic_store(&w->stop, 1);
    if (w->kind == COND) {
        pthread_mutex_lock(&w->gil->mutex);
        pthread_cond_broadcast(&w->gil->cond);
        pthread_mutex_unlock(&w->gil->mutex);
    }
    pthread_join(w->th, NULL);
}

static uint64_t gil_lo(const fake_gil *g)
{
    return (uint64_t)(uintptr_t)&g->mutex;
}

static uint64_t gil_hi(const fake_gil *g)
{
    return (uint64_t)(uintptr_t)&g->after;
}

/* Probes until the state is `want` (a thread takes a moment to block),
 * for up to 5 s; returns the last state seen. */
static uint32_t wait_state(sw_threadstate *t, uint32_t tid, uint64_t *round, uint64_t lo, uint64_t hi, uint32_t want)
{
    uint32_t s = SW_STATE_UNKNOWN;
    uint64_t cpu;
    for (int i = 0; i < 5000; i++) {
        s = sw_threadstate_probe(t, tid, ++*round, lo, hi, &cpu);
        if (s == want)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return s;
}

static uint64_t thread_cpu_ns(pthread_t th)
{
    clockid_t c;
    struct timespec ts;
    if (pthread_getcpuclockid(th, &c) != 0 || clock_gettime(c, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 1 if the CPU time delta cpu, of the thread `what`, was read and lies in
 * [lo, hi] (the thread's own clock read around the two probes); reported
 * if not. */
static int cpu_within(const char *what, uint64_t cpu, uint64_t lo, uint64_t hi)
{
    return CHECK_MSG(cpu != SW_NO_CPU && cpu >= lo && cpu <= hi, "%s: delta %llu not within [%llu, %llu]", what,
                     (unsigned long long)cpu, (unsigned long long)lo, (unsigned long long)hi);
}

TEST(running_idle_and_gil_wait)
{
    static fake_gil g = {1, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 2};
    worker spin, slp, cond, mtx;
    REQUIRE(start(&spin, SPIN, NULL));
    REQUIRE(start(&slp, SLEEP, NULL));
    REQUIRE(start(&cond, COND, &g));
    sw_threadstate *t = sw_threadstate_new((int)getpid(), 64);
    REQUIRE(t != NULL);
    uint64_t round = 0, lo = gil_lo(&g), hi = gil_hi(&g);
    CHECK_EQ_U64(wait_state(t, spin.tid, &round, lo, hi, SW_STATE_RUNNING), SW_STATE_RUNNING);
    CHECK_EQ_U64(wait_state(t, slp.tid, &round, lo, hi, SW_STATE_IDLE), SW_STATE_IDLE);
    CHECK_EQ_U64(wait_state(t, cond.tid, &round, lo, hi, SW_STATE_GIL_WAIT), SW_STATE_GIL_WAIT);
    /* The same wait on a struct that is not the GIL is just idle. */
    uint64_t cpu;
    CHECK_EQ_U64(sw_threadstate_probe(t, cond.tid, ++round, hi, hi + 64, &cpu), SW_STATE_IDLE);
    CHECK_EQ_U64(sw_threadstate_probe(t, cond.tid, ++round, 0, 0, &cpu), SW_STATE_IDLE);
    /* Blocked on the GIL's mutex rather than its condition variable. */
    stop(&cond);
    pthread_mutex_lock(&g.mutex);
    REQUIRE(start(&mtx, MUTEX, &g));
    CHECK_EQ_U64(wait_state(t, mtx.tid, &round, lo, hi, SW_STATE_GIL_WAIT), SW_STATE_GIL_WAIT);
    pthread_mutex_unlock(&g.mutex);
    stop(&mtx);
    /* A thread that has ended cannot be told, nor tid 0. (The kernel wakes
     * the joiner a moment before it removes the thread.) */
    char gone[64];
    snprintf(gone, sizeof gone, "/proc/self/task/%u", (unsigned)mtx.tid);
    for (int i = 0; i < 5000 && access(gone, F_OK) == 0; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ_U64(sw_threadstate_probe(t, mtx.tid, ++round, lo, hi, &cpu), SW_STATE_UNKNOWN);
    CHECK_EQ_U64(cpu, SW_NO_CPU);
    CHECK_EQ_U64(sw_threadstate_probe(t, 0, ++round, lo, hi, &cpu), SW_STATE_UNKNOWN);
    CHECK_EQ_U64(cpu, SW_NO_CPU);
    sw_threadstate_stats st;
    sw_threadstate_get_stats(t, &st);
    CHECK(st.unknown >= 2);
    CHECK(st.probes >= 7);
    stop(&spin);
    stop(&slp);
    sw_threadstate_free(t);
}

TEST(cpu_deltas_are_the_threads_cpu_time)
{
    worker spin, slp;
    REQUIRE(start(&spin, SPIN, NULL));
    REQUIRE(start(&slp, SLEEP, NULL));
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);   /* both have used some CPU before the first round */
    sw_threadstate *t = sw_threadstate_new((int)getpid(), 64);
    REQUIRE(t != NULL);
    uint64_t cpu;
    /* First round: what they used before does not count. */
    uint64_t before1 = thread_cpu_ns(spin.th);
    sw_threadstate_probe(t, spin.tid, 1, 0, 0, &cpu);
    uint64_t after1 = thread_cpu_ns(spin.th);
    CHECK_EQ_U64(cpu, 0);
    CHECK(before1 > 0);
    sw_threadstate_probe(t, slp.tid, 1, 0, 0, &cpu);
    CHECK_EQ_U64(cpu, 0);
    ts.tv_nsec = 50000000;
    nanosleep(&ts, NULL);
    /* Second round: the delta lies between the clock's readings around
     * the two probes. */
    uint64_t before2 = thread_cpu_ns(spin.th);
    sw_threadstate_probe(t, spin.tid, 2, 0, 0, &cpu);
    uint64_t after2 = thread_cpu_ns(spin.th);
    cpu_within("spinner", cpu, before2 - after1, after2 - before1);
    CHECK(cpu > 1000000);   /* it had a CPU for more than 1 of the 50 ms */
    sw_threadstate_probe(t, slp.tid, 2, 0, 0, &cpu);
    CHECK_MSG(cpu < 10000000, "sleeper used %llu ns", (unsigned long long)cpu);
    /* A thread first seen after the first round is new: all its CPU time
     * counts. */
    worker late;
    REQUIRE(start(&late, SPIN, NULL));
    nanosleep(&ts, NULL);
    uint64_t lb = thread_cpu_ns(late.th);
    sw_threadstate_probe(t, late.tid, 3, 0, 0, &cpu);
    uint64_t la = thread_cpu_ns(late.th);
    cpu_within("new thread", cpu, lb, la);
    stop(&late);
    stop(&spin);
    stop(&slp);
    sw_threadstate_free(t);
}

TEST(cpu_counts_from_the_marked_start_however_late_the_first_round)
{
    worker spin;
    REQUIRE(start(&spin, SPIN, NULL));
    sw_threadstate *t = sw_threadstate_new((int)getpid(), 64);
    REQUIRE(t != NULL);
    uint64_t before0 = thread_cpu_ns(spin.th);
    CHECK(sw_threadstate_mark_start(t) >= 2);   /* (this thread and the spinner at least) */
    uint64_t after0 = thread_cpu_ns(spin.th);
    struct timespec ts = {0, 50000000};
    /* A thread born after the mark, before the first round: all its CPU
     * time counts, in the first round too. */
    worker born;
    REQUIRE(start(&born, SPIN, NULL));
    nanosleep(&ts, NULL);   /* the first round comes late */
    uint64_t cpu, before1 = thread_cpu_ns(spin.th);
    sw_threadstate_probe(t, spin.tid, 1, 0, 0, &cpu);
    uint64_t after1 = thread_cpu_ns(spin.th);
    cpu_within("first probe", cpu, before1 - after0, after1 - before0);
    CHECK(cpu > 1000000);   /* it had a CPU for more than 1 of the 50 ms */
    uint64_t bb = thread_cpu_ns(born.th);
    sw_threadstate_probe(t, born.tid, 1, 0, 0, &cpu);
    uint64_t ba = thread_cpu_ns(born.th);
    cpu_within("born since the mark", cpu, bb, ba);
    CHECK(cpu > 1000000);
    stop(&born);
    stop(&spin);
    sw_threadstate_free(t);
}

TEST(cpu_read_every_n_rounds_adds_up_to_the_same)
{
    worker spin;
    REQUIRE(start(&spin, SPIN, NULL));
    sw_threadstate *t = sw_threadstate_new((int)getpid(), 64);
    REQUIRE(t != NULL);
    sw_threadstate_set_cpu_every(t, 4);
    uint64_t cpu, sum = 0, before9 = 0;
    struct timespec ts = {0, 5000000};
    /* (the thread known to run: its state is not read) */
    uint64_t before1 = thread_cpu_ns(spin.th);
    CHECK_EQ_U64(sw_threadstate_probe_running(t, spin.tid, 1, &cpu), SW_STATE_RUNNING);
    uint64_t after1 = thread_cpu_ns(spin.th);
    for (uint64_t round = 2; round <= 9; round++) {
        nanosleep(&ts, NULL);
        if (round == 9)
            before9 = thread_cpu_ns(spin.th);
        CHECK_EQ_U64(sw_threadstate_probe_running(t, spin.tid, round, &cpu), SW_STATE_RUNNING);
        CHECK(cpu != SW_NO_CPU);
        if (round != 5 && round != 9)
            CHECK_EQ_U64(cpu, 0);   /* read in rounds 1, 5 and 9 only */
        sum += cpu;
    }
    uint64_t after9 = thread_cpu_ns(spin.th);
    /* Between its reads in rounds 1 and 9, all of its CPU time. */
    CHECK_MSG(sum >= before9 - after1 && sum <= after9 - before1, "sum %llu not within [%llu, %llu]",
              (unsigned long long)sum, (unsigned long long)(before9 - after1),
              (unsigned long long)(after9 - before1));
    CHECK(sum > 0);
    stop(&spin);
    sw_threadstate_free(t);
}

/* The descriptor this process has open on /proc/.../task/TID/syscall, or -1. */
static int syscall_fd_of(uint32_t tid)
{
    char want[64], link[256], path[300];
    snprintf(want, sizeof want, "/task/%u/syscall", tid);
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int found = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link[n] = 0;
        size_t wl = strlen(want), ll = (size_t)n;
        if (ll >= wl && strcmp(link + ll - wl, want) == 0)
            found = atoi(e->d_name);
    }
    closedir(d);
    return found;
}

/* Threads blocked until stopped (on a condition variable that is not the
 * GIL's), so that every probe finds them idle. */
static fake_gil other = {1, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 2};

/* Waits until w is blocked (probing with a prober of its own). */
static int blocked(worker *w)
{
    sw_threadstate *t = sw_threadstate_new((int)getpid(), 1);
    uint64_t round = 0;
    int ok = t && wait_state(t, w->tid, &round, 0, 0, SW_STATE_IDLE) == SW_STATE_IDLE;
    sw_threadstate_free(t);
    return ok;
}

TEST(sweep_and_descriptor_cap)
{
    worker a, b;
    REQUIRE(start(&a, COND, &other) && blocked(&a));
    REQUIRE(start(&b, COND, &other) && blocked(&b));
    sw_threadstate *t = sw_threadstate_new((int)getpid(), 1);   /* one kept descriptor */
    REQUIRE(t != NULL);
    uint64_t cpu;
    sw_threadstate_stats st;
    for (uint64_t r = 1; r <= 3; r++) {
        sw_threadstate_probe(t, a.tid, r, 0, 0, &cpu);
        sw_threadstate_probe(t, b.tid, r, 0, 0, &cpu);
        sw_threadstate_sweep(t, r);
    }
    sw_threadstate_get_stats(t, &st);
    CHECK_EQ_U64(st.opens, 1 + 3);   /* a's kept; b's opened every time */
    CHECK(syscall_fd_of(a.tid) >= 0);
    CHECK_EQ_I64(syscall_fd_of(b.tid), -1);
    /* Round 4 sees only b: a is forgotten, its descriptor closed. */
    sw_threadstate_probe(t, b.tid, 4, 0, 0, &cpu);
    sw_threadstate_sweep(t, 4);
    CHECK_EQ_I64(syscall_fd_of(a.tid), -1);
    /* ... and a is new when seen again: all its CPU time counts. */
    uint64_t lb = thread_cpu_ns(a.th);
    sw_threadstate_probe(t, a.tid, 5, 0, 0, &cpu);
    CHECK(cpu >= lb && cpu != SW_NO_CPU);
    /* Many threads: the table grows and shrinks. */
    for (uint32_t i = 0; i < 1000; i++)
        sw_threadstate_probe(t, 4000000 + i, 6, 0, 0, &cpu);   /* no such threads */
    sw_threadstate_get_stats(t, &st);
    CHECK(st.unknown >= 1000);
    CHECK_EQ_U64(sw_threadstate_probe(t, a.tid, 6, 0, 0, &cpu), SW_STATE_IDLE);
    sw_threadstate_sweep(t, 6);
    CHECK_EQ_U64(sw_threadstate_probe(t, a.tid, 7, 0, 0, &cpu), SW_STATE_IDLE);
    sw_threadstate_sweep(t, 7);
    stop(&a);
    stop(&b);
    sw_threadstate_free(t);
}

TEST(a_reused_descriptor_is_never_closed)
{
    worker a;
    REQUIRE(start(&a, COND, &other) && blocked(&a));
    sw_threadstate *t = sw_threadstate_new((int)getpid(), 8);
    REQUIRE(t != NULL);
    uint64_t cpu;
    CHECK_EQ_U64(sw_threadstate_probe(t, a.tid, 1, 0, 0, &cpu), SW_STATE_IDLE);
    int fd = syscall_fd_of(a.tid);
    REQUIRE(fd >= 0);
    /* The program closes it and opens a file of its own, which gets the
     * same number. */
    close(fd);
    char path[] = "/tmp/sw-threadstate-XXXXXX";
    int mine = mkstemp(path);
    REQUIRE(mine >= 0);
    unlink(path);
    CHECK_EQ_I64(write(mine, "not a syscall line", 18), 18);
    if (mine != fd) {
        CHECK_EQ_I64(dup2(mine, fd), fd);
        close(mine);
    }
    CHECK_EQ_U64(sw_threadstate_probe(t, a.tid, 2, 0, 0, &cpu), SW_STATE_IDLE);   /* reopened */
    CHECK(fcntl(fd, F_GETFD) >= 0);    /* the program's file is still open */
    sw_threadstate_free(t);
    char buf[32] = {0};
    CHECK_EQ_I64(pread(fd, buf, sizeof buf - 1, 0), 18);
    CHECK_EQ_STR(buf, "not a syscall line");
    close(fd);
    stop(&a);
}
