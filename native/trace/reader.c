/*
 * reader.c - bounded parsing of trace files (see reader.h, docs/format.md).
 * The chunks come from the container's iterator (base/container.h), which
 * skips and records damaged ranges; every read of a payload goes through a
 * bounded cursor (base/cursor.h), so nothing in the input can make the
 * reader read outside the payload it holds.
 *
 * A file is streamed: the load keeps the definitions and an index of the
 * EVENTS and SAMPLES chunks (offset, length, sequence number, start time),
 * and each replay or sample cursor reads the chunks it needs with pread(2)
 * into buffers of its own, so memory stays bounded by the largest chunk
 * (64 MiB), whatever the size of the file.
 */
#define _GNU_SOURCE
#include "reader.h"

#include "base/base.h"
#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct chunk_ref {
    uint64_t off;            /* payload offset in the source */
    uint32_t len;
    uint64_t seq;            /* EVENTS: the chunk's sequence number; SAMPLES: its sample count */
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
    chunk_ref *chunks;
    size_t nchunks, cap;
    uint64_t written;        /* EVENTS chunks the writer sealed (END, 1.5), 0: unknown */
    size_t owner;            /* a task (info.task != 0): its thread's position, or SIZE_MAX */
    chunk_ref *task_frames;  /* its TASK_FRAMES chunks (format 1.7); seq: the EVENTS chunk's */
    size_t ntask_frames, task_frames_cap;
} thread_rec;

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
    unsigned shift;
    uint64_t tick0;
    double ns_per_tick;
    int64_t end_ns;
    /* Samples (format 1.2). */
    sw_frame_info **frames;  /* indexed by frame id */
    uint32_t frame_limit;
    chunk_ref *samples;      /* SAMPLES chunks, in file order */
    size_t nsample_chunks, sample_cap;
    struct sample_key *skeys;   /* distinct (ident, tid) of samples, sorted */
    size_t nskeys;
    uint64_t nsamples, unattributed;
    int bad_frame_kind;      /* 1 + the kind of a SAMPLE_FRAMES entry of an unknown kind, 0: none */
    /* Records of threads written by another thread (format 1.8). */
    chunk_ref *trecs;        /* THREAD_RECORDS chunks, in file order */
    size_t ntrec_chunks, trec_cap;
    uint64_t ntrecs, trecs_unattributed;
};

/* A sampled thread: its ident and native tid, and its position in the
 * thread list (UINT32_MAX: none could be given). */
typedef struct sample_key {
    uint64_t ident, tid;
    uint32_t pos;
} sample_key;

/* Reads a str into a fresh NUL-terminated copy. */
static int get_str(sw_cursor *c, char **out, size_t *outlen)
{
    const char *s;
    size_t n;
    int rc = sw_cur_str(c, &s, &n);
    if (rc)
        return rc;
    if (!(*out = sw_dup_n(s, n)))
        return SW_ENOMEM;
    if (outlen)
        *outlen = n;
    return SW_OK;
}

/* Appends the entries of a META or END payload to the trace's list. */
static int parse_kv(sw_trace *t, sw_cursor *c)
{
    sw_kv kv;
    int rc;
    while ((rc = sw_kv_next(&c->p, c->end, &kv)) == 1) {
        sw_meta_entry e = {NULL, (int)kv.type, kv.u, kv.i, kv.f, NULL, kv.slen};
        char *key = sw_dup_n(kv.key, kv.key_len);
        char *str = kv.type == SW_VAL_BYTES ? sw_dup_n(kv.s, kv.slen) : NULL;
        sw_meta_entry *m = sw_array_grow(t->meta, &t->meta_cap, t->nmeta + 1, sizeof *m, 32);
        if (!key || (kv.type == SW_VAL_BYTES && !str) || !m) {
            free(key);
            free(str);
            return SW_ENOMEM;
        }
        e.key = key;
        e.s = str;
        t->meta = m;
        t->meta[t->nmeta++] = e;
    }
    return rc;
}

static thread_rec *thread_get(sw_trace *t, uint64_t index)
{
    for (size_t i = 0; i < t->nthreads; i++)
        if (t->threads[i].info.index == index && !t->threads[i].info.task)
            return &t->threads[i];
    if (index > UINT32_MAX)
        return NULL;
    thread_rec *grown = sw_array_grow(t->threads, &t->threads_cap, t->nthreads + 1, sizeof *grown, 8);
    if (!grown)
        return NULL;
    t->threads = grown;
    thread_rec *r = &t->threads[t->nthreads++];
    memset(r, 0, sizeof *r);
    r->info.index = (uint32_t)index;
    r->info.name = "";
    return r;
}

static int parse_threads(sw_trace *t, sw_cursor *c)
{
    while (c->p < c->end) {
        uint64_t index, tid, ident;
        char *name = NULL;
        int rc;
        if ((rc = sw_cur_varint(c, &index)) || (rc = sw_cur_varint(c, &tid)) || (rc = sw_cur_varint(c, &ident)) ||
            (rc = get_str(c, &name, NULL)))
            return rc;
        if (index > UINT32_MAX) {  /* not an index the writer can give */
            free(name);
            return SW_EFORMAT;
        }
        thread_rec *r = thread_get(t, index);
        if (!r) {
            free(name);
            return SW_ENOMEM;
        }
        if (tid)
            r->info.native_tid = tid;
        if (ident)
            r->info.ident = ident;
        if (name[0] || !r->name) {
            free(r->name);
            r->name = name;
            r->info.name = name;
        } else {
            free(name);
        }
    }
    return SW_OK;
}

/* TASK entries (format 1.7): varint task (above 0), varint thread index,
 * str name. A later entry of the same task renames it. */
static int parse_tasks(sw_trace *t, sw_cursor *c)
{
    while (c->p < c->end) {
        uint64_t task, thread;
        char *name = NULL;
        int rc;
        if ((rc = sw_cur_varint(c, &task)) || (rc = sw_cur_varint(c, &thread)) || (rc = get_str(c, &name, NULL)))
            return rc;
        if (!task || thread > UINT32_MAX) {
            free(name);
            return SW_EFORMAT;
        }
        thread_rec *r = NULL;
        for (size_t i = 0; i < t->nthreads && !r; i++)
            if (t->threads[i].info.task == task)
                r = &t->threads[i];
        if (!r) {
            thread_rec *grown = sw_array_grow(t->threads, &t->threads_cap, t->nthreads + 1, sizeof *grown, 8);
            if (!grown) {
                free(name);
                return SW_ENOMEM;
            }
            t->threads = grown;
            r = &t->threads[t->nthreads++];
            memset(r, 0, sizeof *r);
            r->info.index = UINT32_MAX - t->ntasks++;
            r->info.task = task;
        }
        r->info.thread = (uint32_t)thread;
        free(r->name);
        r->name = name;
        r->info.name = name;
    }
    return SW_OK;
}

static void free_code(sw_code_info *ci)
{
    if (!ci)
        return;
    free((char *)ci->name);
    free((char *)ci->qualname);
    free((char *)ci->filename);
    free(ci);
}

/* Makes room for slot `id` in a table of pointers (new slots NULL); returns
 * the (possibly moved) table, or NULL when out of memory (then unchanged). */
static void *grow_slots(void *slots, uint32_t *limit, uint64_t id, size_t slot)
{
    size_t cap = *limit;
    char *p = sw_array_grow(slots, &cap, (size_t)id + 1, slot, 64);
    if (p && cap > *limit) {
        memset(p + (size_t)*limit * slot, 0, (cap - *limit) * slot);
        *limit = (uint32_t)cap;
    }
    return p;
}

static int parse_codes(sw_trace *t, sw_cursor *c)
{
    while (c->p < c->end) {
        uint64_t id, line;
        uint8_t kind;
        char *name = NULL, *qual = NULL, *file = NULL;
        int rc;
        if ((rc = sw_cur_varint(c, &id)) || (rc = sw_cur_u8(c, &kind)) || (rc = get_str(c, &name, NULL)) ||
            (rc = get_str(c, &qual, NULL)) || (rc = get_str(c, &file, NULL)) ||
            (rc = sw_cur_varint(c, &line)))
            goto fail;
        /* Ids are dense from 0 and every entry takes at least 6 bytes, so a
         * file that defines id N is longer than 6 * N: this bounds the table
         * (and what analysis and exports allocate per id) by the input. */
        rc = SW_EFORMAT;
        if (id >= (1u << 28) || id > t->len / 6)
            goto fail;
        rc = SW_ENOMEM;
        sw_code_info **cs = grow_slots(t->codes, &t->code_limit, id, sizeof *cs);
        if (!cs)
            goto fail;
        t->codes = cs;
        sw_code_info *ci = calloc(1, sizeof *ci);
        if (!ci)
            goto fail;
        ci->id = (uint32_t)id;
        ci->kind = kind;
        ci->name = name;
        ci->qualname = qual;
        ci->filename = file;
        ci->firstlineno = line > UINT32_MAX ? UINT32_MAX : (uint32_t)line;
        free_code(t->codes[id]);
        t->codes[id] = ci;
        continue;
    fail:
        free(name);
        free(qual);
        free(file);
        return rc;
    }
    return SW_OK;
}

static void free_frame(sw_frame_info *fi)
{
    if (!fi)
        return;
    free((char *)fi->name);
    free((char *)fi->filename);
    free(fi);
}

static int parse_frames(sw_trace *t, sw_cursor *c)
{
    while (c->p < c->end) {
        uint64_t id, line;
        uint8_t kind;
        char *name = NULL, *file = NULL;
        int rc;
        if ((rc = sw_cur_varint(c, &id)) || (rc = sw_cur_u8(c, &kind)) || (rc = get_str(c, &name, NULL)) ||
            (rc = get_str(c, &file, NULL)) || (rc = sw_cur_varint(c, &line)))
            goto fail;
        rc = SW_EFORMAT;
        /* Kinds are not a newer minor's room: a frame of an unknown kind
         * could not be shown truthfully, so the chunk is refused. */
        if (kind != SW_FRAME_PYTHON && kind != SW_FRAME_NATIVE) {
            t->bad_frame_kind = 1 + kind;
            goto fail;
        }
        /* Dense ids, at least 5 bytes per entry: the table is bounded by
         * the input, as for code ids. */
        if (id >= (1u << 28) || id > t->len / 5)
            goto fail;
        rc = SW_ENOMEM;
        sw_frame_info **fs = grow_slots(t->frames, &t->frame_limit, id, sizeof *fs);
        if (!fs)
            goto fail;
        t->frames = fs;
        sw_frame_info *fi = calloc(1, sizeof *fi);
        if (!fi)
            goto fail;
        *fi = (sw_frame_info){(uint32_t)id, kind, name, file, line > UINT32_MAX ? UINT32_MAX : (uint32_t)line};
        free_frame(t->frames[id]);
        t->frames[id] = fi;
        continue;
    fail:
        free(name);
        free(file);
        return rc;
    }
    return SW_OK;
}

/* One sample's fields, read from [p, end) (its length-prefixed record). */
typedef struct sample_raw {
    uint64_t ident, tid, zt, weight, cpu1, state, flags, depth;
    const uint8_t *frames;   /* depth varints */
    const uint8_t *lines;    /* depth varints (format 1.3), or NULL */
} sample_raw;

static int parse_sample(sw_cursor *c, sample_raw *r)
{
    uint64_t len;
    if (sw_cur_varint(c, &len) || len > (uint64_t)(c->end - c->p))
        return SW_EFORMAT;
    sw_cursor s = {c->p, c->p + len};
    c->p += len;
    if (sw_cur_varint(&s, &r->ident) || sw_cur_varint(&s, &r->tid) || sw_cur_varint(&s, &r->zt) || sw_cur_varint(&s, &r->weight) ||
        sw_cur_varint(&s, &r->cpu1) || sw_cur_varint(&s, &r->state) || sw_cur_varint(&s, &r->flags) || sw_cur_varint(&s, &r->depth) ||
        r->depth > (uint64_t)(s.end - s.p))
        return SW_EFORMAT;
    r->frames = s.p;
    for (uint64_t k = 0; k < r->depth; k++) {
        uint64_t id;
        if (sw_cur_varint(&s, &id) || id > UINT32_MAX)
            return SW_EFORMAT;
    }
    /* Format 1.3: the lines being run, one per frame, when recorded. */
    r->lines = NULL;
    if (s.p < s.end) {
        uint64_t n;
        if (sw_cur_varint(&s, &n) || (n != r->depth && n != 0))
            return SW_EFORMAT;
        r->lines = n ? s.p : NULL;
        for (uint64_t k = 0; k < n; k++) {
            uint64_t line;
            if (sw_cur_varint(&s, &line))
                return SW_EFORMAT;
        }
    }
    return SW_OK;  /* bytes after the known fields: a newer minor's */
}

/* The payload of an indexed chunk, as a cursor: in the memory source, or
 * read into buf. */
static int chunk_payload(const sw_trace *t, const chunk_ref *ch, sw_bytes *buf, sw_cursor *c)
{
    const uint8_t *p;
    int rc = sw_source_read(&t->src, ch->off, ch->len, buf, &p);
    if (rc == SW_OK)
        *c = sw_cursor_of(p, ch->len);
    return rc;
}

/* Checks a whole SAMPLES chunk (its payload at p, at offset off) before it
 * is indexed, so that iterating samples later cannot fail. */
static int add_samples_chunk(sw_trace *t, const uint8_t *p, uint64_t off, uint32_t len)
{
    sw_cursor c = sw_cursor_of(p, len);
    uint64_t n;
    if (sw_cur_varint(&c, &n) || n > len)
        return SW_EFORMAT;
    for (uint64_t k = 0; k < n; k++) {
        sample_raw r;
        if (parse_sample(&c, &r))
            return SW_EFORMAT;
    }
    if (c.p != c.end)
        return SW_EFORMAT;
    chunk_ref *cs = sw_array_grow(t->samples, &t->sample_cap, t->nsample_chunks + 1, sizeof *cs, 16);
    if (!cs)
        return SW_ENOMEM;
    t->samples = cs;
    t->samples[t->nsample_chunks++] = (chunk_ref){off, len, n, 0};
    return SW_OK;
}

/* One record of a THREAD_RECORDS chunk (format 1.8), its payload not
 * decoded. */
typedef struct trec_raw {
    uint64_t tid, zt, kind, len;
    const uint8_t *payload;
} trec_raw;

static int parse_trec(sw_cursor *c, trec_raw *r)
{
    if (sw_cur_varint(c, &r->tid) || sw_cur_varint(c, &r->zt) || sw_cur_varint(c, &r->kind) ||
        sw_cur_varint(c, &r->len) || r->len > (uint64_t)(c->end - c->p))
        return SW_EFORMAT;
    r->payload = c->p;
    c->p += r->len;
    return SW_OK;
}

/* Checks a whole THREAD_RECORDS chunk before it is indexed, so that
 * iterating its records later cannot fail. */
static int add_trecs_chunk(sw_trace *t, const uint8_t *p, uint64_t off, uint32_t len)
{
    sw_cursor c = sw_cursor_of(p, len);
    uint64_t n;
    if (sw_cur_varint(&c, &n) || n > len)
        return SW_EFORMAT;
    for (uint64_t k = 0; k < n; k++) {
        trec_raw r;
        if (parse_trec(&c, &r))
            return SW_EFORMAT;
    }
    if (c.p != c.end)
        return SW_EFORMAT;
    chunk_ref *cs = sw_array_grow(t->trecs, &t->trec_cap, t->ntrec_chunks + 1, sizeof *cs, 16);
    if (!cs)
        return SW_ENOMEM;
    t->trecs = cs;
    t->trecs[t->ntrec_chunks++] = (chunk_ref){off, len, n, 0};
    return SW_OK;
}

/* The position of the thread whose native tid is tid, or SIZE_MAX. */
static size_t thread_of_tid(const sw_trace *t, uint64_t tid)
{
    for (size_t j = 0; tid && j < t->nthreads; j++)
        if (t->threads[j].info.native_tid == tid)
            return j;
    return SIZE_MAX;
}

static int count_trecs(sw_trace *t);

static int cmp_key(const void *a, const void *b)
{
    const sample_key *x = a, *y = b;
    if (x->ident != y->ident)
        return x->ident < y->ident ? -1 : 1;
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static const sample_key *find_key(const sw_trace *t, uint64_t ident, uint64_t tid)
{
    sample_key k = {ident, tid, 0};
    return t->nskeys ? bsearch(&k, t->skeys, t->nskeys, sizeof k, cmp_key) : NULL;
}

#define MAX_SAMPLED_THREADS 4096

/* After loading: gives every sampled (ident, tid) a thread position,
 * adding threads the trace has no events of, and counts samples per
 * thread. */
static int map_sampled_threads(sw_trace *t)
{
    sample_key *keys = NULL;
    size_t n = 0, cap = 0;
    uint64_t last_i = 0, last_t = 0;
    int have_last = 0, rc;
    sw_bytes buf = {0};
    for (size_t i = 0; i < t->nsample_chunks; i++) {
        sw_cursor c;
        if ((rc = chunk_payload(t, &t->samples[i], &buf, &c))) {
            free(keys);
            sw_bytes_free(&buf);
            return rc;
        }
        uint64_t cnt = 0;   /* checked at load */
        sw_cur_varint(&c, &cnt);
        for (uint64_t k = 0; k < cnt; k++) {
            sample_raw r;
            parse_sample(&c, &r);
            if (have_last && r.ident == last_i && r.tid == last_t)
                continue;
            have_last = 1;
            last_i = r.ident;
            last_t = r.tid;
            sample_key *g = sw_array_grow(keys, &cap, n + 1, sizeof *g, 64);
            if (!g) {
                free(keys);
                sw_bytes_free(&buf);
                return SW_ENOMEM;
            }
            keys = g;
            keys[n++] = (sample_key){r.ident, r.tid, UINT32_MAX};
        }
    }
    if (n > 1)
        qsort(keys, n, sizeof *keys, cmp_key);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || cmp_key(&keys[u - 1], &keys[i]) != 0)
            keys[u++] = keys[i];
    uint32_t next_index = 0;
    for (size_t i = 0; i < t->nthreads; i++)
        if (!t->threads[i].info.task && t->threads[i].info.index >= next_index)
            next_index = t->threads[i].info.index + 1;
    size_t added = 0;
    for (size_t i = 0; i < u && i < MAX_SAMPLED_THREADS; i++) {
        sample_key *k = &keys[i];
        size_t pos = SIZE_MAX;
        for (size_t j = 0; j < t->nthreads && pos == SIZE_MAX; j++)
            if (k->ident && t->threads[j].info.ident == k->ident)
                pos = j;
        for (size_t j = 0; j < t->nthreads && pos == SIZE_MAX; j++)
            if (k->tid && t->threads[j].info.native_tid == k->tid)
                pos = j;
        if (pos == SIZE_MAX && next_index < UINT32_MAX && added < MAX_SAMPLED_THREADS) {
            thread_rec *r = thread_get(t, next_index++);
            if (!r) {
                free(keys);
                sw_bytes_free(&buf);
                return SW_ENOMEM;
            }
            r->info.ident = k->ident;
            r->info.native_tid = k->tid;
            pos = (size_t)(r - t->threads);
            added++;
        }
        k->pos = pos == SIZE_MAX ? UINT32_MAX : (uint32_t)pos;
    }
    t->skeys = keys;
    t->nskeys = u;
    for (size_t i = 0; i < t->nsample_chunks; i++) {
        sw_cursor c;
        if ((rc = chunk_payload(t, &t->samples[i], &buf, &c))) {
            sw_bytes_free(&buf);
            return rc;
        }
        uint64_t cnt = 0;   /* checked at load */
        sw_cur_varint(&c, &cnt);
        for (uint64_t k = 0; k < cnt; k++) {
            sample_raw r;
            parse_sample(&c, &r);
            const sample_key *key = find_key(t, r.ident, r.tid);
            if (key && key->pos != UINT32_MAX) {
                t->threads[key->pos].info.samples++;
                t->nsamples++;
            } else {
                t->unattributed++;
            }
        }
    }
    sw_bytes_free(&buf);
    return SW_OK;
}

/* The fixed part of an EVENTS payload. */
typedef struct events_head {
    uint64_t index, seq, t0, dropped, depth;
    const uint8_t *prefix;   /* depth varints */
    uint64_t n;
    const uint8_t *body;
} events_head;

static int parse_events_head(sw_cursor *c, events_head *h)
{
    int rc;
    if ((rc = sw_cur_varint(c, &h->index)) || (rc = sw_cur_varint(c, &h->seq)) || (rc = sw_cur_varint(c, &h->t0)) ||
        (rc = sw_cur_varint(c, &h->dropped)) || (rc = sw_cur_varint(c, &h->depth)))
        return rc;
    if (h->depth > (uint64_t)(c->end - c->p))
        return SW_ETRUNC;
    h->prefix = c->p;
    for (uint64_t k = 0; k < h->depth; k++) {
        uint64_t id;
        if ((rc = sw_cur_varint(c, &id)))
            return rc;
    }
    if ((rc = sw_cur_varint(c, &h->n)))
        return rc;
    h->body = c->p;
    return SW_OK;
}

/* A TASK_FRAMES chunk (format 1.7): indexed by its thread and the
 * sequence number of the EVENTS chunk it belongs to; read by a replay
 * that starts at that chunk. */
static int add_task_frames_chunk(sw_trace *t, sw_cursor *c, uint64_t off, uint32_t len)
{
    uint64_t index, seq;
    int rc;
    if ((rc = sw_cur_varint(c, &index)) || (rc = sw_cur_varint(c, &seq)))
        return rc;
    if (index > UINT32_MAX)
        return SW_EFORMAT;
    thread_rec *r = thread_get(t, index);
    if (!r)
        return SW_ENOMEM;
    chunk_ref *g = sw_array_grow(r->task_frames, &r->task_frames_cap, r->ntask_frames + 1, sizeof *g, 8);
    if (!g)
        return SW_ENOMEM;
    r->task_frames = g;
    r->task_frames[r->ntask_frames++] = (chunk_ref){off, len, seq, 0};
    return SW_OK;
}

static int add_events_chunk(sw_trace *t, const uint8_t *p, uint64_t off, uint32_t len)
{
    sw_cursor c = sw_cursor_of(p, len);
    events_head h;
    int rc = parse_events_head(&c, &h);
    if (rc)
        return rc;
    if (h.index > UINT32_MAX)  /* not an index the writer can give */
        return SW_EFORMAT;
    thread_rec *r = thread_get(t, h.index);
    if (!r)
        return SW_ENOMEM;
    chunk_ref *cs = sw_array_grow(r->chunks, &r->cap, r->nchunks + 1, sizeof *cs, 16);
    if (!cs)
        return SW_ENOMEM;
    r->chunks = cs;
    r->chunks[r->nchunks++] = (chunk_ref){off, len, h.seq, h.t0};
    r->info.chunks++;
    r->info.events += h.n;
    r->info.dropped += h.dropped;
    return SW_OK;
}

static const char *chunk_name(unsigned type)
{
    switch (type) {
    case SW_CHUNK_META: return "META";
    case SW_CHUNK_CODE: return "CODE";
    case SW_CHUNK_THREAD: return "THREAD";
    case SW_CHUNK_EVENTS: return "EVENTS";
    case SW_CHUNK_END: return "END";
    case SW_CHUNK_SAMPLE_FRAMES: return "SAMPLE_FRAMES";
    case SW_CHUNK_SAMPLES: return "SAMPLES";
    case SW_CHUNK_TASK: return "TASK";
    case SW_CHUNK_TASK_FRAMES: return "TASK_FRAMES";
    case SW_CHUNK_THREAD_RECORDS: return "THREAD_RECORDS";
    default: return NULL;
    }
}

/* Traces in the container: their magic, version and chunk types. */
static const sw_container_kind trace_kind = {
    SW_MAGIC, "trace", SW_FORMAT_MAJOR, SW_FORMAT_MINOR,
    1u << SW_CHUNK_META | 1u << SW_CHUNK_CODE | 1u << SW_CHUNK_THREAD | 1u << SW_CHUNK_EVENTS |
        1u << SW_CHUNK_END | 1u << SW_CHUNK_SAMPLE_FRAMES | 1u << SW_CHUNK_SAMPLES | 1u << SW_CHUNK_TASK |
        1u << SW_CHUNK_TASK_FRAMES | 1u << SW_CHUNK_THREAD_RECORDS,
    chunk_name};

static int cmp_chunk(const void *a, const void *b)
{
    const chunk_ref *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* What the time base lacks, said after the damage (see load()). */
static void timebase_note(const sw_trace *t, char *note, size_t len);

/* Rewrites the damage text from the list. */
static void describe(sw_trace *t)
{
    sw_damage_describe(t->dmg, t->ndmg, t->dmg_total, t->damage, sizeof t->damage);
    char note[160];
    timebase_note(t, note, sizeof note);
    size_t n = strlen(t->damage);
    if (note[0] && n + 2 < sizeof t->damage)
        n += (size_t)snprintf(t->damage + n, sizeof t->damage - n, "; %s", note);
    if (t->lost_events && n + 2 < sizeof t->damage)
        snprintf(t->damage + n, sizeof t->damage - n, "; %s%llu events lost", t->lost_at_least ? "at least " : "",
                 (unsigned long long)t->lost_events);
}

/* Adds a damaged range found after the load (a replay's malformed events
 * chunk), in file order, once. */
static void add_damage(sw_trace *t, const sw_damage *d)
{
    if (!t->dmg && !(t->dmg = calloc(SW_DAMAGE_KEEP, sizeof *t->dmg)))
        return;
    size_t i = 0;
    while (i < t->ndmg && t->dmg[i].off < d->off)
        i++;
    if ((i < t->ndmg && t->dmg[i].off == d->off) || t->ndmg == SW_DAMAGE_KEEP)
        return;   /* known already (another replay), or no room to tell */
    memmove(&t->dmg[i + 1], &t->dmg[i], (t->ndmg - i) * sizeof *t->dmg);
    t->dmg[i] = *d;
    t->ndmg++;
    t->dmg_total++;
    describe(t);
}

/* Reads one intact chunk; a nonzero code for a chunk it cannot use. */
static int read_chunk(sw_trace *t, const sw_chunk *ch)
{
    sw_cursor c = sw_cursor_of(ch->payload, ch->len);
    uint64_t poff = ch->off + SW_CHUNK_HEADER_LEN;
    int rc;
    switch (ch->type) {
    case SW_CHUNK_META:
        /* A writer of format 1.5 writes its META chunks again before END:
         * a copy of a chunk already read adds nothing. */
        for (size_t i = 0; i < t->nmetas; i++)
            if (t->metas[i].len == ch->len && memcmp(t->metas[i].data, ch->payload, ch->len) == 0)
                return SW_OK;
        meta_copy *m = sw_array_grow(t->metas, &t->metas_cap, t->nmetas + 1, sizeof *m, 4);
        if (!m)
            return SW_ENOMEM;
        t->metas = m;
        uint8_t *copy = malloc(ch->len ? ch->len : 1);
        if (!copy)
            return SW_ENOMEM;
        memcpy(copy, ch->payload, ch->len);
        t->metas[t->nmetas++] = (meta_copy){copy, ch->len};
        return parse_kv(t, &c);
    case SW_CHUNK_CODE: return parse_codes(t, &c);
    case SW_CHUNK_THREAD: return parse_threads(t, &c);
    case SW_CHUNK_TASK: return parse_tasks(t, &c);
    case SW_CHUNK_TASK_FRAMES: return add_task_frames_chunk(t, &c, poff, ch->len);
    case SW_CHUNK_EVENTS: return add_events_chunk(t, ch->payload, poff, ch->len);
    case SW_CHUNK_END:
        if ((rc = parse_kv(t, &c)) == SW_OK)
            t->complete = 1;
        return rc;
    /* After a SAMPLE_FRAMES chunk refused for a frame kind this reader
     * does not know (a newer sampler's), samples are not read: they may
     * name such frames. */
    case SW_CHUNK_SAMPLE_FRAMES: return t->bad_frame_kind ? SW_OK : parse_frames(t, &c);
    case SW_CHUNK_SAMPLES: return t->bad_frame_kind ? SW_OK : add_samples_chunk(t, ch->payload, poff, ch->len);
    case SW_CHUNK_THREAD_RECORDS: return add_trecs_chunk(t, ch->payload, poff, ch->len);
    default: return SW_OK;   /* the iterator hands out known types only */
    }
}

static int load(sw_trace *t, char *err, size_t errlen)
{
    sw_chunks it;
    t->len = t->src.size;
    int rc = sw_chunks_open(&it, &trace_kind, &t->src, err, errlen);
    sw_chunk ch;
    while (rc == SW_OK && (rc = sw_chunks_next(&it, &ch)) == 1) {
        int had_bad_kind = t->bad_frame_kind;
        rc = read_chunk(t, &ch);
        if (rc && rc != SW_ENOMEM) {
            char what[112];
            if (t->bad_frame_kind && !had_bad_kind)
                snprintf(what, sizeof what,
                         "sample frame of unknown kind %d (written by a newer stackwatch?) in the SAMPLE_FRAMES chunk",
                         t->bad_frame_kind - 1);
            else
                snprintf(what, sizeof what, "malformed %s chunk", chunk_name(ch.type));
            sw_chunks_malformed(&it, &ch, what);
        }
        rc = rc == SW_ENOMEM ? rc : SW_OK;
    }
    uint64_t intact = it.chunks;
    t->unknown_chunks = it.unknown;
    t->dmg = it.damage;   /* the list is the trace's now */
    t->ndmg = it.ndamage;
    t->dmg_total = it.damage_total;
    it.damage = NULL;
    sw_chunks_close(&it);
    if (rc == SW_ENOMEM) {
        snprintf(err, errlen, "out of memory while reading the trace");
        return rc;
    }
    if (rc == SW_EIO && !err[0]) {
        snprintf(err, errlen, "cannot read: %s", strerror(errno));
        return rc;
    }
    if (rc)
        return rc;   /* the header: err says why */
    if (!intact) {
        describe(t);
        snprintf(err, errlen, "not a readable stackwatch trace (no intact header chunk, nor any other)%s%s",
                 t->damage[0] ? ": " : "", t->damage);
        return SW_EFORMAT;
    }
    const sw_meta_entry *e;
    t->ns_per_tick = 1.0;
    if ((e = sw_trace_meta_find(t, "time_shift")))
        t->shift = e->u > 30 ? 30 : (unsigned)e->u;
    /* A refined rate from END wins over the first estimate in META. */
    e = sw_trace_meta_find(t, "clock_hz_refined");
    if (!e)
        e = sw_trace_meta_find(t, "clock_hz");
    if (e && e->f > 1e3)
        t->ns_per_tick = 1e9 / e->f;
    /* Tasks after the threads, each after its own thread: the consumers
     * list them in this order. */
    if (t->ntasks) {
        thread_rec *sorted = malloc(t->nthreads * sizeof *sorted);
        if (!sorted) {
            snprintf(err, errlen, "out of memory while reading the trace");
            return SW_ENOMEM;
        }
        size_t n = 0;
        for (size_t i = 0; i < t->nthreads; i++)
            if (!t->threads[i].info.task)
                sorted[n++] = t->threads[i];
        size_t nthr = n;
        for (size_t k = 0; k < nthr; k++)
            for (size_t i = 0; i < t->nthreads; i++)
                if (t->threads[i].info.task && t->threads[i].info.thread == sorted[k].info.index)
                    sorted[n++] = t->threads[i];
        for (size_t i = 0; i < t->nthreads; i++) {   /* tasks of a thread never seen */
            thread_rec *r = &t->threads[i];
            int known = 0;
            for (size_t k = 0; k < nthr && !known; k++)
                known = sorted[k].info.index == r->info.thread;
            if (r->info.task && !known)
                sorted[n++] = *r;
        }
        free(t->threads);
        t->threads = sorted;
        t->threads_cap = t->nthreads;
        for (size_t i = 0; i < t->nthreads; i++) {
            thread_rec *r = &t->threads[i];
            r->owner = SIZE_MAX;
            for (size_t k = 0; r->info.task && k < nthr; k++)
                if (t->threads[k].info.index == r->info.thread)
                    r->owner = k;
        }
    }
    if ((rc = map_sampled_threads(t)) != SW_OK || (rc = count_trecs(t)) != SW_OK) {
        snprintf(err, errlen, rc == SW_ENOMEM ? "out of memory while reading the trace" : "cannot read: %s",
                 strerror(errno));
        return rc;
    }
    uint64_t first = UINT64_MAX;   /* the earliest chunk start, in units */
    for (size_t i = 0; i < t->nthreads; i++) {
        thread_rec *r = &t->threads[i];
        if (r->nchunks > 1)  /* qsort(NULL, 0, ...) is undefined */
            qsort(r->chunks, r->nchunks, sizeof *r->chunks, cmp_chunk);
        for (size_t k = 0; k < r->nchunks; k++)
            if (r->chunks[k].t0 < first)
                first = r->chunks[k].t0;
        char key[48];
        snprintf(key, sizeof key, "dropped.%u", r->info.index);
        if ((e = sw_trace_meta_find(t, key)))
            r->info.dropped += e->u;
        snprintf(key, sizeof key, "chunks.%u", r->info.index);
        if ((e = sw_trace_meta_find(t, key)))
            r->written = e->u;
    }
    if ((e = sw_trace_meta_find(t, "tick0")))
        t->tick0 = e->u;
    else if (t->dmg_total && first != UINT64_MAX && first <= UINT64_MAX >> t->shift)
        t->tick0 = first << t->shift;   /* META lost: times count from the first event */
    t->end_ns = -1;
    if ((e = sw_trace_meta_find(t, "end_ticks")))
        t->end_ns = sw_trace_units_to_ns(t, e->u >> t->shift);
    /* END counts the events sealed and those dropped: without drops, the
     * sealed ones are what the file held. A drop may be of a sealed event
     * (a ring's discard, a failed write) or of one never sealed, so with
     * drops the difference is a lower bound of what the file held. */
    const sw_meta_entry *sealed = sw_trace_meta_find(t, "events"), *dropped = sw_trace_meta_find(t, "dropped");
    if (t->dmg_total && t->complete && sealed && dropped && sealed->u >= dropped->u) {
        uint64_t read = 0;
        for (size_t i = 0; i < t->nthreads; i++)
            read += t->threads[i].info.task ? 0 : t->threads[i].info.events;
        if (read < sealed->u - dropped->u) {
            t->lost_events = sealed->u - dropped->u - read;
            t->lost_at_least = dropped->u != 0;
        }
    }
    describe(t);
    return SW_OK;
}

/* With damage, the keys of the time base that no intact META or END chunk
 * gave, and what times are then; "" when nothing is missing (or the file
 * is intact: a file written without them has no such keys). */
static void timebase_note(const sw_trace *t, char *note, size_t len)
{
    static const char *const keys[] = {"time_shift", "tick0", "clock_hz"};
    size_t n = 0;
    note[0] = 0;
    for (int i = 0; t->dmg_total && i < 3 && n < len; i++) {
        int have = sw_trace_meta_find(t, keys[i]) || (i == 2 && sw_trace_meta_find(t, "clock_hz_refined"));
        if (!have)
            n += (size_t)snprintf(note + n, len - n, "%s%s", n ? ", " : "the time base lost ", keys[i]);
    }
    if (n && n < len)
        snprintf(note + n, len - n, " with its META chunk: event times are estimates");
}

int sw_trace_open_mem(const uint8_t *data, size_t len, sw_trace **out, char *err, size_t errlen)
{
    *out = NULL;
    sw_trace *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    t->fd = -1;
    t->mem = malloc(len ? len : 1);
    if (!t->mem) {
        free(t);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    if (len)
        memcpy(t->mem, data, len);
    sw_source_mem(&t->src, t->mem, len);
    err[0] = 0;
    int rc = load(t, err, errlen);
    if (rc) {
        sw_trace_free(t);
        return rc;
    }
    *out = t;
    return SW_OK;
}

int sw_trace_open_file(const char *path, sw_trace **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return SW_EIO;
    }
    sw_trace *t = calloc(1, sizeof *t);
    if (!t) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    t->fd = fd;
    err[0] = 0;
    int rc = sw_source_fd(&t->src, fd);
    if (rc)
        snprintf(err, errlen, "cannot read: %s", strerror(errno));
    else
        rc = load(t, err, errlen);
    if (rc) {
        sw_trace_free(t);
        return rc;
    }
    *out = t;
    return SW_OK;
}

void sw_trace_free(sw_trace *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nmeta; i++) {
        free((char *)t->meta[i].key);
        free((char *)t->meta[i].s);
    }
    free(t->meta);
    for (size_t i = 0; i < t->nmetas; i++)
        free(t->metas[i].data);
    free(t->metas);
    for (size_t i = 0; i < t->nthreads; i++) {
        free(t->threads[i].name);
        free(t->threads[i].chunks);
        free(t->threads[i].task_frames);
    }
    free(t->threads);
    for (uint32_t i = 0; i < t->code_limit; i++)
        free_code(t->codes[i]);
    free(t->codes);
    for (uint32_t i = 0; i < t->frame_limit; i++)
        free_frame(t->frames[i]);
    free(t->frames);
    free(t->samples);
    free(t->skeys);
    free(t->trecs);
    free(t->dmg);
    free(t->mem);
    if (t->fd >= 0)
        close(t->fd);
    free(t);
}

const char *sw_trace_damage(const sw_trace *t) { return t->damage; }
size_t sw_trace_damage_count(const sw_trace *t) { return t->ndmg; }
const sw_damage *sw_trace_damage_range(const sw_trace *t, size_t i) { return i < t->ndmg ? &t->dmg[i] : NULL; }
uint64_t sw_trace_damage_total(const sw_trace *t) { return t->dmg_total; }
uint64_t sw_trace_unknown_chunks(const sw_trace *t) { return t->unknown_chunks; }
int sw_trace_complete(const sw_trace *t) { return t->complete; }
size_t sw_trace_meta_count(const sw_trace *t) { return t->nmeta; }
const sw_meta_entry *sw_trace_meta(const sw_trace *t, size_t i) { return i < t->nmeta ? &t->meta[i] : NULL; }

const sw_meta_entry *sw_trace_meta_find(const sw_trace *t, const char *key)
{
    /* Later entries win (an END value updates a META one). */
    for (size_t i = t->nmeta; i-- > 0;)
        if (strcmp(t->meta[i].key, key) == 0)
            return &t->meta[i];
    return NULL;
}

size_t sw_trace_thread_count(const sw_trace *t) { return t->nthreads; }
const sw_thread_info *sw_trace_thread(const sw_trace *t, size_t i) { return i < t->nthreads ? &t->threads[i].info : NULL; }
uint32_t sw_trace_code_limit(const sw_trace *t) { return t->code_limit; }
const sw_code_info *sw_trace_code(const sw_trace *t, uint32_t id) { return id < t->code_limit ? t->codes[id] : NULL; }

int64_t sw_trace_units_to_ns(const sw_trace *t, uint64_t units)
{
    uint64_t ticks = units << t->shift;
    double d = (double)(int64_t)(ticks - t->tick0) * t->ns_per_tick;
    /* Times are bounded to +-2^61 ns (73 years): the conversion of d is
     * then defined, and differences of times cannot overflow an int64. */
    const double lim = 2305843009213693952.0;
    if (!(d < lim))
        d = lim;
    else if (d < -lim)
        d = -lim;
    return (int64_t)d;
}

int64_t sw_trace_end_ns(const sw_trace *t) { return t->end_ns; }

/* Replay state: the open frames as the stream has them. A frame whose
 * TEARDOWN event was read has been handed to the callback as ended but is
 * still open in the stream (`ended`) until its exit comes, which is then
 * dropped; callbacks get depths without such frames. */
/* The open frames of a task the replay's thread does not run now. */
typedef struct task_frames {
    uint64_t task;
    uint32_t *stack;
    uint8_t *ended;
    uint32_t depth, cap, nended;
} task_frames;

typedef struct replay {
    uint32_t *stack;
    uint8_t *ended;
    uint32_t depth, cap;
    uint32_t nended;         /* frames of the stack that are `ended` */
    /* Tasks (format 1.7): the stack above is the running task's; the
     * callback gets the events of task `want` only (the stack is task
     * `running`'s) (0: the thread's own). */
    uint64_t running, want;
    task_frames *tasks;      /* the other tasks with open frames */
    size_t ntasks, tasks_cap;
    const thread_rec *tr;    /* the thread replayed, and the index of the */
    size_t chunk;            /* chunk being read (for reading ahead) */
    int64_t last_ns;
    sw_event_fn fn;
    void *ud;
    unsigned flags;          /* SW_REPLAY_* */
    sw_bytes cur, ahead;     /* a file's chunk being replayed, and one read ahead */
    char s1[SW_EXT_STR_MAX + 1], s2[SW_EXT_STR_MAX + 1];
} replay;

static int push(replay *r, uint32_t code)
{
    if (r->depth == r->cap) {
        uint32_t cap = r->cap ? r->cap * 2 : 256;
        uint32_t *s = realloc(r->stack, (size_t)cap * sizeof *s);
        if (!s)
            return SW_ENOMEM;
        r->stack = s;
        uint8_t *e = realloc(r->ended, cap);
        if (!e)
            return SW_ENOMEM;
        r->ended = e;
        r->cap = cap;
    }
    r->ended[r->depth] = 0;
    r->stack[r->depth++] = code;
    return SW_OK;
}

/* The depth callbacks see for the stream's current depth. */
static uint32_t seen_depth(const replay *r) { return r->depth - r->nended; }

/* The code of the innermost open frame not ended (seen_depth(r) > 0). */
static uint32_t innermost_seen(const replay *r)
{
    uint32_t d = r->depth;
    while (d > 0 && r->ended[d - 1])
        d--;
    return d ? r->stack[d - 1] : SW_EXT_NO_CODE;
}

static int emit(replay *r, int kind, uint32_t code, uint32_t depth, int synthetic)
{
    if (r->running != r->want)
        return 0;
    sw_event ev = {r->last_ns, code, depth, (uint8_t)kind, (uint8_t)synthetic, NULL, NULL};
    return r->fn(r->ud, &ev);
}

/* Pops the innermost open frame and hands its end to the callback, unless
 * a TEARDOWN event already did. */
static int pop(replay *r, int kind, int synthetic)
{
    r->depth--;
    if (r->ended[r->depth]) {
        r->ended[r->depth] = 0;
        r->nended--;
        return 0;
    }
    return emit(r, kind, r->stack[r->depth], seen_depth(r), synthetic);
}

/* Reads a str of an EXT payload into buf (cut at SW_EXT_STR_MAX bytes, on
 * a character boundary). */
static int get_ext_str(sw_cursor *c, char *buf)
{
    uint64_t n;
    buf[0] = 0;
    if (sw_cur_varint(c, &n) || n > (uint64_t)(c->end - c->p))
        return SW_ETRUNC;
    size_t k = n > SW_EXT_STR_MAX ? SW_EXT_STR_MAX : (size_t)n;
    if (k < n)  /* do not end inside a UTF-8 sequence */
        while (k > 0 && (c->p[k] & 0xc0) == 0x80)
            k--;
    memcpy(buf, c->p, k);
    buf[k] = 0;
    c->p += n;
    return SW_OK;
}

/* Decodes one field of an EXT payload, of type `type` (SW_FT_*), into its
 * slot of x (SW_SLOT_*). Returns nonzero when the payload ends first (or
 * a code id is out of range). Called with constants, from the rows. */
SW_INLINE int decode_field(sw_cursor *c, char *s1, char *s2, sw_ext *x, unsigned type, unsigned slot)
{
    if (type == SW_FT_STR)
        return get_ext_str(c, slot == SW_SLOT_S1 ? s1 : s2);
    uint64_t v;
    if (sw_cur_varint(c, &v))
        return 1;
    if (type == SW_FT_SIGNED)
        v = (uint64_t)sw_unzigzag(v);
    switch (slot) {
    case SW_SLOT_CODE:
        if (v >= SW_EXT_NO_CODE)
            return 1;
        x->code = (uint32_t)v;
        break;
    case SW_SLOT_LINE: x->line = v; break;
    case SW_SLOT_A: x->a = v; break;
    case SW_SLOT_B: x->b = v; break;
    default: x->c = v; break;
    }
    return 0;
}

/* Decodes the payload of an EXT event of a kind with a row (records.h)
 * into x, its fields in order into their slots: one case per row, made
 * from the row. A payload shorter than the kind's fields sets
 * x->malformed; bytes after them are ignored (room for fields a newer
 * minor version adds). */
#define SW_X_DECODE_FIELD_(f, type, slot) &&!decode_field(&c, s1, s2, x, SW_FT_##type, SW_SLOT_##slot)
#define SW_X_DECODE_KIND_(K, n, nm, since, from, cat, label, shape, pair, stat, title, track, ...)       \
    case n:                                                                                            \
        bad = !(1 __VA_ARGS__);                                                                        \
        break;
static void decode_ext_into(char *s1, char *s2, uint32_t kind, const uint8_t *p, size_t len, sw_ext *x)
{
    memset(x, 0, sizeof *x);
    sw_cursor c = {p, p + len};
    x->kind = kind;
    x->code = SW_EXT_NO_CODE;
    s1[0] = s2[0] = 0;
    x->s1 = s1;
    x->s2 = s2;
    int bad = 0;
    switch (kind) {
        SW_RECORD_KINDS(SW_X_DECODE_KIND_, SW_X_DECODE_FIELD_)
    default:
        break;
    }
    x->malformed = bad != 0;
}

/* Exchanges the running task's frames with k's. */
static void task_frames_swap(replay *r, task_frames *k)
{
    task_frames run = {r->running, r->stack, r->ended, r->depth, r->cap, r->nended};
    r->running = k->task;
    r->stack = k->stack;
    r->ended = k->ended;
    r->depth = k->depth;
    r->cap = k->cap;
    r->nended = k->nended;
    *k = run;
}

/* The running task's open frames handed to the callback as synthetic
 * calls (open) or returns, without changing them (a relabelling). */
static int task_frames_emit(replay *r, int open)
{
    int rc;
    if (open) {
        for (uint32_t d = 0, seen = 0; d < r->depth; d++)
            if (!r->ended[d] && (rc = emit(r, SW_OP_CALL, r->stack[d], seen++, 1)))
                return rc;
    } else {
        for (uint32_t d = r->depth, seen = seen_depth(r); d-- > 0;)
            if (!r->ended[d] && (rc = emit(r, SW_OP_RETURN, r->stack[d], --seen, 1)))
                return rc;
    }
    return 0;
}

/* The frames the replay keeps for task, not running (r->running is task
 * itself when called): ended in its own view and forgotten. Only a damaged
 * trace switches from a task whose frames are kept as suspended. */
static int task_frames_drop(replay *r, uint64_t task)
{
    for (size_t i = 0; i < r->ntasks; i++) {
        if (r->tasks[i].task != task)
            continue;
        task_frames k = r->tasks[i];
        r->tasks[i] = r->tasks[--r->ntasks];
        int rc = 0;
        for (uint32_t d = k.depth, seen = k.depth - k.nended; d-- > 0 && !rc;)
            if (!k.ended[d])
                rc = emit(r, SW_OP_RETURN, k.stack[d], --seen, 1);
        free(k.stack);
        free(k.ended);
        return rc;
    }
    return 0;
}

/* A TASK_SWITCH record: the open frames are origin's (relabelled when the
 * replay had them as another task's: its first switch, or after a gap),
 * kept as origin's, and target's become the running ones. */
static int task_switch(replay *r, uint64_t origin, uint64_t target)
{
    int rc;
    if (r->running != origin) {
        if ((rc = task_frames_emit(r, 0)))
            return rc;
        r->running = origin;
        if ((rc = task_frames_drop(r, origin)) || (rc = task_frames_emit(r, 1)))
            return rc;
    }
    if (origin == target)
        return 0;
    task_frames mine = {origin, r->stack, r->ended, r->depth, r->cap, r->nended};
    task_frames next = {target, NULL, NULL, 0, 0, 0};
    for (size_t i = 0; i < r->ntasks; i++)
        if (r->tasks[i].task == target) {
            next = r->tasks[i];
            r->tasks[i] = r->tasks[--r->ntasks];
            break;
        }
    if (mine.depth) {
        task_frames *g = sw_array_grow(r->tasks, &r->tasks_cap, r->ntasks + 1, sizeof *g, 8);
        if (!g)
            return SW_ENOMEM;
        r->tasks = g;
        r->tasks[r->ntasks++] = mine;
    } else if (next.cap) {   /* reuse nothing: free the empty arrays */
        free(mine.stack);
        free(mine.ended);
    } else {
        next.stack = mine.stack;   /* keep the empty arrays for the target */
        next.ended = mine.ended;
        next.cap = mine.cap;
    }
    r->stack = next.stack;
    r->ended = next.ended;
    r->depth = next.depth;
    r->cap = next.cap;
    r->nended = next.nended;
    r->running = target;
    return 0;
}

/* Closes open frames down to depth `keep`, as synthetic returns. */
static int close_to(replay *r, uint32_t keep)
{
    while (r->depth > keep) {
        int rc = pop(r, SW_OP_RETURN, 1);
        if (rc)
            return rc;
    }
    return 0;
}

/* Closes every task's open frames (a gap, or the end): the callback's
 * task's as synthetic returns. The running task stays the running one. */
static int close_all(replay *r)
{
    int rc = close_to(r, 0);
    for (size_t i = 0; i < r->ntasks && !rc; i++)
        if (r->tasks[i].task == r->want) {
            task_frames_swap(r, &r->tasks[i]);
            rc = close_to(r, 0);
            task_frames_swap(r, &r->tasks[i]);
        }
    if (rc)
        return rc;
    for (size_t i = 0; i < r->ntasks; i++) {
        free(r->tasks[i].stack);
        free(r->tasks[i].ended);
    }
    r->ntasks = 0;
    return 0;
}

/* How the innermost open frame ends: its exit op, read ahead from c (n
 * events left in the chunk, then the thread's next chunks while no gap
 * comes between), or SW_OP_RETURN if the stream ends (or is damaged)
 * first, as the frame is then closed by a synthetic return. */
static unsigned peek_exit(const sw_trace *t, replay *r, sw_cursor c, uint64_t n)
{
    uint64_t level = 0;
    size_t k = r->chunk;
    for (;;) {
        for (; n > 0; n--) {
            uint64_t x, v, len;
            if (sw_cur_varint(&c, &x))
                return SW_OP_RETURN;
            unsigned op = (unsigned)(x & ((1u << SW_OP_BITS) - 1));
            switch (op) {
            case SW_OP_CALL:
            case SW_OP_RESUME:
            case SW_OP_C_CALL:
                if (sw_cur_varint(&c, &v))
                    return SW_OP_RETURN;
                level++;
                break;
            case SW_OP_EXT:
                if (sw_cur_varint(&c, &v) || sw_cur_varint(&c, &len) || len > (uint64_t)(c.end - c.p))
                    return SW_OP_RETURN;
                c.p += len;
                break;
            default:
                if (level == 0)
                    return op;
                level--;
            }
        }
        if (++k >= r->tr->nchunks || r->tr->chunks[k].seq != r->tr->chunks[k - 1].seq + 1)
            return SW_OP_RETURN;
        sw_cursor nc;
        events_head h;
        if (chunk_payload(t, &r->tr->chunks[k], &r->ahead, &nc) || parse_events_head(&nc, &h))
            return SW_OP_RETURN;
        c.p = h.body;
        c.end = nc.end;
        n = h.n;
    }
}

/* A chunk read after a gap (or alone): its TASK_FRAMES chunk (format 1.7),
 * when it has one, says which task ran when it started (the one whose
 * frames its prefix lists) and the other tasks' open frames, which are
 * opened (synthetic calls) for the callback's task. A TASK_FRAMES chunk
 * that cannot be read or does not parse is taken as none. */
static int task_frames_load(sw_trace *t, replay *r, uint64_t seq)
{
    const chunk_ref *ref = NULL;
    for (size_t i = 0; i < r->tr->ntask_frames && !ref; i++)
        if (r->tr->task_frames[i].seq == seq)
            ref = &r->tr->task_frames[i];
    sw_cursor c;
    uint64_t index, s, running, n;
    if (!ref || chunk_payload(t, ref, &r->ahead, &c) || sw_cur_varint(&c, &index) || sw_cur_varint(&c, &s) ||
        sw_cur_varint(&c, &running) || sw_cur_varint(&c, &n))
        return 0;
    r->running = running;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t task, depth, id;
        if (sw_cur_varint(&c, &task) || sw_cur_varint(&c, &depth) || depth > (uint64_t)(c.end - c.p) || task == running)
            return 0;
        task_frames f = {task, NULL, NULL, 0, 0, 0};
        task_frames_swap(r, &f);   /* f holds the running task's frames now */
        int rc = 0, bad = 0;
        for (uint64_t d = 0; d < depth && !rc && !bad; d++) {
            if (sw_cur_varint(&c, &id) || id > UINT32_MAX)
                bad = 1;
            else
                rc = push(r, (uint32_t)id);
        }
        if (!rc && !bad)
            rc = task_frames_emit(r, 1);
        task_frames_swap(r, &f);   /* f holds the task's frames */
        task_frames *g = f.depth ? sw_array_grow(r->tasks, &r->tasks_cap, r->ntasks + 1, sizeof *g, 8) : NULL;
        if (g) {
            r->tasks = g;
            r->tasks[r->ntasks++] = f;
        } else {
            free(f.stack);
            free(f.ended);
            if (f.depth && !rc)
                rc = SW_ENOMEM;
        }
        if (rc || bad)
            return rc;
    }
    return 0;
}

/* Replays one chunk. gap: the previous chunk of the thread was not read
 * (lost, discarded or malformed); quiet: the previous ones were skipped on
 * purpose (sw_trace_replay_from), so no DROPPED event says so. */
static int replay_chunk(sw_trace *t, replay *r, const chunk_ref *ch, int gap, int quiet)
{
    sw_cursor c;
    events_head h;
    int rc = chunk_payload(t, ch, &r->cur, &c);
    if (rc)
        return rc == SW_EFORMAT ? SW_EIO : rc;   /* indexed: only reading can fail */
    if ((rc = parse_events_head(&c, &h)))
        return rc;
    uint64_t now = h.t0;
    int64_t t0_ns = sw_trace_units_to_ns(t, h.t0);
    /* Reconcile the open frames with the chunk's prefix: after a gap
     * nothing is known of what happened between, so close everything and
     * reopen the prefix; without a gap they must already agree. */
    int agree = !gap && h.depth == r->depth;
    sw_cursor pc = {h.prefix, h.body};
    for (uint64_t k = 0; agree && k < h.depth; k++) {
        uint64_t id;
        if (sw_cur_varint(&pc, &id))
            return SW_EFORMAT;
        agree = id == r->stack[k];
    }
    if (!agree) {
        if ((rc = close_all(r)))
            return rc;
        if (t0_ns > r->last_ns)
            r->last_ns = t0_ns;
        if ((h.dropped || gap) && !quiet) {
            if ((rc = emit(r, SW_EV_DROPPED, (uint32_t)(h.dropped > UINT32_MAX ? UINT32_MAX : h.dropped), 0, 1)))
                return rc;
        }
        if ((rc = task_frames_load(t, r, h.seq)))
            return rc;
        pc.p = h.prefix;
        for (uint64_t k = 0; k < h.depth; k++) {
            uint64_t id;
            if (sw_cur_varint(&pc, &id) || id > UINT32_MAX)
                return SW_EFORMAT;
            if (push(r, (uint32_t)id))
                return SW_ENOMEM;
            if ((rc = emit(r, SW_OP_CALL, (uint32_t)id, r->depth - 1, 1)))
                return rc;
        }
    } else if (h.dropped) {
        if (t0_ns > r->last_ns)
            r->last_ns = t0_ns;
        if ((rc = emit(r, SW_EV_DROPPED, (uint32_t)(h.dropped > UINT32_MAX ? UINT32_MAX : h.dropped), seen_depth(r), 1)))
            return rc;
    }
    c.p = h.body;
    for (uint64_t k = 0; k < h.n; k++) {
        uint64_t x;
        if (sw_cur_varint(&c, &x))
            return SW_EFORMAT;
        unsigned op = (unsigned)(x & ((1u << SW_OP_BITS) - 1));
        now += x >> SW_OP_BITS;
        int64_t ns = sw_trace_units_to_ns(t, now);
        if (ns > r->last_ns)
            r->last_ns = ns;
        switch (op) {
        case SW_OP_CALL:
        case SW_OP_RESUME:
        case SW_OP_C_CALL: {
            uint64_t id;
            if (sw_cur_varint(&c, &id) || id > UINT32_MAX)
                return SW_EFORMAT;
            if (push(r, (uint32_t)id))
                return SW_ENOMEM;
            if ((rc = emit(r, (int)op, (uint32_t)id, seen_depth(r) - 1, 0)))
                return rc;
            break;
        }
        case SW_OP_RETURN:
        case SW_OP_YIELD:
        case SW_OP_UNWIND:
        case SW_OP_C_RETURN:
            if (r->depth == 0)
                break;  /* cannot happen in a well-formed stream: ignore */
            if ((rc = pop(r, (int)op, 0)))
                return rc;
            break;
        case SW_OP_EXT: {
            uint64_t kind, len;
            const sw_record_kind *rk;
            if (sw_cur_varint(&c, &kind) || sw_cur_varint(&c, &len) || len > (uint64_t)(c.end - c.p))
                return SW_EFORMAT;
            if (kind == SW_EXT_DROPPED) {
                sw_cursor e = {c.p, c.p + len};
                uint64_t n = 0;
                if (sw_cur_varint(&e, &n))
                    return SW_EFORMAT;
                if ((rc = emit(r, SW_EV_DROPPED, (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n), seen_depth(r), 0)))
                    return rc;
            } else if (kind == SW_EXT_TASK_SWITCH) {
                sw_ext x;
                decode_ext_into(r->s1, r->s2, (uint32_t)kind, c.p, (size_t)len, &x);
                /* Delivered (SW_REPLAY_TASKS) before the switch: located
                 * at the innermost frame of the task switched away from. */
                uint32_t at = r->depth > r->nended ? innermost_seen(r) : SW_EXT_NO_CODE;
                if ((r->flags & SW_REPLAY_TASKS) && (r->flags & SW_REPLAY_EXT)) {
                    x.code = x.malformed ? SW_EXT_NO_CODE : at;
                    sw_event ev = {r->last_ns, x.code, seen_depth(r), SW_EV_EXT, 0, &x, NULL};
                    if ((rc = r->fn(r->ud, &ev)))
                        return rc;
                }
                if (!x.malformed && (rc = task_switch(r, x.a, x.b)))
                    return rc;
            } else if (kind == SW_EXT_TEARDOWN) {
                /* The first of a clearing's TEARDOWN events ends the frame. */
                if (r->depth > 0 && !r->ended[r->depth - 1]) {
                    sw_cursor rest = {c.p + len, c.end};
                    unsigned exit_op = peek_exit(t, r, rest, h.n - k - 1);
                    r->ended[r->depth - 1] = 1;
                    r->nended++;
                    if ((rc = emit(r, (int)exit_op, r->stack[r->depth - 1], seen_depth(r), 0)))
                        return rc;
                }
            } else if ((r->flags & SW_REPLAY_EXT) && (rk = sw_record_kind_of(kind)) && rk->shape != SW_RS_REPLAY) {
                sw_ext x;
                decode_ext_into(r->s1, r->s2, (uint32_t)kind, c.p, (size_t)len, &x);
                sw_event ev = {r->last_ns, x.code, seen_depth(r), SW_EV_EXT, 0, &x, NULL};
                if ((r->running == r->want || (r->flags & SW_REPLAY_TASKS)) && (rc = r->fn(r->ud, &ev)))
                    return rc;
            }
            c.p += len;
            break;
        }
        }
    }
    if (c.p != c.end)
        return SW_EFORMAT;
    return SW_OK;
}

int sw_trace_replay(sw_trace *t, size_t i, sw_event_fn fn, void *ud)
{
    return sw_trace_replay_ext(t, i, 0, fn, ud);
}

int sw_trace_replay_ext(sw_trace *t, size_t i, unsigned flags, sw_event_fn fn, void *ud)
{
    return sw_trace_replay_from(t, i, flags, INT64_MIN, fn, ud);
}

void sw_trace_set_progress(sw_trace *t, sw_progress_fn fn, void *ud)
{
    t->progress = fn;
    t->progress_ud = ud;
}

uint64_t sw_trace_events_bytes(const sw_trace *t, size_t i)
{
    uint64_t n = 0;
    if (i < t->nthreads && t->threads[i].info.task)
        i = t->threads[i].owner;
    for (size_t k = 0; i < t->nthreads && k < t->threads[i].nchunks; k++)
        n += t->threads[i].chunks[k].len;
    return n;
}

/* Tells the progress callback of `bytes` more replayed; nonzero: stop. */
static int progressed(sw_trace *t, uint64_t bytes)
{
    return t->progress ? t->progress(t->progress_ud, bytes) : 0;
}

/* A failure of reading or memory ends a replay; a chunk that does not
 * decode does not. */
static int fatal(int rc) { return rc == SW_ENOMEM || rc == SW_EIO || rc == SW_ECANCELED; }

int sw_trace_replay_from(sw_trace *t, size_t i, unsigned flags, int64_t from_ns, sw_event_fn fn, void *ud)
{
    if (i >= t->nthreads)
        return SW_EARG;
    thread_rec *tr = &t->threads[i];
    replay r;
    memset(&r, 0, sizeof r);
    if (tr->info.task) {   /* a task: its thread's events while it ran */
        r.want = tr->info.task;
        if (tr->owner == SIZE_MAX)
            return SW_OK;
        tr = &t->threads[tr->owner];
    }
    r.fn = fn;
    r.ud = ud;
    r.flags = flags;
    int rc = SW_OK, bad = SW_OK, after_bad = 0;
    r.last_ns = INT64_MIN;
    r.tr = tr;
    /* Chunks that end before from_ns are skipped: chunk k ends where chunk
     * k + 1 starts (times never go back in a thread's stream). */
    size_t first = 0;
    uint64_t skipped = 0;
    while (from_ns != INT64_MIN && first + 1 < tr->nchunks &&
           sw_trace_units_to_ns(t, tr->chunks[first + 1].t0) <= from_ns)
        skipped += tr->chunks[first++].len;
    if (skipped && progressed(t, skipped))
        rc = SW_ECANCELED;
    for (size_t k = first; k < tr->nchunks && (rc == SW_OK || (rc < 0 && !fatal(rc))); k++) {
        r.chunk = k;
        int gap = k > 0 ? tr->chunks[k].seq != tr->chunks[k - 1].seq + 1 : tr->chunks[k].seq != 0;
        int quiet = k == first && first > 0;
        rc = replay_chunk(t, &r, &tr->chunks[k], gap || after_bad || quiet, quiet && !gap);
        if (rc >= 0 && progressed(t, tr->chunks[k].len))
            rc = SW_ECANCELED;
        after_bad = rc < 0;
        if (rc < 0 && !fatal(rc)) {
            /* An intact chunk whose events do not decode: what it gave is
             * kept, and the next chunk is read as after a gap. */
            sw_damage d = {tr->chunks[k].off - SW_CHUNK_HEADER_LEN, SW_CHUNK_HEADER_LEN + tr->chunks[k].len, 1,
                           SW_DAMAGE_MALFORMED, 0, ""};
            snprintf(d.what, sizeof d.what, "corrupted: malformed events in thread %u, chunk %llu",
                     tr->info.index, (unsigned long long)tr->chunks[k].seq);
            add_damage(t, &d);
            bad = rc;
        }
    }
    if (rc == SW_OK || (rc < 0 && !fatal(rc)))
        rc = bad;
    if ((rc >= 0 && rc != SW_OK) || fatal(rc)) {
        for (size_t k = 0; k < r.ntasks; k++) {
            free(r.tasks[k].stack);
            free(r.tasks[k].ended);
        }
        free(r.tasks);
        free(r.stack);
        free(r.ended);
        sw_bytes_free(&r.cur);
        sw_bytes_free(&r.ahead);
        return rc;  /* the callback asked to stop, or reading failed */
    }
    int rc2 = SW_OK;
    /* The thread's last chunks lost (END says how many it sealed, 1.5):
     * what it did after its last event read is unknown, so its frames end
     * there, after a DROPPED event. Else they were still open when tracing
     * stopped. */
    if (tr->nchunks && tr->written > tr->chunks[tr->nchunks - 1].seq + 1)
        rc2 = emit(&r, SW_EV_DROPPED, 0, seen_depth(&r), 1);
    else if (t->end_ns > r.last_ns && (r.depth || r.ntasks))
        r.last_ns = t->end_ns;
    if (rc2 == SW_OK)
        rc2 = close_all(&r);
    for (size_t k = 0; k < r.ntasks; k++) {
        free(r.tasks[k].stack);
        free(r.tasks[k].ended);
    }
    free(r.tasks);
    free(r.stack);
    free(r.ended);
    sw_bytes_free(&r.cur);
    sw_bytes_free(&r.ahead);
    return rc2 ? rc2 : rc;
}

/* ---- samples ---- */

uint32_t sw_trace_frame_limit(const sw_trace *t) { return t->frame_limit; }
const sw_frame_info *sw_trace_frame(const sw_trace *t, uint32_t id) { return id < t->frame_limit ? t->frames[id] : NULL; }
uint64_t sw_trace_sample_count(const sw_trace *t) { return t->nsamples; }
uint64_t sw_trace_samples_unattributed(const sw_trace *t) { return t->unattributed; }

struct sw_sample_cursor {
    sw_trace *t;
    sw_bytes buf;            /* a file's chunk being read */
    size_t thread;
    size_t chunk;            /* next chunk to open */
    sw_cursor c;                /* within the current chunk */
    uint64_t left;           /* samples left in it */
    uint32_t *frames;
    uint32_t *lines;
    size_t cap;
};

sw_sample_cursor *sw_sample_cursor_new(sw_trace *t, size_t thread)
{
    sw_sample_cursor *c = calloc(1, sizeof *c);
    if (c) {
        c->t = t;
        c->thread = thread;
    }
    return c;
}

void sw_sample_cursor_free(sw_sample_cursor *c)
{
    if (!c)
        return;
    free(c->frames);
    free(c->lines);
    sw_bytes_free(&c->buf);
    free(c);
}

int sw_sample_cursor_next(sw_sample_cursor *c, sw_trace_sample *out)
{
    sw_trace *t = c->t;
    for (;;) {
        while (!c->left) {
            if (c->chunk >= t->nsample_chunks)
                return 0;
            int rc = chunk_payload(t, &t->samples[c->chunk++], &c->buf, &c->c);
            if (rc)
                return rc == SW_EFORMAT ? SW_EIO : rc;
            if (sw_cur_varint(&c->c, &c->left))
                return SW_EFORMAT;  /* checked at load: cannot happen */
        }
        c->left--;
        sample_raw r;
        if (parse_sample(&c->c, &r))
            return SW_EFORMAT;
        const sample_key *key = find_key(t, r.ident, r.tid);
        if (!key || key->pos == UINT32_MAX || (c->thread != SIZE_MAX && key->pos != c->thread))
            continue;
        if (r.depth > c->cap) {
            size_t cap = (size_t)r.depth;
            uint32_t *f = realloc(c->frames, cap * sizeof *f);
            if (f)
                c->frames = f;
            uint32_t *l = f ? realloc(c->lines, cap * sizeof *l) : NULL;
            if (l)
                c->lines = l;
            if (!f || !l)
                return SW_ENOMEM;
            c->cap = cap;
        }
        sw_cursor fc = {r.frames, c->c.p};
        for (uint64_t k = 0; k < r.depth; k++) {
            uint64_t id = 0;
            sw_cur_varint(&fc, &id);
            c->frames[k] = (uint32_t)id;
        }
        sw_cursor lc = {r.lines, c->c.p};
        for (uint64_t k = 0; r.lines && k < r.depth; k++) {
            uint64_t line = 0;
            sw_cur_varint(&lc, &line);
            c->lines[k] = line > UINT32_MAX ? UINT32_MAX : (uint32_t)line;
        }
        /* Times within +-2^61 ns, like event times. */
        int64_t ns = sw_unzigzag(r.zt);
        const int64_t lim = (int64_t)1 << 61;
        out->t_ns = ns > lim ? lim : ns < -lim ? -lim : ns;
        out->thread = key->pos;
        out->state = r.state > UINT32_MAX ? UINT32_MAX : (uint32_t)r.state;
        out->flags = r.flags > UINT32_MAX ? UINT32_MAX : (uint32_t)r.flags;
        out->weight_ns = r.weight;
        out->cpu_ns = r.cpu1 ? r.cpu1 - 1 : UINT64_MAX;
        out->depth = (uint32_t)r.depth;
        out->frames = c->frames;
        out->lines = r.lines ? c->lines : NULL;
        return 1;
    }
}

/* ---- records of threads written by another thread (format 1.7) ---- */

/* After loading: how many records have a thread (by native tid). */
static int count_trecs(sw_trace *t)
{
    sw_bytes buf = {0};
    for (size_t i = 0; i < t->ntrec_chunks; i++) {
        sw_cursor c;
        int rc = chunk_payload(t, &t->trecs[i], &buf, &c);
        if (rc) {
            sw_bytes_free(&buf);
            return rc;
        }
        uint64_t n = 0, last_tid = 0;   /* checked at load */
        size_t last = SIZE_MAX;
        sw_cur_varint(&c, &n);
        for (uint64_t k = 0; k < n; k++) {
            trec_raw r;
            parse_trec(&c, &r);
            if (r.tid != last_tid || k == 0) {
                last = thread_of_tid(t, r.tid);
                last_tid = r.tid;
            }
            if (last == SIZE_MAX)
                t->trecs_unattributed++;
            else
                t->ntrecs++;
        }
    }
    sw_bytes_free(&buf);
    return SW_OK;
}

uint64_t sw_trace_thread_record_count(const sw_trace *t) { return t->ntrecs; }
uint64_t sw_trace_thread_records_unattributed(const sw_trace *t) { return t->trecs_unattributed; }

struct sw_trec_cursor {
    sw_trace *t;
    sw_bytes buf;
    size_t thread;
    size_t chunk;
    sw_cursor c;
    uint64_t left;
    uint64_t last_tid;
    size_t last_pos;
    sw_ext x;
    char s1[SW_EXT_STR_MAX + 1], s2[SW_EXT_STR_MAX + 1];
};

sw_trec_cursor *sw_trec_cursor_new(sw_trace *t, size_t thread)
{
    sw_trec_cursor *c = calloc(1, sizeof *c);
    if (c) {
        c->t = t;
        c->thread = thread;
        c->last_pos = SIZE_MAX;
    }
    return c;
}

void sw_trec_cursor_free(sw_trec_cursor *c)
{
    if (!c)
        return;
    sw_bytes_free(&c->buf);
    free(c);
}

int sw_trec_cursor_next(sw_trec_cursor *c, sw_trace_trec *out)
{
    sw_trace *t = c->t;
    for (;;) {
        while (!c->left) {
            if (c->chunk >= t->ntrec_chunks)
                return 0;
            int rc = chunk_payload(t, &t->trecs[c->chunk++], &c->buf, &c->c);
            if (rc)
                return rc == SW_EFORMAT ? SW_EIO : rc;
            if (sw_cur_varint(&c->c, &c->left))
                return SW_EFORMAT;  /* checked at load: cannot happen */
        }
        c->left--;
        trec_raw r;
        if (parse_trec(&c->c, &r))
            return SW_EFORMAT;
        if (r.tid != c->last_tid || c->last_pos == SIZE_MAX) {
            c->last_pos = thread_of_tid(t, r.tid);
            c->last_tid = r.tid;
        }
        if (c->last_pos == SIZE_MAX || (c->thread != SIZE_MAX && c->last_pos != c->thread))
            continue;
        const sw_record_kind *k = sw_record_kind_of(r.kind);
        if (!k || k->shape == SW_RS_REPLAY)
            continue;   /* a newer minor version's kind: skipped */
        decode_ext_into(c->s1, c->s2, (uint32_t)r.kind, r.payload, (size_t)r.len, &c->x);
        int64_t ns = sw_unzigzag(r.zt);
        const int64_t lim = (int64_t)1 << 61;
        out->t_ns = ns > lim ? lim : ns < -lim ? -lim : ns;
        out->thread = (uint32_t)c->last_pos;
        out->ext = &c->x;
        return 1;
    }
}
