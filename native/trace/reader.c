/*
 * reader.c - bounded parsing of trace files (see reader.h, docs/format.md).
 * Every read is checked against the end of its chunk; nothing in the input
 * can make the reader read outside the loaded buffer.
 */
#define _GNU_SOURCE
#include "reader.h"

#include "base/bytes.h"
#include "base/crc32.h"
#include "format.h"
#include "base/varint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct chunk_ref {
    size_t off;              /* payload offset in the buffer */
    size_t len;
    uint64_t seq;
} chunk_ref;

typedef struct thread_rec {
    sw_thread_info info;
    char *name;
    chunk_ref *chunks;
    size_t nchunks, cap;
} thread_rec;

struct sw_trace {
    uint8_t *buf;
    size_t len;
    char damage[256];
    int complete;
    sw_meta_entry *meta;
    size_t nmeta, meta_cap;
    size_t nmeta_header;     /* entries before this index come from META */
    thread_rec *threads;
    size_t nthreads, threads_cap;
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
};

/* A sampled thread: its ident and native tid, and its position in the
 * thread list (UINT32_MAX: none could be given). */
typedef struct sample_key {
    uint64_t ident, tid;
    uint32_t pos;
} sample_key;

static void set_damage(sw_trace *t, const char *fmt, size_t off, const char *what)
{
    if (t->damage[0])
        return;
    snprintf(t->damage, sizeof t->damage, fmt, what, off);
}

typedef struct cursor {
    const uint8_t *p, *end;
} cursor;

static int get_u(cursor *c, uint64_t *v) { return sw_get_varint(&c->p, c->end, v); }

static int get_u8(cursor *c, uint8_t *v)
{
    if (c->p >= c->end)
        return SW_ETRUNC;
    *v = *c->p++;
    return SW_OK;
}

/* Reads a str into a fresh NUL-terminated copy. */
static int get_str(cursor *c, char **out, size_t *outlen)
{
    uint64_t n;
    int rc = get_u(c, &n);
    if (rc)
        return rc;
    if (n > (uint64_t)(c->end - c->p))
        return SW_ETRUNC;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return SW_ENOMEM;
    memcpy(s, c->p, (size_t)n);
    s[n] = 0;
    c->p += n;
    *out = s;
    if (outlen)
        *outlen = (size_t)n;
    return SW_OK;
}

static int parse_kv(sw_trace *t, cursor *c)
{
    while (c->p < c->end) {
        sw_meta_entry e;
        memset(&e, 0, sizeof e);
        char *key = NULL;
        uint8_t type;
        int rc = get_str(c, &key, NULL);
        if (rc)
            return rc;
        if ((rc = get_u8(c, &type))) {
            free(key);
            return rc;
        }
        e.key = key;
        e.type = type;
        switch (type) {
        case SW_VAL_UINT:
            rc = get_u(c, &e.u);
            e.i = (int64_t)e.u;
            e.f = (double)e.u;
            break;
        case SW_VAL_SINT:
            rc = get_u(c, &e.u);
            e.i = sw_unzigzag(e.u);
            e.f = (double)e.i;
            break;
        case SW_VAL_BYTES: {
            char *s = NULL;
            rc = get_str(c, &s, &e.slen);
            e.s = s;
            break;
        }
        case SW_VAL_F64: {
            if (c->end - c->p < 8) {
                rc = SW_ETRUNC;
                break;
            }
            uint64_t u = 0;
            for (int k = 0; k < 8; k++)
                u |= (uint64_t)c->p[k] << (8 * k);
            memcpy(&e.f, &u, 8);
            c->p += 8;
            break;
        }
        default:
            rc = SW_EFORMAT;
        }
        if (rc) {
            free(key);
            return rc;
        }
        sw_meta_entry *m = sw_array_grow(t->meta, &t->meta_cap, t->nmeta + 1, sizeof *m, 32);
        if (!m) {
            free(key);
            free((char *)e.s);
            return SW_ENOMEM;
        }
        t->meta = m;
        t->meta[t->nmeta++] = e;
    }
    return SW_OK;
}

static thread_rec *thread_get(sw_trace *t, uint64_t index)
{
    for (size_t i = 0; i < t->nthreads; i++)
        if (t->threads[i].info.index == index)
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

static int parse_threads(sw_trace *t, cursor *c)
{
    while (c->p < c->end) {
        uint64_t index, tid, ident;
        char *name = NULL;
        int rc;
        if ((rc = get_u(c, &index)) || (rc = get_u(c, &tid)) || (rc = get_u(c, &ident)) ||
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

static int parse_codes(sw_trace *t, cursor *c)
{
    while (c->p < c->end) {
        uint64_t id, line;
        uint8_t kind;
        char *name = NULL, *qual = NULL, *file = NULL;
        int rc;
        if ((rc = get_u(c, &id)) || (rc = get_u8(c, &kind)) || (rc = get_str(c, &name, NULL)) ||
            (rc = get_str(c, &qual, NULL)) || (rc = get_str(c, &file, NULL)) ||
            (rc = get_u(c, &line)))
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

static int parse_frames(sw_trace *t, cursor *c)
{
    while (c->p < c->end) {
        uint64_t id, line;
        uint8_t kind;
        char *name = NULL, *file = NULL;
        int rc;
        if ((rc = get_u(c, &id)) || (rc = get_u8(c, &kind)) || (rc = get_str(c, &name, NULL)) ||
            (rc = get_str(c, &file, NULL)) || (rc = get_u(c, &line)))
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

static int parse_sample(cursor *c, sample_raw *r)
{
    uint64_t len;
    if (get_u(c, &len) || len > (uint64_t)(c->end - c->p))
        return SW_EFORMAT;
    cursor s = {c->p, c->p + len};
    c->p += len;
    if (get_u(&s, &r->ident) || get_u(&s, &r->tid) || get_u(&s, &r->zt) || get_u(&s, &r->weight) ||
        get_u(&s, &r->cpu1) || get_u(&s, &r->state) || get_u(&s, &r->flags) || get_u(&s, &r->depth) ||
        r->depth > (uint64_t)(s.end - s.p))
        return SW_EFORMAT;
    r->frames = s.p;
    for (uint64_t k = 0; k < r->depth; k++) {
        uint64_t id;
        if (get_u(&s, &id) || id > UINT32_MAX)
            return SW_EFORMAT;
    }
    /* Format 1.3: the lines being run, one per frame, when recorded. */
    r->lines = NULL;
    if (s.p < s.end) {
        uint64_t n;
        if (get_u(&s, &n) || (n != r->depth && n != 0))
            return SW_EFORMAT;
        r->lines = n ? s.p : NULL;
        for (uint64_t k = 0; k < n; k++) {
            uint64_t line;
            if (get_u(&s, &line))
                return SW_EFORMAT;
        }
    }
    return SW_OK;  /* bytes after the known fields: a newer minor's */
}

/* Checks a whole SAMPLES chunk before it is indexed, so that iterating
 * samples later cannot fail. */
static int add_samples_chunk(sw_trace *t, size_t off, size_t len)
{
    cursor c = {t->buf + off, t->buf + off + len};
    uint64_t n;
    if (get_u(&c, &n) || n > len)
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
    t->samples[t->nsample_chunks++] = (chunk_ref){off, len, n};
    return SW_OK;
}

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
    int have_last = 0;
    for (size_t i = 0; i < t->nsample_chunks; i++) {
        cursor c = {t->buf + t->samples[i].off, t->buf + t->samples[i].off + t->samples[i].len};
        uint64_t cnt;
        get_u(&c, &cnt);
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
        if (t->threads[i].info.index >= next_index)
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
        cursor c = {t->buf + t->samples[i].off, t->buf + t->samples[i].off + t->samples[i].len};
        uint64_t cnt = 0;   /* stays 0 if the chunk was damaged (checked at load) */
        get_u(&c, &cnt);
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
    return SW_OK;
}

/* The fixed part of an EVENTS payload. */
typedef struct events_head {
    uint64_t index, seq, t0, dropped, depth;
    const uint8_t *prefix;   /* depth varints */
    uint64_t n;
    const uint8_t *body;
} events_head;

static int parse_events_head(cursor *c, events_head *h)
{
    int rc;
    if ((rc = get_u(c, &h->index)) || (rc = get_u(c, &h->seq)) || (rc = get_u(c, &h->t0)) ||
        (rc = get_u(c, &h->dropped)) || (rc = get_u(c, &h->depth)))
        return rc;
    if (h->depth > (uint64_t)(c->end - c->p))
        return SW_ETRUNC;
    h->prefix = c->p;
    for (uint64_t k = 0; k < h->depth; k++) {
        uint64_t id;
        if ((rc = get_u(c, &id)))
            return rc;
    }
    if ((rc = get_u(c, &h->n)))
        return rc;
    h->body = c->p;
    return SW_OK;
}

static int add_events_chunk(sw_trace *t, size_t off, size_t len)
{
    cursor c = {t->buf + off, t->buf + off + len};
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
    r->chunks[r->nchunks++] = (chunk_ref){off, len, h.seq};
    r->info.chunks++;
    r->info.events += h.n;
    r->info.dropped += h.dropped;
    return SW_OK;
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static const char *chunk_name(int type)
{
    switch (type) {
    case SW_CHUNK_META: return "META";
    case SW_CHUNK_CODE: return "CODE";
    case SW_CHUNK_THREAD: return "THREAD";
    case SW_CHUNK_EVENTS: return "EVENTS";
    case SW_CHUNK_END: return "END";
    case SW_CHUNK_SAMPLE_FRAMES: return "SAMPLE_FRAMES";
    case SW_CHUNK_SAMPLES: return "SAMPLES";
    default: return "unknown";
    }
}

static int cmp_chunk(const void *a, const void *b)
{
    const chunk_ref *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int load(sw_trace *t, char *err, size_t errlen)
{
    if (t->len < SW_FILE_HEADER_LEN || memcmp(t->buf, SW_MAGIC, SW_MAGIC_LEN) != 0) {
        snprintf(err, errlen, "not a stackwatch trace (bad magic number)");
        return SW_EFORMAT;
    }
    unsigned major = t->buf[8] | (unsigned)t->buf[9] << 8;
    if (major != SW_FORMAT_MAJOR) {
        snprintf(err, errlen, "trace format version %u is not supported (this reader reads version %d)",
                 major, SW_FORMAT_MAJOR);
        return SW_EVERSION;
    }
    size_t off = SW_FILE_HEADER_LEN;
    int saw_meta = 0;
    while (off < t->len) {
        if (t->len - off < SW_CHUNK_HEADER_LEN) {
            set_damage(t, "%s: the file ends inside a chunk header at offset %zu", off, "truncated");
            break;
        }
        const uint8_t *h = t->buf + off;
        int type = h[0];
        size_t plen = rd32(h + 4);
        uint32_t crc = rd32(h + 8);
        size_t poff = off + SW_CHUNK_HEADER_LEN;
        if (plen > SW_CHUNK_MAX || plen > t->len - poff) {
            set_damage(t, "%s: a chunk at offset %zu is longer than the rest of the file", off, "truncated");
            break;
        }
        if (sw_crc32(0, t->buf + poff, plen) != crc) {
            set_damage(t, "%s: checksum mismatch in the chunk at offset %zu", off, "corrupted");
            break;
        }
        cursor c = {t->buf + poff, t->buf + poff + plen};
        int rc = SW_OK;
        switch (type) {
        case SW_CHUNK_META:
            saw_meta = 1;
            rc = parse_kv(t, &c);
            t->nmeta_header = t->nmeta;
            break;
        case SW_CHUNK_CODE: rc = parse_codes(t, &c); break;
        case SW_CHUNK_THREAD: rc = parse_threads(t, &c); break;
        case SW_CHUNK_EVENTS: rc = add_events_chunk(t, poff, plen); break;
        case SW_CHUNK_END:
            rc = parse_kv(t, &c);
            t->complete = 1;
            break;
        case SW_CHUNK_SAMPLE_FRAMES: rc = parse_frames(t, &c); break;
        case SW_CHUNK_SAMPLES: rc = add_samples_chunk(t, poff, plen); break;
        default:
            break;  /* a newer minor version's chunk: skip it */
        }
        if (rc == SW_ENOMEM) {
            snprintf(err, errlen, "out of memory while reading the trace");
            return rc;
        }
        if (rc && t->bad_frame_kind) {
            char what[96];
            snprintf(what, sizeof what, "sample frame of unknown kind %d (written by a newer stackwatch?)",
                     t->bad_frame_kind - 1);
            set_damage(t, "%s in the SAMPLE_FRAMES chunk at offset %zu", off, what);
            break;
        }
        if (rc) {
            char what[64];
            snprintf(what, sizeof what, "malformed %s chunk", chunk_name(type));
            set_damage(t, "%s at offset %zu", off, what);
            break;
        }
        off = poff + plen;
    }
    if (!saw_meta) {
        snprintf(err, errlen, "not a readable stackwatch trace (no intact header chunk)%s%s",
                 t->damage[0] ? ": " : "", t->damage);
        return SW_EFORMAT;
    }
    const sw_meta_entry *e;
    t->ns_per_tick = 1.0;
    if ((e = sw_trace_meta_find(t, "time_shift")))
        t->shift = e->u > 30 ? 30 : (unsigned)e->u;
    if ((e = sw_trace_meta_find(t, "tick0")))
        t->tick0 = e->u;
    /* A refined rate from END wins over the first estimate in META. */
    e = sw_trace_meta_find(t, "clock_hz_refined");
    if (!e)
        e = sw_trace_meta_find(t, "clock_hz");
    if (e && e->f > 1e3)
        t->ns_per_tick = 1e9 / e->f;
    t->end_ns = -1;
    if ((e = sw_trace_meta_find(t, "end_ticks")))
        t->end_ns = sw_trace_units_to_ns(t, e->u >> t->shift);
    if (map_sampled_threads(t) != SW_OK) {
        snprintf(err, errlen, "out of memory while reading the trace");
        return SW_ENOMEM;
    }
    for (size_t i = 0; i < t->nthreads; i++) {
        thread_rec *r = &t->threads[i];
        if (r->nchunks > 1)  /* qsort(NULL, 0, ...) is undefined */
            qsort(r->chunks, r->nchunks, sizeof *r->chunks, cmp_chunk);
        char key[48];
        snprintf(key, sizeof key, "dropped.%u", r->info.index);
        if ((e = sw_trace_meta_find(t, key)))
            r->info.dropped += e->u;
    }
    return SW_OK;
}

int sw_trace_open_mem(const uint8_t *data, size_t len, sw_trace **out, char *err, size_t errlen)
{
    *out = NULL;
    sw_trace *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    t->buf = malloc(len ? len : 1);
    if (!t->buf) {
        free(t);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    if (len)
        memcpy(t->buf, data, len);
    t->len = len;
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
    sw_bytes b = {0};
    int rc = sw_bytes_read_file(&b, path, err, errlen);
    if (rc) {
        sw_bytes_free(&b);
        return rc;
    }
    uint8_t *buf = b.data;
    size_t len = b.len;
    sw_trace *t = calloc(1, sizeof *t);
    if (!t) {
        free(buf);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    t->buf = buf;
    t->len = len;
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
    for (size_t i = 0; i < t->nthreads; i++) {
        free(t->threads[i].name);
        free(t->threads[i].chunks);
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
    free(t->buf);
    free(t);
}

const char *sw_trace_damage(const sw_trace *t) { return t->damage; }
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
typedef struct replay {
    uint32_t *stack;
    uint8_t *ended;
    uint32_t depth, cap;
    uint32_t nended;         /* frames of the stack that are `ended` */
    const thread_rec *tr;    /* the thread replayed, and the index of the */
    size_t chunk;            /* chunk being read (for reading ahead) */
    int64_t last_ns;
    sw_event_fn fn;
    void *ud;
    unsigned flags;          /* SW_REPLAY_* */
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

static int emit(replay *r, int kind, uint32_t code, uint32_t depth, int synthetic)
{
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
static int get_ext_str(cursor *c, char *buf)
{
    uint64_t n;
    buf[0] = 0;
    if (get_u(c, &n) || n > (uint64_t)(c->end - c->p))
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

/* Decodes the payload of an EXT event of a known kind (2-13) into x. A
 * payload shorter than the kind's fields sets x->malformed; bytes after
 * them are ignored (room for fields a newer minor version adds). */
static void decode_ext(replay *r, uint64_t kind, const uint8_t *p, size_t len, sw_ext *x)
{
    memset(x, 0, sizeof *x);
    cursor c = {p, p + len};
    x->kind = (uint32_t)kind;
    x->code = SW_EXT_NO_CODE;
    r->s1[0] = r->s2[0] = 0;
    x->s1 = r->s1;
    x->s2 = r->s2;
    uint64_t code = 0;
    int bad = 0;
    switch (kind) {
    case SW_EXT_LINE:
    case SW_EXT_INSTRUCTION:
    case SW_EXT_RAISE:
    case SW_EXT_HANDLED:
        bad = get_u(&c, &code) || code >= SW_EXT_NO_CODE || get_u(&c, &x->line);
        if (!bad)
            x->code = (uint32_t)code;
        if (!bad && kind == SW_EXT_INSTRUCTION)
            bad = get_u(&c, &x->a) || get_u(&c, &x->b) || get_ext_str(&c, r->s1);
        else if (!bad && kind != SW_EXT_LINE)
            bad = get_ext_str(&c, r->s1) != SW_OK;
        break;
    case SW_EXT_GC_START:
        bad = get_u(&c, &x->a);
        break;
    case SW_EXT_GC_DONE:
        bad = get_u(&c, &x->a) || get_u(&c, &x->b) || get_u(&c, &x->c);
        break;
    case SW_EXT_NEW_START:
    case SW_EXT_NEW_DONE:
    case SW_EXT_DEL_START:
    case SW_EXT_DEL_DONE:
        bad = get_ext_str(&c, r->s1) || get_ext_str(&c, r->s2);
        break;
    case SW_EXT_THREAD_START:
    case SW_EXT_THREAD_EXIT:
        bad = get_ext_str(&c, r->s1) || get_u(&c, &x->a);
        break;
    }
    x->malformed = bad != 0;
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

/* How the innermost open frame ends: its exit op, read ahead from c (n
 * events left in the chunk, then the thread's next chunks while no gap
 * comes between), or SW_OP_RETURN if the stream ends (or is damaged)
 * first, as the frame is then closed by a synthetic return. */
static unsigned peek_exit(const sw_trace *t, const replay *r, cursor c, uint64_t n)
{
    uint64_t level = 0;
    size_t k = r->chunk;
    for (;;) {
        for (; n > 0; n--) {
            uint64_t x, v, len;
            if (get_u(&c, &x))
                return SW_OP_RETURN;
            unsigned op = (unsigned)(x & ((1u << SW_OP_BITS) - 1));
            switch (op) {
            case SW_OP_CALL:
            case SW_OP_RESUME:
            case SW_OP_C_CALL:
                if (get_u(&c, &v))
                    return SW_OP_RETURN;
                level++;
                break;
            case SW_OP_EXT:
                if (get_u(&c, &v) || get_u(&c, &len) || len > (uint64_t)(c.end - c.p))
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
        const chunk_ref *ch = &r->tr->chunks[k];
        cursor nc = {t->buf + ch->off, t->buf + ch->off + ch->len};
        events_head h;
        if (parse_events_head(&nc, &h))
            return SW_OP_RETURN;
        c.p = h.body;
        c.end = nc.end;
        n = h.n;
    }
}

static int replay_chunk(sw_trace *t, replay *r, const chunk_ref *ch, int gap)
{
    cursor c = {t->buf + ch->off, t->buf + ch->off + ch->len};
    events_head h;
    int rc = parse_events_head(&c, &h);
    if (rc)
        return rc;
    uint64_t now = h.t0;
    int64_t t0_ns = sw_trace_units_to_ns(t, h.t0);
    /* Reconcile the open frames with the chunk's prefix: after a gap
     * nothing is known of what happened between, so close everything and
     * reopen the prefix; without a gap they must already agree. */
    int agree = !gap && h.depth == r->depth;
    cursor pc = {h.prefix, h.body};
    for (uint64_t k = 0; agree && k < h.depth; k++) {
        uint64_t id;
        if (get_u(&pc, &id))
            return SW_EFORMAT;
        agree = id == r->stack[k];
    }
    if (!agree) {
        if ((rc = close_to(r, 0)))
            return rc;
        if (t0_ns > r->last_ns)
            r->last_ns = t0_ns;
        if (h.dropped || gap) {
            if ((rc = emit(r, SW_EV_DROPPED, (uint32_t)(h.dropped > UINT32_MAX ? UINT32_MAX : h.dropped), 0, 1)))
                return rc;
        }
        pc.p = h.prefix;
        for (uint64_t k = 0; k < h.depth; k++) {
            uint64_t id;
            if (get_u(&pc, &id) || id > UINT32_MAX)
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
        if (get_u(&c, &x))
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
            if (get_u(&c, &id) || id > UINT32_MAX)
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
            if (get_u(&c, &kind) || get_u(&c, &len) || len > (uint64_t)(c.end - c.p))
                return SW_EFORMAT;
            if (kind == SW_EXT_DROPPED) {
                cursor e = {c.p, c.p + len};
                uint64_t n = 0;
                if (get_u(&e, &n))
                    return SW_EFORMAT;
                if ((rc = emit(r, SW_EV_DROPPED, (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n), seen_depth(r), 0)))
                    return rc;
            } else if (kind == SW_EXT_TEARDOWN) {
                /* The first of a clearing's TEARDOWN events ends the frame. */
                if (r->depth > 0 && !r->ended[r->depth - 1]) {
                    cursor rest = {c.p + len, c.end};
                    unsigned exit_op = peek_exit(t, r, rest, h.n - k - 1);
                    r->ended[r->depth - 1] = 1;
                    r->nended++;
                    if ((rc = emit(r, (int)exit_op, r->stack[r->depth - 1], seen_depth(r), 0)))
                        return rc;
                }
            } else if ((r->flags & SW_REPLAY_EXT) && kind >= SW_EXT_LINE && kind <= SW_EXT_THREAD_EXIT) {
                sw_ext x;
                decode_ext(r, kind, c.p, (size_t)len, &x);
                sw_event ev = {r->last_ns, x.code, seen_depth(r), SW_EV_EXT, 0, &x, NULL};
                if ((rc = r->fn(r->ud, &ev)))
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
    if (i >= t->nthreads)
        return SW_EARG;
    thread_rec *tr = &t->threads[i];
    replay r;
    memset(&r, 0, sizeof r);
    r.fn = fn;
    r.ud = ud;
    r.flags = flags;
    int rc = SW_OK;
    r.last_ns = INT64_MIN;
    r.tr = tr;
    for (size_t k = 0; k < tr->nchunks && rc == SW_OK; k++) {
        r.chunk = k;
        int gap = k > 0 ? tr->chunks[k].seq != tr->chunks[k - 1].seq + 1 : tr->chunks[k].seq != 0;
        rc = replay_chunk(t, &r, &tr->chunks[k], gap);
        if (rc < 0 && !t->damage[0])
            snprintf(t->damage, sizeof t->damage,
                     "corrupted: malformed events in thread %u, chunk %llu", tr->info.index,
                     (unsigned long long)tr->chunks[k].seq);
    }
    if (rc >= 0 && rc != SW_OK) {
        free(r.stack);
        free(r.ended);
        return rc;  /* the callback asked to stop */
    }
    int rc2;
    if (t->end_ns > r.last_ns && r.depth)
        r.last_ns = t->end_ns;
    rc2 = close_to(&r, 0);
    free(r.stack);
    free(r.ended);
    return rc2 ? rc2 : rc;
}

/* ---- samples ---- */

uint32_t sw_trace_frame_limit(const sw_trace *t) { return t->frame_limit; }
const sw_frame_info *sw_trace_frame(const sw_trace *t, uint32_t id) { return id < t->frame_limit ? t->frames[id] : NULL; }
uint64_t sw_trace_sample_count(const sw_trace *t) { return t->nsamples; }
uint64_t sw_trace_samples_unattributed(const sw_trace *t) { return t->unattributed; }

struct sw_sample_cursor {
    sw_trace *t;
    size_t thread;
    size_t chunk;            /* next chunk to open */
    cursor c;                /* within the current chunk */
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
    free(c);
}

int sw_sample_cursor_next(sw_sample_cursor *c, sw_trace_sample *out)
{
    sw_trace *t = c->t;
    for (;;) {
        while (!c->left) {
            if (c->chunk >= t->nsample_chunks)
                return 0;
            const chunk_ref *ch = &t->samples[c->chunk++];
            c->c = (cursor){t->buf + ch->off, t->buf + ch->off + ch->len};
            if (get_u(&c->c, &c->left))
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
        cursor fc = {r.frames, c->c.p};
        for (uint64_t k = 0; k < r.depth; k++) {
            uint64_t id = 0;
            get_u(&fc, &id);
            c->frames[k] = (uint32_t)id;
        }
        cursor lc = {r.lines, c->c.p};
        for (uint64_t k = 0; r.lines && k < r.depth; k++) {
            uint64_t line = 0;
            get_u(&lc, &line);
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
