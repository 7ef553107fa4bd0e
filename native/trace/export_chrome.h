/*
 * export_chrome.h - a trace as Chrome Trace Event JSON (chrome://tracing,
 * the Perfetto UI, speedscope): B/E events per thread, timestamps in
 * microseconds of CLOCK_MONOTONIC; EXT events as instants with their data
 * as args, a garbage collection as a complete "X" event on its thread,
 * samples as instants with their stacks in args.
 */
#ifndef SW_EXPORT_CHROME_H
#define SW_EXPORT_CHROME_H

#include "export_walk.h"

/* Writes the JSON to a FILE the caller opened. Returns 0, or a negative
 * code with a message in err. */
int sw_export_chrome(sw_trace *t, FILE *out, const sw_export_opts *o, char *err, size_t errlen);

#endif
