/*
 * writer.h - writing a trace file while the program runs.
 *
 * A writer owns one open file. Each traced thread gets a thread buffer
 * (sw_tbuf) that only that thread appends to, with no lock: events are
 * encoded straight into the current chunk. When the chunk is full it is
 * sealed (checksummed) and written to the file under the writer's lock, or,
 * in ring mode, kept in a per-thread ring of the most recent chunks and
 * written when the writer closes. Definitions (code objects, threads) are
 * queued and always written before any events chunk that could refer to
 * them, so a file cut short at any chunk boundary still reads.
 *
 * Ownership: sw_writer_open() returns a writer that sw_writer_free() frees;
 * thread buffers belong to the writer and are freed with it. A writer whose
 * file write fails keeps running: later chunks are counted as dropped and
 * the first error is reported by sw_writer_error().
 */
#ifndef SW_WRITER_H
#define SW_WRITER_H

#include "bytes.h"
#include "clock.h"
#include "format.h"
#include "sw_common.h"
#include "varint.h"

#include <pthread.h>
#include <string.h>

typedef struct sw_writer sw_writer;

typedef struct sw_writer_opts {
    size_t chunk_bytes;   /* size of each thread's chunk buffer (>= 4 KiB) */
    size_t ring_bytes;    /* 0: stream chunks to the file; else keep only the
                           * most recent ring_bytes of chunks per thread and
                           * write them at close (flight recorder) */
    unsigned time_shift;  /* timestamps are stored in units of 2^shift ticks */
} sw_writer_opts;


/* One event as the hot path stores it: the raw clock value and (code id << 3
 * | op). Chunks are encoded from these records when they are sealed. */
#define SW_RAW_RECORD 12

typedef struct sw_tbuf {
    /* Hot: touched by every event. */
    uint8_t *pos;         /* next free raw record */
    uint8_t *limit;       /* pos beyond this needs sw_tbuf_make_room() */
    uint32_t depth;       /* open frames (for --max-depth and name lookup) */
    /* Cold. */
    uint8_t *data;        /* raw records of the current chunk */
    size_t cap;
    unsigned shift;
    uint32_t index;       /* thread index in the trace */
    uint64_t seq;         /* sequence number of the next sealed chunk */
    uint64_t seq_seen;    /* seq at the previous sw_writer_flush_quiet() */
    uint64_t last;        /* encoder: time of the last encoded event, units */
    uint32_t *stack;      /* encoder: code ids of open frames, outermost first */
    uint32_t sdepth, stack_cap;
    sw_bytes enc;         /* encoder output, reused */
    uint64_t dropped_pending; /* dropped events to report in the next chunk */
    uint32_t ext_slots;   /* raw records of the current chunk holding EXT payloads */
    uint64_t events;      /* events sealed */
    uint64_t dropped;     /* events lost (ring discards, write errors, OOM) */
    int finished;         /* the thread has exited: no more events */
    int broken;           /* out of memory: events are only counted */
    /* Ring mode: sealed chunks kept in memory, oldest at ring_head. */
    uint8_t **ring;
    size_t *ring_len;
    uint32_t *ring_events;
    size_t ring_slots, ring_head, ring_count;
    sw_writer *w;
    struct sw_tbuf *next;
} sw_tbuf;

/* Opens (creating or truncating) path and writes the file header. Returns 0
 * and sets *out, or a negative SW_E* code with errno set for SW_EIO. */
int sw_writer_open(sw_writer **out, const char *path, const sw_writer_opts *opts);

/* Writes a META chunk whose payload is a key/value list (bytes.h). */
int sw_writer_meta(sw_writer *w, const sw_bytes *kv);

/* Queues a code definition (format.h, CODE entry). Thread-safe. */
int sw_writer_define_code(sw_writer *w, uint32_t id, int kind, const char *name,
                          const char *qualname, const char *filename,
                          uint32_t firstlineno);

/* Creates the buffer of a new thread, whose first event comes after
 * now_ticks, and queues its definition. Returns NULL when out of memory.
 * Thread-safe. */
sw_tbuf *sw_writer_add_thread(sw_writer *w, uint64_t native_tid, uint64_t ident,
                              const char *name, uint64_t now_ticks);

/* Queues a new name for a thread. Thread-safe. */
int sw_writer_thread_name(sw_writer *w, uint32_t index, const char *name);

/* Seals the thread's current chunk and writes (or rings) it. Called by the
 * owning thread, or by anyone once that thread can no longer append. */
void sw_tbuf_flush(sw_tbuf *b);

/* Seals every unfinished thread's pending records whose thread has not
 * sealed a chunk by itself since the previous call (a periodic flush: data
 * reaches the file even from threads that record slowly). The caller must
 * guarantee that no thread appends meanwhile (the extension holds the GIL). */
void sw_writer_flush_quiet(sw_writer *w);

/* Marks the thread finished after flushing it (thread exit). */
void sw_tbuf_finish(sw_tbuf *b);

/* Slow path of the event encoders: seals the full chunk and starts the next.
 * Returns 1 if the event can be written now, 0 if it must be dropped (the
 * thread is out of memory: the writer records the error and counts the
 * event as dropped). */
SW_NOINLINE int sw_tbuf_make_room(sw_tbuf *b);

/* An extended event (SW_OP_EXT): kind and payload (at most SW_EXT_MAX
 * bytes). Not on the hot path of calls; rare events only. Called by the
 * owning thread. */
#define SW_EXT_MAX 480
void sw_tbuf_ext(sw_tbuf *b, uint64_t ticks, unsigned kind, const uint8_t *payload, size_t len);

/* Writes one chunk of the given type (e.g. SW_CHUNK_SAMPLES) with the
 * payload, under the writer's lock, from any thread. Returns SW_ESTATE once
 * the writer is closed, SW_EIO if the write fails. */
int sw_writer_chunk(sw_writer *w, int type, const void *payload, size_t len);

/* Flushes every thread, writes pending definitions and an END chunk holding
 * the totals plus the caller's key/values (end_kv may be NULL), and closes
 * the file. Returns 0 or the first error the writer met. */
int sw_writer_close(sw_writer *w, const sw_bytes *end_kv);

/* Closes the file without writing anything more (the child after fork()). */
void sw_writer_abandon(sw_writer *w);

/* Frees the writer and its thread buffers. */
void sw_writer_free(sw_writer *w);

/* First error met (0 if none); msg gets a description. */
int sw_writer_error(const sw_writer *w, char *msg, size_t msglen);

typedef struct sw_writer_totals {
    uint64_t events, dropped, chunks, bytes, threads, codes;
} sw_writer_totals;
void sw_writer_totals_get(sw_writer *w, sw_writer_totals *t);

/* ---- The hot path: inline recorders used by the hooks. ----
 *
 * An event is one 12-byte raw record: two stores and a pointer bump. The
 * delta/varint encoding, the open-frame stack and the event count are done
 * when the chunk is sealed (writer.c, encode_chunk), in one tight loop. */

SW_INLINE void sw_tbuf_record(sw_tbuf *b, uint64_t ticks, uint32_t word)
{
    uint8_t *p = b->pos;
    memcpy(p, &ticks, 8);
    memcpy(p + 8, &word, 4);
    b->pos = p + SW_RAW_RECORD;
}

/* A frame starts: op is SW_OP_CALL, SW_OP_RESUME or SW_OP_C_CALL; code
 * ids are below 2^29. */
SW_INLINE void sw_tbuf_enter(sw_tbuf *b, uint64_t ticks, unsigned op, uint32_t code)
{
    if (SW_UNLIKELY(b->pos > b->limit) && !sw_tbuf_make_room(b))
        return;
    sw_tbuf_record(b, ticks, (code << SW_OP_BITS) | op);
    b->depth++;
}

/* The innermost frame ends: op is SW_OP_RETURN, SW_OP_YIELD, SW_OP_UNWIND or
 * SW_OP_C_RETURN. */
SW_INLINE void sw_tbuf_exit(sw_tbuf *b, uint64_t ticks, unsigned op)
{
    if (SW_UNLIKELY(b->pos > b->limit) && !sw_tbuf_make_room(b))
        return;
    sw_tbuf_record(b, ticks, op);
    b->depth -= b->depth != 0;
}

#endif
