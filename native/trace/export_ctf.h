/*
 * export_ctf.h - a trace as CTF 1.8 traces in one directory, laid out as an
 * LTTng session's (babeltrace2 reads the directory, Trace Compass imports
 * it as an experiment): `ust/` (a TSDL `metadata` file and one binary
 * stream file per thread, `stream_<thread index>`) and, when the trace has
 * kernel events, `kernel/` (the same for those events), written a packet
 * at a time.
 *
 * Events follow LTTng's conventions so that Trace Compass opens `ust/` as
 * an LTTng-UST trace (its call-stack view) and `kernel/` as an LTTng kernel
 * trace (system calls named syscall_entry_<name> / syscall_exit_<name>,
 * sched_switch, sched_wakeup, x86_exceptions_page_fault_user): calls are
 * `lttng_ust_cyg_profile:func_entry` (fields addr = the code id, name,
 * file, line, kind) and returns `lttng_ust_cyg_profile:func_exit` (addr);
 * every event has the contexts vpid, vtid and procname (kernel: pid, tid,
 * procname). EXT events other than the kernel's are
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

/* The first file of the export's directory (exporters.h): the ust trace's
 * metadata. */
#define SW_CTF_FIRST_FILE "ust/metadata"

/* Writes the ust trace's TSDL metadata to `out`, a file the caller opened
 * as o->dir/ust/metadata, its stream files beside it, and the kernel trace
 * (when there are kernel events) into o->dir/kernel.
 * Returns 0, or a negative code with a message in err. */
int sw_export_ctf(sw_trace *t, FILE *out, const sw_export_opts *o, char *err, size_t errlen);

#endif
