/*
 * wake_flows.h - the flows of wakeups between threads of a trace (format
 * 1.10, `run --kernel=sched`) that the timeline exports draw.
 *
 * Each WAKEUP record whose wakee is another thread of the trace (both
 * threads kept by the export's filter, the wakeup in its window) is one
 * flow from the waker, at the wakeup, to the wakee: at the switch in
 * (ON_CPU) that ends the wakee's off-CPU interval the wakeup fell in; or,
 * when the wakee was not off CPU then (it had not switched out yet: it was
 * still runnable, and the kernel's wakeup only set it running again), at
 * the wakeup's own time on the wakee's track. A wakeup of a thread that
 * was off CPU and never switched in again before the trace ended has no
 * flow; a wakeup of a thread of the trace that the filter leaves out is
 * not shown at all (sw_wake_flows_shows). The exporters draw the start on the WAKEUP event itself
 * (sw_wake_flow_start gives its id) and the end as a mark on the wakee's
 * track, one of the task flow ends (export_walk.h) in the options
 * sw_wake_flows_opts returns.
 */
#ifndef SW_WAKE_FLOWS_H
#define SW_WAKE_FLOWS_H

#include "export_walk.h"

typedef struct sw_wake_flows sw_wake_flows;

/* Finds the trace's wakeup flows. Returns 0 and *out (free it with
 * sw_wake_flows_free), or SW_ENOMEM / SW_EIO (a THREAD_RECORDS chunk
 * that could not be read). */
int sw_wake_flows_new(sw_trace *t, const sw_export_opts *o, sw_wake_flows **out);
/* o (as given to sw_wake_flows_new, NULL too) with the wakee ends added
 * to its task flows: each an end (ends = 1) named "woken by TID" (at a
 * switch in) or "woken by TID (runnable)", category "sched". Valid while
 * wf lives. */
const sw_export_opts *sw_wake_flows_opts(const sw_wake_flows *wf);
/* The id of the flow that the WAKEUP record x of thread `thread` at t_ns
 * starts, or 0 when it starts none. */
uint64_t sw_wake_flow_start(const sw_wake_flows *wf, size_t thread, int64_t t_ns, const sw_ext *x);
/* The thread of the trace whose native tid is `tid` (t: the trace wf was
 * made from), or NULL. */
const sw_thread_info *sw_wake_flows_thread(const sw_wake_flows *wf, sw_trace *t, uint64_t tid);
/* Whether the exports show the WAKEUP record x at all: not when its
 * wakee is a thread of the trace that the export's filter leaves out (a
 * wakee outside the trace, another process's task, is shown, named by
 * the record's comm). The same in every timeline export (Perfetto's
 * instant and ftrace sched_waking, Chrome's instant, CTF's
 * sched_wakeup); 1 for any other record. */
int sw_wake_flows_shows(const sw_wake_flows *wf, const sw_ext *x);
/* Whether the ON_CPU record x of thread `thread` at t_ns is the second
 * half of a switch already written whole (format 1.15): on its CPU, the
 * switch just before it is a switch out of another thread the export
 * keeps to this one (its next_tid). The scheduler views (Perfetto's ftrace
 * sched_switch, CTF's) write that switch once, from the one to the other,
 * and not this switch in from pid 0. */
int sw_wake_flows_switch_joined(const sw_wake_flows *wf, size_t thread, int64_t t_ns, const sw_ext *x);
/* How many flows (each has both ends). */
size_t sw_wake_flow_count(const sw_wake_flows *wf);
void sw_wake_flows_free(sw_wake_flows *wf);

#endif
