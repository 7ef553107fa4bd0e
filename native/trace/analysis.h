/*
 * analysis.h - what is computed from a whole trace in C: per-function
 * statistics, and the durations of slices (for --min-duration filters).
 */
#ifndef SW_ANALYSIS_H
#define SW_ANALYSIS_H

#include "reader.h"

typedef struct sw_stat_row {
    uint32_t thread;     /* position in the trace's thread list */
    uint32_t code;
    uint64_t calls;      /* entries: calls plus resumptions, like cProfile */
    int64_t total_ns;    /* inclusive time, recursion counted once */
    int64_t own_ns;      /* exclusive time */
} sw_stat_row;

/* Computes one row per (thread, function) that ran. On success *rows is a
 * malloc'd array the caller frees. Returns 0 or a negative SW_E* code. */
int sw_stats_compute(sw_trace *t, sw_stat_row **rows, size_t *nrows);

/* Durations of the slices of one thread, in order of their start (one
 * entry per enter event the replay delivers). Caller frees *dur. */
int sw_slice_durations(sw_trace *t, size_t thread, int64_t **dur, size_t *n);

/* EXT events of the whole trace (all threads), counted by kind. GC time
 * is the sum over GC_START..GC_DONE pairs of one thread. */
#define SW_EXT_KIND_LIMIT 17  /* kinds 0..16 (format.h SW_EXT_*) */
typedef struct sw_ext_summary {
    uint64_t count[SW_EXT_KIND_LIMIT];  /* index SW_EXT_*; kinds 2..13, 15, 16 */
    uint64_t malformed;      /* events whose payload did not decode */
    uint64_t gc_pairs;       /* collections with both start and done */
    int64_t gc_ns;           /* their total duration */
    uint64_t gc_collected, gc_uncollectable;  /* sums over GC_DONE events */
} sw_ext_summary;

int sw_ext_summary_compute(sw_trace *t, sw_ext_summary *out);

#endif
