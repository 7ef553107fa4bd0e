/*
 * writer.c - trace file writer: chunk sealing, streaming, ring mode,
 * definitions and totals (see writer.h and docs/format.md).
 */
#define _GNU_SOURCE
#include "writer.h"
#include "records.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

struct sw_writer {
    int fd;
    int broken;            /* a write failed: nothing more is written */
    int closed;
    pthread_mutex_t lock;
    sw_writer_opts opts;
    int error;             /* first error (SW_E*), 0 if none */
    char errmsg[256];
    sw_bytes meta_chunks;  /* the META chunks written, header and payload,
                              written again before END (format 1.5) */
    uint64_t nmeta;        /* chunks in meta_chunks */
    sw_bytes code_defs;    /* queued CODE entries */
    sw_bytes thread_defs;  /* queued THREAD entries */
    sw_bytes task_defs;    /* queued TASK entries (format 1.7) */
    sw_bytes string_defs;  /* queued STRINGS entries (format 1.16) */
    /* The interned strings (format 1.16), id = index: their bytes, one
     * after another in string_bytes, at offsets string_at[id] .. [id + 1]
     * (nstrings + 1 offsets); by content in strings_ix. */
    sw_bytes string_bytes;
    size_t *string_at;
    size_t string_at_cap;
    uint32_t nstrings;
    sw_hashtab strings_ix;
    uint64_t ncodes;
    sw_tbuf *threads;      /* newest first */
    uint32_t nthreads;
    uint64_t chunks, bytes;
};

static void set_error(sw_writer *w, int code, const char *what)
{
    if (w->error)
        return;
    w->error = code;
    if (code == SW_EIO)
        snprintf(w->errmsg, sizeof w->errmsg, "%s: %s", what, strerror(errno));
    else
        snprintf(w->errmsg, sizeof w->errmsg, "%s: %s", what, sw_strerror(code));
}

static int write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t k = writev(fd, iov, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return SW_EIO;
        }
        size_t left = (size_t)k;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return SW_OK;
}

/* Writes one chunk; the caller holds the lock. */
static int write_chunk_locked(sw_writer *w, int type, const struct iovec *parts, int nparts)
{
    if (w->broken || w->fd < 0)
        return SW_EIO;
    uint8_t hdr[SW_CHUNK_HEADER_LEN];
    if (nparts > 7 || sw_chunk_header_put(hdr, (unsigned)type, parts, nparts) != SW_OK)
        return SW_EARG;
    struct iovec iov[8];
    iov[0].iov_base = hdr;
    iov[0].iov_len = sizeof hdr;
    size_t total = sizeof hdr;
    for (int i = 0; i < nparts; i++) {
        iov[i + 1] = parts[i];
        total += parts[i].iov_len;
    }
    if (write_all(w->fd, iov, nparts + 1) != SW_OK) {
        set_error(w, SW_EIO, "writing the trace file");
        w->broken = 1;
        return SW_EIO;
    }
    w->chunks++;
    w->bytes += total;
    return SW_OK;
}

static int write_raw_locked(sw_writer *w, const void *p, size_t n)
{
    if (w->broken || w->fd < 0)
        return SW_EIO;
    struct iovec iov = {(void *)p, n};
    if (write_all(w->fd, &iov, 1) != SW_OK) {
        set_error(w, SW_EIO, "writing the trace file");
        w->broken = 1;
        return SW_EIO;
    }
    w->bytes += n;
    return SW_OK;
}

static void flush_defs_locked(sw_writer *w)
{
    if (w->code_defs.len) {
        struct iovec p = {w->code_defs.data, w->code_defs.len};
        write_chunk_locked(w, SW_CHUNK_CODE, &p, 1);
        w->code_defs.len = 0;
    }
    if (w->thread_defs.len) {
        struct iovec p = {w->thread_defs.data, w->thread_defs.len};
        write_chunk_locked(w, SW_CHUNK_THREAD, &p, 1);
        w->thread_defs.len = 0;
    }
    if (w->string_defs.len) {   /* (before the task definitions that name its entries) */
        struct iovec p = {w->string_defs.data, w->string_defs.len};
        write_chunk_locked(w, SW_CHUNK_STRINGS, &p, 1);
        w->string_defs.len = 0;
    }
    if (w->task_defs.len) {
        struct iovec p = {w->task_defs.data, w->task_defs.len};
        write_chunk_locked(w, SW_CHUNK_TASK_INTERNED, &p, 1);
        w->task_defs.len = 0;
    }
}

int sw_writer_open(sw_writer **out, const char *path, const sw_writer_opts *opts)
{
    *out = NULL;
    if (!path || !opts || opts->chunk_bytes < 4096 || opts->chunk_bytes > SW_CHUNK_MAX / 2 ||
        opts->time_shift > 20)
        return SW_EARG;
    sw_writer *w = calloc(1, sizeof *w);
    if (!w)
        return SW_ENOMEM;
    w->opts = *opts;
    if (pthread_mutex_init(&w->lock, NULL) != 0) {
        free(w);
        return SW_ENOMEM;
    }
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int e = errno;
        pthread_mutex_destroy(&w->lock);
        free(w);
        errno = e;
        return SW_EIO;
    }
    uint8_t hdr[SW_FILE_HEADER_LEN];
    sw_file_header_put(hdr, SW_MAGIC, SW_FORMAT_MAJOR, SW_FORMAT_MINOR);
    if (write_raw_locked(w, hdr, sizeof hdr) != SW_OK) {
        int e = errno;
        close(w->fd);
        pthread_mutex_destroy(&w->lock);
        free(w);
        errno = e;
        return SW_EIO;
    }
    *out = w;
    return SW_OK;
}

int sw_writer_meta(sw_writer *w, const sw_bytes *kv)
{
    if (kv->failed)
        return SW_ENOMEM;
    pthread_mutex_lock(&w->lock);
    struct iovec p = {kv->data, kv->len};
    int rc = write_chunk_locked(w, SW_CHUNK_META, &p, 1);
    if (rc == SW_OK) {
        /* Kept for the copy before END: a reader whose META chunk is
         * damaged finds the time base there. */
        uint8_t hdr[SW_CHUNK_HEADER_LEN];
        sw_chunk_header_put(hdr, SW_CHUNK_META, &p, 1);
        size_t mark = w->meta_chunks.len;
        sw_bytes_put(&w->meta_chunks, hdr, sizeof hdr);
        sw_bytes_put(&w->meta_chunks, kv->data, kv->len);
        if (w->meta_chunks.failed) {
            w->meta_chunks.len = mark;   /* no copy: the file is still right */
            w->meta_chunks.failed = 0;
        } else {
            w->nmeta++;
        }
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

int sw_writer_define_code(sw_writer *w, uint32_t id, int kind, const char *name,
                          const char *qualname, const char *filename, uint32_t firstlineno)
{
    pthread_mutex_lock(&w->lock);
    sw_bytes *b = &w->code_defs;
    size_t mark = b->len;
    sw_bytes_varint(b, id);
    sw_bytes_u8(b, (uint8_t)kind);
    sw_bytes_str(b, name);
    sw_bytes_str(b, qualname);
    sw_bytes_str(b, filename);
    sw_bytes_varint(b, firstlineno);
    int rc = SW_OK;
    if (b->failed) {
        b->len = mark;
        b->failed = 0;
        set_error(w, SW_ENOMEM, "queueing a code definition");
        rc = SW_ENOMEM;
    } else {
        w->ncodes++;
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

static int queue_thread_locked(sw_writer *w, uint32_t index, uint64_t tid, uint64_t ident,
                               const char *name)
{
    sw_bytes *b = &w->thread_defs;
    size_t mark = b->len;
    sw_bytes_varint(b, index);
    sw_bytes_varint(b, tid);
    sw_bytes_varint(b, ident);
    sw_bytes_str(b, name);
    if (b->failed) {
        b->len = mark;
        b->failed = 0;
        set_error(w, SW_ENOMEM, "queueing a thread definition");
        return SW_ENOMEM;
    }
    return SW_OK;
}

static void set_limit(sw_tbuf *b);

sw_tbuf *sw_writer_add_thread(sw_writer *w, uint64_t native_tid, uint64_t ident,
                              const char *name, uint64_t now_ticks)
{
    sw_tbuf *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->cap = w->opts.chunk_bytes;
    b->data = malloc(b->cap);
    b->stack_cap = b->start_cap = 64;
    b->stack = malloc(b->stack_cap * sizeof *b->stack);
    b->start_stack = malloc(b->start_cap * sizeof *b->start_stack);
    if (!b->data || !b->stack || !b->start_stack) {
        free(b->data);
        free(b->stack);
        free(b->start_stack);
        free(b);
        return NULL;
    }
    b->pos = b->data;
    b->limit = b->data + b->cap - SW_EVENT_MAX;
    b->shift = w->opts.time_shift;
    b->last = b->start_last = now_ticks >> b->shift;
    b->w = w;
    pthread_mutex_lock(&w->lock);
    b->index = w->nthreads++;
    b->next = w->threads;
    w->threads = b;
    queue_thread_locked(w, b->index, native_tid, ident, name);
    pthread_mutex_unlock(&w->lock);
    set_limit(b);
    return b;
}

int sw_writer_define_task(sw_writer *w, uint64_t task, uint32_t thread, const char *name)
{
    uint64_t sid;   /* (format 1.18: the name interned, as TASK_CREATE's) */
    int rc = sw_writer_intern(w, name ? name : "", name ? strlen(name) : 0, &sid);
    if (rc != SW_OK)
        return rc;
    pthread_mutex_lock(&w->lock);
    sw_bytes *b = &w->task_defs;
    size_t mark = b->len;
    sw_bytes_varint(b, task);
    sw_bytes_varint(b, thread);
    sw_bytes_varint(b, sid);
    if (b->failed) {
        b->len = mark;
        b->failed = 0;
        set_error(w, SW_ENOMEM, "queueing a task definition");
        rc = SW_ENOMEM;
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

int sw_writer_intern(sw_writer *w, const char *s, size_t len, uint64_t *id)
{
    uint64_t h = sw_hash_bytes(s, len, 0);
    pthread_mutex_lock(&w->lock);
    uint32_t pos, i;
    for (i = sw_hashtab_first(&w->strings_ix, h, &pos); i != SW_HT_NONE; i = sw_hashtab_next(&w->strings_ix, h, &pos))
        if (w->string_at[i + 1] - w->string_at[i] == len && memcmp(w->string_bytes.data + w->string_at[i], s, len) == 0)
            break;
    int rc = SW_OK;
    if (i == SW_HT_NONE) {   /* new: kept, and its entry queued */
        i = w->nstrings;
        size_t *at = sw_array_grow(w->string_at, &w->string_at_cap, (size_t)i + 2, sizeof *at, 64);
        sw_bytes *d = &w->string_defs;
        size_t mark = d->len, bytes_mark = w->string_bytes.len;
        if (at) {
            w->string_at = at;
            at[0] = 0;
            sw_bytes_put(&w->string_bytes, s, len);
            sw_bytes_varint(d, i);
            sw_bytes_varint(d, len);
            sw_bytes_put(d, s, len);
        }
        if (!at || d->failed || w->string_bytes.failed || sw_hashtab_add(&w->strings_ix, h, i) != 0) {
            d->len = mark;
            d->failed = 0;
            w->string_bytes.len = bytes_mark;
            w->string_bytes.failed = 0;
            set_error(w, SW_ENOMEM, "interning a string");
            rc = SW_ENOMEM;
        } else {
            at[i + 1] = w->string_bytes.len;
            w->nstrings++;
        }
    }
    pthread_mutex_unlock(&w->lock);
    *id = i;
    return rc;
}

int sw_writer_intern_fn(void *w, const char *s, size_t len, uint64_t *id)
{
    return sw_writer_intern(w, s, len, id);
}

int sw_writer_thread_name(sw_writer *w, uint32_t index, const char *name)
{
    pthread_mutex_lock(&w->lock);
    /* Native tid and ident 0 mean "unchanged" to readers. */
    int rc = queue_thread_locked(w, index, 0, 0, name);
    pthread_mutex_unlock(&w->lock);
    return rc;
}

static void note_error(sw_tbuf *b, int code, const char *what)
{
    pthread_mutex_lock(&b->w->lock);
    set_error(b->w, code, what);
    pthread_mutex_unlock(&b->w->lock);
}

/* Grows an array of code ids to hold at least `need`. */
static int grow_ids(uint32_t **ids, uint32_t *cap, uint32_t need)
{
    if (need <= *cap)
        return SW_OK;
    uint32_t n = *cap ? *cap : 64;
    while (n < need) {
        if (n > UINT32_MAX / 2)
            return SW_ENOMEM;
        n *= 2;
    }
    uint32_t *p = realloc(*ids, (size_t)n * sizeof *p);
    if (!p)
        return SW_ENOMEM;
    *ids = p;
    *cap = n;
    return SW_OK;
}

/* Encodes the header of the current chunk's EVENTS payload (format.h) into
 * b->enc: the state when the chunk started, then the event count. The
 * events themselves are already encoded in b->data. */
static int encode_header(sw_tbuf *b)
{
    sw_bytes *o = &b->enc;
    o->len = 0;
    sw_bytes_varint(o, b->index);
    sw_bytes_varint(o, b->seq);
    sw_bytes_varint(o, b->start_last);
    sw_bytes_varint(o, b->dropped_pending);
    sw_bytes_varint(o, b->start_depth);
    for (uint32_t i = 0; i < b->start_depth; i++)
        sw_bytes_varint(o, b->start_stack[i]);
    sw_bytes_varint(o, b->nev);
    return o->failed ? SW_ENOMEM : SW_OK;
}

/* The open frames of a task the thread does not run now (format 1.7). */
typedef struct sw_task_frames {
    uint64_t task;
    uint32_t *ids;           /* outermost first */
    uint32_t depth, cap;
} sw_task_frames;

/* The TASK_FRAMES payload (format 1.7) of a chunk starting now, when the
 * thread runs a task or other tasks have open frames: so that the chunk
 * read alone knows every task's. */
static int encode_task_frames(sw_tbuf *b)
{
    sw_bytes *o = &b->start_tasks;
    o->len = 0;
    if (!b->task && !b->ntasks)
        return SW_OK;
    sw_bytes_varint(o, b->index);
    sw_bytes_varint(o, b->seq);
    sw_bytes_varint(o, b->task);
    sw_bytes_varint(o, b->ntasks);
    for (uint32_t i = 0; i < b->ntasks; i++) {
        const sw_task_frames *k = &b->tasks[i];
        sw_bytes_varint(o, k->task);
        sw_bytes_varint(o, k->depth);
        for (uint32_t d = 0; d < k->depth; d++)
            sw_bytes_varint(o, k->ids[d]);
    }
    return o->failed ? SW_ENOMEM : SW_OK;
}

/* The bytes of a TASK_FRAMES chunk written before the current chunk
 * (0: none). */
static size_t task_frames_len(const sw_tbuf *b)
{
    size_t n = b->start_tasks.len;
    return n && n <= SW_CHUNK_MAX ? SW_CHUNK_HEADER_LEN + n : 0;
}

/* Where the current chunk's events end (sw_tbuf.limit). In ring mode the
 * chunk as kept (its TASK_FRAMES chunk, its header and prefix, its events)
 * fits chunk_bytes, so that the ring's chunks hold the bytes --ring says;
 * a prefix that takes more than half of it (thousands of open frames)
 * leaves the events half. */
static void set_limit(sw_tbuf *b)
{
    size_t room = b->cap;
    if (b->w->opts.ring_bytes && encode_header(b) == SW_OK) {
        /* The prefix as it is now, the event count and dropped count at
         * their longest. */
        size_t prefix = task_frames_len(b) + SW_CHUNK_HEADER_LEN + b->enc.len + 2 * SW_VARINT_MAX;
        room = prefix < b->cap / 2 ? b->cap - prefix : b->cap / 2;
    }
    b->limit = b->data + room - SW_EVENT_MAX;
}

/* The next chunk starts where this one ends: its t_start and open frames. */
static int start_next_chunk(sw_tbuf *b)
{
    b->pos = b->data;
    b->nev = 0;
    b->start_last = b->last;
    if (grow_ids(&b->start_stack, &b->start_cap, b->depth) != SW_OK)
        return SW_ENOMEM;
    memcpy(b->start_stack, b->stack, (size_t)b->depth * sizeof *b->stack);
    b->start_depth = b->depth;
    int rc = encode_task_frames(b);
    set_limit(b);
    return rc;
}

/* Out of memory, or the frame stack out of step: the open frames can no
 * longer be followed, so the thread stops recording; what it records from
 * now on is counted as dropped. */
static void break_thread(sw_tbuf *b, int code, uint64_t lost, const char *what)
{
    note_error(b, code, what);
    b->dropped += lost;
    b->broken = 1;
    b->nev = 0;
    b->pos = b->limit + 1;
}

/* One sealed chunk kept in the ring: its bytes as written (a TASK_FRAMES
 * chunk, then EVENTS), their length and the events in it. */
typedef struct sw_ring_chunk {
    uint8_t *bytes;
    size_t len;
    uint32_t events;
} sw_ring_chunk;

/* Keeps a sealed chunk, discarding (counted) the oldest ones until the
 * ring holds at most ring_bytes; one larger than that alone is discarded. */
static void ring_push(sw_tbuf *b, uint8_t *chunk, size_t len, uint32_t events)
{
    size_t max = b->w->opts.ring_bytes;
    while (b->ring_count && b->ring_kept + len > max) {
        sw_ring_chunk *old = &b->ring[b->ring_head];
        b->dropped += old->events;
        b->ring_kept -= old->len;
        free(old->bytes);
        old->bytes = NULL;
        b->ring_head = (b->ring_head + 1) % b->ring_slots;
        b->ring_count--;
    }
    if (len > max) {
        b->dropped += events;
        free(chunk);
        return;
    }
    if (b->ring_count == b->ring_slots) {
        /* Grow, the oldest first again. */
        size_t slots = b->ring_slots ? 2 * b->ring_slots : 8;
        sw_ring_chunk *r = calloc(slots, sizeof *r);
        if (!r) {
            note_error(b, SW_ENOMEM, "keeping a chunk in the ring");
            b->dropped += events;
            free(chunk);
            return;
        }
        for (size_t k = 0; k < b->ring_count; k++)
            r[k] = b->ring[(b->ring_head + k) % b->ring_slots];
        free(b->ring);
        b->ring = r;
        b->ring_slots = slots;
        b->ring_head = 0;
    }
    b->ring[(b->ring_head + b->ring_count) % b->ring_slots] = (sw_ring_chunk){chunk, len, events};
    b->ring_count++;
    b->ring_kept += len;
}

void sw_tbuf_flush(sw_tbuf *b)
{
    sw_writer *w = b->w;
    if (b->broken || (b->nev == 0 && b->dropped_pending == 0))
        return;
    uint32_t n = b->nev;
    if (encode_header(b) != SW_OK) {
        break_thread(b, SW_ENOMEM, n, "encoding a chunk");
        return;
    }
    struct iovec parts[2] = {{b->enc.data, b->enc.len}, {b->data, (size_t)(b->pos - b->data)}};
    /* Format 1.7: the tasks' open frames when it started, just before it. */
    struct iovec tf = {b->start_tasks.data, b->start_tasks.len};
    size_t tf_len = task_frames_len(b);
    if (w->opts.ring_bytes) {
        size_t len = tf_len + SW_CHUNK_HEADER_LEN + parts[0].iov_len + parts[1].iov_len;
        uint8_t *chunk = malloc(len);
        if (!chunk) {
            note_error(b, SW_ENOMEM, "keeping a chunk in the ring");
            b->dropped += n;
        } else {
            if (tf_len) {
                sw_chunk_header_put(chunk, SW_CHUNK_TASK_FRAMES, &tf, 1);
                memcpy(chunk + SW_CHUNK_HEADER_LEN, tf.iov_base, tf.iov_len);
            }
            uint8_t *ev = chunk + tf_len;
            sw_chunk_header_put(ev, SW_CHUNK_EVENTS, parts, 2);   /* chunk_bytes < SW_CHUNK_MAX / 2 */
            memcpy(ev + SW_CHUNK_HEADER_LEN, parts[0].iov_base, parts[0].iov_len);
            memcpy(ev + SW_CHUNK_HEADER_LEN + parts[0].iov_len, parts[1].iov_base, parts[1].iov_len);
            ring_push(b, chunk, len, n);
        }
    } else {
        pthread_mutex_lock(&w->lock);
        flush_defs_locked(w);
        if (tf_len)
            write_chunk_locked(w, SW_CHUNK_TASK_FRAMES, &tf, 1);
        if (write_chunk_locked(w, SW_CHUNK_EVENTS, parts, 2) != SW_OK)
            b->dropped += n;
        pthread_mutex_unlock(&w->lock);
    }
    b->events += n;
    b->dropped_pending = 0;
    b->cpu = 0;   /* each chunk says its CPU again (a reader may lack the one before) */
    b->seq++;
    if (start_next_chunk(b) != SW_OK)
        break_thread(b, SW_ENOMEM, 0, "starting a chunk");
}

void sw_writer_flush_quiet(sw_writer *w)
{
    if (w->closed)
        return;
    for (sw_tbuf *b = w->threads; b; b = b->next) {
        if (!b->finished && b->seq == b->seq_seen && b->nev > 0 && !b->broken)
            sw_tbuf_flush(b);
        b->seq_seen = b->seq;
    }
}

static void write_ring_locked(sw_writer *w, sw_tbuf *b);

void sw_writer_flush_all(sw_writer *w)
{
    if (w->closed)
        return;
    for (sw_tbuf *b = w->threads; b; b = b->next) {
        if (!b->finished)
            sw_tbuf_flush(b);
        b->seq_seen = b->seq;
    }
    pthread_mutex_lock(&w->lock);
    flush_defs_locked(w);
    if (w->opts.ring_bytes)
        for (sw_tbuf *b = w->threads; b; b = b->next)
            write_ring_locked(w, b);
    pthread_mutex_unlock(&w->lock);
}

void sw_tbuf_finish(sw_tbuf *b)
{
    if (b->finished)
        return;
    sw_tbuf_flush(b);
    b->finished = 1;
}

void sw_tbuf_ext(sw_tbuf *b, uint64_t ticks, unsigned kind, const uint8_t *payload, size_t len)
{
    if (len > SW_EXT_MAX) {
        b->dropped_pending++;
        b->dropped++;
        return;
    }
    /* It fits when the event after it still would: the chunk's events end
     * SW_EVENT_MAX past its limit. */
    size_t need = 3 * SW_VARINT_MAX + len;
    if (b->pos > b->limit || (size_t)(b->limit - b->pos) < need) {
        sw_tbuf_flush(b);   /* the chunk is not full, but this does not fit */
        if (!sw_tbuf_make_room(b))
            return;
        if (b->pos > b->limit || (size_t)(b->limit - b->pos) < need) {
            b->dropped++;
            return;
        }
    }
    uint8_t *p = sw_put_varint_fast(b->pos, (sw_tbuf_delta(b, ticks) << SW_OP_BITS) | SW_OP_EXT);
    p = sw_put_varint_fast(sw_put_varint_fast(p, kind), len);
    if (len)   /* a kind without payload may pass NULL */
        memcpy(p, payload, len);
    b->pos = p + len;
    b->nev++;
}

void sw_tbuf_cpu_moved(sw_tbuf *b, uint64_t ticks, uint32_t cpu)
{
    uint8_t payload[SW_VARINT_MAX];
    size_t n = (size_t)(sw_put_varint_fast(payload, cpu) - payload);
    uint64_t seq = b->seq;
    uint32_t nev = b->nev;
    sw_tbuf_ext(b, ticks, SW_EXT_CPU, payload, n);
    /* Written (when that sealed the chunk, as the new chunk's first
     * record)? Else the next event tries again. */
    if (b->seq != seq ? b->nev > 0 : b->nev > nev)
        b->cpu = cpu + 1;
}

int sw_tbuf_make_room(sw_tbuf *b)
{
    if (SW_UNLIKELY(b->depth > b->stack_cap) && !b->broken) {
        /* More exits than starts (see sw_tbuf_put_exit_paired): the
         * open-frame stack is out of step with the events. */
        break_thread(b, SW_ESTATE, 0, "the frame stack went out of step (more returns than calls)");
    }
    if (b->pos > b->limit)
        sw_tbuf_flush(b);
    if (!b->broken && b->depth >= b->stack_cap &&
        grow_ids(&b->stack, &b->stack_cap, b->depth + 1) != SW_OK)
        break_thread(b, SW_ENOMEM, 0, "growing the frame stack");
    if (b->broken) {
        b->dropped++;
        return 0;
    }
    return 1;
}

void sw_tbuf_task_switch(sw_tbuf *b, uint64_t ticks, uint64_t origin, uint64_t target)
{
    if (b->broken || b->finished)
        return;
    sw_ext v = {.a = origin, .b = target};
    uint8_t buf[2 * SW_VARINT_MAX];
    long n = sw_record_encode(SW_EXT_TASK_SWITCH, &v, 0, buf, sizeof buf);
    if (n < 0)
        return;
    /* First the record (it may seal the chunk: the next one's prefix is
     * then the frames open before the switch, as the record says). */
    sw_tbuf_ext(b, ticks, SW_EXT_TASK_SWITCH, buf, (size_t)n);
    if (b->broken)
        return;
    /* The frames open now are origin's, whatever the thread ran before. */
    b->task = origin;
    if (origin == target)
        return;
    /* Keep them, unless there are none. */
    if (b->depth) {
        if (b->ntasks == b->tasks_cap) {
            uint32_t cap = b->tasks_cap ? b->tasks_cap * 2 : 8;
            sw_task_frames *g = realloc(b->tasks, (size_t)cap * sizeof *g);
            if (!g) {
                break_thread(b, SW_ENOMEM, 0, "keeping a task's frames");
                return;
            }
            b->tasks = g;
            b->tasks_cap = cap;
        }
        sw_task_frames *k = &b->tasks[b->ntasks];
        k->task = origin;
        k->ids = NULL;
        k->cap = 0;
        if (grow_ids(&k->ids, &k->cap, b->depth) != SW_OK) {
            break_thread(b, SW_ENOMEM, 0, "keeping a task's frames");
            return;
        }
        memcpy(k->ids, b->stack, (size_t)b->depth * sizeof *b->stack);
        k->depth = b->depth;
        b->ntasks++;
    }
    /* Target's frames, as it left them. */
    b->depth = 0;
    b->task = target;
    for (uint32_t i = 0; i < b->ntasks; i++) {
        sw_task_frames *k = &b->tasks[i];
        if (k->task != target)
            continue;
        if (grow_ids(&b->stack, &b->stack_cap, k->depth + 1) != SW_OK) {
            break_thread(b, SW_ENOMEM, 0, "growing the frame stack");
            return;
        }
        memcpy(b->stack, k->ids, (size_t)k->depth * sizeof *b->stack);
        b->depth = k->depth;
        free(k->ids);
        b->tasks[i] = b->tasks[--b->ntasks];
        break;
    }
}

static void write_ring_locked(sw_writer *w, sw_tbuf *b)
{
    for (size_t k = 0; k < b->ring_count; k++) {
        sw_ring_chunk *c = &b->ring[(b->ring_head + k) % b->ring_slots];
        if (write_raw_locked(w, c->bytes, c->len) == SW_OK)   /* a TASK_FRAMES chunk, then EVENTS */
            w->chunks += c->bytes[0] == SW_CHUNK_TASK_FRAMES ? 2 : 1;
        else
            b->dropped += c->events;
        free(c->bytes);
        c->bytes = NULL;
    }
    b->ring_count = 0;
    b->ring_kept = 0;
}

void sw_writer_totals_get(sw_writer *w, sw_writer_totals *t)
{
    memset(t, 0, sizeof *t);
    for (sw_tbuf *b = w->threads; b; b = b->next) {
        t->events += b->events + (b->broken ? 0 : b->nev);
        t->dropped += b->dropped;
        t->threads++;
    }
    t->chunks = w->chunks;
    t->bytes = w->bytes;
    t->codes = w->ncodes;
}

int sw_writer_close(sw_writer *w, const sw_bytes *end_kv)
{
    if (w->closed)
        return SW_ESTATE;
    sw_writer_flush_all(w);
    for (sw_tbuf *b = w->threads; b; b = b->next)
        b->finished = 1;
    sw_bytes kv = {0};
    sw_writer_totals t;
    sw_writer_totals_get(w, &t);
    pthread_mutex_lock(&w->lock);
    sw_kv_uint(&kv, "events", t.events);
    sw_kv_uint(&kv, "dropped", t.dropped);
    for (sw_tbuf *b = w->threads; b; b = b->next) {
        char key[48];
        if (b->dropped) {
            snprintf(key, sizeof key, "dropped.%u", b->index);
            sw_kv_uint(&kv, key, b->dropped);
        }
        if (b->seq) {   /* format 1.5: how many EVENTS chunks it sealed */
            snprintf(key, sizeof key, "chunks.%u", b->index);
            sw_kv_uint(&kv, key, b->seq);
        }
    }
    if (w->error)
        sw_kv_str(&kv, "error", w->errmsg);
    if (end_kv && !end_kv->failed)
        sw_bytes_put(&kv, end_kv->data, end_kv->len);
    /* Format 1.5: the META chunks again, then END. */
    if (w->meta_chunks.len && write_raw_locked(w, w->meta_chunks.data, w->meta_chunks.len) == SW_OK)
        w->chunks += w->nmeta;
    if (!kv.failed) {
        struct iovec p = {kv.data, kv.len};
        write_chunk_locked(w, SW_CHUNK_END, &p, 1);
    }
    sw_bytes_free(&kv);
    if (w->fd >= 0 && close(w->fd) != 0 && !w->broken)
        set_error(w, SW_EIO, "closing the trace file");
    w->fd = -1;
    w->closed = 1;
    int rc = w->error;
    pthread_mutex_unlock(&w->lock);
    return rc;
}

void sw_writer_abandon(sw_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    w->closed = 1;
}

void sw_writer_fork_prepare(sw_writer *w)
{
    pthread_mutex_lock(&w->lock);
}

void sw_writer_fork_release(sw_writer *w)
{
    pthread_mutex_unlock(&w->lock);
}

void sw_writer_free(sw_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    sw_tbuf *b = w->threads;
    while (b) {
        sw_tbuf *n = b->next;
        for (size_t k = 0; k < b->ring_slots; k++)
            free(b->ring[k].bytes);
        free(b->ring);
        free(b->data);
        free(b->stack);
        free(b->start_stack);
        for (uint32_t k = 0; k < b->ntasks; k++)
            free(b->tasks[k].ids);
        free(b->tasks);
        sw_bytes_free(&b->start_tasks);
        sw_bytes_free(&b->enc);
        free(b);
        b = n;
    }
    sw_bytes_free(&w->meta_chunks);
    sw_bytes_free(&w->code_defs);
    sw_bytes_free(&w->thread_defs);
    sw_bytes_free(&w->task_defs);
    sw_bytes_free(&w->string_defs);
    sw_bytes_free(&w->string_bytes);
    free(w->string_at);
    sw_hashtab_free(&w->strings_ix);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

int sw_writer_error(const sw_writer *w, char *msg, size_t msglen)
{
    if (msg && msglen)
        snprintf(msg, msglen, "%s", w->error ? w->errmsg : "");
    return w->error;
}

int sw_writer_chunk(sw_writer *w, int type, const void *payload, size_t len)
{
    if (len > SW_CHUNK_MAX)
        return SW_EARG;
    pthread_mutex_lock(&w->lock);
    struct iovec p = {(void *)payload, len};
    int rc = w->closed ? SW_ESTATE : write_chunk_locked(w, type, &p, 1);
    pthread_mutex_unlock(&w->lock);
    return rc;
}
