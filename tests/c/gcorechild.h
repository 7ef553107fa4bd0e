/*
 * gcorechild.h - gdb's gcore of a child of the test, for the tests that
 * read a real core (elf/test_elfcore.c, procmem/test_unwind.c): the child,
 * forked from the test as it is at the call, waits in pause() while gcore
 * dumps it, then is killed. Only in the plain build: ASan's shadow memory
 * (terabytes mapped) would make the core that large.
 */
#ifndef SW_GCORECHILD_H
#define SW_GCORECHILD_H

#include "check.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct gcore_child {
    char dir[32];        /* a new folder under /tmp, holding ... */
    char path[256];      /* ... the core */
    int pid;             /* the child's (gone now) */
} gcore_child;

/* The core of a new child into g: 1, or 0 where this build or machine
 * cannot (the reason printed; missing gcore fails under CI) or gcore
 * failed (a check failed). */
static int gcore_child_take(gcore_child *g)
{
    if (strcmp(CHECK_BUILD, "plain") != 0) {
        printf("      (the plain build only)\n");
        return 0;
    }
    if (access("/usr/bin/gcore", X_OK) != 0) {
        printf("      (gcore is missing: scripts/install-deps.sh installs gdb)\n");
        CHECK(getenv("CI") == NULL || (strcmp(getenv("CI"), "true") != 0 && strcmp(getenv("CI"), "1") != 0));
        return 0;
    }
    pid_t child = fork();
    if (!CHECK(child >= 0))
        return 0;
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm(60);   /* never outlives the test */
        pause();
        _exit(0);
    }
    snprintf(g->dir, sizeof g->dir, "/tmp/sw-test-gcore-XXXXXX");
    char cmd[256];
    int made = mkdtemp(g->dir) != NULL, rc = -1;
    if (made) {
        snprintf(cmd, sizeof cmd, "timeout 60 gcore -o %s/core %d >/dev/null 2>&1", g->dir, (int)child);
        rc = system(cmd);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    g->pid = (int)child;
    snprintf(g->path, sizeof g->path, "%s/core.%d", g->dir, (int)child);
    if (!CHECK(made) || !CHECK_EQ_I64(rc, 0)) {
        if (made)
            rmdir(g->dir);
        return 0;
    }
    return 1;
}

/* Removes the core and its folder. */
static void gcore_child_remove(const gcore_child *g)
{
    unlink(g->path);
    rmdir(g->dir);
}

#endif
