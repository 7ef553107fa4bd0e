/*
 * clock.c - choosing and calibrating the trace clock (see clock.h).
 */
#define _GNU_SOURCE
#include "clock.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

uint64_t sw_clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int sw_clock_thread_timer(int sig, timer_t *timer)
{
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = sig;
#ifdef sigev_notify_thread_id
    ev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
#else
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
#endif
    return timer_create(CLOCK_MONOTONIC, &ev, timer);
}

/* The TSC is usable when the kernel chose it as its own clocksource: then it
 * is constant-rate, does not stop in idle states and is synchronised across
 * CPUs (the kernel checks all three before choosing it). */
static int kernel_uses_tsc(void)
{
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!f)
        return 0;
    char buf[32] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strncmp(buf, "tsc", 3) == 0;
}

#if SW_HAVE_TSC
static void sample_pair(uint64_t *tsc, uint64_t *mono)
{
    /* Take the TSC between two monotonic reads and keep the tightest. */
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t a = sw_clock_ns(CLOCK_MONOTONIC);
        uint64_t t = __rdtsc();
        uint64_t b = sw_clock_ns(CLOCK_MONOTONIC);
        if (b - a < best) {
            best = b - a;
            *tsc = t;
            *mono = a + (b - a) / 2;
        }
    }
}
#endif

void sw_clock_calibrate(sw_clock *c, int allow_tsc)
{
    memset(c, 0, sizeof *c);
    c->kind = SW_CLOCK_MONOTONIC;
    c->hz = 1e9;
#if SW_HAVE_TSC
    if (allow_tsc && kernel_uses_tsc()) {
        uint64_t t0 = 0, m0 = 0, t1 = 0, m1 = 0;
        sample_pair(&t0, &m0);
        do {
            sample_pair(&t1, &m1);
        } while (m1 - m0 < 2000000);
        if (t1 > t0) {
            c->kind = SW_CLOCK_TSC;
            c->hz = (double)(t1 - t0) * 1e9 / (double)(m1 - m0);
            c->tick0 = t1;
            c->mono0_ns = m1;
            c->real0_ns = sw_clock_ns(CLOCK_REALTIME) - (sw_clock_ns(CLOCK_MONOTONIC) - m1);
            c->boot0_ns = sw_clock_ns(CLOCK_BOOTTIME) - (sw_clock_ns(CLOCK_MONOTONIC) - m1);
            return;
        }
    }
#else
    (void)allow_tsc;
#endif
    c->mono0_ns = sw_clock_ns(CLOCK_MONOTONIC);
    c->tick0 = c->mono0_ns;
    c->real0_ns = sw_clock_ns(CLOCK_REALTIME);
    c->boot0_ns = sw_clock_ns(CLOCK_BOOTTIME);
}

void sw_clock_refine(sw_clock *c)
{
#if SW_HAVE_TSC
    if (c->kind != SW_CLOCK_TSC)
        return;
    uint64_t t1 = 0, m1 = 0;
    sample_pair(&t1, &m1);
    if (m1 > c->mono0_ns + 50000000u && t1 > c->tick0)  /* >= 50 ms: better than the start */
        c->hz = (double)(t1 - c->tick0) * 1e9 / (double)(m1 - c->mono0_ns);
#else
    (void)c;
#endif
}
