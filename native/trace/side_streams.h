/*
 * side_streams.h - side streams: the time-ordered streams of records of a
 * trace that are not a thread's call stack, each in chunks of its own
 * type, its records naming their thread (side_streams.c). Today: the
 * sampler's samples (SAMPLES) and the records of threads written by
 * another thread (THREAD_RECORDS: the kernel reader's system calls); next,
 * kernel events per CPU and other processes' records.
 *
 * One table, SW_SIDE_STREAMS, lists the kinds of stream. The reader checks
 * each chunk of a stream before it indexes it (so that reading it later
 * cannot fail), attributes every record to a thread of the list and
 * counts those it could not; one cursor (sw_side_cursor) reads any stream,
 * of one thread or of all, in file order (time order for one writer),
 * each record decoded into an item: an EXT record (records.h) or a
 * sample. The export walk (export_walk.h) opens one cursor per stream for
 * each thread and merges them N-way by time among the thread's events, so
 * an exporter sees a stream's items as events (SW_EV_EXT, SW_EV_SAMPLE)
 * and has no code path per stream.
 *
 * Adding a stream: its producer (a writer of its chunk type, like
 * sample_stream.c or thread_records.c), its chunk type (format.h, the
 * reader's list in chunk_index.c) and a row here with the three functions
 * of side_streams.c its row names: parse (one record's bounds, its thread
 * and time), thread (the record's thread in the list) and item (the record
 * decoded, or skipped). A stream of EXT records needs nothing else: the
 * exports show them by their kinds' rows (records.h).
 *
 * Part of the reader's interface: included by reader.h, which consumers
 * include.
 */
#ifndef SW_SIDE_STREAMS_H
#define SW_SIDE_STREAMS_H

#include "reader.h"

/* The kinds of side stream: X(NAME, name, chunk type). Their order is the
 * order in which items of the same time are merged (records of a thread
 * before its samples), and the order in which the load attributes their
 * records (a stream may add threads to the list: the samples do, for
 * threads the trace has no events of). */
#define SW_SIDE_STREAMS(X)                                  \
    X(THREAD_RECORDS, thread_records, SW_CHUNK_THREAD_RECORDS) \
    X(SAMPLES, samples, SW_CHUNK_SAMPLES)

#define SW_X_SIDE_ENUM_(K, name, chunk) SW_SIDE_##K,
enum { SW_SIDE_STREAMS(SW_X_SIDE_ENUM_) SW_SIDE_STREAM_COUNT };
#undef SW_X_SIDE_ENUM_

/* The event kind of a sample in a walk (export_walk.h): `sample` set. */
#define SW_EV_SAMPLE 19

/* ---- Samples of the statistical sampler (format 1.2) ----
 *
 * Threads are matched to samples by threading ident (then native thread
 * id); a sampled thread the trace has no events of gets an entry of its own
 * in the thread list (no chunks, name ""). Sample times are in the same
 * nanoseconds as events. */

typedef struct sw_frame_info {
    uint32_t id;
    uint8_t kind;            /* SW_FRAME_PYTHON or SW_FRAME_NATIVE (name: the
                                bare symbol; exports add " [native]") */
    const char *name, *filename;
    uint32_t line;
} sw_frame_info;

struct sw_trace_sample {
    int64_t t_ns;
    uint32_t thread;         /* position in the thread list */
    uint32_t state, flags;   /* sample.h SW_STATE_*, SW_SAMPLE_* */
    uint64_t weight_ns;      /* time the sample stands for */
    uint64_t cpu_ns;         /* CPU time since the thread's previous sample, or UINT64_MAX */
    uint32_t depth;
    const uint32_t *frames;  /* frame ids, outermost first (sw_trace_frame) */
    const uint32_t *lines;   /* format 1.3, when recorded: the line each frame
                                runs (0: unknown or native), parallel to
                                frames; else NULL */
};

/* Highest frame id + 1; sw_trace_frame() returns NULL for ids never defined. */
uint32_t sw_trace_frame_limit(const sw_trace *t);
const sw_frame_info *sw_trace_frame(const sw_trace *t, uint32_t id);
/* Samples of threads in the list (and those that could not be given one:
 * more than 4096 distinct sampled threads). */
uint64_t sw_trace_sample_count(const sw_trace *t);
uint64_t sw_trace_samples_unattributed(const sw_trace *t);

/* Iterates the samples of one thread (or of all, thread == SIZE_MAX) in
 * file order (time order for one sampler). next() returns 1 and fills *out
 * (valid until the next call), 0 at the end. */
typedef struct sw_sample_cursor sw_sample_cursor;
sw_sample_cursor *sw_sample_cursor_new(sw_trace *t, size_t thread);
int sw_sample_cursor_next(sw_sample_cursor *c, sw_trace_sample *out);
void sw_sample_cursor_free(sw_sample_cursor *c);

/* ---- Records of threads written by another thread (format 1.8) ----
 *
 * THREAD_RECORDS chunks hold EXT records (records.h rows written by
 * KERNEL: system calls, lost kernel records) of threads named by their
 * native tid, on the samples' time base. A record whose tid is no thread
 * of the trace is counted as unattributed and never delivered; a kind
 * this reader has no row for is skipped. */
typedef struct sw_trace_trec {
    int64_t t_ns;            /* same nanoseconds as events */
    uint32_t thread;         /* position in the thread list */
    const sw_ext *ext;       /* its payload decoded (valid until the next call) */
} sw_trace_trec;

uint64_t sw_trace_thread_record_count(const sw_trace *t);
uint64_t sw_trace_thread_records_unattributed(const sw_trace *t);

/* Iterates the records of one thread (or of all, thread == SIZE_MAX) in
 * file order (time order for one writer). next() returns 1 and fills
 * *out, 0 at the end, or a negative code. */
typedef struct sw_trec_cursor sw_trec_cursor;
sw_trec_cursor *sw_trec_cursor_new(sw_trace *t, size_t thread);
int sw_trec_cursor_next(sw_trec_cursor *c, sw_trace_trec *out);
void sw_trec_cursor_free(sw_trec_cursor *c);

/* ---- Any side stream ---- */

/* One record of a side stream, decoded: an EXT record (ext) or a sample
 * (sample), the other NULL; valid until the cursor's next call. */
typedef struct sw_side_item {
    int64_t t_ns;            /* same nanoseconds as events */
    uint32_t thread;         /* position in the thread list */
    uint8_t event;           /* SW_EV_EXT or SW_EV_SAMPLE */
    const sw_ext *ext;
    const sw_trace_sample *sample;
} sw_side_item;

/* The name of stream kind `kind` (SW_SIDE_*: "samples", ...). */
const char *sw_side_stream_name(unsigned kind);
/* Records of stream `kind` that have a thread, and those that have none. */
uint64_t sw_side_stream_records(const sw_trace *t, unsigned kind);
uint64_t sw_side_stream_unattributed(const sw_trace *t, unsigned kind);

/* Iterates the records of stream `kind` of one thread (or of all, thread
 * == SIZE_MAX) in file order. next() returns 1 and fills *out, 0 at the
 * end, or a negative code. Records of no thread of the list, and records
 * of a kind this reader has no row for (a newer minor version's), are
 * skipped. */
typedef struct sw_side_cursor sw_side_cursor;
sw_side_cursor *sw_side_cursor_new(sw_trace *t, unsigned kind, size_t thread);
int sw_side_cursor_next(sw_side_cursor *c, sw_side_item *out);
void sw_side_cursor_free(sw_side_cursor *c);

/* ---- For the load (chunk_index.c) ---- */

/* An intact chunk of type `type`: when it is a side stream's, checked
 * whole and indexed (nonzero: it cannot be used); else nothing. */
int sw_side_add_chunk(sw_trace *t, unsigned type, const uint8_t *p, uint64_t off, uint32_t len);
/* A SAMPLE_FRAMES chunk: the samples' frame definitions. A frame of a
 * kind this reader does not know refuses the chunk (bad_frame_kind), and
 * after it no samples are read: they may name such frames. */
int sw_side_sample_frames(sw_trace *t, sw_cursor *c);
/* After the load: every stream's records given a thread (in the table's
 * order), and counted. */
int sw_side_streams_index(sw_trace *t);
void sw_side_streams_free(sw_trace *t);

#endif
