/*
 * thread_records.c - EXT records of threads written by another thread into
 * THREAD_RECORDS chunks (thread_records.h).
 */
#include "thread_records.h"

#include "format.h"

#include <stdlib.h>

#define FLUSH_BYTES (64 * 1024)
#define FLUSH_NS 250000000u
#define STR_MAX 200

struct sw_trec_stream {
    sw_writer *w;
    uint64_t mono0;
    sw_bytes recs;           /* the records buffered */
    uint64_t n;              /* how many */
    uint64_t first_ns;       /* CLOCK_MONOTONIC of the first buffered */
    uint64_t records, lost;
    sw_bytes chunk;
};

sw_trec_stream *sw_trec_stream_new(sw_writer *w, uint64_t mono0_ns)
{
    sw_trec_stream *st = calloc(1, sizeof *st);
    if (st) {
        st->w = w;
        st->mono0 = mono0_ns;
    }
    return st;
}

int sw_trec_stream_flush(sw_trec_stream *st)
{
    if (!st->n)
        return SW_OK;
    st->chunk.len = 0;
    int rc = sw_bytes_varint(&st->chunk, st->n);
    if (rc == SW_OK)
        rc = sw_bytes_put(&st->chunk, st->recs.data, st->recs.len);
    if (rc == SW_OK)
        rc = sw_writer_chunk(st->w, SW_CHUNK_THREAD_RECORDS, st->chunk.data, st->chunk.len);
    if (rc != SW_OK) {
        st->lost += st->n;
        st->records -= st->n;
    }
    st->recs.len = 0;
    st->n = 0;
    return rc;
}

int sw_trec_stream_add(sw_trec_stream *st, uint64_t tid, uint64_t mono_ns, uint32_t kind, const sw_ext *vals)
{
    uint8_t payload[SW_EXT_MAX];
    long len = sw_record_encode(kind, vals, STR_MAX, payload, sizeof payload);
    size_t mark = st->recs.len;
    int rc = len < 0 ? SW_EARG : SW_OK;
    if (rc == SW_OK)
        rc = sw_bytes_varint(&st->recs, tid);
    if (rc == SW_OK)
        rc = sw_bytes_varint(&st->recs, sw_zigzag((int64_t)(mono_ns - st->mono0)));
    if (rc == SW_OK)
        rc = sw_bytes_varint(&st->recs, kind);
    if (rc == SW_OK)
        rc = sw_bytes_varint(&st->recs, (uint64_t)len);
    if (rc == SW_OK)
        rc = sw_bytes_put(&st->recs, payload, (size_t)len);
    if (rc != SW_OK) {
        st->recs.len = mark;
        st->lost++;
        return rc;
    }
    if (!st->n)
        st->first_ns = mono_ns;
    st->n++;
    st->records++;
    if (st->recs.len >= FLUSH_BYTES || mono_ns - st->first_ns >= FLUSH_NS)
        return sw_trec_stream_flush(st);
    return SW_OK;
}

void sw_trec_stream_counts(const sw_trec_stream *st, uint64_t *records, uint64_t *lost)
{
    *records = st->records;
    *lost = st->lost;
}

void sw_trec_stream_free(sw_trec_stream *st)
{
    if (!st)
        return;
    sw_bytes_free(&st->recs);
    sw_bytes_free(&st->chunk);
    free(st);
}
