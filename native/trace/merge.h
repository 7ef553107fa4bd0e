/*
 * merge.h - several traces exported as one timeline: a program and the
 * processes it started (tracer/follow.py), each traced into a file of its
 * own. Every trace is one process of the output (Perfetto: a process
 * track with its threads' tracks; Chrome: a pid), on the host's clocks
 * the traces' calibration ties them to (docs/format.md, "Clock"), so
 * traces of one host line up without any adjustment.
 *
 * A child's META says which process started it (`parent_pid`), from which
 * thread and when (`spawn_tid`, `spawn_mono_ns`). The merge finds that
 * thread in the parent's trace and the innermost slice open on it at that
 * moment (the call that started the child; with --min-duration, the
 * innermost one kept), and links it to the child's first slice by a flow.
 * Among traces of the same pid (a process that replaced itself by exec)
 * the parent is the last one started before the spawn.
 *
 * The exporters write one process at a time (exporters.h) and take what
 * makes it a part of a merged output
 * from sw_export_opts.part.
 */
#ifndef SW_MERGE_H
#define SW_MERGE_H

#include "export_walk.h"

/* A flow from the slice of a process that started a child process to the
 * child's first slice (Perfetto: flow_ids / terminating_flow_ids; Chrome:
 * flow events "s" and "f"). */
typedef struct sw_export_flow {
    uint64_t id;             /* nonzero, unique in the output */
    size_t thread;           /* the parent's thread (position) that started the child */
    uint64_t begin;          /* the slice that carries it: its ordinal among the
                              * slice begins the walk hands over for that thread
                              * (UINT64_MAX: none was open) */
    int64_t t_ns;            /* when the child was started, in the parent trace's ns */
} sw_export_flow;

/* One process of a merged output. */
typedef struct sw_export_part {
    uint64_t key;            /* distinct for each process of the output (Perfetto's
                              * track ids derive from it); the pid unless two
                              * processes share one (an exec) */
    uint32_t seq_base;       /* Perfetto: its packet sequences are seq_base + 1, ... */
    int first, last;         /* Chrome: it opens / closes the document */
    const sw_export_flow *flows;  /* the flows out of it, by thread then begin */
    size_t nflows;
    uint64_t in_flow;        /* the flow that ends at its first slice, or 0 */
} sw_export_part;

/* Writes the n traces (n >= 1) as one output of an exporter's format
 * (exporters.h: its `write`) to a FILE the caller opened, the processes in
 * order of their start. Returns 0, or a negative code with a message in
 * err. The traces stay the caller's. */
int sw_export_merged(sw_trace *const *traces, size_t n, sw_export_fn write, FILE *out,
                     const sw_export_opts *o, char *err, size_t errlen);

#endif
