/*
 * trace_trees.h - the call trees of an exact trace (profile/calltree.h),
 * built from one filtered replay of each thread, so that a trace can be
 * written in the formats of call trees (HTML flame graph, speedscope,
 * collapsed stacks, pprof) from its exact durations.
 *
 * A thread's tree has a node per call path. At each node, `self` counts
 * the calls of that path (the entries the trace recorded: synthetic ones,
 * which the reader or a filter's window makes up, are not calls) and
 * `self_weight` sums their own time in nanoseconds; after
 * sw_calltree_sum_up(), `weight` is the node's total time (its calls'
 * durations: own times sum up to them exactly) and `count` the calls in
 * its subtree. The functions are (qualified name, file, first line) of
 * the trace's code ids.
 */
#ifndef SW_TRACE_TREES_H
#define SW_TRACE_TREES_H

#include "filter.h"
#include "profile/profile.h"
#include "reader.h"

/* One tree per thread position of t, on the function table ft (which the
 * trees borrow): trees[i] for every thread the filter keeps, NULL for the
 * others. trees must hold sw_trace_thread_count(t) entries; on failure
 * every tree made is freed and trees[] is NULL. Memory: the trees (a node
 * per distinct call path: sizeof(sw_calltree_node) and its slot in the
 * tree's index) and a stack of the open calls, whatever the trace's size.
 * With max_nodes > 0, trees of more nodes than that together fail with
 * SW_ENOMEM as soon as they reach it (rather than taking all memory).
 * Returns 0, SW_ENOMEM, SW_EIO or SW_ECANCELED. */
int sw_trace_trees(sw_trace *t, const sw_filter *f, sw_functab *ft, size_t max_nodes, sw_calltree **trees);

#endif
