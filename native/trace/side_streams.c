/*
 * side_streams.c - the side streams of a trace (see side_streams.h): the
 * table of stream kinds, the check and index of their chunks at load, the
 * attribution of their records to threads, and the one cursor that reads
 * any of them; the samples' frame definitions and thread keys.
 */
#define _GNU_SOURCE
#include "side_streams.h"

#include "base/base.h"
#include "chunk_index.h"
#include "format.h"

#include <stdlib.h>
#include <string.h>

/* One record of a side stream, its bounds checked, not decoded: its
 * thread (ident: 0 when the stream names threads by tid alone), its time
 * (zigzag ns) and the fields of its kind. */
typedef struct side_raw {
    uint64_t ident, tid, zt;
    /* samples */
    uint64_t weight, cpu1, state, flags, depth;
    const uint8_t *frames;   /* depth varints */
    const uint8_t *lines;    /* depth varints (format 1.3), or NULL */
    /* thread records */
    uint64_t kind, len;
    const uint8_t *payload;
} side_raw;

struct sw_side_cursor {
    sw_trace *t;
    unsigned kind;
    sw_bytes buf;            /* a file's chunk being read */
    size_t thread;           /* SIZE_MAX: every thread */
    size_t chunk;            /* next chunk to open */
    sw_cursor c;             /* within the current chunk */
    uint64_t left;           /* records left in it */
    int have_last;           /* the thread of the last record read: */
    uint64_t last_ident, last_tid;
    size_t last_pos;
    /* What an item points to. */
    sw_trace_sample sample;
    uint32_t *frames, *lines;
    size_t cap;
    sw_ext x;
    char s1[SW_EXT_STR_MAX + 1], s2[SW_EXT_STR_MAX + 1];
};

/* ---- samples (format 1.2, 1.3) ---- */

static void free_frame(sw_frame_info *fi)
{
    if (!fi)
        return;
    free((char *)fi->name);
    free((char *)fi->filename);
    free(fi);
}

int sw_side_sample_frames(sw_trace *t, sw_cursor *c)
{
    if (t->bad_frame_kind)
        return SW_OK;
    while (c->p < c->end) {
        uint64_t id, line;
        uint8_t kind;
        char *name = NULL, *file = NULL;
        int rc;
        if ((rc = sw_cur_varint(c, &id)) || (rc = sw_cur_u8(c, &kind)) || (rc = sw_index_get_str(c, &name, NULL)) ||
            (rc = sw_index_get_str(c, &file, NULL)) || (rc = sw_cur_varint(c, &line)))
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
        sw_frame_info **fs = sw_index_grow_slots(t->frames, &t->frame_limit, id, sizeof *fs);
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

/* A sampled thread: its ident and native tid, and its position in the
 * thread list (UINT32_MAX: none could be given). */
typedef struct sample_key {
    uint64_t ident, tid;
    uint32_t pos;
} sample_key;

/* One sample: varint length, then its fields. */
static int samples_parse(sw_cursor *c, side_raw *r)
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


static int cmp_key(const void *a, const void *b)
{
    const sample_key *x = a, *y = b;
    if (x->ident != y->ident)
        return x->ident < y->ident ? -1 : 1;
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static size_t samples_thread(const sw_trace *t, const side_raw *r)
{
    sample_key k = {r->ident, r->tid, 0};
    const sample_key *key = t->nskeys ? bsearch(&k, t->skeys, t->nskeys, sizeof k, cmp_key) : NULL;
    return key && key->pos != UINT32_MAX ? key->pos : SIZE_MAX;
}

#define MAX_SAMPLED_THREADS 4096

/* After loading: gives every sampled (ident, tid) a thread position,
 * adding threads the trace has no events of. */
static int samples_threads(sw_trace *t)
{
    sample_key *keys = NULL;
    size_t n = 0, cap = 0;
    uint64_t last_i = 0, last_t = 0;
    int have_last = 0, rc;
    sw_bytes buf = {0};
    const side_index *ix = &t->side[SW_SIDE_SAMPLES];
    for (size_t i = 0; i < ix->nchunks; i++) {
        sw_cursor c;
        if ((rc = sw_index_payload(t, &ix->chunks[i], &buf, &c))) {
            free(keys);
            sw_bytes_free(&buf);
            return rc;
        }
        uint64_t cnt = 0;   /* checked at load */
        sw_cur_varint(&c, &cnt);
        for (uint64_t k = 0; k < cnt; k++) {
            side_raw r;
            samples_parse(&c, &r);
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
    sw_bytes_free(&buf);
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
            thread_rec *r = sw_index_thread(t, next_index++);
            if (!r) {
                free(keys);
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
    return SW_OK;
}

static void samples_counted(sw_trace *t, size_t pos) { t->threads[pos].info.samples++; }

/* The sample r, into the cursor's buffers. */
static int samples_item(sw_side_cursor *c, const side_raw *r, sw_side_item *out)
{
    if (r->depth > c->cap) {
        size_t cap = (size_t)r->depth;
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
    sw_cursor fc = {r->frames, c->c.p};
    for (uint64_t k = 0; k < r->depth; k++) {
        uint64_t id = 0;
        sw_cur_varint(&fc, &id);
        c->frames[k] = (uint32_t)id;
    }
    sw_cursor lc = {r->lines, c->c.p};
    for (uint64_t k = 0; r->lines && k < r->depth; k++) {
        uint64_t line = 0;
        sw_cur_varint(&lc, &line);
        c->lines[k] = line > UINT32_MAX ? UINT32_MAX : (uint32_t)line;
    }
    sw_trace_sample *s = &c->sample;
    s->t_ns = out->t_ns;
    s->thread = out->thread;
    s->state = r->state > UINT32_MAX ? UINT32_MAX : (uint32_t)r->state;
    s->flags = r->flags > UINT32_MAX ? UINT32_MAX : (uint32_t)r->flags;
    s->weight_ns = r->weight;
    s->cpu_ns = r->cpu1 ? r->cpu1 - 1 : UINT64_MAX;
    s->depth = (uint32_t)r->depth;
    s->frames = c->frames;
    s->lines = r->lines ? c->lines : NULL;
    out->event = SW_EV_SAMPLE;
    out->sample = s;
    return 1;
}

/* ---- records of threads written by another thread (format 1.8) ---- */

/* One record: varint tid, varint zigzag time, varint kind, varint length,
 * its payload. */
static int thread_records_parse(sw_cursor *c, side_raw *r)
{
    r->ident = 0;
    if (sw_cur_varint(c, &r->tid) || sw_cur_varint(c, &r->zt) || sw_cur_varint(c, &r->kind) ||
        sw_cur_varint(c, &r->len) || r->len > (uint64_t)(c->end - c->p))
        return SW_EFORMAT;
    r->payload = c->p;
    c->p += r->len;
    return SW_OK;
}

static size_t thread_records_thread(const sw_trace *t, const side_raw *r)
{
    return sw_index_thread_of_tid(t, r->tid);
}

/* The record r decoded by its kind's row (records.h); 0 for a kind
 * without one (a newer minor version's) or one the replay consumes. */
static int thread_records_item(sw_side_cursor *c, const side_raw *r, sw_side_item *out)
{
    const sw_record_kind *k = sw_record_kind_of(r->kind);
    if (!k || k->shape == SW_RS_REPLAY)
        return 0;
    sw_record_decode((uint32_t)r->kind, r->payload, (size_t)r->len, &c->t->strings, c->s1, c->s2, &c->x);
    out->event = SW_EV_EXT;
    out->ext = &c->x;
    return 1;
}

#define thread_records_threads NULL
#define thread_records_counted NULL

/* ---- the table ---- */

typedef struct side_kind {
    const char *name;
    unsigned chunk;          /* the chunk type holding its records */
    /* One record at c: its bounds checked (nonzero: malformed). */
    int (*parse)(sw_cursor *c, side_raw *r);
    /* Run once after the load, before the records are attributed (NULL:
     * nothing): a stream that adds threads to the list. */
    int (*threads)(sw_trace *t);
    /* The record's thread: its position in the list, or SIZE_MAX. */
    size_t (*thread)(const sw_trace *t, const side_raw *r);
    /* Told of each record given a thread at load (NULL: nothing). */
    void (*counted)(sw_trace *t, size_t pos);
    /* The record decoded into out (t_ns and thread set): 1, or 0 to skip
     * it, or a negative code. */
    int (*item)(sw_side_cursor *c, const side_raw *r, sw_side_item *out);
} side_kind;

#define SW_X_SIDE_ROW_(K, name, chunk) \
    {#name, chunk, name##_parse, name##_threads, name##_thread, name##_counted, name##_item},
static const side_kind side_kinds[SW_SIDE_STREAM_COUNT] = {SW_SIDE_STREAMS(SW_X_SIDE_ROW_)};

const char *sw_side_stream_name(unsigned kind) { return kind < SW_SIDE_STREAM_COUNT ? side_kinds[kind].name : "?"; }
uint64_t sw_side_stream_records(const sw_trace *t, unsigned kind)
{
    return kind < SW_SIDE_STREAM_COUNT ? t->side[kind].records : 0;
}
uint64_t sw_side_stream_unattributed(const sw_trace *t, unsigned kind)
{
    return kind < SW_SIDE_STREAM_COUNT ? t->side[kind].unattributed : 0;
}

/* ---- load ---- */

int sw_side_add_chunk(sw_trace *t, unsigned type, const uint8_t *p, uint64_t off, uint32_t len)
{
    unsigned kind = 0;
    while (kind < SW_SIDE_STREAM_COUNT && side_kinds[kind].chunk != type)
        kind++;
    if (kind == SW_SIDE_STREAM_COUNT || (kind == SW_SIDE_SAMPLES && t->bad_frame_kind))
        return SW_OK;
    /* A varint count, then that many records, and nothing after them. */
    sw_cursor c = sw_cursor_of(p, len);
    uint64_t n;
    if (sw_cur_varint(&c, &n) || n > len)
        return SW_EFORMAT;
    for (uint64_t k = 0; k < n; k++) {
        side_raw r;
        if (side_kinds[kind].parse(&c, &r))
            return SW_EFORMAT;
    }
    if (c.p != c.end)
        return SW_EFORMAT;
    side_index *ix = &t->side[kind];
    chunk_ref *cs = sw_array_grow(ix->chunks, &ix->cap, ix->nchunks + 1, sizeof *cs, 16);
    if (!cs)
        return SW_ENOMEM;
    ix->chunks = cs;
    ix->chunks[ix->nchunks++] = (chunk_ref){off, len, n, 0};
    return SW_OK;
}

/* Counts the records of stream kind that have a thread, and those that
 * have none. */
static int count_records(sw_trace *t, unsigned kind)
{
    const side_kind *k = &side_kinds[kind];
    side_index *ix = &t->side[kind];
    sw_bytes buf = {0};
    uint64_t last_i = 0, last_t = 0;
    size_t last = SIZE_MAX;
    int have_last = 0;
    for (size_t i = 0; i < ix->nchunks; i++) {
        sw_cursor c;
        int rc = sw_index_payload(t, &ix->chunks[i], &buf, &c);
        if (rc) {
            sw_bytes_free(&buf);
            return rc;
        }
        uint64_t n = 0;   /* checked at load */
        sw_cur_varint(&c, &n);
        for (uint64_t j = 0; j < n; j++) {
            side_raw r;
            k->parse(&c, &r);
            if (!have_last || r.ident != last_i || r.tid != last_t) {
                last = k->thread(t, &r);
                last_i = r.ident;
                last_t = r.tid;
                have_last = 1;
            }
            if (last == SIZE_MAX) {
                ix->unattributed++;
            } else {
                ix->records++;
                if (k->counted)
                    k->counted(t, last);
            }
        }
    }
    sw_bytes_free(&buf);
    return SW_OK;
}

int sw_side_streams_index(sw_trace *t)
{
    int rc;
    for (unsigned kind = 0; kind < SW_SIDE_STREAM_COUNT; kind++)
        if (side_kinds[kind].threads && (rc = side_kinds[kind].threads(t)) != SW_OK)
            return rc;
    for (unsigned kind = 0; kind < SW_SIDE_STREAM_COUNT; kind++)
        if ((rc = count_records(t, kind)) != SW_OK)
            return rc;
    return SW_OK;
}

void sw_side_streams_free(sw_trace *t)
{
    for (uint32_t i = 0; i < t->frame_limit; i++)
        free_frame(t->frames[i]);
    free(t->frames);
    free(t->skeys);
    for (unsigned kind = 0; kind < SW_SIDE_STREAM_COUNT; kind++)
        free(t->side[kind].chunks);
}

/* ---- the cursor ---- */

sw_side_cursor *sw_side_cursor_new(sw_trace *t, unsigned kind, size_t thread)
{
    if (kind >= SW_SIDE_STREAM_COUNT)
        return NULL;
    sw_side_cursor *c = calloc(1, sizeof *c);
    if (c) {
        c->t = t;
        c->kind = kind;
        c->thread = thread;
    }
    return c;
}

void sw_side_cursor_free(sw_side_cursor *c)
{
    if (!c)
        return;
    free(c->frames);
    free(c->lines);
    sw_bytes_free(&c->buf);
    free(c);
}

int sw_side_cursor_next(sw_side_cursor *c, sw_side_item *out)
{
    sw_trace *t = c->t;
    const side_kind *k = &side_kinds[c->kind];
    const side_index *ix = &t->side[c->kind];
    for (;;) {
        while (!c->left) {
            if (c->chunk >= ix->nchunks)
                return 0;
            int rc = sw_index_payload(t, &ix->chunks[c->chunk++], &c->buf, &c->c);
            if (rc)
                return rc == SW_EFORMAT ? SW_EIO : rc;
            if (sw_cur_varint(&c->c, &c->left))
                return SW_EFORMAT;  /* checked at load: cannot happen */
        }
        c->left--;
        side_raw r;
        if (k->parse(&c->c, &r))
            return SW_EFORMAT;
        if (!c->have_last || r.ident != c->last_ident || r.tid != c->last_tid) {
            c->last_pos = k->thread(t, &r);
            c->last_ident = r.ident;
            c->last_tid = r.tid;
            c->have_last = 1;
        }
        if (c->last_pos == SIZE_MAX || (c->thread != SIZE_MAX && c->last_pos != c->thread))
            continue;
        /* Times within +-2^61 ns, like event times. */
        int64_t ns = sw_unzigzag(r.zt);
        const int64_t lim = (int64_t)1 << 61;
        *out = (sw_side_item){ns > lim ? lim : ns < -lim ? -lim : ns, (uint32_t)c->last_pos, 0, NULL, NULL};
        int rc = k->item(c, &r, out);
        if (rc)
            return rc;
    }
}

/* ---- the samples' and the thread records' own interface (reader.h) ---- */

uint32_t sw_trace_frame_limit(const sw_trace *t) { return t->frame_limit; }
const sw_frame_info *sw_trace_frame(const sw_trace *t, uint32_t id) { return id < t->frame_limit ? t->frames[id] : NULL; }
uint64_t sw_trace_sample_count(const sw_trace *t) { return t->side[SW_SIDE_SAMPLES].records; }
uint64_t sw_trace_samples_unattributed(const sw_trace *t) { return t->side[SW_SIDE_SAMPLES].unattributed; }
uint64_t sw_trace_thread_record_count(const sw_trace *t) { return t->side[SW_SIDE_THREAD_RECORDS].records; }
uint64_t sw_trace_thread_records_unattributed(const sw_trace *t)
{
    return t->side[SW_SIDE_THREAD_RECORDS].unattributed;
}

/* The samples' and the thread records' cursors wrap a side cursor (their
 * first and only member). */
static void *wrapper_new(sw_trace *t, unsigned kind, size_t thread)
{
    sw_side_cursor **w = calloc(1, sizeof *w);
    if (w && !(*w = sw_side_cursor_new(t, kind, thread))) {
        free(w);
        w = NULL;
    }
    return w;
}

static void wrapper_free(void *w)
{
    if (w)
        sw_side_cursor_free(*(sw_side_cursor **)w);
    free(w);
}

struct sw_sample_cursor {
    sw_side_cursor *c;
};

sw_sample_cursor *sw_sample_cursor_new(sw_trace *t, size_t thread) { return wrapper_new(t, SW_SIDE_SAMPLES, thread); }
void sw_sample_cursor_free(sw_sample_cursor *c) { wrapper_free(c); }

int sw_sample_cursor_next(sw_sample_cursor *c, sw_trace_sample *out)
{
    sw_side_item it;
    int n = sw_side_cursor_next(c->c, &it);
    if (n == 1)
        *out = *it.sample;
    return n;
}

struct sw_trec_cursor {
    sw_side_cursor *c;
};

sw_trec_cursor *sw_trec_cursor_new(sw_trace *t, size_t thread)
{
    return wrapper_new(t, SW_SIDE_THREAD_RECORDS, thread);
}
void sw_trec_cursor_free(sw_trec_cursor *c) { wrapper_free(c); }

int sw_trec_cursor_next(sw_trec_cursor *c, sw_trace_trec *out)
{
    sw_side_item it;
    int n = sw_side_cursor_next(c->c, &it);
    if (n == 1)
        *out = (sw_trace_trec){it.t_ns, it.thread, it.ext};
    return n;
}
