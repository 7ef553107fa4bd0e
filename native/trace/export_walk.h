/*
 * export_walk.h - what the exporters of traces share (export_chrome.h,
 * export_perfetto.h): their options, the slice walk that replays every
 * thread with short slices left out and the samples merged in, and the
 * names of EXT events.
 *
 * EXT events (line, instruction, exception, object and thread events) are
 * instant events on their thread's track with their data as args / debug
 * annotations; a garbage collection is a slice from GC_START to GC_DONE.
 * sw_export_ext_name() gives every exporter the same names.
 */
#ifndef SW_EXPORT_WALK_H
#define SW_EXPORT_WALK_H

#include "filter.h"
#include "reader.h"

#include <stdio.h>

/* The options of every exporter. */
struct sw_export_part;
typedef struct sw_export_opts {
    int64_t min_duration_ns;  /* slices shorter than this are left out */
    const sw_filter *filter;  /* what is kept (NULL: everything) */
    const struct sw_export_part *part;  /* a part of a merged output (merge.h), or NULL */
} sw_export_opts;

/* Walks each thread the filter keeps: its slices through the filter
 * (filter.h), leaving out those shorter than min_duration_ns (and,
 * consistently, their ends), and its EXT events (SW_EV_EXT). Which slices
 * are short is found by a first filtered replay, which keeps one bit per
 * slice of the thread. */
typedef int (*sw_slice_fn)(void *ud, size_t thread, const sw_event *ev);
/* After each thread's events the walk also hands fn one event of this
 * kind, at the time of the thread's last event (for exporters that close
 * what they opened, e.g. a GC slice). */
#define SW_WALK_THREAD_END 18
/* The thread's sampler samples (format 1.2) in the filter's window are
 * handed to fn in time order among its events, as events of this kind
 * with `sample` set. */
#define SW_WALK_SAMPLE 19
int sw_export_walk(sw_trace *t, const sw_export_opts *o, sw_slice_fn fn, void *ud);

/* Name and category of an EXT event in the exports ("line 12", "line";
 * "raise ValueError", "exception"; ...), written into buf. */
const char *sw_export_ext_name(const sw_ext *x, char *buf, size_t len, const char **category);

#endif
