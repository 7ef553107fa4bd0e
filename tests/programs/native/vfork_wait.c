/*
 * vfork_wait.c - vfork_wait(ms): vforks a child that sleeps ms and exits,
 * so the calling thread waits in the kernel, uninterruptibly (state D),
 * for that long: a thread that ptrace cannot stop meanwhile. Loaded with
 * ctypes by tests/programs/vfork_wait.py (tests/py/cli/test_freeze_bound.py).
 */
#define _GNU_SOURCE
#include <time.h>
#include <unistd.h>

int vfork_wait(int ms)
{
    pid_t c = vfork();
    if (c == 0) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        _exit(0);
    }
    return c > 0 ? 0 : -1;
}
