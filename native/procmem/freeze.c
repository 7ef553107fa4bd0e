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
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_PASSES 64   /* rescans of /proc/PID/task for threads started meanwhile */
#define MAX_LATE 64     /* threads seized whose stop is still due */

/* Threads this (tracing) thread seized and interrupted whose stop did not
 * come within SW_FREEZE_WAIT_NS: asleep in the kernel, uninterruptibly.
 * They are still traced (PTRACE_DETACH needs a stopped tracee), their
 * interrupt pending: once they stop, the next sw_thaw of this thread lets
 * them go (or a freeze takes them as they are); if this thread exits
 * first, the kernel detaches them. Per thread: ptrace is. */
static _Thread_local int late[MAX_LATE];
static _Thread_local int nlate;

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

/* 1 if thread tid of pid sleeps uninterruptibly now (state D in its
 * stat file), 0 if not or unknown. */
static int in_d_state(int pid, int tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, tid);
    if (sw_read_text(path, buf, sizeof buf) != 0)
        return 0;
    const char *p = strrchr(buf, ')');   /* (the name may hold anything) */
    return p && p[1] == ' ' && p[2] == 'D';
}

/* Waits up to bound_ns for tid's stop (or end): 1 with its status in st, 0
 * if it is gone, -1 if it did not stop in time.
 *
 * A thread interrupted while running or asleep interruptibly stops on its
 * way back to user space, within ~0.1-0.3 ms here (up to tens of ms under
 * load): for it, a blocking waitpid, woken by the stop itself. Polling
 * instead (sleeping or yielding between tries) made each stop of a busy
 * machine (load 15) 7-20 ms, not 1-2: every try waits for a CPU again.
 * Only a thread asleep uninterruptibly (state D) after the interrupt can
 * keep its stop away for long: it is polled, bounded, each pause a quarter
 * of the time waited so far (at most 1 ms). Left unbounded: a thread
 * that, between the look at its state and its stop, enters such a sleep
 * from a system call it was in (a window of microseconds). */
static int wait_stop(int pid, int tid, int *st, uint64_t bound_ns)
{
    pid_t r = waitpid(tid, st, __WALL | WNOHANG);
    if (r == tid)
        return 1;
    if (r < 0 && errno != EINTR)
        return 0;
    if (!bound_ns)
        return -1;
    if (!in_d_state(pid, tid)) {
        for (;;) {
            r = waitpid(tid, st, __WALL);
            if (r == tid)
                return 1;
            if (r < 0 && errno != EINTR)
                return 0;
        }
    }
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
        r = wait_stop(f->pid, tid, &st, 0);
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
        snprintf(err, errlen, "cannot stop thread %d of process %d: ptrace: %s%s", tid, f->pid, strerror(errno),
                 errno == EPERM ? " (it is traced already, by gdb or strace: one tracer at a time; or ptrace needs "
                                  "the same user and kernel.yama.ptrace_scope 0, or root / CAP_SYS_PTRACE: `sudo "
                                  "sysctl kernel.yama.ptrace_scope=0`, or run as root)"
                                : "");
        return SW_EIO;
    }
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0)
        return 0;   /* gone (ESRCH: the only failure of a seized tracee) */
    r = wait_stop(f->pid, tid, &st, SW_FREEZE_WAIT_NS);
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
        int st, r = wait_stop(0, late[i], &st, 0);
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

