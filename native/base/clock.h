/*
 * clock.h - the trace clock.
 *
 * On x86-64 with a TSC that the kernel itself uses as its clocksource
 * (constant and nonstop), a timestamp is the raw TSC; elsewhere it is
 * CLOCK_MONOTONIC in nanoseconds. sw_clock_calibrate() ties the chosen clock
 * to CLOCK_MONOTONIC, CLOCK_REALTIME and CLOCK_BOOTTIME so that readers can
 * convert ticks to any of them (docs/format.md, "Clock").
 */
#ifndef SW_CLOCK_H
#define SW_CLOCK_H

#include "common.h"

#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#  include <x86intrin.h>
#  define SW_HAVE_TSC 1
#else
#  define SW_HAVE_TSC 0
#endif

typedef enum { SW_CLOCK_MONOTONIC = 0, SW_CLOCK_TSC = 1 } sw_clock_kind;

typedef struct sw_clock {
    sw_clock_kind kind;
    double hz;            /* ticks per second */
    uint64_t tick0;       /* ticks at the calibration point */
    uint64_t mono0_ns;    /* CLOCK_MONOTONIC at tick0 */
    uint64_t real0_ns;    /* CLOCK_REALTIME at tick0 */
    uint64_t boot0_ns;    /* CLOCK_BOOTTIME at tick0 */
    uint64_t hz_over_ns;  /* the interval hz was measured over (the cached one's: sw_clock_calibrate) */
} sw_clock;

/* Reads a clock_gettime clock in nanoseconds. */
uint64_t sw_clock_ns(clockid_t id);

/* Makes *timer, a CLOCK_MONOTONIC timer (disarmed) whose expiry sends
 * signal sig to the calling thread alone. 0, or -1 with errno. */
int sw_clock_thread_timer(int sig, timer_t *timer);

/* Chooses the clock (TSC only if allow_tsc and the kernel trusts it) and
 * measures its rate over about 2 ms. Never fails: falls back to
 * CLOCK_MONOTONIC.
 *
 * cache (NULL: none) names a file that keeps the TSC's rate for this boot
 * (boot_id, a line of /proc/sys/kernel/random/boot_id): when it holds one
 * that a measure over about 0.2 ms agrees with (within 1e-3), that rate
 * is taken, measured over longer and so more precise, and the 2 ms are
 * saved; else the 2 ms measure is made and written there. The file is
 * read only if it is a regular file of this user's that no one else may
 * write, and replaced whole (a temporary file renamed over it). */
void sw_clock_calibrate(sw_clock *c, int allow_tsc, const char *cache, const char *boot_id);

/* Re-measures hz over the whole interval since calibration; call at the end
 * of a trace for a precise rate. With a cache (as sw_clock_calibrate's),
 * a rate measured over longer than the cached one (and over 1 s) is
 * written there. */
void sw_clock_refine(sw_clock *c, const char *cache, const char *boot_id);

/* Reads the chosen clock. The hot path calls this once per event. */
SW_INLINE uint64_t sw_clock_now(const sw_clock *c)
{
#if SW_HAVE_TSC
    if (SW_LIKELY(c->kind == SW_CLOCK_TSC))
        return __rdtsc();
#endif
    (void)c;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
