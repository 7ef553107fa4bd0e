/*
 * calltree_pprof.h - call trees as a pprof profile: the message `Profile` of
 * profile.proto (github.com/google/pprof, proto/profile.proto), the input
 * of `go tool pprof`. Written by calltree_pprof.c.
 *
 * What is written:
 *  - sample_type: [samples/count, wall/nanoseconds] (a tree's counts and
 *    weights; "calls" instead of "samples" with opts->count_type);
 *    period_type wall/nanoseconds, period = the sampling interval.
 *  - one Function (name, filename, start_line; no system_name, see
 *    calltree_pprof.c) and one Location per function of the shared table
 *    that some tree uses (id = function id + 1; the location's line is the
 *    function's first line: the trees do not record call-site lines).
 *  - one Sample per tree node with samples ending in it: location ids leaf
 *    first, values [self, self_weight], and the label thread=<name> when
 *    the tree has a name. Samples with no frame (the root's own) have no
 *    location. So the totals of the file are the trees' root totals.
 *  - string_table with "" at index 0; strings that are not valid UTF-8
 *    have each bad byte replaced by U+FFFD.
 *
 * The message is not compressed: on disk a pprof profile is gzipped, which
 * the caller does (the Python layer, with its gzip module).
 */
#ifndef SW_CALLTREE_PPROF_H
#define SW_CALLTREE_PPROF_H

#include "base/base.h"
#include "calltree.h"

#include <stdio.h>

typedef struct sw_pprof_tree {
    const char *thread;          /* value of the "thread" label; NULL for none */
    const sw_calltree *tree;
} sw_pprof_tree;

typedef struct sw_pprof_opts {
    uint64_t period_ns;          /* sampling interval; 0 if unknown */
    int64_t time_nanos;          /* start of the profile, ns since the Unix epoch; 0 if unknown */
    int64_t duration_nanos;      /* 0 if unknown */
    const char *comment;         /* a comment of the profile; NULL for none */
    const char *count_type;      /* the first sample type's name: NULL for "samples"
                                    ("calls" for the trees of an exact trace) */
    const char *weight;          /* what the second value of a sample and the period
                                  * measure, in nanoseconds: "wall" (NULL) or "cpu" */
} sw_pprof_opts;

/* Appends the Profile message for the n trees (n may be 0: a valid profile
 * without samples) to out. Every tree must use one function table, else
 * SW_EARG. opts may be NULL. Returns 0, SW_EARG or SW_ENOMEM (out then
 * holds a partial message and out->failed is set). */
int sw_pprof_write(sw_bytes *out, const sw_pprof_tree *trees, size_t n, const sw_pprof_opts *opts);

/* The same message written to f as it is built, in pieces of about 1 MiB
 * (never held whole: its samples grow with the trees' nodes and depths).
 * Returns 0, SW_EARG, SW_ENOMEM or SW_EIO (a write failed; f then holds a
 * partial message). */
int sw_pprof_write_file(FILE *f, const sw_pprof_tree *trees, size_t n, const sw_pprof_opts *opts);

#endif
