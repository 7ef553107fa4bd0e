/*
 * calltree_emit.h - call trees written as text for other tools: collapsed
 * stacks (flamegraph.pl), speedscope JSON, and the flat node list of the
 * HTML flame graph (src/stackwatch/render/flamegraph.py).
 */
#ifndef SW_CALLTREE_EMIT_H
#define SW_CALLTREE_EMIT_H

#include "calltree.h"

#include <stdio.h>

/* Collapsed stacks, the input format of flamegraph.pl: one line per
 * distinct stack with samples ending in it, "root;...;leaf COUNT\n", each
 * frame written as "name (file:line)" with ';' and line breaks replaced.
 * With use_weights, the value is the stack's self_weight instead (the own
 * nanoseconds of an exact trace's tree), and a stack with a weight but no
 * count is written too. Returns SW_EIO if a write failed. */
int sw_calltree_write_collapsed(const sw_calltree *t, FILE *f, int use_weights);

/* One profile of a speedscope file. */
typedef struct sw_speedscope_profile {
    const char *name;          /* e.g. "Thread 1234 (MainThread)" */
    const sw_calltree *tree;
} sw_speedscope_profile;

/* A speedscope JSON file (https://www.speedscope.app/file-format-schema.json)
 * with one "sampled" profile per entry of `profiles`, all of whose trees
 * must share one function table (else SW_EARG). Each distinct stack is one
 * sample; its weight is its self_weight in `unit` ("nanoseconds" for the
 * sampler's wall-time weights and an exact trace's own times) or, with
 * use_counts, its self count (then unit "none" fits). A stack with a
 * weight but no count (a trace's frame opened by a window) is a sample.
 * speedscope opens on the main thread's profile (the first whose name
 * contains "MainThread"), else on the busiest (the largest total).
 * Returns SW_EIO if a write failed. */
int sw_speedscope_write(FILE *f, const char *file_name, const sw_speedscope_profile *profiles, size_t n,
                        const char *unit, int use_counts, const char *exporter);

/* The nodes of t in pre-order (children in insertion order), six numbers
 * each, comma-separated, as the flame graph page's JSON holds them: the
 * pre-order index of the parent and the frame (-1, -1 for the root), then
 * count, self, weight and self_weight. frame[func] is the page's frame of
 * each function id (nframes entries; a node of a function beyond them:
 * SW_EARG). Memory: 4 bytes per node. Returns SW_EIO if a write failed. */
int sw_calltree_write_flat(const sw_calltree *t, FILE *f, const uint32_t *frame, uint32_t nframes);

#endif
