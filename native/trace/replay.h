/*
 * replay.h - the replay of a thread's events (replay.c): one thread's (or
 * task's) EVENTS chunks decoded in order and handed to a callback, with
 * every slice balanced (reader.h says how gaps and damage are replayed).
 * Part of the reader's interface: included by reader.h, which consumers
 * include.
 */
#ifndef SW_REPLAY_H
#define SW_REPLAY_H

#include "reader.h"

/* Replays thread i's events. Returns 0, the callback's nonzero value, or a
 * negative code if a chunk is malformed (the events it gave before the
 * fault and those of the other chunks are delivered, the chunk after it is
 * read as after a gap, and every slice is closed). */
int sw_trace_replay(sw_trace *t, size_t i, sw_event_fn fn, void *ud);

/* Like sw_trace_replay; with SW_REPLAY_EXT in flags it also delivers the
 * EXT events of the known kinds 2-13 (SW_EV_EXT, in stream order, at the
 * depth of the frames open then). Unknown kinds are skipped. */
#define SW_REPLAY_EXT 1u
/* With SW_REPLAY_EXT: the EXT events of every task the thread runs (format
 * 1.7), not only those of the track replayed, and its TASK_SWITCH records
 * (SW_EV_EXT, delivered before the switch, at the depth of the task
 * switched away from, ext->code its innermost open frame or
 * SW_EXT_NO_CODE) and TASK_STACK records (format 1.20): what a reader of task events (stackwatch's
 * tracer/task_events.py) needs from one replay of the thread. */
#define SW_REPLAY_TASKS 2u
int sw_trace_replay_ext(sw_trace *t, size_t i, unsigned flags, sw_event_fn fn, void *ud);

/* Like sw_trace_replay_ext, for a consumer that wants the events from
 * about from_ns on: the thread's chunks that end before from_ns (those
 * followed by a chunk that starts at or before it) are not read, and the
 * first chunk read opens the frames its prefix lists with synthetic calls
 * at its start, without a DROPPED event. The events before from_ns that
 * this chunk holds are delivered too (the consumer clips: filter.h).
 * INT64_MIN: from the start. To stop before the end, the callback returns
 * nonzero (nothing is closed then). */
int sw_trace_replay_from(sw_trace *t, size_t i, unsigned flags, int64_t from_ns, sw_event_fn fn, void *ud);

/* Bytes of the EVENTS chunks of thread i (what a replay of it reads). */
uint64_t sw_trace_events_bytes(const sw_trace *t, size_t i);

/* Progress of long conversions: every replay tells fn the payload bytes of
 * each chunk it has replayed (or skipped); fn returning nonzero stops the
 * replay with SW_ECANCELED. One callback per trace (NULL: none); replays
 * of one trace in several threads at once would call it from each. */
typedef int (*sw_progress_fn)(void *ud, uint64_t bytes);
void sw_trace_set_progress(sw_trace *t, sw_progress_fn fn, void *ud);

#endif
