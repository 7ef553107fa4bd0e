/*
 * analysis.h - what is computed from a whole trace in C, in one replay of
 * each thread (memory bounded by the functions, never by the events):
 * per-function statistics and the calls between functions (the tables of
 * `stackwatch stats` and of the pstats and callgrind exports), the
 * durations of slices, EXT events and samples summed up.
 */
#ifndef SW_ANALYSIS_H
#define SW_ANALYSIS_H

#include "filter.h"
#include "reader.h"

typedef struct sw_stat_row {
    uint32_t thread;     /* position in the trace's thread list */
    uint32_t code;
    uint64_t calls;      /* entries: calls plus resumptions, like cProfile */
    int64_t total_ns;    /* inclusive time, recursion counted once */
    int64_t own_ns;      /* exclusive time */
    uint64_t prim;       /* calls made while no frame of the function was
                            open (cProfile's primitive calls) */
} sw_stat_row;

/* The calls from one function (the caller) to another (the callee) on
 * one thread, as cProfile counts them for pstats' callers. */
#define SW_NO_CALLER UINT32_MAX
typedef struct sw_edge_row {
    uint32_t thread;
    uint32_t caller;     /* code id; SW_NO_CALLER for the outermost frames */
    uint32_t callee;
    uint64_t calls;
    uint64_t prim;       /* calls made while no other call from caller to callee was open */
    int64_t total_ns;    /* time of those calls (recursion through the pair counted once) */
    int64_t own_ns;      /* the callee's own time in all these calls */
    int64_t inclusive_ns;  /* time of every call, nested ones too (callgrind's cost of a call) */
} sw_edge_row;

/* Computes one row per (thread, function) that ran. On success *rows is a
 * malloc'd array the caller frees. Returns 0 or a negative SW_E* code. */
int sw_stats_compute(sw_trace *t, sw_stat_row **rows, size_t *nrows);

/* The same through a filter (NULL: none); with edges non-NULL also one
 * row per (thread, caller, callee) that called (*edges, caller frees).
 * Calls are the entries that are not synthetic (filter.h, reader.h). */
int sw_stats_filtered(sw_trace *t, const sw_filter *f, sw_stat_row **rows, size_t *nrows, sw_edge_row **edges,
                      size_t *nedges);

/* Durations of the slices of one thread, in order of their start (one
 * entry per enter event the replay delivers). Caller frees *dur. */
int sw_slice_durations(sw_trace *t, size_t thread, int64_t **dur, size_t *n);

/* EXT events of the whole trace (all threads), counted by kind. GC time
 * is the sum over the pairs of one thread of the kinds whose stat is GC
 * (records.h: GC_START..GC_DONE). */
#define SW_SYSCALL_ROWS 512
typedef struct sw_ext_summary {
    uint64_t count[SW_EXT_KIND_LIMIT];  /* index SW_EXT_* (records.h); kinds the replay delivers */
    uint64_t malformed;      /* events whose payload did not decode */
    uint64_t gc_pairs;       /* collections with both start and done */
    int64_t gc_ns;           /* their total duration */
    uint64_t gc_collected, gc_uncollectable;  /* sums over GC_DONE events (its b and c) */
    /* Records written by another thread (format 1.7), counted in count[]
     * too: system calls (stat SYSCALL) by name, and the kernel records
     * lost (stat KERNEL_LOST, their field a summed). */
    uint64_t kernel_lost;
    /* Off-CPU intervals (stat OFF_CPU: OFF_CPU..ON_CPU pairs of one
     * thread) and their total time; page faults (stat FAULT). */
    uint64_t off_cpu_pairs;
    int64_t off_cpu_ns;
    uint64_t faults;
    size_t nsyscalls;        /* rows used; calls beyond SW_SYSCALL_ROWS distinct names go to the last */
    struct sw_syscall_row {
        char name[32];
        uint64_t calls, errors;   /* errors: calls that returned -4095..-1 */
        int64_t total_ns;
    } syscalls[SW_SYSCALL_ROWS];
} sw_ext_summary;

int sw_ext_summary_compute(sw_trace *t, sw_ext_summary *out);
/* The same through a filter (NULL: none). */
int sw_ext_summary_filtered(sw_trace *t, const sw_filter *f, sw_ext_summary *out);

/* The kernel's events (run --kernel) per function: time in system calls
 * (records of stat SYSCALL), time off CPU (OFF_CPU..ON_CPU pairs) and page
 * faults (stat FAULT). Each counts to the innermost frame open on its
 * thread when it began, as the exports nest it (SW_NO_CALLER: none open),
 * through a filter (NULL: none). *rows is malloc'd, the caller frees it. */
typedef struct sw_kernel_fn_row {
    uint32_t thread;
    uint32_t code;           /* code id, or SW_NO_CALLER */
    uint64_t calls;          /* system calls */
    int64_t total_ns;        /* their time */
    uint64_t off_cpu;        /* intervals off CPU that began here */
    int64_t off_cpu_ns;      /* their time */
    uint64_t faults;         /* page faults */
} sw_kernel_fn_row;
int sw_kernel_by_function(sw_trace *t, const sw_filter *f, sw_kernel_fn_row **rows, size_t *nrows);

#endif
