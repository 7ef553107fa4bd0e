/*
 * writer.c - trace file writer: chunk sealing, streaming, ring mode,
 * definitions and totals (see writer.h and docs/format.md).
 */
#define _GNU_SOURCE
#include "writer.h"

#include "crc32.h"

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
    sw_bytes code_defs;    /* queued CODE entries */
    sw_bytes thread_defs;  /* queued THREAD entries */
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

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Builds the 12-byte chunk header for a payload made of parts. */
static void chunk_header(uint8_t hdr[SW_CHUNK_HEADER_LEN], int type,
                         const struct iovec *parts, int nparts)
{
    uint32_t crc = 0;
    size_t len = 0;
    for (int i = 0; i < nparts; i++) {
        crc = sw_crc32(crc, parts[i].iov_base, parts[i].iov_len);
        len += parts[i].iov_len;
    }
    hdr[0] = (uint8_t)type;
    hdr[1] = hdr[2] = hdr[3] = 0;
    put_u32(hdr + 4, (uint32_t)len);
    put_u32(hdr + 8, crc);
}

/* Writes one chunk; the caller holds the lock. */
static int write_chunk_locked(sw_writer *w, int type, const struct iovec *parts, int nparts)
{
    if (w->broken || w->fd < 0)
        return SW_EIO;
    uint8_t hdr[SW_CHUNK_HEADER_LEN];
    chunk_header(hdr, type, parts, nparts);
    struct iovec iov[8];
    iov[0].iov_base = hdr;
    iov[0].iov_len = sizeof hdr;
    size_t total = sizeof hdr;
    for (int i = 0; i < nparts && i < 7; i++) {
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
    uint8_t hdr[SW_FILE_HEADER_LEN] = {0};
    memcpy(hdr, SW_MAGIC, SW_MAGIC_LEN);
    hdr[8] = SW_FORMAT_MAJOR;
    hdr[10] = SW_FORMAT_MINOR;
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

sw_tbuf *sw_writer_add_thread(sw_writer *w, uint64_t native_tid, uint64_t ident,
                              const char *name, uint64_t now_ticks)
{
    sw_tbuf *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    /* Whole raw records only; limit leaves room for one more. */
    b->cap = w->opts.chunk_bytes / SW_RAW_RECORD * SW_RAW_RECORD;
    b->data = malloc(b->cap);
    if (w->opts.ring_bytes) {
        b->ring_slots = w->opts.ring_bytes / w->opts.chunk_bytes;
        if (b->ring_slots < 2)
            b->ring_slots = 2;
        b->ring = calloc(b->ring_slots, sizeof *b->ring);
        b->ring_len = calloc(b->ring_slots, sizeof *b->ring_len);
        b->ring_events = calloc(b->ring_slots, sizeof *b->ring_events);
    }
    if (!b->data || (w->opts.ring_bytes && (!b->ring || !b->ring_len || !b->ring_events))) {
        free(b->data);
        free(b->ring);
        free(b->ring_len);
        free(b->ring_events);
        free(b);
        return NULL;
    }
    b->pos = b->data;
    b->limit = b->data + b->cap - SW_RAW_RECORD;
    b->shift = w->opts.time_shift;
    b->last = now_ticks >> b->shift;
    b->w = w;
    pthread_mutex_lock(&w->lock);
    b->index = w->nthreads++;
    b->next = w->threads;
    w->threads = b;
    queue_thread_locked(w, b->index, native_tid, ident, name);
    pthread_mutex_unlock(&w->lock);
    return b;
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

static SW_NOINLINE int grow_stack(sw_tbuf *b)
{
    uint32_t cap = b->stack_cap ? b->stack_cap * 2 : 256;
    uint32_t *s = cap > b->stack_cap ? realloc(b->stack, (size_t)cap * sizeof *s) : NULL;
    if (!s)
        return SW_ENOMEM;
    b->stack = s;
    b->stack_cap = cap;
    return SW_OK;
}

/* Ops that open a frame (CALL, RESUME, C_CALL), as a bit set. */
#define ENTER_OPS ((1u << SW_OP_CALL) | (1u << SW_OP_RESUME) | (1u << SW_OP_C_CALL))

/* Encodes the raw records of the current chunk into b->enc as an EVENTS
 * payload (format.h): header with the open frames at the chunk's start,
 * then the events with delta times. Returns the number of events, or -1 if
 * out of memory. */
static long encode_chunk(sw_tbuf *b)
{
    sw_bytes *o = &b->enc;
    size_t nrec = (size_t)(b->pos - b->data) / SW_RAW_RECORD - b->ext_slots;
    o->len = 0;
    sw_bytes_varint(o, b->index);
    sw_bytes_varint(o, b->seq);
    sw_bytes_varint(o, b->last);
    sw_bytes_varint(o, b->dropped_pending);
    sw_bytes_varint(o, b->sdepth);
    for (uint32_t i = 0; i < b->sdepth; i++)
        sw_bytes_varint(o, b->stack[i]);
    sw_bytes_varint(o, nrec);
    /* Every raw record (payload records of EXT events included) encodes
     * into at most two varints' worth of bytes. */
    if (o->failed || sw_bytes_reserve(o, (nrec + b->ext_slots) * (2 * SW_VARINT_MAX)) != SW_OK)
        return -1;
    uint8_t *out = o->data + o->len;
    uint64_t last = b->last;
    unsigned shift = b->shift;
    uint32_t *stack = b->stack;
    uint32_t sd = b->sdepth, cap = b->stack_cap;
    const uint8_t *end = b->pos;
    for (const uint8_t *r = b->data; r < end; r += SW_RAW_RECORD) {
        uint64_t ticks;
        uint32_t word;
        memcpy(&ticks, r, 8);
        memcpy(&word, r + 8, 4);
        uint64_t now = ticks >> shift;
        uint64_t d = now > last ? now - last : 0;
        last = now > last ? now : last;
        unsigned op = word & ((1u << SW_OP_BITS) - 1);
        uint64_t x = (d << SW_OP_BITS) | op;
        if ((ENTER_OPS >> op) & 1) {
            uint32_t code = word >> SW_OP_BITS;
            if (SW_LIKELY((x | code) < 0x80)) {
                out[0] = (uint8_t)x;  /* the common call: two one-byte varints */
                out[1] = (uint8_t)code;
                out += 2;
            } else {
                out = sw_put_varint_fast(out, x);
                out = sw_put_varint_fast(out, code);
            }
            if (SW_UNLIKELY(sd == cap)) {
                b->sdepth = sd;
                if (grow_stack(b) != SW_OK) {
                    b->last = last;
                    return -1;
                }
                stack = b->stack;
                cap = b->stack_cap;
            }
            stack[sd++] = code;
        } else if (op == SW_OP_EXT) {
            /* Raw: word = payload length << 3 | EXT, then the payload
             * (varint kind, varint len, bytes) in the following records. */
            uint32_t len = word >> SW_OP_BITS;
            out = sw_put_varint_fast(out, x);
            memcpy(out, r + SW_RAW_RECORD, len);
            out += len;
            r += (len + SW_RAW_RECORD - 1) / SW_RAW_RECORD * SW_RAW_RECORD;
        } else {
            out = sw_put_varint_fast(out, x);
            sd -= sd != 0;
        }
    }
    b->sdepth = sd;
    o->len = (size_t)(out - o->data);
    b->last = last;
    return (long)nrec;
}

static void ring_push(sw_tbuf *b, uint8_t *chunk, size_t len, uint32_t events)
{
    if (b->ring_count == b->ring_slots) {
        /* Discard the oldest chunk. */
        size_t i = b->ring_head;
        b->dropped += b->ring_events[i];
        free(b->ring[i]);
        b->ring_head = (i + 1) % b->ring_slots;
        b->ring_count--;
    }
    size_t slot = (b->ring_head + b->ring_count) % b->ring_slots;
    b->ring[slot] = chunk;
    b->ring_len[slot] = len;
    b->ring_events[slot] = events;
    b->ring_count++;
}

void sw_tbuf_flush(sw_tbuf *b)
{
    sw_writer *w = b->w;
    size_t nrec = (size_t)(b->pos - b->data) / SW_RAW_RECORD;
    if (b->broken || (nrec == 0 && b->dropped_pending == 0))
        return;
    long n = encode_chunk(b);
    b->pos = b->data;
    b->ext_slots = 0;
    if (n < 0) {
        /* Out of memory: the frame stack can no longer be followed, so the
         * thread stops recording; what it records is counted as dropped. */
        note_error(b, SW_ENOMEM, "encoding a chunk");
        b->dropped += nrec;
        b->broken = 1;
        b->pos = b->limit + 1;
        return;
    }
    if (w->opts.ring_bytes) {
        struct iovec part = {b->enc.data, b->enc.len};
        size_t len = SW_CHUNK_HEADER_LEN + b->enc.len;
        uint8_t *chunk = malloc(len);
        if (!chunk) {
            note_error(b, SW_ENOMEM, "keeping a chunk in the ring");
            b->dropped += (uint64_t)n;
        } else {
            chunk_header(chunk, SW_CHUNK_EVENTS, &part, 1);
            memcpy(chunk + SW_CHUNK_HEADER_LEN, b->enc.data, b->enc.len);
            ring_push(b, chunk, len, (uint32_t)n);
        }
    } else {
        pthread_mutex_lock(&w->lock);
        flush_defs_locked(w);
        struct iovec part = {b->enc.data, b->enc.len};
        if (write_chunk_locked(w, SW_CHUNK_EVENTS, &part, 1) != SW_OK)
            b->dropped += (uint64_t)n;
        pthread_mutex_unlock(&w->lock);
    }
    b->events += (uint64_t)n;
    b->dropped_pending = 0;
    b->seq++;
}

void sw_writer_flush_quiet(sw_writer *w)
{
    if (w->closed)
        return;
    for (sw_tbuf *b = w->threads; b; b = b->next) {
        if (!b->finished && b->seq == b->seq_seen && b->pos > b->data && !b->broken)
            sw_tbuf_flush(b);
        b->seq_seen = b->seq;
    }
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
    uint8_t head[2 * SW_VARINT_MAX];
    uint8_t *h = sw_put_varint_fast(sw_put_varint_fast(head, kind), len);
    size_t hl = (size_t)(h - head), total = hl + len;
    size_t slots = (total + SW_RAW_RECORD - 1) / SW_RAW_RECORD;
    if ((size_t)(b->data + b->cap - b->pos) < (slots + 2) * SW_RAW_RECORD) {
        if (!sw_tbuf_make_room(b))
            return;
        if ((size_t)(b->data + b->cap - b->pos) < (slots + 2) * SW_RAW_RECORD) {
            b->dropped++;
            return;
        }
    }
    sw_tbuf_record(b, ticks, ((uint32_t)total << SW_OP_BITS) | SW_OP_EXT);
    memcpy(b->pos, head, hl);
    memcpy(b->pos + hl, payload, len);
    b->pos += slots * SW_RAW_RECORD;
    b->ext_slots += (uint32_t)slots;
}

int sw_tbuf_make_room(sw_tbuf *b)
{
    sw_tbuf_flush(b);
    if (b->broken) {
        b->dropped++;
        return 0;
    }
    return 1;
}

static void write_ring_locked(sw_writer *w, sw_tbuf *b)
{
    for (size_t k = 0; k < b->ring_count; k++) {
        size_t i = (b->ring_head + k) % b->ring_slots;
        if (write_raw_locked(w, b->ring[i], b->ring_len[i]) == SW_OK)
            w->chunks++;
        else
            b->dropped += b->ring_events[i];
        free(b->ring[i]);
        b->ring[i] = NULL;
    }
    b->ring_count = 0;
}

void sw_writer_totals_get(sw_writer *w, sw_writer_totals *t)
{
    memset(t, 0, sizeof *t);
    for (sw_tbuf *b = w->threads; b; b = b->next) {
        t->events += b->events + (b->broken ? 0 : (uint64_t)(b->pos - b->data) / SW_RAW_RECORD - b->ext_slots);
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
    for (sw_tbuf *b = w->threads; b; b = b->next)
        sw_tbuf_finish(b);
    pthread_mutex_lock(&w->lock);
    flush_defs_locked(w);
    if (w->opts.ring_bytes)
        for (sw_tbuf *b = w->threads; b; b = b->next)
            write_ring_locked(w, b);
    sw_bytes kv = {0};
    sw_writer_totals t;
    pthread_mutex_unlock(&w->lock);
    sw_writer_totals_get(w, &t);
    pthread_mutex_lock(&w->lock);
    sw_kv_uint(&kv, "events", t.events);
    sw_kv_uint(&kv, "dropped", t.dropped);
    for (sw_tbuf *b = w->threads; b; b = b->next) {
        if (b->dropped) {
            char key[48];
            snprintf(key, sizeof key, "dropped.%u", b->index);
            sw_kv_uint(&kv, key, b->dropped);
        }
    }
    if (w->error)
        sw_kv_str(&kv, "error", w->errmsg);
    if (end_kv && !end_kv->failed)
        sw_bytes_put(&kv, end_kv->data, end_kv->len);
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
            free(b->ring ? b->ring[k] : NULL);
        free(b->ring);
        free(b->ring_len);
        free(b->ring_events);
        free(b->data);
        free(b->stack);
        sw_bytes_free(&b->enc);
        free(b);
        b = n;
    }
    sw_bytes_free(&w->code_defs);
    sw_bytes_free(&w->thread_defs);
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
