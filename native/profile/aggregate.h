/*
 * aggregate.h - the live profile, the aggregating consumer of samples: one call tree per
 * thread over one shared function table. The sampler thread feeds it
 * through sw_profile_sink; readers (the Python bindings) look at the trees
 * under sw_profile_lock, so they may do so while sampling continues.
 */
#ifndef SW_AGGREGATE_H
#define SW_AGGREGATE_H

#include "calltree.h"
#include "history.h"
#include "base/base.h"

typedef struct sw_profile sw_profile;

/* Most threads kept apart; samples of further threads are dropped. */
#define SW_PROFILE_MAX_THREADS 4096

typedef struct sw_profile_thread {
    uint64_t thread_id;      /* threading.get_ident() */
    uint64_t native_tid;     /* OS thread id, 0 where unknown */
    uint64_t samples;
    int64_t first_ns, last_ns;   /* CLOCK_MONOTONIC of its first and last sample */
    uint64_t pending_ns;     /* weight of failed samples since its last stored one */
    sw_calltree *tree;
    sw_calltree_cursor cursor;   /* its last stack in tree: the next one's common prefix is not looked up */
    /* What the thread was doing (sw_sample.state), over its stored samples
     * and, in CPU mode, those left out for being off the CPU. */
    uint64_t states[SW_STATE_COUNT];
    uint64_t gil_held;       /* samples in which it held the GIL */
    uint64_t off_cpu;        /* CPU mode: samples left out (idle or waiting for the GIL) */
    uint64_t cpu_ns;         /* CPU time the samples above stood for (where known) */
} sw_profile_thread;

/* What a sample's weight is, and which samples count. */
#define SW_PROFILE_WALL 0    /* every sample, weighted by the wall time it stands for */
#define SW_PROFILE_CPU 1     /* only samples of threads on a CPU (running, or state
                                unknown), weighted by the CPU time the thread used
                                since its previous sample (wall time where that is
                                unknown); the others are counted in
                                sw_profile_off_cpu and their CPU time, if any,
                                goes to the thread's next stored sample */

/* Returns NULL if out of memory. */
sw_profile *sw_profile_new(void);
void sw_profile_free(sw_profile *p);

/* An sw_sample_sink: adds the sample to its thread's tree. ud is the
 * sw_profile. The weight of a failed sample (SW_SAMPLE_FAILED) goes to the
 * thread's next stored sample: failures are likelier in code whose stack
 * changes fast, and losing their time would hide such code. Never fails; a
 * sample that cannot be stored (out of memory, too many threads) is
 * counted in sw_profile_dropped. */
void sw_profile_sink(void *ud, sw_sample *s);

/* Filters applied to every sample before it is stored; they exist to keep
 * the profiler's own frames (and those of a wrapper such as the CLI that
 * runs the program) out of the profile. Code objects are given by address.
 *
 * Root cut: drop the frames from the root through the root-most frame
 * running `anchor`, then any directly following frames running a code
 * object of follow[]. Stacks without the anchor are kept whole. anchor 0
 * turns the cut off.
 * Ignore: a sample with a frame running a code object of ignore[] among
 * the frames left after the root cut is not stored (so a wrapper's
 * function that calls the anchor can be ignored: it only matters in
 * stacks without the anchor, e.g. once the program has finished).
 * Elide: frames running a code object of elide[] are left out of the
 * stack (the rest of it is kept).
 * Samples left with no frame, or ignored, are counted in sw_profile_cut.
 * Returns SW_EARG if a list is longer than SW_PROFILE_MAX_FILTER. */
#define SW_PROFILE_MAX_FILTER 8
typedef struct sw_profile_filters {
    uint64_t anchor;
    uint64_t follow[SW_PROFILE_MAX_FILTER];
    size_t nfollow;
    uint64_t ignore[SW_PROFILE_MAX_FILTER];
    size_t nignore;
    uint64_t elide[SW_PROFILE_MAX_FILTER];
    size_t nelide;
} sw_profile_filters;
int sw_profile_set_filters(sw_profile *p, uint64_t anchor, const uint64_t *follow, size_t nfollow,
                           const uint64_t *ignore, size_t nignore, const uint64_t *elide, size_t nelide);

/* SW_PROFILE_WALL (the default) or SW_PROFILE_CPU; set before samples
 * arrive. Returns SW_EARG for another value. */
int sw_profile_set_mode(sw_profile *p, int mode);

/* Samples left out besides the mode's rule (both off by default):
 * skip_idle, those of threads asleep in a blocking call (SW_STATE_IDLE; a
 * thread waiting for the GIL is not idle); gil_only, those of threads not
 * holding the GIL. Counted in sw_profile_left_out (and in their thread's
 * states), their time given to no sample. Set before samples arrive. */
void sw_profile_set_keep(sw_profile *p, int skip_idle, int gil_only);
uint64_t sw_profile_left_out(const sw_profile *p);

/* Readers hold the lock around the calls below while a sampler may still
 * be feeding the profile. */
void sw_profile_lock(sw_profile *p);
void sw_profile_unlock(sw_profile *p);

sw_functab *sw_profile_functab(sw_profile *p);
size_t sw_profile_thread_count(const sw_profile *p);
const sw_profile_thread *sw_profile_thread_get(const sw_profile *p, size_t i);
uint64_t sw_profile_samples(const sw_profile *p);
uint64_t sw_profile_dropped(const sw_profile *p);
uint64_t sw_profile_cut(const sw_profile *p);
uint64_t sw_profile_off_cpu(const sw_profile *p);
int sw_profile_mode(const sw_profile *p);

/* A new tree (over the profile's function table) holding the samples of
 * every thread; the caller frees it. NULL if out of memory. */
sw_calltree *sw_profile_merged(sw_profile *p);

/* History (history.h): with cycle_ns > 0, every stored sample also goes to
 * its thread's tree in the entry of the cycle it was taken in. Cycles are
 * [origin + k*cycle_ns, origin + (k+1)*cycle_ns) where origin is
 * origin_ns (CLOCK_MONOTONIC, like sample times) and entries carry wall
 * clock times: monotonic + wall_offset_ns. An entry is opened by the first
 * stored sample of its cycle (cycles without stored samples have none).
 * maxlen bounds the entries kept (0: no bound). cycle_ns 0 turns the
 * history off (the default). Set before samples arrive. A sample that
 * cannot be added to the history (out of memory) is still in the
 * whole-run tree and is counted in sw_profile_history_dropped. */
int sw_profile_set_history(sw_profile *p, int64_t cycle_ns, size_t maxlen, int64_t wall_offset_ns,
                           int64_t origin_ns);
sw_history *sw_profile_history(sw_profile *p);   /* NULL when off; read under the lock */
uint64_t sw_profile_history_dropped(const sw_profile *p);
/* Ends the newest entry at now_ns (CLOCK_MONOTONIC) if it would end later:
 * called when sampling stops. Takes the lock. */
void sw_profile_end_history(sw_profile *p, int64_t now_ns);

/* Omit: frames of functions whose file name matches one of the globs
 * (fnmatch(3) without flags: '*' also matches '/', as Python's
 * fnmatch.fnmatchcase) are removed from every stack; their callees attach
 * to their caller. A sample left with no frame is counted in
 * sw_profile_cut. Copies the globs. SW_EARG for more than
 * SW_PROFILE_MAX_OMIT globs or a NULL one. */
#define SW_PROFILE_MAX_OMIT 65   /* the user's 64 (profiler/history.py MAX_OMIT) and stackwatch's own files */
int sw_profile_set_omit(sw_profile *p, const char *const *globs, size_t n);

#endif
