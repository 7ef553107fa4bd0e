/*
 * chunk_index.h - what an opened trace keeps: its definitions and the index
 * of its chunks (the layout of sw_trace), and the helpers the reader's
 * other files read it with. For the reader's files only (chunk_index.c,
 * replay.c, side_streams.c); consumers use reader.h.
 *
 * chunk_index.c loads a file once: every chunk through the container's
 * iterator (base/container.h, which skips and records damaged ranges), the
 * definitions (META, END, CODE, THREAD, TASK) parsed and kept, and the
 * chunks that are read again later indexed by offset: each thread's EVENTS
 * and TASK_FRAMES chunks (replayed by replay.c) and the side streams'
 * chunks (side_streams.c, which checks each one before it is indexed).
 * Memory stays bounded by the largest chunk, whatever the size of the file.
 */
#ifndef SW_CHUNK_INDEX_H
#define SW_CHUNK_INDEX_H

#include "base/base.h"
#include "reader.h"

/* An indexed chunk: its payload's place in the source. */
typedef struct chunk_ref {
    uint64_t off;            /* payload offset in the source */
    uint32_t len;
    uint64_t seq;            /* EVENTS, TASK_FRAMES: the EVENTS chunk's sequence
                                number; a side stream's: its record count */
    uint64_t t0;             /* EVENTS: its t_start (units) */
} chunk_ref;

/* A META payload read (format 1.5 repeats them before END). */
typedef struct meta_copy {
    uint8_t *data;
    size_t len;
} meta_copy;

typedef struct thread_rec {
    sw_thread_info info;
    char *name;
    uint64_t name_sid;       /* a task defined by a TASK_INTERNED chunk (1.18): its name's STRINGS id + 1,
                              * resolved once every chunk is read (0: name is its own) */
    chunk_ref *chunks;
    size_t nchunks, cap;
    uint64_t written;        /* EVENTS chunks the writer sealed (END, 1.5), 0: unknown */
    size_t owner;            /* a task (info.task != 0): its thread's position, or SIZE_MAX */
    chunk_ref *task_frames;  /* its TASK_FRAMES chunks (format 1.7); seq: the EVENTS chunk's */
    size_t ntask_frames, task_frames_cap;
} thread_rec;

/* The chunks of one side stream (side_streams.h), in file order, and how
 * many of its records have a thread and how many have none. */
typedef struct side_index {
    chunk_ref *chunks;
    size_t nchunks, cap;
    uint64_t records, unattributed;
} side_index;

struct sw_trace {
    sw_source src;           /* the file (read with pread) or a copy in memory */
    uint8_t *mem;            /* that copy (sw_trace_open_mem), owned */
    int fd;                  /* the file, owned; -1 for memory */
    uint64_t len;            /* the source's size */
    sw_progress_fn progress; /* told of the bytes of every chunk replayed */
    void *progress_ud;
    char damage[768];        /* sw_damage_describe() of the list below */
    sw_damage *dmg;          /* damaged ranges, in file order (load) then as
                                replays find them; at most SW_DAMAGE_KEEP */
    size_t ndmg;
    uint64_t dmg_total;
    uint64_t unknown_chunks;  /* chunks of a newer minor version, skipped */
    uint64_t lost_events;    /* events of the chunks lost to damage, when END tells */
    int lost_at_least;       /* lost_events is a lower bound (the writer dropped events) */
    int complete;
    sw_meta_entry *meta;
    size_t nmeta, meta_cap;
    meta_copy *metas;        /* the META chunks read (format 1.5 repeats them) */
    size_t nmetas, metas_cap;
    thread_rec *threads;
    size_t nthreads, threads_cap;
    uint32_t ntasks;         /* entries of threads that are tasks (format 1.7) */
    sw_code_info **codes;    /* indexed by id */
    uint32_t code_limit;
    sw_strings strings;      /* the interned strings (format 1.16, STRINGS chunks), by id */
    unsigned shift;
    uint64_t tick0;
    double ns_per_tick;
    int64_t end_ns;
    /* Side streams (side_streams.h), by kind. */
    side_index side[SW_SIDE_STREAM_COUNT];
    /* The samples' frames (format 1.2). */
    sw_frame_info **frames;  /* indexed by frame id */
    uint32_t frame_limit;
    struct sample_key *skeys;   /* distinct (ident, tid) of samples, sorted */
    size_t nskeys;
    int bad_frame_kind;      /* 1 + the kind of a SAMPLE_FRAMES entry of an unknown kind, 0: none */
};

/* The fixed part of an EVENTS payload. */
typedef struct events_head {
    uint64_t index, seq, t0, dropped, depth;
    const uint8_t *prefix;   /* depth varints */
    uint64_t n;
    const uint8_t *body;
} events_head;

int sw_index_events_head(sw_cursor *c, events_head *h);

/* The payload of an indexed chunk, as a cursor: in the memory source, or
 * read into buf. */
int sw_index_payload(const sw_trace *t, const chunk_ref *ch, sw_bytes *buf, sw_cursor *c);

/* Reads a str into a fresh NUL-terminated copy (outlen: its length, or
 * NULL). */
int sw_index_get_str(sw_cursor *c, char **out, size_t *outlen);

/* Makes room for slot `id` in a table of pointers (new slots NULL); returns
 * the (possibly moved) table, or NULL when out of memory (then unchanged). */
void *sw_index_grow_slots(void *slots, uint32_t *limit, uint64_t id, size_t slot);

/* The thread (not a task) of writer index `index`, added to the list when
 * new; NULL when out of memory or not an index the writer can give. */
thread_rec *sw_index_thread(sw_trace *t, uint64_t index);

/* The position of the thread whose native tid is tid, or SIZE_MAX. */
size_t sw_index_thread_of_tid(const sw_trace *t, uint64_t tid);

/* Adds a damaged range found after the load (a replay's malformed events
 * chunk), in file order, once. */
void sw_index_add_damage(sw_trace *t, const sw_damage *d);

#endif
