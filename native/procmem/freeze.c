/*
 * freeze.c - stopping every thread of a process with ptrace, without a
 * signal (see freeze.h).
 */
#define _GNU_SOURCE
#include "freeze.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_PASSES 64   /* rescans of /proc/PID/task for threads started meanwhile */
#define MAX_LATE 64     /* threads seized whose stop is still due */
#define WAKE_AGAIN_NS 5000000L   /* wait_timed: its timer's period after the bound */

/* Threads this (tracing) thread seized and interrupted whose stop did not
 * come within SW_FREEZE_WAIT_NS: asleep in the kernel, uninterruptibly.
 * They are still traced (PTRACE_DETACH needs a stopped tracee), their
 * interrupt pending: once they stop, the next sw_thaw of this thread lets
 * them go (or a freeze takes them as they are); if this thread exits
 * first, the kernel detaches them. Per thread: ptrace is. */
static _Thread_local int late[MAX_LATE];
static _Thread_local int nlate;
static void (*seize_hook)(int tid);   /* tests: sw_freeze_set_seize_hook */

static int has(const sw_frozen *f, int tid)
{
    for (int i = 0; i < f->n; i++)
        if (f->tids[i] == tid)
            return 1;
    return 0;
}

static int late_index(int tid)
{
    for (int i = 0; i < nlate; i++)
        if (late[i] == tid)
            return i;
    return -1;
}

static void late_drop(int i)
{
    late[i] = late[--nlate];
}

/* Thread tid of pid's state letter in its stat file ('R', 'S', 'D', 'Z',
 * ...), or 0 if unknown (gone). */
static char thread_state(int pid, int tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, tid);
    if (sw_read_text(path, buf, sizeof buf) != 0)
        return 0;
    const char *p = strrchr(buf, ')');   /* (the name may hold anything) */
    return p && p[1] == ' ' ? p[2] : 0;
}

static void on_wake(int sig)
{
    (void)sig;   /* (only to end a waitpid with EINTR) */
}

/* 1 if this thread can have its blocking waitpid ended by SW_FREEZE_SIGNAL
 * (the signal's action is on_wake, installed here the first time while
 * the signal was at its default, which would end the process, so nobody
 * sends it; kept installed, as another freezing thread may be using it);
 * 0 if the process uses that signal itself. */
static int wake_ready(void)
{
    static volatile sig_atomic_t ours;
    struct sigaction cur;
    if (sigaction(SW_FREEZE_SIGNAL, NULL, &cur) != 0)
        return 0;
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == on_wake)
        return 1;
    if (ours || cur.sa_handler != SIG_DFL || (cur.sa_flags & SA_SIGINFO))
        return 0;   /* the program's own (or ours replaced since) */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_wake;   /* no SA_RESTART: the wait ends with EINTR */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SW_FREEZE_SIGNAL, &sa, NULL) != 0)
        return 0;
    ours = 1;
    return 1;
}

/* A blocking waitpid for tid, ended by a timer after bound_ns: 1 with its
 * status in st, 0 if it is gone, -1 if it did not stop in time, -2 if no
 * timer could be set (wake_ready 0, or timer_create failed). The timer
 * sends SW_FREEZE_SIGNAL to this thread only (unblocked meanwhile, as the
 * sampler's thread blocks every signal), at the bound and then every
 * WAKE_AGAIN_NS: a signal taken before the waitpid slept (this thread
 * preempted that long) or another signal's EINTR leaves the wait to the
 * next one. One left pending after the wait (the mask restored first) is
 * taken by on_wake when next unblocked, or ends a later wait early, which
 * then waits on to its own bound. */
static int wait_timed(int tid, int *st, uint64_t bound_ns)
{
    if (!wake_ready())
        return -2;
    timer_t timer;
    if (sw_clock_thread_timer(SW_FREEZE_SIGNAL, &timer) != 0)
        return -2;
    sigset_t one, old;
    sigemptyset(&one);
    sigaddset(&one, SW_FREEZE_SIGNAL);
    pthread_sigmask(SIG_UNBLOCK, &one, &old);
    uint64_t end = sw_clock_ns(CLOCK_MONOTONIC) + bound_ns;
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = (time_t)(bound_ns / 1000000000ull);
    its.it_value.tv_nsec = (long)(bound_ns % 1000000000ull);
    its.it_interval.tv_nsec = WAKE_AGAIN_NS;
    timer_settime(timer, 0, &its, NULL);
    int rc = -1;
    while (sw_clock_ns(CLOCK_MONOTONIC) < end) {
        pid_t r = waitpid(tid, st, __WALL);
        if (r == tid) {
            rc = 1;
            break;
        }
        if (r < 0 && errno != EINTR) {
            rc = 0;
            break;
        }
    }
    timer_delete(timer);
    if (sigismember(&old, SW_FREEZE_SIGNAL))
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* Waits up to bound_ns for tid's stop (or end): 1 with its status in st, 0
 * if it is gone, -1 if it did not stop in time.
 *
 * A thread interrupted while running or asleep interruptibly stops on its
 * way back to user space, within ~0.1-0.3 ms here (up to tens of ms under
 * load): for it, a blocking waitpid, woken by the stop itself. Polling
 * instead (sleeping or yielding between tries) made each stop of a busy
 * machine (load 15) 7-20 ms, not 1-2: every try waits for a CPU again.
 * A thread asleep uninterruptibly (state D) after the interrupt keeps its
 * stop away for as long as it sleeps (before the wait or from a system
 * call it was in when interrupted), so the blocking wait is ended by a
 * timer (wait_timed). Only if the program uses the timer's signal itself
 * is the thread polled instead, each pause a quarter of the time waited
 * so far (at most 1 ms). */
static int wait_stop(int tid, int *st, uint64_t bound_ns)
{
    pid_t r = waitpid(tid, st, __WALL | WNOHANG);
    if (r == tid)
        return 1;
    if (r < 0 && errno != EINTR)
        return 0;
    if (!bound_ns)
        return -1;
    int rc = wait_timed(tid, st, bound_ns);
    if (rc != -2)
        return rc;
    uint64_t t0 = sw_clock_ns(CLOCK_MONOTONIC);
    for (;;) {
        uint64_t waited = sw_clock_ns(CLOCK_MONOTONIC) - t0;
        if (waited >= bound_ns)
            return -1;
        uint64_t pause = waited / 4 < 20000 ? 20000 : waited / 4 < 1000000 ? waited / 4 : 1000000;
        struct timespec ts = {0, (long)pause};
        nanosleep(&ts, NULL);
        r = waitpid(tid, st, __WALL | WNOHANG);
        if (r == tid)
            return 1;
        if (r < 0 && errno != EINTR)
            return 0;
    }
}

/* Adds tid, stopped with status st, to f. A stop for a signal on its way
 * to the thread (not the interrupt's PTRACE_EVENT_STOP) keeps the signal,
 * handed back at the detach: never swallowed. */
static int took(sw_frozen *f, int tid, int st)
{
    f->sigs[f->n] = WIFSTOPPED(st) && (st >> 16) == 0 ? WSTOPSIG(st) : 0;
    f->tids[f->n++] = tid;
    return 1;
}

static int not_stopped(sw_frozen *f, int tid, char *err, size_t errlen)
{
    snprintf(err, errlen, "thread %d of process %d did not stop within %.0f ms (asleep in the kernel, "
             "uninterruptibly: state D, e.g. I/O on a stuck file system, or a parent waiting for its vfork child)",
             tid, f->pid, (double)SW_FREEZE_WAIT_NS / 1e6);
    return SW_ESTATE;
}

/* Why PTRACE_SEIZE of tid was refused (EPERM): 0 if the thread has ended
 * (a zombie, f->ended counted: it runs nothing more; a process exiting,
 * or a thread ended before its process's other threads), else SW_EIO with
 * err saying whether another tracer has it or what grants the permission
 * (each says "ptrace: Operation not permitted", which the attach reports
 * as a PermissionError). */
static int not_seized(sw_frozen *f, int tid, char *err, size_t errlen)
{
    char st = thread_state(f->pid, tid);
    if (st == 'Z' || st == 'X') {
        f->ended++;
        return 0;
    }
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", f->pid, tid);
    const char *tp = sw_read_text(path, buf, sizeof buf) == 0 ? strstr(buf, "\nTracerPid:") : NULL;
    int tracer = tp ? atoi(tp + 11) : 0;
    if (tracer > 0) {
        char name[64] = "";
        snprintf(path, sizeof path, "/proc/%d/comm", tracer);
        if (sw_read_text(path, name, sizeof name) == 0)
            name[strcspn(name, "\n")] = '\0';
        snprintf(err, errlen, "cannot stop thread %d of process %d: ptrace: Operation not permitted (it is traced "
                 "already, by process %d%s%s%s: one tracer at a time)", tid, f->pid, tracer, *name ? " (" : "", name,
                 *name ? ")" : "");
        return SW_EIO;
    }
    snprintf(err, errlen, "cannot stop thread %d of process %d: ptrace: Operation not permitted (ptrace needs the "
             "same user and kernel.yama.ptrace_scope 0, or root / CAP_SYS_PTRACE: `sudo sysctl "
             "kernel.yama.ptrace_scope=0`, or run as root)", tid, f->pid);
    return SW_EIO;
}

/* Seizes and stops tid. 1 if stopped, 0 if it is gone, SW_EIO on error,
 * SW_ESTATE if it does not stop within SW_FREEZE_WAIT_NS (or, seized
 * before and late, has not stopped yet): then it is not in f. */
static int stop_one(sw_frozen *f, int tid, char *err, size_t errlen)
{
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 16;
        int *t = realloc(f->tids, (size_t)cap * sizeof *t);
        if (t)
            f->tids = t;
        int *g = t ? realloc(f->sigs, (size_t)cap * sizeof *g) : NULL;
        if (!g) {
            snprintf(err, errlen, "out of memory");
            return SW_EIO;
        }
        f->sigs = g;
        f->cap = cap;
    }
    int st, r, li = late_index(tid);
    if (li >= 0) {
        /* Seized by an earlier freeze, its stop still due: no second wait
         * (the threads stopped already would wait with it). */
        r = wait_stop(tid, &st, 0);
        if (r < 0)
            return not_stopped(f, tid, err, errlen);
        late_drop(li);
        if (r == 0 || WIFEXITED(st) || WIFSIGNALED(st))
            return 0;
        return took(f, tid, st);
    }
    if (nlate == MAX_LATE) {
        snprintf(err, errlen, "cannot stop thread %d of process %d: %d threads seized earlier have not stopped yet",
                 tid, f->pid, MAX_LATE);
        return SW_EIO;
    }
    if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) {
        if (errno == ESRCH)
            return 0;
        if (errno == EPERM)
            return not_seized(f, tid, err, errlen);
        snprintf(err, errlen, "cannot stop thread %d of process %d: ptrace: %s", tid, f->pid, strerror(errno));
        return SW_EIO;
    }
    if (seize_hook)
        seize_hook(tid);
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) {
        /* Gone (ESRCH: the only failure of a seized tracee): released
         * already, or its exit still to be collected: collected here, so
         * no thread of ours is left a zombie. */
        waitpid(tid, &st, __WALL | WNOHANG);
        return 0;
    }
    r = wait_stop(tid, &st, SW_FREEZE_WAIT_NS);
    if (r < 0) {
        late[nlate++] = tid;
        return not_stopped(f, tid, err, errlen);
    }
    if (r == 0 || WIFEXITED(st) || WIFSIGNALED(st))
        return 0;
    return took(f, tid, st);
}

int sw_freeze(sw_frozen *f, int pid, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->pid = pid;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    for (int pass = 0; pass < MAX_PASSES; pass++) {
        DIR *d = opendir(path);
        if (!d) {
            snprintf(err, errlen, "process %d: %s", pid, strerror(errno));
            sw_thaw(f);
            return SW_EIO;
        }
        int added = 0;
        f->ended = 0;   /* (this pass's) */
        struct dirent *e;
        while ((e = readdir(d))) {
            int tid = atoi(e->d_name);
            if (tid <= 0 || has(f, tid))
                continue;
            int r = stop_one(f, tid, err, errlen);
            if (r < 0) {
                closedir(d);
                sw_thaw(f);
                return r;
            }
            added += r;
        }
        closedir(d);
        if (!added && !f->n && f->ended) {
            snprintf(err, errlen, "process %d is exiting: its threads have ended (zombie), it runs nothing more", pid);
            sw_thaw(f);
            return SW_EIO;
        }
        if (!added)
            return SW_OK;
    }
    snprintf(err, errlen, "process %d keeps starting threads: it cannot be frozen", pid);
    sw_thaw(f);
    return SW_EIO;
}

int sw_freeze_thread(sw_frozen *f, int pid, int tid, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->pid = pid;
    int r = stop_one(f, tid, err, errlen);
    if (r > 0)
        return SW_OK;
    if (r == 0 && f->ended)
        snprintf(err, errlen, "thread %d of process %d has ended (zombie)%s", tid, pid,
                 tid == pid ? ": the process is exiting" : "");
    sw_thaw(f);
    return r == 0 ? SW_EARG : r;
}

void sw_thaw(sw_frozen *f)
{
    for (int i = 0; i < f->n; i++)
        ptrace(PTRACE_DETACH, f->tids[i], 0, (void *)(intptr_t)f->sigs[i]);
    free(f->tids);
    free(f->sigs);
    f->tids = f->sigs = NULL;
    f->n = f->cap = 0;
    for (int i = nlate - 1; i >= 0; i--) {
        int st, r = wait_stop(late[i], &st, 0);
        if (r == 0 || (r > 0 && (WIFEXITED(st) || WIFSIGNALED(st)))) {
            late_drop(i);
        } else if (r > 0) {
            ptrace(PTRACE_DETACH, late[i], 0, (void *)(intptr_t)(WIFSTOPPED(st) && (st >> 16) == 0 ? WSTOPSIG(st) : 0));
            late_drop(i);
        }
    }
}

typedef struct check_job {
    int pid, tid, rc;
    char *err;
    size_t errlen;
} check_job;

static void *check_thread(void *arg)
{
    check_job *j = arg;
    sw_frozen f;
    j->rc = sw_freeze_thread(&f, j->pid, j->tid, j->err, j->errlen);
    if (j->rc == SW_OK)
        sw_thaw(&f);
    return NULL;
}

int sw_freeze_check(int pid, int tid, char *err, size_t errlen)
{
    check_job j = {pid, tid, SW_EIO, err, errlen};
    pthread_t t;
    if (pthread_create(&t, NULL, check_thread, &j) != 0) {
        snprintf(err, errlen, "cannot start a thread: %s", strerror(errno));
        return SW_EIO;
    }
    pthread_join(t, NULL);
    return j.rc;
}

int sw_freeze_late(void)
{
    return nlate;
}

void sw_freeze_set_seize_hook(void (*fn)(int tid))
{
    seize_hook = fn;
}

