/*
 * freeze.c - stopping every thread of a process with ptrace, without a
 * signal (see freeze.h).
 */
#define _GNU_SOURCE
#include "freeze.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#define MAX_PASSES 64   /* rescans of /proc/PID/task for threads started meanwhile */

static int has(const sw_frozen *f, int tid)
{
    for (int i = 0; i < f->n; i++)
        if (f->tids[i] == tid)
            return 1;
    return 0;
}

/* Seizes and stops tid. 1 if stopped, 0 if it is gone, -1 on error. */
static int stop_one(sw_frozen *f, int tid, char *err, size_t errlen)
{
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 16;
        int *t = realloc(f->tids, (size_t)cap * sizeof *t);
        if (!t) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        f->tids = t;
        f->cap = cap;
    }
    if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) {
        if (errno == ESRCH)
            return 0;
        snprintf(err, errlen, "cannot stop thread %d of process %d: ptrace: %s%s", tid, f->pid, strerror(errno),
                 errno == EPERM ? " (it is traced already, by gdb or strace: one tracer at a time; or ptrace needs "
                                  "the same user and kernel.yama.ptrace_scope 0, or root / CAP_SYS_PTRACE: `sudo "
                                  "sysctl kernel.yama.ptrace_scope=0`, or run as root)"
                                : "");
        return -1;
    }
    f->tids[f->n++] = tid;
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0)
        return errno == ESRCH ? 0 : -1;
    int st;
    for (;;) {
        pid_t r = waitpid(tid, &st, __WALL);
        if (r == tid)
            break;
        if (r < 0 && errno != EINTR)
            return 0;   /* gone */
    }
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
        f->n--;
        return 0;
    }
    return 1;
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
                return SW_EIO;
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
    return r == 0 ? SW_EARG : SW_EIO;
}

void sw_thaw(sw_frozen *f)
{
    for (int i = 0; i < f->n; i++)
        ptrace(PTRACE_DETACH, f->tids[i], 0, 0);
    free(f->tids);
    f->tids = NULL;
    f->n = f->cap = 0;
}
