/*
 * export_perfetto.h - a trace as a Perfetto protobuf trace
 * (perfetto_trace.proto): one TrackDescriptor per process and thread,
 * TrackEvent slice begin/end packets on one packet sequence per thread
 * (the thread's track its default), names, source locations and slice
 * categories interned per sequence, timestamps as deltas on a
 * sequence-scoped incremental clock that a ClockSnapshot at the start of
 * each sequence ties to CLOCK_BOOTTIME (nanoseconds); EXT events as
 * instants with debug annotations, a garbage collection as a slice on a
 * "GC" track under its thread's track, samples on a "samples" track with
 * their stacks as inline callstacks.
 */
#ifndef SW_EXPORT_PERFETTO_H
#define SW_EXPORT_PERFETTO_H

#include "export_walk.h"

/* Writes the trace to a FILE the caller opened. Returns 0, or a negative
 * code with a message in err. */
int sw_export_perfetto(sw_trace *t, FILE *out, const sw_export_opts *o, char *err, size_t errlen);

#endif
