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
#include "session.h"

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
     * itself is protected by the stack guard (sw_tstate.stack_guard). */
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

/* Takes every bonus back from the thread states still alive. */
void sw_recursion_bonus_take_back(void)
{
    PyThreadState *me = PyThreadState_Get();
    pthread_mutex_lock(&sw_S.lock);
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts; ts = PyThreadState_Next(ts)) {
        for (size_t i = 0; i < nbonuses; i++) {
            if (bonuses[i].ts == ts && ts->thread_id == (unsigned long)bonuses[i].thread) {
                ts->c_recursion_remaining -= bonuses[i].bonus;
                break;
            }
        }
    }
    nbonuses = 0;
    pthread_mutex_unlock(&sw_S.lock);
}
#else
void sw_recursion_bonus_give(PyThreadState *ts) { (void)ts; }
void sw_recursion_bonus_forget_self(void) {}
void sw_recursion_bonus_take_back(void) {}
#endif


/* The lowest address the hook lets a hooked call start at: the thread's
 * stack bottom plus a margin for raising and handling RecursionError. */
uintptr_t sw_stack_guard_of_this_thread(void)
{
    pthread_attr_t attr;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return 0;
    int ok = pthread_attr_getstack(&attr, &addr, &size) == 0;
    pthread_attr_destroy(&attr);
    if (!ok || !addr || size < (64u << 10))
        return 0;
    size_t margin = size / 4 < (512u << 10) ? size / 4 : (512u << 10);
    return (uintptr_t)addr + margin;
}

