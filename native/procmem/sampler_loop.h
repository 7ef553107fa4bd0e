/*
 * sampler_loop.h - the sampling thread: a plain pthread (no Python thread
 * state, never takes the GIL) that calls sw_pystack_sample_all at a fixed
 * interval and hands every stack to a sink.
 *
 * Ticks are scheduled on absolute CLOCK_MONOTONIC deadlines, so the rate
 * does not drift. Each round stands for one tick and never starts before
 * the interval of its tick; a sampler that fell behind by at most
 * SW_SAMPLER_CATCH_UP_NS of ticks makes their rounds up until it is on
 * time again (one that spins, over 10 kHz: each a quarter to three
 * quarters of an interval after the last, at once when rounds are slower
 * than that); one that spins does so too after a stall off its CPU of up
 * to SW_SAMPLER_MAKE_UP_NS (one wait and round that took
 * SW_SAMPLER_PREEMPTED_NS more than two intervals), at twice the rate at
 * most, never a burst of rounds at one instant, missing only the ticks
 * beyond; one further behind, or a sleeping one, skips the ticks passed
 * (counted as missed). Intervals under
 * SW_SAMPLER_SPIN_BELOW_NS (over 10 kHz) are waited for by spinning on the
 * clock, not sleeping: a wake-up comes tens of microseconds late.
 */
#ifndef SW_SAMPLER_LOOP_H
#define SW_SAMPLER_LOOP_H

#include "base/base.h"
#include "pystack.h"

#define SW_SAMPLER_MIN_INTERVAL_NS 5000ull           /* 5 us: another process, read from outside */
#define SW_SAMPLER_MIN_INTERVAL_SELF_NS 20000ull     /* 20 us: this process, whose threads it slows */
#define SW_SAMPLER_MAX_INTERVAL_NS 60000000000ull    /* 60 s */
#define SW_SAMPLER_SPIN_BELOW_NS 100000ull           /* shorter intervals are waited for spinning */
#define SW_SAMPLER_CATCH_UP_NS 1000000ull            /* the ticks a late sampler may owe: 1 ms of them */
#define SW_SAMPLER_OFF_CPU_NS 2000000ull             /* a stall longer than this: the sampler was off its CPU */
#define SW_SAMPLER_MAKE_UP_NS 20000000ull            /* a sampler preempted: up to 20 ms of its ticks made up */
#define SW_SAMPLER_PREEMPTED_NS 250000ull            /* ... one whose wait and round took this over two intervals */

typedef struct sw_sampler sw_sampler;

typedef struct sw_sampler_stats {
    sw_pystack_stats reader;
    uint64_t interval_ns;
    uint64_t ticks;          /* sampling rounds done */
    uint64_t missed;         /* ticks skipped because the sampler ran late */
    uint64_t stalls;         /* ... in how many stalls (late by more than SW_SAMPLER_CATCH_UP_NS) */
    uint64_t stall_max_ns;   /* ... the longest (how late its round ended) */
    uint64_t missed_off_cpu; /* of missed, those in stalls late by over SW_SAMPLER_OFF_CPU_NS:
                              * the sampler kept off its CPU (a round takes microseconds, and
                              * a sampler merely too slow is counted late at just over
                              * SW_SAMPLER_CATCH_UP_NS), not rounds too slow for the rate */
    uint64_t busy_ns;        /* time spent reading stacks */
    int64_t start_ns, stop_ns;   /* CLOCK_MONOTONIC; stop_ns is 0 while running */
    int running;
} sw_sampler_stats;

/* A sampler that owns `reader` (freed with it). Returns NULL if out of
 * memory (the reader is then freed) or SW_EARG-worthy interval (NULL too). */
sw_sampler *sw_sampler_new(sw_pystack *reader, uint64_t interval_ns, sw_sample_sink sink, void *ud);

/* Its reader (not to be used while it runs). */
sw_pystack *sw_sampler_reader(sw_sampler *s);
/* Stops the thread if running, then frees everything (in a forked child:
 * nothing, see sw_sampler_in_forked_child). */
void sw_sampler_free(sw_sampler *s);

/* Before the start: on, the thread (when it sleeps between rounds: rates
 * up to 10 kHz) never preempts a running thread when it wakes (SCHED_BATCH);
 * for a sampler of another process, whose threads it would otherwise take
 * their CPU from on a busy machine. */
void sw_sampler_set_yielding(sw_sampler *s, int on);

/* Starts the thread. Returns 0, SW_ESTATE if it already ran (a sampler
 * runs once), or SW_ENOMEM if the thread could not be created. */
int sw_sampler_start(sw_sampler *s);
/* Stops the thread and waits for it. Returns 0 or SW_ESTATE if it was not
 * running. */
int sw_sampler_stop(sw_sampler *s);

/* 1 in a child process forked while this sampler was running: nothing of
 * it may be used there (its thread is gone, its locks may be held); stop
 * and free then do nothing. */
int sw_sampler_in_forked_child(const sw_sampler *s);

/* A consistent copy of the counters; may be called while running. */
void sw_sampler_get_stats(sw_sampler *s, sw_sampler_stats *out);

#endif
