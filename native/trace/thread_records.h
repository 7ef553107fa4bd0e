/*
 * thread_records.h - EXT records of threads written by another thread of
 * stackwatch into a trace file (format 1.8, THREAD_RECORDS chunks, see
 * format.h and docs/format.md): the kernel reader's system calls.
 *
 * sw_trec_stream_add encodes one record (a row of records.h, its thread's
 * native tid, its CLOCK_MONOTONIC time) into a buffer, written as one
 * THREAD_RECORDS chunk when it holds 64 KiB or 250 ms of records, and by
 * sw_trec_stream_flush. Times are stored as CLOCK_MONOTONIC minus the
 * trace's mono0_ns, as the samples' are (the reader's nanoseconds since the
 * calibration point). Only one thread may use a stream at a time; the
 * writer must outlive its last flush.
 */
#ifndef SW_THREAD_RECORDS_H
#define SW_THREAD_RECORDS_H

#include "base/base.h"
#include "records.h"
#include "writer.h"

typedef struct sw_trec_stream sw_trec_stream;

/* Returns NULL when out of memory. */
sw_trec_stream *sw_trec_stream_new(sw_writer *w, uint64_t mono0_ns);
/* Adds a record of kind `kind` with the fields of vals (records.h
 * sw_record_encode; strings cut at 200 bytes). Returns 0, or a negative
 * code (the record is lost and counted). */
int sw_trec_stream_add(sw_trec_stream *st, uint64_t tid, uint64_t mono_ns, uint32_t kind, const sw_ext *vals);
/* Writes what is buffered. Returns 0 or the writer's error. */
int sw_trec_stream_flush(sw_trec_stream *st);
/* Records written or buffered, and lost (out of memory, write errors). */
void sw_trec_stream_counts(const sw_trec_stream *st, uint64_t *records, uint64_t *lost);
void sw_trec_stream_free(sw_trec_stream *st);

#endif
