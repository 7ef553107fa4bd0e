/*
 * test_damage.c - a valid trace cut at every byte offset, and with every
 * byte flipped (one at a time, two ways), one bit flipped in its first,
 * middle and last chunks, two damaged ranges at once, and chunks of an
 * unknown type: opening either fails cleanly with a message or succeeds
 * with every damaged range reported at its offset (or none); every intact
 * chunk is read, the events of each thread are delivered exactly, with a
 * gap where one of its chunks was lost (frames closed before it, reopened
 * from the next chunk's prefix after it); replay, stats and both exporters
 * run and their output stays well-formed.
 */
#define _GNU_SOURCE
#include "check.h"
#include "trace/analysis.h"
#include "exportcheck.h"
#include "tracegen.h"

typedef struct chunk_desc {
    size_t off, end;     /* header start; end of payload */
    int type;
    uint64_t thread, n;  /* EVENTS only */
    uint32_t defines;    /* THREAD only: bit i, thread index i is defined */
} chunk_desc;

#define MAXCH 256

static size_t layout(const uint8_t *buf, size_t len, chunk_desc *out)
{
    size_t off = SW_FILE_HEADER_LEN, n = 0;
    while (len - off >= SW_CHUNK_HEADER_LEN && n < MAXCH) {
        size_t plen = (size_t)buf[off + 4] | (size_t)buf[off + 5] << 8 | (size_t)buf[off + 6] << 16 |
                      (size_t)buf[off + 7] << 24;
        chunk_desc *c = &out[n++];
        c->off = off;
        c->end = off + SW_CHUNK_HEADER_LEN + plen;
        c->type = buf[off];
        c->thread = c->n = 0;
        c->defines = 0;
        if (c->type == SW_CHUNK_THREAD) {
            const uint8_t *p = buf + off + SW_CHUNK_HEADER_LEN, *end = buf + c->end;
            uint64_t index, tid, ident, nlen;
            while (p < end && !sw_get_varint(&p, end, &index) && !sw_get_varint(&p, end, &tid) &&
                   !sw_get_varint(&p, end, &ident) && !sw_get_varint(&p, end, &nlen) &&
                   nlen <= (uint64_t)(end - p)) {
                p += nlen;
                if (index < 32)
                    c->defines |= 1u << index;
            }
        }
        if (c->type == SW_CHUNK_EVENTS) {
            const uint8_t *p = buf + off + SW_CHUNK_HEADER_LEN, *end = buf + c->end;
            uint64_t seq = 0, t0 = 0, dropped = 0, depth = 0, id = 0;
            sw_get_varint(&p, end, &c->thread);
            sw_get_varint(&p, end, &seq);
            sw_get_varint(&p, end, &t0);
            sw_get_varint(&p, end, &dropped);
            sw_get_varint(&p, end, &depth);
            for (uint64_t k = 0; k < depth; k++)
                sw_get_varint(&p, end, &id);
            sw_get_varint(&p, end, &c->n);
        }
        off = c->end;
    }
    return n;
}

/* The trace under test: three threads, many small chunks (explicit
 * flushes), a rename in the middle, frames left open, an END chunk. In ring
 * mode (150 bytes per thread) the oldest chunks of the first two threads are
 * discarded, so their replays start after a gap, mid-stack. */
static uint8_t *make_trace(tg *g, int ring, size_t *len)
{
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    if (tg_open(g, path, 4096, ring ? 150 : 0, 1, 1e9) || tg_codes(g, 12, 3))
        return NULL;
    tg_thread *a = tg_add_thread(g, 1001, 1, "main", 51);
    tg_thread *b = tg_add_thread(g, 1002, 2, "", 52);
    tg_thread *c = tg_add_thread(g, 1003, 3, "third", 53);
    if (!a || !b || !c)
        return NULL;
    tg_enter(a, SW_OP_CALL, 0);
    a->floor = 1;
    for (int round = 0; round < (ring ? 6 : 4); round++) {
        tg_run(a, 20, 6);
        sw_tbuf_flush(a->b);
        tg_run(b, 12, 4);
        sw_tbuf_flush(b->b);
        if (round == 1)
            sw_writer_thread_name(g->w, 1, "renamed");
        if (round % 2) {
            tg_run(c, 8, 3);
            sw_tbuf_flush(c->b);
        }
    }
    tg_run(a, 10, 6);  /* sealed at close, frames still open */
    if (tg_close(g, 1e9))
        return NULL;
    uint8_t *buf = tg_slurp(path, len);
    unlink(path);
    return buf;
}

typedef struct ctx {
    tg *g;
    const uint8_t *orig;
    size_t len;
    chunk_desc ch[MAXCH];
    size_t nch;
    unsigned long variants, opened, failed_open, damaged;
} ctx;

/* Replay, stats and exports on an opened trace: nothing may crash, exports
 * must succeed and be well-formed. */
static void exercise(sw_trace *t, int check_ts, const char *what)
{
    for (size_t i = 0; i < sw_trace_thread_count(t); i++) {
        tg_rec r;
        int rc = tg_replay(t, i, &r);
        CHECK_MSG(rc <= 0, "%s: replay returned %d", what, rc);
        uint32_t d = 0;
        for (size_t k = 0; k < r.n; k++) {
            int kind = r.ev[k].kind;
            if (kind == SW_OP_CALL || kind == SW_OP_RESUME || kind == SW_OP_C_CALL)
                d++;
            else if (kind != SW_EV_DROPPED && !CHECK_MSG(d-- > 0, "%s: unbalanced replay", what))
                break;
        }
        CHECK_MSG(d == 0, "%s: %u frames left open by the replay", what, d);
        tg_rec_free(&r);
    }
    sw_stat_row *rows = NULL;
    size_t nrows;
    CHECK_MSG(sw_stats_compute(t, &rows, &nrows) == SW_OK, "%s: stats failed", what);
    free(rows);
    size_t n;
    int rc;
    char err[128], why[160];
    char *out = ec_export_mem(sw_export_chrome, t, 0, &n, &rc, err, sizeof err);
    ec_chrome_stats cs;
    if (CHECK_MSG(rc == SW_OK, "%s: chrome export failed: %s", what, err))
        CHECK_MSG(ec_chrome(out, n, check_ts, &cs, why, sizeof why), "%s: chrome export: %s", what, why);
    free(out);
    out = ec_export_mem(sw_export_perfetto, t, 0, &n, &rc, err, sizeof err);
    ec_pb_stats ps;
    if (CHECK_MSG(rc == SW_OK, "%s: perfetto export failed: %s", what, err))
        CHECK_MSG(ec_perfetto((const uint8_t *)out, n, check_ts, &ps, why, sizeof why),
                  "%s: perfetto export: %s", what, why);
    free(out);
}

/* Each thread delivers exactly its events from the chunks not lost
 * (lost[k]: chunk k is damaged, or cut off), with a gap wherever one of its
 * chunks is missing. In ring mode a thread's chunks in the file hold its
 * last events only: its replay starts after a gap. */
static void check_read(ctx *c, sw_trace *t, const uint8_t *lost, const char *what)
{
    for (int i = 0; i < c->g->nth; i++) {
        size_t nev = 0, in_file = 0, nseg = 0;
        static size_t seg[MAXCH][2];
        int defined = 0;
        for (size_t k = 0; k < c->nch; k++)
            if (c->ch[k].type == SW_CHUNK_EVENTS && c->ch[k].thread == (uint64_t)i)
                in_file += c->ch[k].n;
        size_t pos = c->g->th[i].n - in_file;
        int prev_read = 0, last_lost = 0;
        for (size_t k = 0; k < c->nch; k++) {
            if (c->ch[k].type == SW_CHUNK_THREAD && !lost[k] && (c->ch[k].defines >> i & 1))
                defined = 1;
            if (c->ch[k].type != SW_CHUNK_EVENTS || c->ch[k].thread != (uint64_t)i)
                continue;
            if (!lost[k]) {
                defined = 1;
                nev += c->ch[k].n;
                if (prev_read && seg[nseg - 1][1] == pos) {
                    seg[nseg - 1][1] = pos + c->ch[k].n;
                } else {
                    seg[nseg][0] = pos;
                    seg[nseg][1] = pos + c->ch[k].n;
                    nseg++;
                }
            }
            prev_read = !lost[k];
            last_lost = lost[k];
            pos += c->ch[k].n;
        }
        long tp = tg_thread_pos(t, (uint32_t)i);
        if (!defined) {
            CHECK_MSG(tp < 0, "%s: thread %d appears from nowhere", what, i);
            continue;
        }
        if (!CHECK_MSG(tp >= 0, "%s: thread %d missing", what, i))
            continue;
        CHECK_MSG(sw_trace_thread(t, (size_t)tp)->events == nev, "%s: thread %d: %llu events, expected %zu",
                  what, i, (unsigned long long)sw_trace_thread(t, (size_t)tp)->events, nev);
        tg_rec got, exp = {0};
        tg_replay(t, (size_t)tp, &got);
        /* Its last chunk lost: END (when read) says that more were sealed. */
        int tail_lost = last_lost && sw_trace_complete(t);
        tg_expect_ranges(t, &c->g->th[i], (const size_t(*)[2])seg, nseg, tail_lost, &exp);
        char why[300];
        CHECK_MSG(tg_same(&got, &exp, why, sizeof why), "%s: thread %d: %s", what, i, why);
        tg_rec_free(&got);
        tg_rec_free(&exp);
    }
}

/* Chunks from `stop` on are lost (a cut, garbage at the end). */
static void check_prefix(ctx *c, sw_trace *t, size_t stop, const char *what)
{
    uint8_t lost[MAXCH];
    for (size_t k = 0; k < c->nch; k++)
        lost[k] = k >= stop;
    check_read(c, t, lost, what);
}

/* Every chunk but chunk `gone` is read. */
static void check_all_but(ctx *c, sw_trace *t, size_t gone, const char *what)
{
    uint8_t lost[MAXCH] = {0};
    lost[gone] = 1;
    check_read(c, t, lost, what);
}

static int damage_at(const char *damage, size_t off)
{
    char needle[48];
    snprintf(needle, sizeof needle, "offset %zu", off);
    const char *p = strstr(damage, needle);
    return p && (p[strlen(needle)] < '0' || p[strlen(needle)] > '9');
}

static ctx C;

static int setup(int ring)
{
    static tg g;
    memset(&C, 0, sizeof C);
    uint8_t *buf = make_trace(&g, ring, &C.len);
    if (!buf)
        return 0;
    C.g = &g;
    C.orig = buf;
    C.nch = layout(buf, C.len, C.ch);
    return C.nch > 10 && C.ch[C.nch - 1].end == C.len && C.ch[0].type == SW_CHUNK_META &&
           C.ch[C.nch - 1].type == SW_CHUNK_END;
}

static void teardown(void)
{
    free((void *)C.orig);
    tg_free(C.g);
}

static void intact(int ring)
{
    REQUIRE(setup(ring));
    sw_trace *t;
    char err[256];
    REQUIRE(sw_trace_open_mem(C.orig, C.len, &t, err, sizeof err) == SW_OK);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    CHECK_EQ_I64(sw_trace_complete(t), 1);
    if (ring) {  /* the first two threads' oldest chunks were discarded */
        CHECK(sw_trace_thread(t, (size_t)tg_thread_pos(t, 0))->dropped > 0);
        CHECK(sw_trace_thread(t, (size_t)tg_thread_pos(t, 1))->dropped > 0);
        CHECK_EQ_U64(sw_trace_thread(t, (size_t)tg_thread_pos(t, 2))->dropped, 0);
    }
    check_prefix(&C, t, C.nch, "intact");
    exercise(t, 1, "intact");
    sw_trace_free(t);
    teardown();
}

static void truncate_all(int ring)
{
    REQUIRE(setup(ring));
    unsigned long opened = 0, damaged = 0;
    for (size_t k = 0; k < C.len; k++) {
        char what[64];
        snprintf(what, sizeof what, "cut at %zu of %zu", k, C.len);
        uint8_t *data = malloc(k ? k : 1);  /* exact size: ASan sees any overread */
        memcpy(data, C.orig, k);
        sw_trace *t = NULL;
        char err[256] = "";
        int rc = sw_trace_open_mem(data, k, &t, err, sizeof err);
        size_t stop = 0;  /* first chunk not wholly before k */
        while (stop < C.nch && C.ch[stop].end <= k)
            stop++;
        int boundary = k == SW_FILE_HEADER_LEN || (stop > 0 && C.ch[stop - 1].end == k);
        if (k < SW_FILE_HEADER_LEN || stop == 0) {
            CHECK_MSG(rc < 0 && t == NULL && err[0], "%s: should fail to open (rc %d)", what, rc);
        } else if (CHECK_MSG(rc == SW_OK && t, "%s: does not open: %s", what, err)) {
            opened++;
            const char *dmg = sw_trace_damage(t);
            if (boundary) {
                CHECK_MSG(dmg[0] == 0, "%s: damage reported at a chunk boundary: %s", what, dmg);
            } else {
                damaged++;
                CHECK_MSG(strstr(dmg, "truncated") && damage_at(dmg, C.ch[stop].off),
                          "%s: damage \"%s\", expected truncation at offset %zu", what, dmg, C.ch[stop].off);
            }
            CHECK_EQ_I64(sw_trace_complete(t), 0);
            check_prefix(&C, t, stop, what);
            exercise(t, 1, what);
        }
        sw_trace_free(t);
        free(data);
        if (check_failures > 20)
            break;
    }
    printf("      %zu cuts: %lu opened (%lu with damage reported)\n", C.len, opened, damaged);
    CHECK(opened > C.len / 2);
    teardown();
}

static void flip_all(int ring, uint8_t mask)
{
    REQUIRE(setup(ring));
    uint8_t *data = malloc(C.len);
    unsigned long opened = 0, failed = 0, damaged = 0;
    for (size_t p = 0; p < C.len; p++) {
        memcpy(data, C.orig, C.len);
        data[p] ^= mask;
        char what[80];
        snprintf(what, sizeof what, "byte %zu ^ 0x%02x", p, mask);
        sw_trace *t = NULL;
        char err[256] = "";
        int rc = sw_trace_open_mem(data, C.len, &t, err, sizeof err);
        if (rc) {
            failed++;
            CHECK_MSG(rc < 0 && t == NULL && err[0], "%s: failed without a message", what);
        } else {
            opened++;
            if (sw_trace_damage(t)[0])
                damaged++;
        }
        size_t ci = 0;
        while (ci < C.nch && C.ch[ci].end <= p)
            ci++;
        size_t rel = p < SW_FILE_HEADER_LEN ? 0 : p - C.ch[ci].off;
        if (p < SW_MAGIC_LEN) {
            CHECK_MSG(rc == SW_EFORMAT, "%s: bad magic accepted (rc %d)", what, rc);
        } else if (p < 10) {
            CHECK_MSG(rc == SW_EVERSION && strstr(err, "version"), "%s: other major accepted (rc %d)", what, rc);
        } else if (p < SW_FILE_HEADER_LEN || (rel >= 1 && rel <= 3)) {
            /* Minor version, header flags, chunk flags/reserved: ignored. */
            if (CHECK_MSG(rc == SW_OK, "%s: does not open: %s", what, err)) {
                CHECK_MSG(sw_trace_damage(t)[0] == 0, "%s: damage: %s", what, sw_trace_damage(t));
                check_prefix(&C, t, C.nch, what);
                exercise(t, 1, what);
            }
        } else if (rel == 0) {
            /* The chunk type is outside the checksum: the chunk may be read
             * as another type or skipped. Only robustness is checked. */
            if (rc == SW_OK)
                exercise(t, 0, what);
        } else if (CHECK_MSG(rc == SW_OK, "%s: does not open: %s", what, err)) {
            /* The chunk is lost, and only it: every other one is read. */
            const char *dmg = sw_trace_damage(t);
            CHECK_MSG(damage_at(dmg, C.ch[ci].off), "%s: damage \"%s\", expected at offset %zu", what, dmg,
                      C.ch[ci].off);
            CHECK_EQ_U64(sw_trace_damage_total(t), 1);
            CHECK_EQ_I64(sw_trace_complete(t), ci + 1 < C.nch);
            check_all_but(&C, t, ci, what);
            exercise(t, 1, what);
        }
        sw_trace_free(t);
        if (check_failures > 20)
            break;
    }
    printf("      %zu flips: %lu opened (%lu with damage reported), %lu refused\n", C.len, opened, damaged,
           failed);
    free(data);
    teardown();
}

TEST(intact_trace_reads_fully) { intact(0); }
TEST(truncated_at_every_offset) { truncate_all(0); }
TEST(every_byte_flipped_ff) { flip_all(0, 0xff); }
TEST(every_byte_flipped_low_bit) { flip_all(0, 0x01); }
TEST(ring_intact_trace_reads_fully) { intact(1); }
TEST(ring_truncated_at_every_offset) { truncate_all(1); }
TEST(ring_every_byte_flipped_ff) { flip_all(1, 0xff); }
TEST(ring_every_byte_flipped_low_bit) { flip_all(1, 0x01); }

TEST(damage_after_intact_prefix_at_every_chunk)
{
    /* Garbage appended after each chunk boundary: the chunks before still
     * read, and the damage names the garbage's offset. */
    REQUIRE(setup(0));
    for (size_t k = 1; k < C.nch; k++) {
        size_t cut = C.ch[k].off;
        uint8_t *data = malloc(cut + 40);
        memcpy(data, C.orig, cut);
        for (int i = 0; i < 40; i++)
            data[cut + (size_t)i] = (uint8_t)(0x5a ^ (i * 37));
        data[cut] = SW_CHUNK_EVENTS;
        data[cut + 4] = 20;  /* 20-byte payload with a wrong checksum */
        data[cut + 5] = data[cut + 6] = data[cut + 7] = 0;
        sw_trace *t;
        char err[256], what[64];
        snprintf(what, sizeof what, "garbage at %zu", cut);
        if (CHECK_MSG(sw_trace_open_mem(data, cut + 40, &t, err, sizeof err) == SW_OK, "%s: %s", what, err)) {
            CHECK_MSG(strstr(sw_trace_damage(t), "checksum") && damage_at(sw_trace_damage(t), cut), "%s: %s",
                      what, sw_trace_damage(t));
            check_prefix(&C, t, k, what);
            exercise(t, 1, what);
            sw_trace_free(t);
        }
        free(data);
    }
    teardown();
}

/* Flips one bit in the payload of chunk k (of type `type`, or any when
 * type is 0): chunk k alone is lost and reported at its offset, with its
 * bytes and one chunk; the rest reads exactly. */
static void one_bit_in_chunk(size_t k, const char *where)
{
    uint8_t *data = malloc(C.len);
    memcpy(data, C.orig, C.len);
    size_t plen = C.ch[k].end - C.ch[k].off - SW_CHUNK_HEADER_LEN;
    data[C.ch[k].off + SW_CHUNK_HEADER_LEN + plen / 2] ^= 0x08;
    sw_trace *t;
    char err[256], what[96];
    snprintf(what, sizeof what, "a bit flipped in the %s chunk (%zu, at %zu)", where, k, C.ch[k].off);
    if (CHECK_MSG(sw_trace_open_mem(data, C.len, &t, err, sizeof err) == SW_OK, "%s: %s", what, err)) {
        const sw_damage *d = sw_trace_damage_range(t, 0);
        if (CHECK_MSG(sw_trace_damage_total(t) == 1 && d, "%s: %s", what, sw_trace_damage(t))) {
            CHECK_EQ_U64(d->off, C.ch[k].off);
            CHECK_EQ_U64(d->kind, SW_DAMAGE_CRC);
            CHECK_EQ_U64(d->len, C.ch[k].end - C.ch[k].off);
            CHECK_EQ_U64(d->chunks, k + 1 < C.nch ? 1 : 0);
        }
        CHECK_MSG(strstr(sw_trace_damage(t), "checksum mismatch") && damage_at(sw_trace_damage(t), C.ch[k].off),
                  "%s: %s", what, sw_trace_damage(t));
        /* END counts what an EVENTS chunk held. */
        char lost[48];
        snprintf(lost, sizeof lost, "; %llu events lost", (unsigned long long)C.ch[k].n);
        CHECK_MSG((C.ch[k].type == SW_CHUNK_EVENTS && k + 1 < C.nch) == (strstr(sw_trace_damage(t), lost) != NULL),
                  "%s: %s", what, sw_trace_damage(t));
        check_all_but(&C, t, k, what);
        exercise(t, 1, what);
        sw_trace_free(t);
    }
    free(data);
}

TEST(one_bit_in_the_first_middle_or_last_chunk_loses_that_chunk_only)
{
    REQUIRE(setup(0));
    size_t mid = 0;   /* an EVENTS chunk in the middle of the file */
    for (size_t k = C.nch / 2; k < C.nch && !mid; k++)
        if (C.ch[k].type == SW_CHUNK_EVENTS)
            mid = k;
    REQUIRE(mid > 0);
    one_bit_in_chunk(0, "first");
    one_bit_in_chunk(1, "second");
    one_bit_in_chunk(mid, "middle");
    one_bit_in_chunk(C.nch - 1, "last");
    teardown();
}

TEST(two_damaged_ranges)
{
    /* A bit flipped in an EVENTS chunk of the first thread and garbage over
     * two chunks later: both ranges reported, every other chunk read, the
     * first thread's replay with two gaps. */
    REQUIRE(setup(0));
    size_t a = 0, b = 0;
    for (size_t k = 2; k < C.nch && !a; k++)
        if (C.ch[k].type == SW_CHUNK_EVENTS && C.ch[k].thread == 0 && k + 6 < C.nch)
            a = k;
    for (size_t k = a + 3; k + 3 < C.nch && !b; k++)
        if (C.ch[k].type == SW_CHUNK_EVENTS && C.ch[k].thread == 0)
            b = k;
    REQUIRE(a && b);
    uint8_t *data = malloc(C.len);
    memcpy(data, C.orig, C.len);
    data[C.ch[a].off + SW_CHUNK_HEADER_LEN + 3] ^= 0x40;
    for (size_t i = C.ch[b].off + 5; i < C.ch[b + 1].end - 2; i++)
        data[i] = (uint8_t)(i * 131 + 7);
    sw_trace *t;
    char err[256];
    REQUIRE(sw_trace_open_mem(data, C.len, &t, err, sizeof err) == SW_OK);
    REQUIRE_EQ_U64(sw_trace_damage_total(t), 2);
    CHECK_EQ_U64(sw_trace_damage_range(t, 0)->off, C.ch[a].off);
    CHECK_EQ_U64(sw_trace_damage_range(t, 1)->off, C.ch[b].off);
    CHECK_EQ_U64(sw_trace_damage_range(t, 1)->len, C.ch[b + 2].off - C.ch[b].off);
    const char *dmg = sw_trace_damage(t);
    CHECK_MSG(strncmp(dmg, "2 damaged ranges: ", 18) == 0 && damage_at(dmg, C.ch[a].off) &&
                  damage_at(dmg, C.ch[b].off),
              "%s", dmg);
    uint8_t lost[MAXCH] = {0};
    lost[a] = lost[b] = lost[b + 1] = 1;
    check_read(&C, t, lost, "two damaged ranges");
    CHECK_EQ_I64(sw_trace_complete(t), 1);
    exercise(t, 1, "two damaged ranges");
    sw_trace_free(t);
    free(data);
    teardown();
}

TEST(a_chunk_of_unknown_type)
{
    /* An intact chunk whose type this version does not have: in a file of
     * this minor version its type byte was damaged (reported); in a file
     * of a newer minor it is a newer writer's chunk (counted, skipped, not
     * damage). Either way it alone is not read. */
    REQUIRE(setup(0));
    size_t k = 0;
    for (size_t i = C.nch / 3; i < C.nch && !k; i++)
        if (C.ch[i].type == SW_CHUNK_EVENTS)
            k = i;
    REQUIRE(k);
    uint8_t *data = malloc(C.len);
    for (int newer = 0; newer < 2; newer++) {
        memcpy(data, C.orig, C.len);
        data[C.ch[k].off] = 66;
        if (newer)
            data[10] = SW_FORMAT_MINOR + 1;
        sw_trace *t;
        char err[256];
        REQUIRE(sw_trace_open_mem(data, C.len, &t, err, sizeof err) == SW_OK);
        if (newer) {
            CHECK_EQ_STR(sw_trace_damage(t), "");
            CHECK_EQ_U64(sw_trace_unknown_chunks(t), 1);
        } else {
            CHECK_EQ_U64(sw_trace_unknown_chunks(t), 0);
            CHECK_EQ_U64(sw_trace_damage_total(t), 1);
            CHECK_MSG(strstr(sw_trace_damage(t), "a chunk of type 66, which trace format 1.") &&
                          damage_at(sw_trace_damage(t), C.ch[k].off),
                      "%s", sw_trace_damage(t));
        }
        check_all_but(&C, t, k, newer ? "unknown type, newer minor" : "unknown type");
        exercise(t, 1, "unknown type");
        sw_trace_free(t);
    }
    free(data);
    teardown();
}

TEST(the_meta_copy_before_end_keeps_the_time_base)
{
    /* Format 1.5: the writer repeats its META chunks before END, so a
     * trace whose META chunks at the start are both damaged keeps its
     * clock: every event has the time it has in the intact trace. */
    REQUIRE(setup(0));
    REQUIRE(C.ch[0].type == SW_CHUNK_META && C.ch[1].type == SW_CHUNK_META && C.ch[C.nch - 2].type == SW_CHUNK_META &&
            C.ch[C.nch - 3].type == SW_CHUNK_META);
    uint8_t *data = malloc(C.len);
    memcpy(data, C.orig, C.len);
    data[C.ch[0].off + SW_CHUNK_HEADER_LEN] ^= 1;
    data[C.ch[1].end - 1] ^= 1;
    sw_trace *t, *whole;
    char err[256];
    REQUIRE(sw_trace_open_mem(data, C.len, &t, err, sizeof err) == SW_OK);
    REQUIRE(sw_trace_open_mem(C.orig, C.len, &whole, err, sizeof err) == SW_OK);
    CHECK_EQ_U64(sw_trace_damage_total(t), 1);   /* one range: the two chunks */
    CHECK_EQ_U64(sw_trace_damage_range(t, 0)->chunks, 2);
    CHECK_MSG(!strstr(sw_trace_damage(t), "time base"), "%s", sw_trace_damage(t));
    CHECK_EQ_U64(sw_trace_meta_count(t), sw_trace_meta_count(whole));   /* the copies are not listed twice */
    CHECK_EQ_I64(sw_trace_end_ns(t), sw_trace_end_ns(whole));
    REQUIRE_EQ_U64(sw_trace_thread_count(t), sw_trace_thread_count(whole));
    for (size_t i = 0; i < sw_trace_thread_count(t); i++) {
        tg_rec a, b;
        tg_replay(t, i, &a);
        tg_replay(whole, i, &b);
        char why[300];
        CHECK_MSG(tg_same(&a, &b, why, sizeof why), "thread %zu: %s", i, why);
        tg_rec_free(&a);
        tg_rec_free(&b);
    }
    sw_trace_free(t);
    sw_trace_free(whole);
    free(data);
    teardown();
}
