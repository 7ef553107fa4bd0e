/*
 * filter.h - what a reading of a trace keeps: some of its threads, a
 * window of time, the frames of some functions or files, the frames up to
 * a depth. Statistics, call trees and exports read through it
 * (`stackwatch stats` and `export` with --thread, --start/--stop,
 * --include/--exclude, --max-depth).
 *
 * A filtered replay hands its consumer one thread's events as if the trace
 * held only what is kept, balanced as every replay is:
 *  - include/exclude: a frame whose function matches no include glob (when
 *    there are some) or matches an exclude glob is left out; its callees
 *    become its caller's, its time its caller's own time. A glob matches a
 *    function's qualified name, its name or its file (fnmatch(3) without
 *    flags: `*` matches `/` too).
 *  - max_depth: frames deeper than max_depth kept frames are left out
 *    (their time is their kept ancestor's own time).
 *  - window [start_ns, stop_ns] (trace nanoseconds, as event times): the
 *    events at times within it. The frames open at start_ns are opened at
 *    start_ns by synthetic calls, those open at stop_ns closed at stop_ns
 *    by synthetic returns (statistics count neither as calls).
 *  - EXT and DROPPED events in the window are kept, at the depth of the
 *    kept frames open.
 * The window starts the replay at the chunk holding start_ns
 * (sw_trace_replay_from) and stops it at the first event after stop_ns, so
 * a short window of a long trace reads little of it.
 */
#ifndef SW_FILTER_H
#define SW_FILTER_H

#include "reader.h"

typedef struct sw_filter {
    int64_t start_ns, stop_ns;   /* the window; INT64_MIN / INT64_MAX: open */
    uint32_t max_depth;          /* 0: every depth */
    char *const *include;        /* NULL-terminated lists of globs, or NULL */
    char *const *exclude;
    const uint8_t *threads;      /* threads[pos] nonzero: thread kept; NULL: all */
    size_t nthreads;             /* entries of threads (positions beyond: not kept) */
} sw_filter;

/* A filter that keeps everything. */
void sw_filter_all(sw_filter *f);

/* 1 if f (NULL: none) keeps the thread at position `thread`. */
int sw_filter_has_thread(const sw_filter *f, size_t thread);
/* 1 if the time is in f's window. */
int sw_filter_in_window(const sw_filter *f, int64_t t_ns);

/* A filter made ready for one trace: each code id decided once. */
typedef struct sw_filtered sw_filtered;
/* f may be NULL (everything kept). f's lists are borrowed: they must
 * outlive the result. Returns 0 or SW_ENOMEM. */
int sw_filtered_new(sw_trace *t, const sw_filter *f, sw_filtered **out);
void sw_filtered_free(sw_filtered *fl);

/* Replays thread i through the filter (sw_trace_replay_ext's flags and
 * return values). A thread the filter does not keep gives no event. */
int sw_filtered_replay(sw_filtered *fl, size_t i, unsigned flags, sw_event_fn fn, void *ud);

#endif
