/*
 * recursion.c - keeping traced programs within their C stack. Under a
 * frame-evaluation hook every Python call also recurses in C (from 3.11 on
 * CPython otherwise runs Python-to-Python calls without C recursion):
 *
 *  - the C-recursion budget of 3.12+ is topped up while tracing (a hooked
 *    call spends two levels of it), and taken back at stop;
 *  - each thread's stack bounds give the hook a guard address below which a
 *    call raises RecursionError instead of overflowing the C stack.
 *
 * See docs/architecture.md, "Recursion and the C stack".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "recursion.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#if PY_VERSION_HEX >= 0x030C0000
/* CPython 3.12 budgets C recursion at 1500 levels, and a Python call made
 * through a frame-evaluation hook spends two of them, so without help a
 * traced program could recurse only ~750 deep (its Python limit is 1000).
 * While tracing, each attached thread gets a fixed bonus, taken back when
 * tracing stops; the real C stack is protected by the hook's stack guard. The registry
 * pairs the thread state with its pthread, so that a state freed and
 * reused by a new thread is never confused with the old one. */
#define SW_RECURSION_BONUS_CAP 40000
typedef struct { PyThreadState *ts; pthread_t thread; int bonus; } bonus_entry;
static bonus_entry *bonuses;
static size_t nbonuses, bonuses_cap;

void sw_recursion_bonus_give(PyThreadState *ts)
{
    /* Large and fixed (the Python limit may be raised later): the C stack
     * itself is protected by the stack guard (sw_tracer_thread.stack_guard). */
    int bonus = SW_RECURSION_BONUS_CAP;
    pthread_mutex_lock(&sw_S.lock);
    if (nbonuses == bonuses_cap) {
        size_t cap = bonuses_cap ? bonuses_cap * 2 : 16;
        bonus_entry *b = PyMem_RawRealloc(bonuses, cap * sizeof *b);
        if (!b) {
            pthread_mutex_unlock(&sw_S.lock);
            return;  /* no bonus: deep recursion fails earlier, nothing worse */
        }
        bonuses = b;
        bonuses_cap = cap;
    }
    bonuses[nbonuses++] = (bonus_entry){ts, pthread_self(), bonus};
    ts->c_recursion_remaining += bonus;
    pthread_mutex_unlock(&sw_S.lock);
}

/* The exiting thread's state is gone already: forget its entry. Caller
 * holds sw_S.lock. */
void sw_recursion_bonus_forget_self(void)
{
    for (size_t i = 0; i < nbonuses; i++) {
        if (pthread_equal(bonuses[i].thread, pthread_self())) {
            bonuses[i] = bonuses[--nbonuses];
            return;
        }
    }
}

/* What a thread keeps of its budget when its bonus is taken back while it
 * is deep in hooked calls (stop() called deep down, or the last handler
 * removed there): taking it all would leave the budget far below zero, and
 * CPython ends the process when it overflows while already handling an
 * overflow. Such a thread keeps the part of its bonus its stack is using
 * (freed as it returns), so it may later recurse in C somewhat deeper than
 * plain CPython would let it. */
#define SW_RECURSION_KEEP 200

/* Takes every bonus back from the thread states still alive. */
void sw_recursion_bonus_take_back(void)
{
    PyThreadState *me = PyThreadState_Get();
    pthread_mutex_lock(&sw_S.lock);
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts; ts = PyThreadState_Next(ts)) {
        for (size_t i = 0; i < nbonuses; i++) {
            if (bonuses[i].ts == ts && ts->thread_id == (unsigned long)bonuses[i].thread) {
                int take = bonuses[i].bonus;
                if (ts->c_recursion_remaining - take < SW_RECURSION_KEEP)
                    take = ts->c_recursion_remaining > SW_RECURSION_KEEP ? ts->c_recursion_remaining - SW_RECURSION_KEEP : 0;
                ts->c_recursion_remaining -= take;
                break;
            }
        }
    }
    nbonuses = 0;
    sw_S.recursion_gen++;
    pthread_mutex_unlock(&sw_S.lock);
}
#else
void sw_recursion_bonus_give(PyThreadState *ts) { (void)ts; }
void sw_recursion_bonus_forget_self(void) {}
void sw_recursion_bonus_take_back(void) { sw_S.recursion_gen++; }
#endif

void sw_recursion_attach_slow(sw_tracer_thread *t)
{
    t->recursion_gen = sw_S.recursion_gen;
    if (!t->stack_guard)
        t->stack_guard = sw_stack_guard_of_this_thread(&t->handler_guard);
    sw_recursion_bonus_give(PyThreadState_Get());
    /* Its entry is forgotten when the thread exits. */
    if (sw_thread_exit_key())
        pthread_setspecific(sw_S.key, t);
}


/* The lowest address the hook lets a hooked call start at: the thread's
 * stack bottom plus a margin for raising and handling RecursionError. */
/* The main thread's stack, as pthread_getattr_np computes it (the
 * mapping holding the stack pointer, grown down to RLIMIT_STACK but not
 * into the mapping below), from one pass over /proc/self/maps parsed here:
 * glibc's sscanf per line cost ~0.5 M instructions per start. Returns 0
 * and sets *lo, *size, or -1. */
static int main_thread_stack(uintptr_t *lo, size_t *size)
{
    uintptr_t sp = sw_stack_pointer();
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[8192];
    size_t have = 0;
    uintptr_t prev_hi = 0, map_hi = 0;
    int found = 0;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = 0;
        char *line = buf, *nl;
        while (!found && (nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
            char *end;
            uintptr_t a = (uintptr_t)strtoull(line, &end, 16);
            uintptr_t b = *end == '-' ? (uintptr_t)strtoull(end + 1, NULL, 16) : 0;
            if (a <= sp && sp < b) {
                map_hi = b;
                found = 1;
            } else if (b <= sp) {
                prev_hi = b;
            }
            line = nl + 1;
        }
        if (found)
            break;
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
        if (have == sizeof buf - 1)
            have = 0;   /* a line longer than the buffer: not one we need */
    }
    close(fd);
    struct rlimit rl;
    if (!found || getrlimit(RLIMIT_STACK, &rl) != 0)
        return -1;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t limit = rl.rlim_cur == RLIM_INFINITY ? (size_t)(map_hi - prev_hi) : (size_t)rl.rlim_cur / page * page;
    if (limit > map_hi - prev_hi)
        limit = (size_t)(map_hi - prev_hi);
    *lo = map_hi - limit;
    *size = limit;
    return 0;
}

uintptr_t sw_stack_guard_of_this_thread(uintptr_t *handler_guard)
{
    *handler_guard = 0;
    void *addr = NULL;
    size_t size = 0;
    uintptr_t lo;
    if ((pid_t)syscall(SYS_gettid) == getpid() && main_thread_stack(&lo, &size) == 0) {
        addr = (void *)lo;
    } else {
        pthread_attr_t attr;
        if (pthread_getattr_np(pthread_self(), &attr) != 0)
            return 0;
        int ok = pthread_attr_getstack(&attr, &addr, &size) == 0;
        pthread_attr_destroy(&attr);
        if (!ok)
            return 0;
    }
    if (!addr || size < (64u << 10))
        return 0;
    size_t margin = size / 4 < (512u << 10) ? size / 4 : (512u << 10);
    /* A handler called at the program's deepest point may use three
     * quarters of the margin. */
    *handler_guard = (uintptr_t)addr + margin / 4;
    return (uintptr_t)addr + margin;
}
