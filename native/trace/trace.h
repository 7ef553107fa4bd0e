/*
 * trace.h - the public header of native/trace, the trace file: what other
 * rooms include (never the files below one by one).
 *
 *   format.h          the records of a trace (on the container of base/)
 *   records.h         the EXT record kinds, one table
 *   writer.h          writing a trace while the program runs
 *   reader.h          reading one back: definitions, replay, samples, damage
 *   filter.h          what a reading keeps: threads, a time window, functions, depth
 *   analysis.h        statistics over a replay
 *   trace_trees.h     call trees of a trace (profile/calltree.h) from exact durations
 *   export_walk.h     what the exporters share
 *   export_chrome.h   Chrome Trace Event JSON
 *   export_perfetto.h Perfetto protobuf
 *   exporters.h       the table of timeline exporters, by name
 *   merge.h           several traces (processes) exported as one timeline
 *   sample_stream.h   the sampler's samples written into a trace
 */
#ifndef SW_TRACE_H
#define SW_TRACE_H

#include "analysis.h"
#include "export_chrome.h"
#include "export_perfetto.h"
#include "export_walk.h"
#include "exporters.h"
#include "filter.h"
#include "format.h"
#include "merge.h"
#include "reader.h"
#include "records.h"
#include "sample_stream.h"
#include "trace_trees.h"
#include "writer.h"

#endif
