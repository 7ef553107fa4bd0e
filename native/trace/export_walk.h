/*
 * export_walk.h - what the exporters of traces share (export_chrome.h,
 * export_perfetto.h, export_ctf.h): their options, the slice walk that
 * replays every thread with short slices left out and its side streams
 * merged in, and the names of EXT events.
 *
 * EXT events are shown as their kind's row in records.h says: instants on
 * their thread's track with their fields as args / debug annotations, or
 * slices from an OPEN kind to its CLOSE (a garbage collection, GC_START to
 * GC_DONE) on a track of their own. sw_export_ext_name() gives every
 * exporter the same names.
 */
#ifndef SW_EXPORT_WALK_H
#define SW_EXPORT_WALK_H

#include "filter.h"
#include "reader.h"

#include <stdio.h>

/* One end of a flow between tasks (issue 22: a task's creation to its
 * first run, a wake to the woken task, a message sent to its receipt),
 * made by the caller from the trace's task events (the Python
 * stackwatch.taskviews.flows): the exporters draw each end as a mark on
 * its track at its time (Perfetto: an instant with flow_ids /
 * terminating_flow_ids; Chrome: a zero-length slice with a flow event
 * "s" / "f" bound to it). */
typedef struct sw_export_task_flow {
    uint64_t id;              /* nonzero; the same at both ends of a flow */
    size_t thread;            /* the track (thread position) of this end */
    int64_t t_ns;             /* when, in the trace's ns */
    int ends;                 /* 0: the flow starts here; 1: it ends here */
    const char *name;         /* the mark's name ("create", "wake", ...) */
    const char *category;     /* the mark's category; NULL: "task" */
} sw_export_task_flow;

/* The options of every exporter. */
struct sw_export_part;
typedef struct sw_export_opts {
    int64_t min_duration_ns;  /* slices shorter than this are left out */
    const sw_filter *filter;  /* what is kept (NULL: everything) */
    const struct sw_export_part *part;  /* a part of a merged output (merge.h), or NULL */
    const char *dir;          /* the output directory of a directory format
                                 (exporters.h), whose first file the FILE
                                 given is; else NULL */
    const sw_export_task_flow *task_flows;  /* by thread, then time; or NULL */
    size_t ntask_flows;
} sw_export_opts;

/* The next end of a task flow on `thread` due by t_ns (INT64_MAX: every
 * one left), advancing *next (an index into o->task_flows that starts at
 * 0 and that the exporter keeps across the walk, whose threads come in
 * order); NULL when none is due. Ends on threads the walk skipped are
 * passed over. */
const sw_export_task_flow *sw_export_task_flow_due(const sw_export_opts *o, size_t *next, size_t thread,
                                                   int64_t t_ns);

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
/* The thread's side streams (side_streams.h: its sampler samples, its
 * records written by another thread, ...) in the filter's window are
 * handed to fn in time order among its events, merged N-way: a sample as
 * an event of kind SW_EV_SAMPLE with `sample` set, an EXT record as an
 * SW_EV_EXT event. A SLICE kind's record (records.h: a system call) opens
 * a slice on the thread's track, ended by an event of this kind at its
 * end or before the thread's next frame event, whichever comes first (at
 * most one is open on a thread); so does one in the thread's own events,
 * which only a damaged trace has. */
#define SW_WALK_SLICE_END 20
int sw_export_walk(sw_trace *t, const sw_export_opts *o, sw_slice_fn fn, void *ud);

/* An exporter (exporters.h): writes the trace to a FILE the caller opened.
 * Returns 0, or a negative code with a message in err. */
typedef int (*sw_export_fn)(sw_trace *t, FILE *out, const sw_export_opts *o, char *err, size_t errlen);

/* Name and category of an EXT event in the exports, from its kind's row
 * (records.h: label and title; "line 12", "line"; "raise ValueError",
 * "exception"; ...), written into buf. */
const char *sw_export_ext_name(const sw_ext *x, char *buf, size_t len, const char **category);

/* A SLICE kind's record (records.h SW_RS_SLICE: a system call): the name
 * of its slice on its thread's track (its title string, "write"; else its
 * label) and its category; NULL when x is no such record (or malformed). */
const char *sw_export_record_slice(const sw_ext *x, const char **category);

/* Slices of OPEN..CLOSE pairs (records.h, e.g. GC_START..GC_DONE): the
 * OPEN kind's row when x opens one (NULL: it does not, or is malformed);
 * the OPEN kind's row of the slice x closes (NULL: x closes none, or is
 * malformed); the OPEN kind's position among them (0 ..
 * sw_export_pair_count() - 1), for the exporters' per-kind state. */
const sw_record_kind *sw_export_pair_open(const sw_ext *x);
const sw_record_kind *sw_export_pair_close(const sw_ext *x);
int sw_export_pair_index(const sw_record_kind *open);
int sw_export_pair_count(void);
/* 1 when kind k has a field of this name. */
int sw_export_field_in(const sw_record_kind *k, const char *name);
/* The name of an OPEN's slice: its track's name and its first field,
 * "GC (generation 2)"; a string field by its value alone, "off CPU
 * (sleeping)". */
void sw_export_slice_name(const sw_record_kind *open, const sw_ext *x, char *buf, size_t len);

#endif
