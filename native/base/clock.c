/*
 * clock.c - choosing and calibrating the trace clock (see clock.h).
 */
#define _GNU_SOURCE
#include "clock.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FULL_NS 2000000u           /* the rate measured over this, without a cache */
#define QUICK_NS 200000u           /* ... over this, to check a cached rate */
#define CACHE_AGREE 1e-3           /* the largest relative difference a cached rate may have */
#define CACHE_STORE_NS 1000000000u /* a rate refined over this or longer is cached */

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

#if SW_HAVE_TSC
/* The cached rate of this boot: 0 and *hz, *over_ns, or -1 when there is
 * none (no file, another boot's, not this user's or writable by others, or
 * not one of ours). The file: "stackwatch-clock 1 BOOT_ID MILLIHZ OVER_NS"
 * (integers: no locale's decimal point in it). */
static int cache_read(const char *path, const char *boot_id, double *hz, uint64_t *over_ns)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    char buf[160];
    ssize_t n = -1;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 022))
        n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char id[64];
    unsigned long long millihz, over;
    if (sscanf(buf, "stackwatch-clock 1 %63s %llu %llu", id, &millihz, &over) != 3 || strcmp(id, boot_id) != 0 ||
        millihz < 1000000000ull || millihz > 100000000000000ull || over < FULL_NS)
        return -1;
    *hz = (double)millihz / 1000.0;
    *over_ns = over;
    return 0;
}

/* Replaces the cache with this rate (best effort: a temporary file of this
 * process renamed over it). */
static void cache_write(const char *path, const char *boot_id, double hz, uint64_t over_ns)
{
    char tmp[4096], buf[160];
    int k = snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    int n = snprintf(buf, sizeof buf, "stackwatch-clock 1 %s %llu %llu\n", boot_id,
                     (unsigned long long)(hz * 1000.0 + 0.5), (unsigned long long)over_ns);
    if (k < 0 || (size_t)k >= sizeof tmp || n < 0 || (size_t)n >= sizeof buf || strpbrk(boot_id, " \t\n"))
        return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return;
    int ok = write(fd, buf, (size_t)n) == n;
    if (close(fd) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}
#endif

void sw_clock_calibrate(sw_clock *c, int allow_tsc, const char *cache, const char *boot_id)
{
    memset(c, 0, sizeof *c);
    c->kind = SW_CLOCK_MONOTONIC;
    c->hz = 1e9;
#if SW_HAVE_TSC
    if (allow_tsc && kernel_uses_tsc()) {
        double cached = 0;
        uint64_t cached_over = 0;
        int have = cache && boot_id && *boot_id && cache_read(cache, boot_id, &cached, &cached_over) == 0;
        uint64_t t0 = 0, m0 = 0, t1 = 0, m1 = 0;
        sample_pair(&t0, &m0);
        do {
            sample_pair(&t1, &m1);
        } while (m1 - m0 < (have ? QUICK_NS : FULL_NS));
        double hz = t1 > t0 ? (double)(t1 - t0) * 1e9 / (double)(m1 - m0) : 0;
        if (have && hz > 0 && hz - cached <= CACHE_AGREE * cached && cached - hz <= CACHE_AGREE * cached) {
            hz = cached;
            c->hz_over_ns = cached_over;
        } else {
            if (have) {
                /* Not this machine's rate (or a measure held up): the
                 * whole measure, cached. */
                do {
                    sample_pair(&t1, &m1);
                } while (m1 - m0 < FULL_NS);
                hz = t1 > t0 ? (double)(t1 - t0) * 1e9 / (double)(m1 - m0) : 0;
            }
            c->hz_over_ns = m1 - m0;
            if (hz > 0 && cache && boot_id && *boot_id)
                cache_write(cache, boot_id, hz, c->hz_over_ns);
        }
        if (hz > 0) {
            c->kind = SW_CLOCK_TSC;
            c->hz = hz;
            c->tick0 = t1;
            c->mono0_ns = m1;
            c->real0_ns = sw_clock_ns(CLOCK_REALTIME) - (sw_clock_ns(CLOCK_MONOTONIC) - m1);
            c->boot0_ns = sw_clock_ns(CLOCK_BOOTTIME) - (sw_clock_ns(CLOCK_MONOTONIC) - m1);
            return;
        }
        c->hz_over_ns = 0;
    }
#else
    (void)allow_tsc;
    (void)cache;
    (void)boot_id;
#endif
    c->mono0_ns = sw_clock_ns(CLOCK_MONOTONIC);
    c->tick0 = c->mono0_ns;
    c->real0_ns = sw_clock_ns(CLOCK_REALTIME);
    c->boot0_ns = sw_clock_ns(CLOCK_BOOTTIME);
}

void sw_clock_refine(sw_clock *c, const char *cache, const char *boot_id)
{
#if SW_HAVE_TSC
    if (c->kind != SW_CLOCK_TSC)
        return;
    uint64_t t1 = 0, m1 = 0;
    sample_pair(&t1, &m1);
    /* (over 50 ms at least, and longer than the rate in use was measured) */
    if (m1 > c->mono0_ns + 50000000u && m1 - c->mono0_ns > c->hz_over_ns && t1 > c->tick0) {
        c->hz = (double)(t1 - c->tick0) * 1e9 / (double)(m1 - c->mono0_ns);
        c->hz_over_ns = m1 - c->mono0_ns;
        double cached;
        uint64_t cached_over;
        if (c->hz_over_ns >= CACHE_STORE_NS && cache && boot_id && *boot_id &&
            (cache_read(cache, boot_id, &cached, &cached_over) != 0 || cached_over < c->hz_over_ns))
            cache_write(cache, boot_id, c->hz, c->hz_over_ns);
    }
#else
    (void)c;
    (void)cache;
    (void)boot_id;
#endif
}
