/*
 * nativestack.c - a thread's native stack, captured in a signal handler
 * while the sampler reads its Python stack (nativestack.h).
 *
 * The request slot's state goes IDLE -> REQUESTED (sampler, before the
 * signal) -> CAPTURING (handler, by compare-and-swap, so a request the
 * sampler gave up on is never filled) -> CAPTURED (handler, addresses
 * stored) -> RELEASED (sampler) -> IDLE (next request); a read request's
 * handler makes its read and goes on at once: CAPTURING -> CAPTURED ->
 * IDLE (sampler, sw_nstack_read). Both sides spin on
 * the state word, then wait on it with futex(2), which is async-signal-safe,
 * and with a time limit. A side that changes the state wakes the other
 * only when it counts a sleeper (`sleepers`): mostly the other side is still
 * spinning, and a wake-up is a system call made while the thread is parked.
 */
#define _GNU_SOURCE
#include "nativestack.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__) && defined(__x86_64__) && defined(__GLIBC__)
#  include <execinfo.h>
#  include <linux/futex.h>
#  include <ucontext.h>
#  define SW_NSTACK_OK 1
#else
#  define SW_NSTACK_OK 0
#endif

enum { IDLE, REQUESTED, CAPTURING, CAPTURED, RELEASED };
enum { KIND_CAPTURE, KIND_PARK, KIND_READ };   /* what a request asks: the native stack, parking, or a read */

#define SPIN_NS 30000                 /* each side spins this long before it sleeps on the futex */
/* A read request's sampler, after its spin, naps this long at a time
 * instead of sleeping on the futex: a signal to a thread running on another
 * CPU took 8-64 us to be taken on this VM (median ~20 us, 2026-11-28), and
 * a sampler asleep on the futex by then cost the thread a wake-up in its
 * handler (~20 us of its CPU here); a nap is the sampler's own time, and
 * the thread has gone on already. */
#define NAP_NS 20000
#define MAGIC 0x535754ull            /* "SWT": tells our requests from other senders' signals */
#define SEQ_BITS 40

static struct {
    atomic_int state;
    atomic_uint_fast64_t seq;        /* the current request's number */
    atomic_int tid;
    atomic_int kind;
    atomic_int sleepers;             /* threads in futex_wait on state, or about to be */
    int n;
    int truncated;
    uint64_t pcs[SW_NSTACK_MAX];
    sw_mem_iov iov;                  /* a read request's, and what its call returned */
    long got;
} req;

static atomic_uint_fast64_t n_sent, n_answered, n_timeouts, n_late;
/* Threads running the handler's own part now (not a chained handler),
 * and entries into it ever: their mask blocks the signal (sw_nstack_blocked). */
static atomic_int in_handler;
static atomic_uint handler_entries;
static uint64_t next_seq;
static pthread_mutex_t install_mu = PTHREAD_MUTEX_INITIALIZER;
/* Held by a sampler from its request until the thread is released (or the
 * request failed): one request at a time, whichever sampler makes it.
 * Only samplers' threads, which are never asked, take it. */
static pthread_mutex_t request_mu = PTHREAD_MUTEX_INITIALIZER;
static int installed, users, park_users;
/* The process whose samplers are the users, as of the last install (a
 * child's install sets its own): the handler tells our requests by it,
 * and reads with it, without a system call. */
static atomic_int users_pid;
/* A thread's own id, kept by the handler for the process it was asked in
 * (a forked child's first thread has its parent's copy: its pid differs). */
static __thread struct { int pid, tid; } self_ids __attribute__((tls_model("initial-exec")));
static struct sigaction previous;

int sw_nstack_signal(void)
{
#if SW_NSTACK_OK
    return SIGRTMAX - 3;
#else
    return 0;
#endif
}

int sw_nstack_supported(char *err, size_t errlen)
{
#if SW_NSTACK_OK
    if (errlen)
        err[0] = 0;
    return 1;
#else
    snprintf(err, errlen, "native frames need Linux on x86-64 with glibc");
    return 0;
#endif
}

#if SW_NSTACK_OK

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Sleeps while req.state is val, for at most ns. Counted in req.sleepers
 * before the state is looked at again (by the kernel, atomically with the
 * sleep), and the waker changes the state before it reads the count
 * (futex_wake): one of the two sees the other's store, so a sleeper is
 * never missed. */
static void futex_wait(int val, int64_t ns)
{
    if (ns <= 0)
        return;
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    atomic_fetch_add(&req.sleepers, 1);
    syscall(SYS_futex, (int *)&req.state, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
    atomic_fetch_sub(&req.sleepers, 1);
}

/* Spins while *w is val, for at most SPIN_NS: the other side mostly
 * answers within microseconds (a parked thread is released after one walk;
 * a thread that was just running takes the signal at once), where a futex
 * sleep would add a wake-up, tens of microseconds or more on a busy
 * machine, to the time the thread stays parked. */
static void spin_while(atomic_int *w, int val)
{
    int64_t end = mono_ns() + SPIN_NS;
    for (unsigned k = 0; atomic_load(w) == val; k++) {
        if ((k & 63) == 63 && mono_ns() > end)
            return;
        __builtin_ia32_pause();
    }
}

/* After a change of req.state: wakes its sleepers, if any (a stale
 * handler that gave up on an earlier request may be counted too: all
 * are woken, each looks again). */
static void futex_wake(void)
{
    if (atomic_load(&req.sleepers) > 0)
        syscall(SYS_futex, (int *)&req.state, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Someone else's signal of the same number: what the previous handler
 * would have done. (Default and ignore of a real-time signal: the default
 * ends the process; it is re-raised with the old action in place for that.) */
static void chain(int sig, siginfo_t *si, void *uc)
{
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction)
            previous.sa_sigaction(sig, si, uc);
    } else if (previous.sa_handler == SIG_DFL) {
        signal(sig, SIG_DFL);
        raise(sig);
    } else if (previous.sa_handler != SIG_IGN && previous.sa_handler) {
        previous.sa_handler(sig);
    }
}

static void handler(int sig, siginfo_t *si, void *ucv)
{
    atomic_fetch_add(&in_handler, 1);   /* first: a thread preempted right after the signal's delivery counts */
    atomic_fetch_add(&handler_entries, 1);
    int saved_errno = errno;
    uint64_t v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
    int pid = atomic_load(&users_pid);
    if (si->si_code != SI_QUEUE || si->si_pid != pid || !pid || (v >> SEQ_BITS) != MAGIC) {
        atomic_fetch_sub(&in_handler, 1);   /* (a chained handler may never return) */
        chain(sig, si, ucv);
        errno = saved_errno;
        return;
    }
    atomic_fetch_add(&n_answered, 1);
    uint64_t seq = v & ((1ull << SEQ_BITS) - 1);
    int expected = REQUESTED;
    if (self_ids.pid != pid) {
        self_ids.tid = (int)syscall(SYS_gettid);
        self_ids.pid = pid;
    }
    if (atomic_load(&req.seq) != seq || atomic_load(&req.tid) != self_ids.tid ||
        !atomic_compare_exchange_strong(&req.state, &expected, CAPTURING)) {
        atomic_fetch_add(&n_late, 1);    /* a request the sampler gave up on */
        atomic_fetch_sub(&in_handler, 1);
        errno = saved_errno;
        return;
    }
    if (atomic_load(&req.kind) == KIND_CAPTURE) {
        /* backtrace() starts in this handler; the frame after the signal
         * trampoline is the interrupted instruction (the kernel's saved RIP). */
        void *buf[SW_NSTACK_MAX + 8];
        int n = backtrace(buf, SW_NSTACK_MAX + 8);
        uint64_t ip = (uint64_t)((ucontext_t *)ucv)->uc_mcontext.gregs[REG_RIP];
        int k = 0;
        while (k < n && (uint64_t)(uintptr_t)buf[k] != ip)
            k++;
        int m = 0;
        for (; k < n && m < SW_NSTACK_MAX; k++)
            req.pcs[m++] = (uint64_t)(uintptr_t)buf[k];
        req.n = m;
        req.truncated = k < n || n == SW_NSTACK_MAX + 8;
    }
    if (atomic_load(&req.kind) == KIND_READ) {
        /* The read, of the thread's own memory, by the one system call
         * (async-signal-safe; it fails on a bad address, never faults),
         * and on at once: what it read is of this instant. */
        req.got = (long)syscall(SYS_process_vm_readv, pid, req.iov.local, req.iov.nlocal, req.iov.remote,
                                req.iov.nremote, 0ul);
        atomic_store(&req.state, CAPTURED);
        futex_wake();
        atomic_fetch_sub(&in_handler, 1);
        errno = saved_errno;
        return;
    }
    atomic_store(&req.state, CAPTURED);
    futex_wake();
    /* Parked until the sampler has read the Python stack. */
    int64_t deadline = mono_ns() + (int64_t)SW_NSTACK_PARK_MAX_NS;
    spin_while(&req.state, CAPTURED);
    for (;;) {
        if (atomic_load(&req.seq) != seq || atomic_load(&req.state) != CAPTURED)
            break;
        int64_t left = deadline - mono_ns();
        if (left <= 0) {
            expected = CAPTURED;
            atomic_compare_exchange_strong(&req.state, &expected, IDLE);
            break;
        }
        futex_wait(CAPTURED, left);
    }
    atomic_fetch_sub(&in_handler, 1);
    errno = saved_errno;
}

/* Installs the handler for one more user: the native capturer (at most
 * one) or a parker (any number). */
static int install(int park, char *err, size_t errlen)
{
    pthread_mutex_lock(&install_mu);
    if ((users || park_users) && users_pid != getpid()) {
        /* A child forked while the parent's samplers used it: they (and
         * any thread they had asked) do not exist here, nor does the
         * request one of them may have held. The handler stays installed;
         * the request slot starts over. */
        users = park_users = 0;
        pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
        request_mu = fresh;
        atomic_store(&req.state, IDLE);
        atomic_store(&req.sleepers, 0);
        atomic_store(&in_handler, 0);   /* (nor do threads that were in the handler) */
        atomic_store(&n_answered, atomic_load(&n_sent));
    }
    if (!park && users) {
        pthread_mutex_unlock(&install_mu);
        snprintf(err, errlen, "another profiler is capturing native frames");
        return SW_ESTATE;
    }
    if (installed && !sw_nstack_handler_current())
        installed = 0;   /* replaced since it was left installed (signal.signal): installed over that one */
    if (!installed) {
        /* The first backtrace() loads libgcc's unwinder (dlopen, malloc):
         * done here, never first in a handler. */
        void *warm[4];
        (void)backtrace(warm, 4);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sw_nstack_signal(), &sa, &previous) != 0) {
            snprintf(err, errlen, "cannot install the handler of signal %d: %s", sw_nstack_signal(), strerror(errno));
            pthread_mutex_unlock(&install_mu);
            return SW_EIO;
        }
        installed = 1;
    }
    if (park)
        park_users++;
    else
        users = 1;
    atomic_store(&users_pid, (int)getpid());
    pthread_mutex_unlock(&install_mu);
    return SW_OK;
}

static void uninstall(int park)
{
    pthread_mutex_lock(&install_mu);
    int was = park ? park_users : users;
    if (was && users_pid == getpid()) {
        if (park)
            park_users--;
        else
            users = 0;
        /* Every signal sent has been answered: none can arrive any more. */
        if (!users && !park_users && installed && atomic_load(&n_answered) == atomic_load(&n_sent)) {
            sigaction(sw_nstack_signal(), &previous, NULL);
            installed = 0;
        }
    }
    pthread_mutex_unlock(&install_mu);
}

int sw_nstack_install(char *err, size_t errlen)
{
    return install(0, err, errlen);
}

void sw_nstack_uninstall(void)
{
    uninstall(0);
}

int sw_nstack_park_install(char *err, size_t errlen)
{
    return install(1, err, errlen);
}

void sw_nstack_park_uninstall(void)
{
    uninstall(1);
}

/* Sends thread tid a request of this kind and waits up to wait_ns for it to
 * be parked. SW_OK with request_mu held (until sw_nstack_release), or a
 * negative SW_E* code without. */
static int request(int tid, int kind, uint64_t wait_ns, const sw_mem_iov *iov)
{
    if (tid <= 0 || !installed)
        return SW_EARG;
    pthread_mutex_lock(&request_mu);
    uint64_t seq = (++next_seq) & ((1ull << SEQ_BITS) - 1);
    req.n = 0;
    req.truncated = 0;
    if (iov)
        req.iov = *iov;   /* (a read request's) */
    req.got = -1;
    atomic_store(&req.kind, kind);
    atomic_store(&req.tid, tid);
    atomic_store(&req.seq, seq);
    atomic_store(&req.state, REQUESTED);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = sw_nstack_signal();
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_value.sival_ptr = (void *)(uintptr_t)(MAGIC << SEQ_BITS | seq);
    if (syscall(SYS_rt_tgsigqueueinfo, si.si_pid, tid, si.si_signo, &si) != 0) {
        atomic_store(&req.state, IDLE);
        pthread_mutex_unlock(&request_mu);
        return SW_EIO;             /* the thread has exited */
    }
    atomic_fetch_add(&n_sent, 1);
    int64_t deadline = mono_ns() + (int64_t)wait_ns;
    if (kind != KIND_CAPTURE)
        spin_while(&req.state, REQUESTED);
    if (kind == KIND_READ)
        spin_while(&req.state, CAPTURING);   /* (the handler's read: a few microseconds, without a wake-up) */
    for (;;) {
        int s = atomic_load(&req.state);
        if (s == CAPTURED)
            return SW_OK;
        int64_t left = deadline - mono_ns();
        if (left <= 0 && s == REQUESTED) {
            int expected = REQUESTED;
            if (atomic_compare_exchange_strong(&req.state, &expected, IDLE)) {
                atomic_fetch_add(&n_timeouts, 1);
                pthread_mutex_unlock(&request_mu);
                return SW_ESTATE;  /* signals blocked, or the thread is stuck or not run */
            }
            continue;
        }
        if (s == IDLE) {
            pthread_mutex_unlock(&request_mu);
            return SW_EIO;         /* it answered, then gave up waiting (parked too long) */
        }
        if (kind == KIND_READ) {
            struct timespec nap = {0, left > 0 && left < NAP_NS ? (long)left : NAP_NS};
            nanosleep(&nap, NULL);
            continue;
        }
        futex_wait(s, left > 0 ? left : 1000000);
    }
}

int sw_nstack_capture(int tid, uint64_t *pcs, int *truncated)
{
    *truncated = 0;
    int rc = request(tid, KIND_CAPTURE, SW_NSTACK_WAIT_NS, NULL);
    if (rc != SW_OK)
        return rc;
    memcpy(pcs, req.pcs, (size_t)req.n * sizeof *pcs);
    *truncated = req.truncated;
    return req.n;
}

int sw_nstack_park(int tid, uint64_t wait_ns)
{
    return request(tid, KIND_PARK, wait_ns, NULL);
}

long sw_nstack_read(int tid, const sw_mem_iov *iov, uint64_t wait_ns)
{
    int rc = request(tid, KIND_READ, wait_ns, iov);
    if (rc != SW_OK)
        return rc;
    long got = req.got;
    atomic_store(&req.state, IDLE);   /* (the handler has gone on) */
    pthread_mutex_unlock(&request_mu);
    return got >= 0 ? got : 0;
}

int sw_nstack_handler_current(void)
{
    struct sigaction cur;
    return sigaction(sw_nstack_signal(), NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
           cur.sa_sigaction == handler;
}

int sw_nstack_release(void)
{
    int expected = CAPTURED;
    int was_parked = atomic_compare_exchange_strong(&req.state, &expected, RELEASED);
    futex_wake();
    pthread_mutex_unlock(&request_mu);
    return was_parked;
}

#else

int sw_nstack_install(char *err, size_t errlen)
{
    sw_nstack_supported(err, errlen);
    return SW_EIO;
}

void sw_nstack_uninstall(void) {}

int sw_nstack_park_install(char *err, size_t errlen)
{
    sw_nstack_supported(err, errlen);
    return SW_EIO;
}

void sw_nstack_park_uninstall(void) {}

int sw_nstack_capture(int tid, uint64_t *pcs, int *truncated)
{
    (void)tid;
    (void)pcs;
    *truncated = 0;
    return SW_EIO;
}

int sw_nstack_park(int tid, uint64_t wait_ns)
{
    (void)tid;
    (void)wait_ns;
    return SW_EIO;
}

int sw_nstack_handler_current(void)
{
    return 0;
}

int sw_nstack_release(void)
{
    return 0;
}

long sw_nstack_read(int tid, const sw_mem_iov *iov, uint64_t wait_ns)
{
    (void)tid;
    (void)iov;
    (void)wait_ns;
    return SW_EIO;
}

#endif

int sw_nstack_seccomp(int tid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
    if (sw_read_text(path, buf, sizeof buf) != 0)
        return -1;
    const char *at = strstr(buf, "\nSeccomp:");
    int mode = 1;
    if (!at || sscanf(at + 9, " %d", &mode) != 1)
        return -1;
    return mode != 0;
}

int sw_nstack_blocked(int tid)
{
#if SW_NSTACK_OK
    /* Blocked and pending (the thread's own pending set: the signal is
     * sent to the thread), with no thread inside the handler. Blocked
     * alone is a thread inside the handler, whose mask blocks the signal
     * it runs for: one slow to park on a busy machine (preempted between
     * the signal's delivery and its answer), past the signal, which is no
     * longer pending. Such a thread may have the next request's signal
     * pending (it had not run for two requests): while any thread is in
     * the handler, or enters it during the read, none is said to block
     * (one that does is asked again, and muted then). */
    unsigned entries = atomic_load(&handler_entries);
    if (atomic_load(&in_handler) > 0)
        return 0;
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
    if (sw_read_text(path, buf, sizeof buf) != 0 || atomic_load(&handler_entries) != entries)
        return 0;
    const char *blk = strstr(buf, "\nSigBlk:"), *pnd = strstr(buf, "\nSigPnd:");
    unsigned long long blocked, pending;
    if (!blk || !pnd || sscanf(blk + 8, " %llx", &blocked) != 1 || sscanf(pnd + 8, " %llx", &pending) != 1)
        return 0;
    return (blocked & pending) >> (sw_nstack_signal() - 1) & 1;
#else
    (void)tid;
    return 0;
#endif
}

void sw_nstack_get_stats(sw_nstack_stats *out)
{
    out->sent = atomic_load(&n_sent);
    out->timeouts = atomic_load(&n_timeouts);
    out->late = atomic_load(&n_late);
}
