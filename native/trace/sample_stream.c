/*
 * sample_stream.c - samples into the trace file (see sample_stream.h).
 */
#define _GNU_SOURCE
#include "sample_stream.h"

#include "format.h"

#include <stdlib.h>
#include <string.h>

#define FLUSH_BYTES (64u << 10)
#define FLUSH_NS 250000000
#define SKIP_ID (SW_NO_ID - 1)   /* sink_id of a Python frame cut with the frames outside it */
#define DROP_ID (SW_NO_ID - 2)   /* sink_id of a native frame left out alone */

struct sw_sample_stream {
    sw_writer *w;
    uint64_t mono0;
    char *skip;
    size_t skip_len;
    sw_bytes defs;           /* SAMPLE_FRAMES entries not written yet */
    sw_bytes body;           /* encoded samples not written yet */
    sw_bytes one;            /* the sample being encoded */
    sw_bytes out;            /* varint n + body */
    uint32_t *ids;           /* the sample's kept frame ids, innermost first */
    int32_t *lines;          /* their lines (when the sample has lines) */
    uint32_t cap;
    uint64_t nbody;          /* samples in body */
    uint32_t next_id;
    int64_t first_ns;        /* time of the first sample in body */
    uint64_t ignore[SW_SAMPLE_STREAM_MAX_IGNORE];   /* sw_sample_stream_set_ignore */
    size_t nignore;
    sw_sample_stream_stats st;
};

sw_sample_stream *sw_sample_stream_new(sw_writer *w, uint64_t mono0_ns, const char *skip_prefix)
{
    sw_sample_stream *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->w = w;
    st->mono0 = mono0_ns;
    if (skip_prefix && skip_prefix[0]) {
        st->skip = strdup(skip_prefix);
        if (!st->skip) {
            free(st);
            return NULL;
        }
        st->skip_len = strlen(st->skip);
    }
    return st;
}

void sw_sample_stream_free(sw_sample_stream *st)
{
    if (!st)
        return;
    sw_bytes_free(&st->defs);
    sw_bytes_free(&st->body);
    sw_bytes_free(&st->one);
    sw_bytes_free(&st->out);
    free(st->ids);
    free(st->lines);
    free(st->skip);
    free(st);
}

int sw_sample_stream_set_ignore(sw_sample_stream *st, const uint64_t *addrs, size_t n)
{
    if (n > SW_SAMPLE_STREAM_MAX_IGNORE)
        return SW_EARG;
    memcpy(st->ignore, addrs, n * sizeof *addrs);
    st->nignore = n;
    return SW_OK;
}

/* 1 if one of the sample's frames runs an ignored code object. */
/* Adds n to counter `field` of st->st. The counters are written by the
 * sampler's thread alone and read by sw_sample_stream_stats_get on any
 * thread while it runs (Sampler.stats()): relaxed atomic stores and loads,
 * no lock, no torn or racing read. */
#define COUNT(field, n) __atomic_store_n(&st->st.field, st->st.field + (uint64_t)(n), __ATOMIC_RELAXED)

static int inside_ignored(const sw_sample_stream *st, const sw_sample *s)
{
    for (uint32_t i = 0; st->nignore && i < s->depth; i++)
        for (size_t k = 0; k < st->nignore; k++)
            if (s->frames[i]->addr == st->ignore[k])
                return 1;
    return 0;
}

void sw_sample_stream_stats_get(const sw_sample_stream *st, sw_sample_stream_stats *out)
{
    out->samples = __atomic_load_n(&st->st.samples, __ATOMIC_RELAXED);
    out->frames = __atomic_load_n(&st->st.frames, __ATOMIC_RELAXED);
    out->chunks = __atomic_load_n(&st->st.chunks, __ATOMIC_RELAXED);
    out->lost = __atomic_load_n(&st->st.lost, __ATOMIC_RELAXED);
    out->cut = __atomic_load_n(&st->st.cut, __ATOMIC_RELAXED);
}

/* The frame id of a code object, defining it on first use; SKIP_ID for
 * Python frames left out with the frames outside them, DROP_ID for native
 * frames left out alone (the tracer's own C functions between two Python
 * frames), SW_NO_ID when out of memory. A native frame (sample.h) is
 * defined as kind SW_FRAME_NATIVE, named without the " [native]" suffix. */
static uint32_t frame_id(sw_sample_stream *st, sw_sample_code *c)
{
    if (c->sink_id != SW_NO_ID)
        return c->sink_id;
    int native = c->name && sw_sample_code_is_native(c);
    if (st->skip && c->filename && strncmp(c->filename, st->skip, st->skip_len) == 0)
        return c->sink_id = native ? DROP_ID : SKIP_ID;
    if (st->next_id >= DROP_ID)
        return SW_NO_ID;
    size_t mark = st->defs.len;
    sw_bytes_varint(&st->defs, st->next_id);
    sw_bytes_u8(&st->defs, native ? SW_FRAME_NATIVE : SW_FRAME_PYTHON);
    if (native) {
        sw_bytes_varint(&st->defs, c->name_len - SW_NATIVE_SUFFIX_LEN);
        sw_bytes_put(&st->defs, c->name, c->name_len - SW_NATIVE_SUFFIX_LEN);
    } else {
        sw_bytes_str(&st->defs, c->name ? c->name : "?");
    }
    sw_bytes_str(&st->defs, c->filename ? c->filename : "");
    sw_bytes_varint(&st->defs, c->firstlineno < 0 ? 0 : (uint64_t)c->firstlineno);
    if (st->defs.failed) {
        st->defs.len = mark;
        st->defs.failed = 0;
        return SW_NO_ID;
    }
    COUNT(frames, 1);
    return c->sink_id = st->next_id++;
}

static uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

void sw_sample_stream_sink(void *ud, sw_sample *s)
{
    sw_sample_stream *st = ud;
    if (inside_ignored(st, s)) {   /* (first: none of its frames is defined) */
        COUNT(cut, 1);
        return;
    }
    sw_bytes *o = &st->one;
    o->len = 0;
    o->failed = 0;
    sw_bytes_varint(o, s->thread_id);
    sw_bytes_varint(o, s->native_tid);
    sw_bytes_varint(o, zigzag(s->t_ns - (int64_t)st->mono0));
    sw_bytes_varint(o, s->weight_ns);
    sw_bytes_varint(o, s->cpu_ns == SW_NO_CPU ? 0 : s->cpu_ns + 1);
    sw_bytes_varint(o, s->state);
    sw_bytes_varint(o, s->flags);
    /* The frames inner to the innermost skipped one (stackwatch's own
     * frames and the wrapper frames that called them, e.g. runpy's under
     * "python -m stackwatch", are not the program's), outermost first
     * (frames[] is leaf first), without the dropped native ones. A thread
     * that runs stackwatch's own code (its start and stop, attach's pending
     * call in the program's thread) has none: the sample is not stored,
     * only counted (cut). */
    if (s->depth > st->cap) {
        uint32_t cap = s->depth < 64 ? 64 : s->depth;
        uint32_t *ids = realloc(st->ids, (size_t)cap * sizeof *ids);
        if (ids)
            st->ids = ids;
        int32_t *lines = ids ? realloc(st->lines, (size_t)cap * sizeof *lines) : NULL;
        if (lines)
            st->lines = lines;
        if (!ids || !lines) {
            COUNT(lost, 1);
            return;
        }
        st->cap = cap;
    }
    uint32_t n = 0, upto_python = 0;
    int own = 0;
    for (uint32_t i = 0; i < s->depth; i++) {
        uint32_t id = frame_id(st, s->frames[i]);
        if (id == SW_NO_ID) {
            COUNT(lost, 1);
            return;
        }
        if (id == SKIP_ID) {
            /* The native frames outside the outermost kept Python frame
             * are the wrapper's too (its exec() of the program). */
            n = upto_python;
            own = n == 0;
            break;
        }
        if (id == DROP_ID)
            continue;
        st->lines[n] = s->lines ? s->lines[i] : 0;
        st->ids[n++] = id;
        if (!sw_sample_code_is_native(s->frames[i]))
            upto_python = n;
    }
    if (own) {
        COUNT(cut, 1);
        return;
    }
    sw_bytes_varint(o, n);
    for (uint32_t i = n; i-- > 0;)
        sw_bytes_varint(o, st->ids[i]);
    /* Format 1.3: with lines, the line each frame runs (0: unknown, or a
     * native frame), outermost first. */
    if (s->lines) {
        sw_bytes_varint(o, n);
        for (uint32_t i = n; i-- > 0;)
            sw_bytes_varint(o, st->lines[i] > 0 ? (uint64_t)st->lines[i] : 0);
    }
    size_t mark = st->body.len;
    sw_bytes_varint(&st->body, o->len);
    sw_bytes_put(&st->body, o->data, o->len);
    if (o->failed || st->body.failed) {
        st->body.len = mark;
        st->body.failed = 0;
        COUNT(lost, 1);
        return;
    }
    if (st->nbody++ == 0)
        st->first_ns = s->t_ns;
    COUNT(samples, 1);
    if (st->body.len >= FLUSH_BYTES || s->t_ns - st->first_ns >= FLUSH_NS)
        sw_sample_stream_flush(st);
}

int sw_sample_stream_flush(sw_sample_stream *st)
{
    int rc = SW_OK;
    if (st->defs.len) {
        rc = sw_writer_chunk(st->w, SW_CHUNK_SAMPLE_FRAMES, st->defs.data, st->defs.len);
        if (rc != SW_OK) {
            /* Samples naming these frames cannot be read: lose them too. */
            COUNT(lost, st->nbody);
            st->body.len = 0;
            st->nbody = 0;
            return rc;
        }
        st->defs.len = 0;
    }
    if (!st->nbody)
        return SW_OK;
    st->out.len = 0;
    st->out.failed = 0;
    sw_bytes_varint(&st->out, st->nbody);
    sw_bytes_put(&st->out, st->body.data, st->body.len);
    if (st->out.failed)
        rc = SW_ENOMEM;
    else
        rc = sw_writer_chunk(st->w, SW_CHUNK_SAMPLES, st->out.data, st->out.len);
    if (rc == SW_OK)
        COUNT(chunks, 1);
    else
        COUNT(lost, st->nbody);
    st->body.len = 0;
    st->nbody = 0;
    return rc;
}
