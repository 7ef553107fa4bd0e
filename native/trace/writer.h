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

#include "base/base.h"
#include "format.h"

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


/* The most bytes one call or return event takes in the buffer (two
 * varints); sw_tbuf.limit leaves this much room. */
#define SW_EVENT_MAX (2 * SW_VARINT_MAX)

typedef struct sw_tbuf {
    /* Hot: touched by every event. */
    uint8_t *pos;         /* next free byte of the current chunk's events */
    uint8_t *limit;       /* pos beyond this needs sw_tbuf_make_room() */
    uint64_t last;        /* time of the previous event, in units */
    uint32_t *stack;      /* code ids of the open frames, outermost first */
    uint32_t depth;       /* open frames (also for --max-depth and name lookup) */
    uint32_t stack_cap;   /* depth reaching this needs sw_tbuf_make_room() */
    uint32_t nev;         /* events in the current chunk */
    unsigned shift;
    /* Cold. */
    uint8_t *data;        /* encoded events of the current chunk */
    size_t cap;
    uint32_t index;       /* thread index in the trace */
    uint64_t seq;         /* sequence number of the next sealed chunk */
    uint64_t seq_seen;    /* seq at the previous sw_writer_flush_quiet() */
    uint64_t start_last;  /* the current chunk's t_start */
    uint32_t *start_stack;    /* the frames open when the current chunk started */
    uint32_t start_depth, start_cap;
    sw_bytes enc;         /* chunk header, reused */
    uint64_t dropped_pending; /* dropped events to report in the next chunk */
    uint64_t events;      /* events sealed */
    uint64_t dropped;     /* events lost (ring discards, write errors, OOM) */
    uint64_t task;        /* the task the thread runs (format 1.7; 0: itself), whose
                           * open frames are stack[0..depth) */
    struct sw_task_frames *tasks;  /* the other tasks with open frames */
    uint32_t ntasks, tasks_cap;
    sw_bytes start_tasks; /* TASK_FRAMES payload of the current chunk (empty: none) */
    uint32_t cpu;         /* --cpu (format 1.13): the CPU of the chunk's last event + 1; 0: none yet */
    int finished;         /* the thread has exited: no more events */
    int broken;           /* out of memory: events are only counted */
    /* Ring mode: the most recent sealed chunks, ring_kept bytes in all
     * (at most ring_bytes), oldest at ring_head; the array grows. */
    struct sw_ring_chunk *ring;
    size_t ring_slots, ring_head, ring_count, ring_kept;
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

/* Queues the definition of a task (format 1.7; 1.18: a TASK_INTERNED
 * chunk's entry, its name interned as sw_writer_intern does, the entry a
 * TASK_CREATE naming it shares): a greenlet or an asyncio task that runs
 * on the thread of index `thread`, named `name`. Ids are the caller's,
 * above 0 (0 is the thread itself). Thread-safe. */
int sw_writer_define_task(sw_writer *w, uint64_t task, uint32_t thread, const char *name);

/* The thread stops running task `origin` and runs task `target` (a
 * TASK_SWITCH record): the open frames are kept as origin's, and target's
 * (as it left them; none for a task never run) become the thread's open
 * frames, which the hot path's encoders push and pop. Called by the owning
 * thread. */
void sw_tbuf_task_switch(sw_tbuf *b, uint64_t ticks, uint64_t origin, uint64_t target);

/* The id of string s (len bytes, any bytes) among the trace's interned
 * strings (format 1.16, STRINGS chunks), queueing its definition when it
 * is new: ids are dense from 0, in order of first use. Returns 0, or
 * SW_ENOMEM (*id is then not usable). Thread-safe. sw_writer_intern_fn is
 * the same as a records.h sw_intern_fn (ctx: the writer). */
int sw_writer_intern(sw_writer *w, const char *s, size_t len, uint64_t *id);
int sw_writer_intern_fn(void *w, const char *s, size_t len, uint64_t *id);

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
/* Puts every event recorded so far into the file, the writer staying open:
 * each thread's pending records are sealed and, in ring mode, the kept
 * chunks are written and the ring emptied. For a process about to be
 * replaced (exec): the file then reads like one whose process was killed,
 * without a lost event. Caller excludes the threads' recording (the
 * extension holds the GIL and the session lock). */
void sw_writer_flush_all(sw_writer *w);

/* Marks the thread finished after flushing it (thread exit). */
void sw_tbuf_finish(sw_tbuf *b);

/* Slow path of the event encoders: seals the chunk if it is full and grows
 * the open-frame stack if it is. Returns 1 if the event can be written now,
 * 0 if it must be dropped (the thread is out of memory: the writer records
 * the error and counts the event as dropped). */
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

/* Around fork(): sw_writer_fork_prepare() takes the writer's lock, so that
 * no other thread holds it when the process is copied; after fork() the
 * parent and the child each call sw_writer_fork_release(), which releases
 * it (in the child the lock is held by the one thread there, the one that
 * forked). Async-signal-safe, as pthread_atfork handlers must be. */
void sw_writer_fork_prepare(sw_writer *w);
void sw_writer_fork_release(sw_writer *w);

/* Frees the writer and its thread buffers. */
void sw_writer_free(sw_writer *w);

/* First error met (0 if none); msg gets a description. */
int sw_writer_error(const sw_writer *w, char *msg, size_t msglen);

typedef struct sw_writer_totals {
    uint64_t events, dropped, chunks, bytes, threads, codes;
} sw_writer_totals;
void sw_writer_totals_get(sw_writer *w, sw_writer_totals *t);

/* ---- The hot path: inline encoders used by the hooks. ----
 *
 * Events are encoded where they happen, straight into the chunk buffer in
 * the file's format (docs/format.md, EVENTS payload): a delta-time varint,
 * plus a code id for frame starts. The open-frame stack is kept alongside,
 * for the next chunk's header. Sealing a chunk then only adds the header. */

/* The delta of a time in units (ticks >> shift) to the previous event (0
 * if the clock went backwards), and the new previous time. */
SW_INLINE uint64_t sw_tbuf_delta_units(sw_tbuf *b, uint64_t now)
{
    uint64_t last = b->last;
    uint64_t d = now - last;
    d = (int64_t)d < 0 ? 0 : d;
    b->last = last + d;
    return d;
}

SW_INLINE uint64_t sw_tbuf_delta(sw_tbuf *b, uint64_t ticks)
{
    return sw_tbuf_delta_units(b, ticks >> b->shift);
}

/* Writes x < 2^14 as a one- or two-byte varint (p must have two bytes of
 * room). */
SW_INLINE uint8_t *sw_put_varint14(uint8_t *p, uint32_t x)
{
    if (SW_LIKELY(x < 0x80)) {
        p[0] = (uint8_t)x;
        return p + 1;
    }
    p[0] = (uint8_t)(x | 0x80);
    p[1] = (uint8_t)(x >> 7);
    return p + 2;
}

/* Whether a frame start fits without sw_tbuf_make_room(). */
/* --cpu (format 1.13): before an event at `ticks` on CPU `cpu`, a CPU
 * record (records.h) when the chunk has none yet or its last event ran on
 * another CPU. The event still fits after it when it did before. Called by
 * the owning thread. */
void sw_tbuf_cpu_moved(sw_tbuf *b, uint64_t ticks, uint32_t cpu);
SW_INLINE void sw_tbuf_cpu(sw_tbuf *b, uint64_t ticks, uint32_t cpu)
{
    if (SW_UNLIKELY(cpu + 1 != b->cpu))
        sw_tbuf_cpu_moved(b, ticks, cpu);
}

SW_INLINE int sw_tbuf_enter_fits(const sw_tbuf *b)
{
    return SW_LIKELY(b->pos <= b->limit) && SW_LIKELY(b->depth < b->stack_cap);
}

/* A frame starts at `now` (in units: ticks >> shift), when
 * sw_tbuf_enter_fits(): op is SW_OP_CALL, SW_OP_RESUME or SW_OP_C_CALL;
 * code ids are below 2^29. */
SW_INLINE void sw_tbuf_put_enter_units(sw_tbuf *b, uint64_t now, unsigned op, uint32_t code)
{
    uint64_t x = (sw_tbuf_delta_units(b, now) << SW_OP_BITS) | op;
    uint8_t *p = b->pos;
    if (SW_LIKELY(x < 0x4000 && code < 0x80)) {
        /* The common call: a delta of up to two bytes, a one-byte code. */
        p = sw_put_varint14(p, (uint32_t)x);
        *p++ = (uint8_t)code;
    } else {
        p = sw_put_varint_fast(sw_put_varint_fast(p, x), code);
    }
    b->pos = p;
    b->stack[b->depth++] = code;
    b->nev++;
}

SW_INLINE void sw_tbuf_put_enter(sw_tbuf *b, uint64_t ticks, unsigned op, uint32_t code)
{
    sw_tbuf_put_enter_units(b, ticks >> b->shift, op, code);
}

/* The innermost frame ends, when b->pos <= b->limit: op is SW_OP_RETURN,
 * SW_OP_YIELD, SW_OP_UNWIND or SW_OP_C_RETURN. */
SW_INLINE void sw_tbuf_put_exit(sw_tbuf *b, uint64_t ticks, unsigned op)
{
    uint64_t x = (sw_tbuf_delta(b, ticks) << SW_OP_BITS) | op;
    b->pos = SW_LIKELY(x < 0x4000) ? sw_put_varint14(b->pos, (uint32_t)x) : sw_put_varint_fast(b->pos, x);
    b->depth -= b->depth != 0;
    b->nev++;
}

/* The same, for the exit of a frame whose start this buffer recorded (so
 * depth > 0): the depth is decremented without the check. Should that
 * ever be wrong, depth wraps above stack_cap and the next frame start
 * finds it in sw_tbuf_make_room(), which stops the thread's recording
 * (an error, reported) rather than write out of bounds. */
SW_INLINE void sw_tbuf_put_exit_paired_units(sw_tbuf *b, uint64_t now, unsigned op)
{
    uint64_t x = (sw_tbuf_delta_units(b, now) << SW_OP_BITS) | op;
    b->pos = SW_LIKELY(x < 0x4000) ? sw_put_varint14(b->pos, (uint32_t)x) : sw_put_varint_fast(b->pos, x);
    b->depth--;
    b->nev++;
}

SW_INLINE void sw_tbuf_put_exit_paired(sw_tbuf *b, uint64_t ticks, unsigned op)
{
    sw_tbuf_put_exit_paired_units(b, ticks >> b->shift, op);
}

SW_INLINE void sw_tbuf_enter(sw_tbuf *b, uint64_t ticks, unsigned op, uint32_t code)
{
    if (!sw_tbuf_enter_fits(b) && !sw_tbuf_make_room(b))
        return;
    sw_tbuf_put_enter(b, ticks, op, code);
}

SW_INLINE void sw_tbuf_exit(sw_tbuf *b, uint64_t ticks, unsigned op)
{
    if (SW_UNLIKELY(b->pos > b->limit) && !sw_tbuf_make_room(b))
        return;
    sw_tbuf_put_exit(b, ticks, op);
}

#endif
