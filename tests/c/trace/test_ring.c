/*
 * test_ring.c - ring mode (sw_writer_opts.ring_bytes, the flight recorder):
 * only the most recent chunks of each thread, at most ring_bytes of them
 * with their headers, are kept and written at close; the older ones are
 * discarded and counted; the kept tail, which starts in
 * the middle of the stack, replays with a DROPPED event and synthetic calls
 * reopening the frames that were open.
 */
#define _GNU_SOURCE
#include "check.h"
#include "trace/analysis.h"
#include "tracegen.h"

/* The EVENTS chunks of thread `index` in the file: how many, and the first
 * max of them, their sequence numbers (seqs) and bytes with the header
 * (lens), each when not NULL. */
static size_t file_events_chunks(const char *path, uint32_t index, uint64_t *seqs, size_t *lens, size_t max)
{
    size_t len, n = 0;
    uint8_t *buf = tg_slurp(path, &len);
    if (!buf)
        return 0;
    size_t off = SW_FILE_HEADER_LEN;
    while (len - off >= SW_CHUNK_HEADER_LEN) {
        size_t plen = (size_t)buf[off + 4] | (size_t)buf[off + 5] << 8 | (size_t)buf[off + 6] << 16 |
                      (size_t)buf[off + 7] << 24;
        if (buf[off] == SW_CHUNK_EVENTS) {
            const uint8_t *p = buf + off + SW_CHUNK_HEADER_LEN, *end = p + plen;
            uint64_t idx, seq;
            if (sw_get_varint(&p, end, &idx) == SW_OK && sw_get_varint(&p, end, &seq) == SW_OK && idx == index) {
                if (n < max && seqs)
                    seqs[n] = seq;
                if (n < max && lens)
                    lens[n] = SW_CHUNK_HEADER_LEN + plen;
                n++;
            }
        }
        off += SW_CHUNK_HEADER_LEN + plen;
    }
    free(buf);
    return n;
}

static void check_thread(sw_trace *t, tg_thread *th, uint32_t index, size_t from)
{
    long pos = tg_thread_pos(t, index);
    REQUIRE(pos >= 0);
    tg_rec got, exp = {0};
    CHECK_EQ_I64(tg_replay(t, (size_t)pos, &got), SW_OK);
    tg_expect(t, th, from, th->n, &exp);
    char why[300];
    CHECK_MSG(tg_same(&got, &exp, why, sizeof why), "thread %u: %s", index, why);
    for (size_t k = 1; k < got.n; k++)
        if (!CHECK_MSG(got.ev[k].t_ns >= got.ev[k - 1].t_ns, "time goes back at %zu", k))
            break;
    tg_rec_free(&got);
    tg_rec_free(&exp);
}

TEST(discards_oldest_and_replays_tail)
{
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    /* 4 KiB chunks, 8 KiB ring: two chunks kept per thread. */
    REQUIRE(tg_open(&g, path, 4096, 8192, 1, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 20, 4) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 501, 601, "busy", 41);
    tg_thread *b = tg_add_thread(&g, 502, 602, "quiet", 42);
    REQUIRE(a && b);
    /* a: a base of 6 frames that never return, so every chunk starts
     * mid-stack; ~20 chunks of events, most of them discarded. */
    for (uint32_t k = 0; k < 6; k++)
        tg_enter(a, SW_OP_CALL, k);
    a->floor = 6;
    tg_run(a, 30000, 40);
    tg_run(b, 200, 5);  /* fits in one chunk: nothing lost */
    REQUIRE(tg_close(&g, 1e9) == SW_OK);
    sw_writer_totals tot;
    sw_writer_totals_get(g.w, &tot);
    CHECK_EQ_U64(tot.events, a->n + b->n);

    uint64_t seqs[64];
    size_t lens[64];
    size_t na = file_events_chunks(path, 0, seqs, lens, 64);
    CHECK_EQ_U64(na, 2);
    if (na == 2)   /* a full chunk with its prefix (6 open frames) fits its 4 KiB */
        CHECK_MSG(lens[0] <= 4096 && lens[0] > 4096 - 64 && lens[0] + lens[1] <= 8192, "%zu + %zu bytes", lens[0],
                  lens[1]);
    if (na == 2)
        CHECK_EQ_U64(seqs[1], seqs[0] + 1);
    CHECK(na >= 1 && seqs[0] >= 5);  /* the older chunks are gone */
    CHECK_EQ_U64(file_events_chunks(path, 1, seqs, NULL, 64), 1);
    CHECK_EQ_U64(seqs[0], 0);

    sw_trace *t = tg_open_trace(path);

    REQUIRE(t);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    CHECK_EQ_I64(sw_trace_complete(t), 1);
    const sw_thread_info *ta = sw_trace_thread(t, (size_t)tg_thread_pos(t, 0));
    const sw_thread_info *tb = sw_trace_thread(t, (size_t)tg_thread_pos(t, 1));
    REQUIRE(ta && tb);
    CHECK_EQ_U64(ta->chunks, 2);
    CHECK(ta->events > 0 && ta->events < a->n / 4);
    /* Every event is either kept or counted as dropped. */
    CHECK_EQ_U64(ta->events + ta->dropped, a->n);
    CHECK_EQ_U64(tb->events, b->n);
    CHECK_EQ_U64(tb->dropped, 0);
    CHECK_EQ_U64(tot.dropped, ta->dropped);
    const sw_meta_entry *e = sw_trace_meta_find(t, "dropped");
    if (CHECK(e != NULL))
        CHECK_EQ_U64(e->u, ta->dropped);
    e = sw_trace_meta_find(t, "dropped.0");
    if (CHECK(e != NULL))
        CHECK_EQ_U64(e->u, ta->dropped);
    CHECK(sw_trace_meta_find(t, "dropped.1") == NULL);
    e = sw_trace_meta_find(t, "events");
    if (CHECK(e != NULL))
        CHECK_EQ_U64(e->u, a->n + b->n);

    /* The kept tail: the last ta->events events, which start mid-stack. */
    size_t from = a->n - ta->events;
    uint32_t stack[TG_MAX_DEPTH];
    CHECK(tg_stack_at(a, from, stack) >= 6);
    check_thread(t, a, 0, from);
    check_thread(t, b, 1, 0);

    /* Stats count only the events that were kept (synthetic calls are not
     * calls). */
    sw_stat_row *rows;
    size_t nrows;
    REQUIRE(sw_stats_compute(t, &rows, &nrows) == SW_OK);
    uint64_t calls[32] = {0};
    for (size_t k = from; k < a->n; k++)
        if (a->ev[k].kind == SW_OP_CALL || a->ev[k].kind == SW_OP_RESUME || a->ev[k].kind == SW_OP_C_CALL)
            calls[a->ev[k].code]++;
    long pa = tg_thread_pos(t, 0);
    for (uint32_t c = 0; c < 24; c++) {
        uint64_t got = 0;
        for (size_t k = 0; k < nrows; k++)
            if (rows[k].thread == (uint32_t)pa && rows[k].code == c)
                got = rows[k].calls;
        CHECK_EQ_U64(got, calls[c]);
    }
    free(rows);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

/* Ten chunks of known events sealed by explicit flushes into a writer
 * with a ring of ring_bytes (0: streaming); bounds[c]: the events before
 * chunk c. */
static void ten_flushed_chunks(const char *path, size_t ring_bytes, size_t bounds[11], tg_thread **out, tg *g)
{
    REQUIRE(tg_open(g, path, 4096, ring_bytes, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(g, 8, 0) == SW_OK);
    tg_thread *a = tg_add_thread(g, 9, 0, "a", 43);
    REQUIRE(a);
    bounds[0] = 0;
    for (int c = 0; c < 10; c++) {
        tg_run(a, 10 + 7 * (size_t)c, 6);
        sw_tbuf_flush(a->b);
        bounds[c + 1] = a->n;
    }
    REQUIRE(tg_close(g, 0) == SW_OK);
    *out = a;
}

TEST(exact_discard_counts_with_explicit_flushes)
{
    /* The same ten chunks streamed, then into a ring of 600 bytes: it keeps
     * the newest chunks whose bytes (headers included) add up to at most
     * that, and counts the older ones' events as dropped. */
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    tg_thread *a;
    size_t bounds[11];
    ten_flushed_chunks(path, 0, bounds, &a, &g);
    size_t lens[16];
    REQUIRE(file_events_chunks(path, 0, NULL, lens, 16) == 10);
    tg_free(&g);
    size_t ring = 600, kept_bytes = 0, first = 10;
    while (first > 0 && kept_bytes + lens[first - 1] <= ring)
        kept_bytes += lens[--first];
    REQUIRE(first > 0 && first < 9);   /* some kept, some discarded */

    ten_flushed_chunks(path, ring, bounds, &a, &g);
    uint64_t seqs[16];
    CHECK_EQ_U64(file_events_chunks(path, 0, seqs, lens, 16), 10 - first);
    CHECK_EQ_U64(seqs[0], first);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    const sw_thread_info *ti = sw_trace_thread(t, 0);
    REQUIRE(ti);
    CHECK_EQ_U64(ti->chunks, 10 - first);
    CHECK_EQ_U64(ti->dropped, bounds[first]);
    CHECK_EQ_U64(ti->events, a->n - bounds[first]);
    check_thread(t, a, 0, bounds[first]);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

TEST(ring_without_discards_is_exact)
{
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 1 << 20, 2, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 10, 2) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1, 0, "a", 44);
    tg_thread *b = tg_add_thread(&g, 2, 0, "b", 45);
    REQUIRE(a && b);
    tg_run(a, 8000, 15);
    tg_run(b, 5000, 15);
    REQUIRE(tg_close(&g, 1e9) == SW_OK);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    CHECK(sw_trace_thread(t, 0)->chunks >= 3);
    CHECK_EQ_U64(sw_trace_thread(t, 0)->dropped + sw_trace_thread(t, 1)->dropped, 0);
    check_thread(t, a, 0, 0);
    check_thread(t, b, 1, 0);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

TEST(a_chunk_larger_than_the_ring_is_discarded)
{
    /* A ring of 100 bytes: each chunk of 50 events is larger, so none is
     * kept and every event is counted as dropped. */
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 100, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 5, 1) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1, 0, "a", 46);
    REQUIRE(a);
    for (int c = 0; c < 5; c++) {
        tg_run(a, 50, 8);
        sw_tbuf_flush(a->b);
    }
    REQUIRE(tg_close(&g, 0) == SW_OK);
    CHECK_EQ_U64(file_events_chunks(path, 0, NULL, NULL, 0), 0);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    CHECK_EQ_U64(sw_trace_thread(t, 0)->chunks, 0);
    CHECK_EQ_U64(sw_trace_thread(t, 0)->dropped, 250);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}
