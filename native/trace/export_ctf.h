/*
 * export_ctf.h - a trace as a CTF 1.8 trace directory (babeltrace2, Trace
 * Compass): a TSDL `metadata` file and one binary stream file per thread
 * (`stream_<thread index>`), written a packet at a time.
 *
 * Events follow LTTng-UST's conventions so that Trace Compass opens the
 * directory as an LTTng-UST trace and its call-stack view works: calls are
 * `lttng_ust_cyg_profile:func_entry` (fields addr = the code id, name,
 * file, line, kind) and returns `lttng_ust_cyg_profile:func_exit` (addr);
 * every event has the contexts vpid, vtid and procname. EXT events are
 * `stackwatch:<kind name>` with their row's fields (records.h: one event
 * class per row, generated from the table), sampler samples
 * `stackwatch:sample`, lost events `stackwatch:dropped`. The clock
 * `monotonic` counts the trace's own nanoseconds (since its calibration
 * point) and its offset is the wall-clock time of that point (META
 * real0_ns), so absolute times are UTC.
 */
#ifndef SW_EXPORT_CTF_H
#define SW_EXPORT_CTF_H

#include "export_walk.h"

/* Writes the TSDL metadata to `out`, a file the caller opened as
 * o->dir/metadata, and the stream files into the directory o->dir.
 * Returns 0, or a negative code with a message in err. */
int sw_export_ctf(sw_trace *t, FILE *out, const sw_export_opts *o, char *err, size_t errlen);

#endif
