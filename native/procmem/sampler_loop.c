/*
 * sampler_loop.c - the sampling thread (see sampler_loop.h).
 */
#define _GNU_SOURCE
#include "sampler_loop.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

enum { ST_NEW, ST_RUNNING, ST_STOPPING, ST_STOPPED };

struct sw_sampler {
    sw_pystack *reader;
    uint64_t interval_ns;
    sw_sample_sink sink;
    void *ud;
    pthread_t thread;
    pthread_mutex_t mu;      /* guards everything below */
    pthread_cond_t cv;
    int state;
    int stop_requested;
    pid_t pid;               /* process that started the thread */
    int yielding;            /* sw_sampler_set_yielding */
    uint64_t ticks, missed, stalls, stall_max_ns, missed_off_cpu, busy_ns;
    int64_t start_ns, stop_ns;
    sw_pystack_stats reader_stats;   /* copied after each tick */
};

static struct timespec to_timespec(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    return ts;
}

sw_sampler *sw_sampler_new(sw_pystack *reader, uint64_t interval_ns, sw_sample_sink sink, void *ud)
{
    if (interval_ns < SW_SAMPLER_MIN_INTERVAL_NS || interval_ns > SW_SAMPLER_MAX_INTERVAL_NS) {
        sw_pystack_free(reader);
        return NULL;
    }
    sw_sampler *s = calloc(1, sizeof *s);
    if (!s) {
        sw_pystack_free(reader);
        return NULL;
    }
    pthread_condattr_t ca;
    int ok = pthread_condattr_init(&ca) == 0;
    ok = ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0;
    ok = ok && pthread_cond_init(&s->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok || pthread_mutex_init(&s->mu, NULL) != 0) {
        sw_pystack_free(reader);
        free(s);
        return NULL;
    }
    s->reader = reader;
    s->interval_ns = interval_ns;
    s->sink = sink;
    s->ud = ud;
    return s;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* 1 once stop was asked (read without the mutex while spinning). */
static int stop_asked(sw_sampler *s)
{
    return __atomic_load_n(&s->stop_requested, __ATOMIC_ACQUIRE);
}

/* Waits until CLOCK_MONOTONIC reaches deadline or stop is asked; the
 * mutex is held on entry and on return. Short intervals are waited for by
 * spinning: a sleeping thread wakes up tens of microseconds late (timer
 * slack, the scheduler), more than a whole interval at 100 kHz, where the
 * thread is busy most of the time anyway. */
static void wait_until(sw_sampler *s, int64_t deadline)
{
    if (s->interval_ns < SW_SAMPLER_SPIN_BELOW_NS) {
        pthread_mutex_unlock(&s->mu);
        while (!stop_asked(s) && (int64_t)sw_clock_ns(CLOCK_MONOTONIC) < deadline)
            cpu_relax();
        pthread_mutex_lock(&s->mu);
        return;
    }
    struct timespec dl = to_timespec(deadline);
    while (!s->stop_requested && pthread_cond_timedwait(&s->cv, &s->mu, &dl) != ETIMEDOUT)
        ;
}

/* Counts ticks missed in a stall that left the sampler late by late_ns;
 * off_cpu: the sampler was kept off its CPU meanwhile (stalled_off_cpu). */
static void count_missed(sw_sampler *s, int64_t ticks, int64_t late_ns, int off_cpu)
{
    s->missed += (uint64_t)ticks;
    s->stalls++;
    if ((uint64_t)late_ns > s->stall_max_ns)
        s->stall_max_ns = (uint64_t)late_ns;
    if (off_cpu)
        s->missed_off_cpu += (uint64_t)ticks;
}

/* Whether a stall late by late_ns, its last wait and round gap_ns long,
 * kept the sampler off its CPU: a spinning sampler's if that wait and
 * round took over SW_SAMPLER_OFF_CPU_NS and an interval, as it may be
 * late by up to its allowance, 20 ms, merely too slow to make its ticks
 * up; a sleeping one's if it is that late. */
static int stalled_off_cpu(int spinning, int64_t iv, int64_t late_ns, int64_t gap_ns)
{
    return spinning ? gap_ns > (int64_t)SW_SAMPLER_OFF_CPU_NS + iv : late_ns > (int64_t)SW_SAMPLER_OFF_CPU_NS;
}

static void *run(void *arg)
{
    sw_sampler *s = arg;
    int64_t iv = (int64_t)s->interval_ns;
    /* Linux delays a sleeping thread's wake-up by up to its timer slack
     * (50 us by default) to batch wake-ups: keep it well under the
     * interval. Only this thread is affected. */
    unsigned long slack = (unsigned long)(iv / 10);
    if (slack < 50000)
        prctl(PR_SET_TIMERSLACK, slack ? slack : 1ul, 0, 0, 0);
    if (s->yielding && s->interval_ns >= SW_SAMPLER_SPIN_BELOW_NS) {
        /* SCHED_BATCH: woken for a round, this thread waits for a free CPU
         * or the running thread's turn to end instead of preempting it (a
         * target thread on a busy machine: 235 involuntary switches a
         * second at 1 kHz, 63 without a sampler, 63 with this). Nothing
         * else changes (same nice level, same share of the CPU). */
        struct sched_param sp = {0};
        pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    }
    pthread_mutex_lock(&s->mu);
    int64_t deadline = s->start_ns, prev = s->start_ns;
    int64_t done = deadline;   /* the tick of the last round, or the last tick skipped */
    uint64_t rng = (uint64_t)s->start_ns | 1;   /* (xorshift64) */
    /* The ticks a late sampler may owe (sampler_loop.h): catch_up, or
     * after a stall off its CPU up to make_up until it is on time again
     * (allowed), if it spins: a sleeping one's wake-ups, at most 10 kHz,
     * are late on a busy machine (SCHED_BATCH waits for a free CPU), and
     * the paced rounds made up would each be one more (1 kHz beside a
     * make test: 474 rounds/s, against 827 without). */
    const int spinning = (uint64_t)iv < SW_SAMPLER_SPIN_BELOW_NS;
    const int64_t catch_up = (int64_t)SW_SAMPLER_CATCH_UP_NS / iv;
    const int64_t make_up = spinning ? (int64_t)SW_SAMPLER_MAKE_UP_NS / iv : catch_up;
    int64_t allowed = catch_up, end_prev = s->start_ns;
    while (!s->stop_requested) {
        deadline += iv;
        /* Each round starts at a random point of the interval before its
         * tick: rounds evenly spaced sample a program that repeats with a
         * multiple of the interval at the same places of its period every
         * time, and can miss a function entirely (a 1 ms function in a 10
         * ms loop at 500 Hz: 0 of 252 samples). Every place of the
         * interval, not part of it: a half interval left the other half of
         * each period unsampled (that function's share 3-4%, not 10%). The
         * rate stays the one asked, and each sample still stands for the
         * time since the round before. */
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        int64_t at = deadline - (int64_t)(rng % (uint64_t)iv);
        /* A tick owed (its interval passed) by a spinning sampler: its
         * round a quarter to three quarters of an interval after the last
         * one's start, at random (twice the rate on average, never two at
         * one instant), or at once if that is past (rounds slower than
         * that). */
        if (spinning && deadline <= end_prev) {   /* (the last round's end: now, near enough) */
            const int64_t paced = prev + iv / 4 + (int64_t)((rng >> 32) % (uint64_t)(iv / 2 + 1));
            if (at < paced)
                at = paced;
        }
        wait_until(s, at);
        if (s->stop_requested)
            break;
        pthread_mutex_unlock(&s->mu);
        int64_t t0 = (int64_t)sw_clock_ns(CLOCK_MONOTONIC);
        /* A sample stands for the wall time since the previous round: when
         * the sampler runs late (the machine is busy) the stacks it finds
         * stand for the whole gap, not one interval. */
        sw_pystack_sample_all(s->reader, t0, (uint64_t)(t0 - prev), s->sink, s->ud);
        prev = t0;
        int64_t t1 = (int64_t)sw_clock_ns(CLOCK_MONOTONIC);
        pthread_mutex_lock(&s->mu);
        s->ticks++;
        s->busy_ns += (uint64_t)(t1 - t0);
        sw_pystack_get_stats(s->reader, &s->reader_stats);
        const int64_t gap = t1 - end_prev;   /* (since the last round ended: this wait and round) */
        end_prev = t1;
        if (t1 > deadline + iv) {
            /* Late by more than one interval: the ticks passed are
             * made up (paced, above) until the schedule is met again, as
             * long as no more than catch_up of them are owed, or make_up
             * after a stall off the CPU; those beyond are missed
             * (counted; a sleeping sampler misses all it owes then, as
             * before). Missing every tick owed then kept record --pid
             * at 99.3-99.6k rounds/s of 100k asked: the stalls off the CPU
             * (4-10 ms a few times a second on this VM, the machine
             * otherwise idle), and rounds of ~8-9 us, whose lateness
             * wanders past 1 ms now and then (a round of 10-90 us).
             * Made up, each round stands for the time since the one
             * before as always (the first after a stall for the stall).
             * Waiting for the next tick instead made a round that takes
             * 1.2 intervals take two (100 kHz asked, 12 us a round: 50k
             * rounds/s, not 83k); missing every tick a long round passed
             * kept a sampler fast enough on average under the rate asked
             * (84-86k rounds/s of 100k, its rounds 5-6 us but a few long). */
            int64_t skip = (t1 - deadline) / iv - 1;
            /* (a stall of the sampler off its CPU, one wait and round
             * longer than two intervals and SW_SAMPLER_PREEMPTED_NS: its
             * ticks made up, up to make_up, paced as above, the allowance
             * kept, and raised by rounds slow meanwhile (a round of 10-90
             * us now and then at 100 kHz), until it is on time again; rounds
             * merely too slow for the rate are not, and are missed beyond
             * catch_up) */
            if (skip > allowed && (allowed > catch_up || gap > 2 * iv + (int64_t)SW_SAMPLER_PREEMPTED_NS))
                allowed = skip < make_up ? skip : make_up;
            if (skip > allowed) {
                /* (those beyond the allowance; stalls apart from missed:
                 * many short ones are a sampler too slow for the rate, a
                 * few long ones the machine's) */
                const int64_t excess = spinning ? skip - allowed : skip;
                count_missed(s, excess, t1 - deadline, stalled_off_cpu(spinning, iv, t1 - deadline, gap));
                deadline += excess * iv;
            }
        } else
            allowed = catch_up;
        done = deadline;
    }
    /* Ticks still owed at the stop are missed: every interval from the
     * start to the last round is a round or a missed tick. */
    int64_t now = (int64_t)sw_clock_ns(CLOCK_MONOTONIC);
    if (now > done + iv) {
        int64_t owed = (now - done) / iv - 1;
        if (owed > catch_up)   /* (a stall too: preempted before the stop) */
            count_missed(s, owed, now - done, stalled_off_cpu(spinning, iv, now - done, now - end_prev));
        else
            s->missed += (uint64_t)owed;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

sw_pystack *sw_sampler_reader(sw_sampler *s)
{
    return s->reader;
}

void sw_sampler_set_yielding(sw_sampler *s, int on)
{
    s->yielding = on;
}

int sw_sampler_start(sw_sampler *s)
{
    pthread_mutex_lock(&s->mu);
    if (s->state != ST_NEW) {
        pthread_mutex_unlock(&s->mu);
        return SW_ESTATE;
    }
    sw_pystack_mark_start(s->reader);   /* (CPU times from here, however late the first round) */
    s->start_ns = (int64_t)sw_clock_ns(CLOCK_MONOTONIC);
    s->pid = getpid();
    /* The thread blocks every signal: they stay for the program's threads
     * (Python handles signals in the main thread only). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, run, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        s->state = ST_RUNNING;
    pthread_mutex_unlock(&s->mu);
    return rc == 0 ? SW_OK : SW_ENOMEM;
}

/* In a child forked while sampling, the thread does not exist and the
 * mutex may be held forever by it: touch neither. */
static int forked_child(const sw_sampler *s)
{
    return (s->state == ST_RUNNING || s->state == ST_STOPPING) && s->pid != getpid();
}

int sw_sampler_stop(sw_sampler *s)
{
    if (forked_child(s))
        return SW_ESTATE;
    pthread_mutex_lock(&s->mu);
    if (s->state != ST_RUNNING) {
        pthread_mutex_unlock(&s->mu);
        return SW_ESTATE;
    }
    __atomic_store_n(&s->stop_requested, 1, __ATOMIC_RELEASE);
    s->state = ST_STOPPING;   /* a concurrent stop() now fails instead of joining too */
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&s->mu);
    s->state = ST_STOPPED;
    s->stop_ns = (int64_t)sw_clock_ns(CLOCK_MONOTONIC);
    pthread_mutex_unlock(&s->mu);
    return SW_OK;
}

void sw_sampler_free(sw_sampler *s)
{
    if (!s || forked_child(s))
        return;   /* leaked in a forked child: its memory is the parent's copy */
    sw_sampler_stop(s);
    sw_pystack_free(s->reader);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int sw_sampler_in_forked_child(const sw_sampler *s)
{
    return forked_child(s);
}

void sw_sampler_get_stats(sw_sampler *s, sw_sampler_stats *out)
{
    pthread_mutex_lock(&s->mu);
    out->reader = s->reader_stats;
    out->interval_ns = s->interval_ns;
    out->ticks = s->ticks;
    out->missed = s->missed;
    out->stalls = s->stalls;
    out->stall_max_ns = s->stall_max_ns;
    out->missed_off_cpu = s->missed_off_cpu;
    out->busy_ns = s->busy_ns;
    out->start_ns = s->start_ns;
    out->stop_ns = s->stop_ns;
    out->running = s->state == ST_RUNNING || s->state == ST_STOPPING;
    pthread_mutex_unlock(&s->mu);
}
