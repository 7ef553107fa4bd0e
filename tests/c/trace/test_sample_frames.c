/*
 * test_sample_frames.c - native frames and lines in the samples of a trace
 * file (format 1.3, stackwatch run --sample --native --sample-lines):
 * written by the sample stream (native frames as kind 1 named by the bare
 * symbol, the tracer's own native frames left out alone, the wrapper's
 * native frames cut with its Python frames, the line of each frame) and
 * read back exactly; both exports name native frames "symbol [native]" and
 * show the lines; a frame kind this reader does not know, or a line list
 * that does not match the stack, is reported as damage after the good
 * part; the file cut at every offset or with any byte flipped reads
 * cleanly or fails with a message, and exports stay well-formed.
 */
#define _GNU_SOURCE
#include "check.h"
#include "base/crc32.h"
#include "trace/trace.h"
#include "exportcheck.h"
#include "trace/sample_stream.h"
#include "samplecheck.h"
#include "tracegen.h"

#define MONO0 5000000000ull   /* tracegen's META mono0_ns */

/* As the stack reader merges them (nativemerge.c), leaf first below. */
static sw_sample_code codes[] = {
    SC_CODE(0x1000, "builtin_exec [native]", "/usr/lib/libpython3.so", 0),   /* 0: the wrapper's exec */
    SC_CODE(0x2000, "run", "/site/stackwatch/program.py", 40),                 /* 1: the wrapper */
    SC_CODE(0x3000, "<module>", "/app/prog.py", 1),                            /* 2 */
    SC_CODE(0x4000, "sw_eval_hook [native]", "/site/stackwatch/_native.so", 0), /* 3: the tracer's own */
    SC_CODE(0x5000, "squeeze", "/app/prog.py", 5),                             /* 4 */
    SC_CODE(0x6000, "zlib_compress [native]", "/usr/lib/zlib.so", 0),          /* 5 */
    SC_CODE(0x7000, "deflate [native]", "/lib/libz.so.1", 0),                  /* 6 */
    SC_CODE(0x8000, "thread_run [native]", "/usr/lib/libpython3.so", 0),       /* 7: a thread's root */
};
#define NCODES (sizeof codes / sizeof codes[0])

/* One sample, frames and lines given outermost first (the sink takes them
 * innermost first). lines NULL: a sample without lines. */
static void feed(sw_sample_stream *st, uint64_t ident, int64_t mono, int n, const int *outer_first,
                 const int32_t *lines)
{
    sc_feed(st, codes, ident, ident - 139000, mono, 1, n, outer_first, lines);
}

/* A trace of one thread (ident 140001) in a call, and its samples: inside
 * zlib under squeeze with lines, the same without lines, and a thread
 * root's native frame outside a Python frame (no cut: kept). */
static int write_trace(const char *p, tg *g)
{
    if (tg_open(g, p, 4096, 0, 0, 1e9) || tg_codes(g, 3, 0))
        return -1;
    tg_thread *a = tg_add_thread(g, 1001, 140001, "MainThread", 1);
    if (!a)
        return -1;
    tg_enter(a, SW_OP_CALL, 0);
    for (size_t i = 0; i < NCODES; i++)
        codes[i].sink_id = SW_NO_ID;
    sw_sample_stream *st = sw_sample_stream_new(g->w, MONO0, "/site/stackwatch/");
    if (!st)
        return -1;
    static const int deep[] = {0, 1, 0, 2, 3, 4, 5, 6};
    static const int32_t deep_lines[] = {0, 44, 0, 12, 0, 6, 0, 0};
    static const int root[] = {7, 4};
    static const int32_t root_lines[] = {0, 7};
    feed(st, 140001, (int64_t)MONO0 + 100, 8, deep, deep_lines);
    feed(st, 140001, (int64_t)MONO0 + 200, 8, deep, NULL);
    feed(st, 140001, (int64_t)MONO0 + 300, 2, root, root_lines);
    int rc = sw_sample_stream_flush(st);
    sw_sample_stream_stats ss;
    sw_sample_stream_stats_get(st, &ss);
    sw_sample_stream_free(st);
    /* Frames defined: deflate, zlib_compress, squeeze, <module>,
     * builtin_exec (met before the cut is known), thread_run. */
    if (rc || ss.samples != 3 || ss.frames != 6 || ss.lost)
        return -1;
    tg_exit(a, SW_OP_RETURN);
    return tg_close(g, 1e9);
}

static const char *name_of(sw_trace *t, uint32_t id)
{
    const sw_frame_info *f = sw_trace_frame(t, id);
    return f ? f->name : "(none)";
}

TEST(native_frames_and_lines_read_back_exactly)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(write_trace(p, &g) == SW_OK);
    sw_trace *t = tg_open_trace(p);
    REQUIRE(t);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    CHECK_EQ_U64(sw_trace_sample_count(t), 3);
    sc_got a = {0};
    CHECK_EQ_I64(sc_collect(t, 0, &a), 0);
    REQUIRE_EQ_U64(a.n, 3);
    /* The wrapper (Python and native) cut, the tracer's hook left out. */
    REQUIRE_EQ_U64(a.s[0].depth, 4);
    CHECK_EQ_STR(name_of(t, a.s[0].frames[0]), "<module>");
    CHECK_EQ_STR(name_of(t, a.s[0].frames[1]), "squeeze");
    CHECK_EQ_STR(name_of(t, a.s[0].frames[2]), "zlib_compress");
    CHECK_EQ_STR(name_of(t, a.s[0].frames[3]), "deflate");
    const sw_frame_info *d = sw_trace_frame(t, a.s[0].frames[3]);
    REQUIRE(d);
    CHECK_EQ_U64(d->kind, SW_FRAME_NATIVE);
    CHECK_EQ_STR(d->filename, "/lib/libz.so.1");
    CHECK_EQ_U64(d->line, 0);
    const sw_frame_info *sq = sw_trace_frame(t, a.s[0].frames[1]);
    REQUIRE(sq);
    CHECK_EQ_U64(sq->kind, SW_FRAME_PYTHON);
    CHECK_EQ_U64(sq->line, 5);
    REQUIRE(a.s[0].lines != NULL);
    CHECK_EQ_U64(a.s[0].lines[0], 12);
    CHECK_EQ_U64(a.s[0].lines[1], 6);
    CHECK_EQ_U64(a.s[0].lines[2], 0);
    CHECK_EQ_U64(a.s[0].lines[3], 0);
    /* Without lines: the same stack, no line list. */
    REQUIRE_EQ_U64(a.s[1].depth, 4);
    CHECK(a.s[1].lines == NULL);
    CHECK_EQ_U64(a.s[1].frames[3], a.s[0].frames[3]);
    /* No cut: a thread's native root stays. */
    REQUIRE_EQ_U64(a.s[2].depth, 2);
    CHECK_EQ_STR(name_of(t, a.s[2].frames[0]), "thread_run");
    CHECK_EQ_STR(name_of(t, a.s[2].frames[1]), "squeeze");
    REQUIRE(a.s[2].lines != NULL);
    CHECK_EQ_U64(a.s[2].lines[1], 7);
    /* No frame of stackwatch's files was defined. */
    for (uint32_t id = 0; id < sw_trace_frame_limit(t); id++) {
        const sw_frame_info *f = sw_trace_frame(t, id);
        CHECK(!f || strstr(f->filename, "stackwatch") == NULL);
    }
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}

TEST(exports_name_native_frames_and_show_lines)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(write_trace(p, &g) == SW_OK);
    sw_trace *t = tg_open_trace(p);
    REQUIRE(t);
    char err[256], why[160];
    size_t n;
    int rc;
    char *out = ec_export_mem(sw_export_chrome, t, 0, &n, &rc, err, sizeof err);
    REQUIRE(rc == SW_OK);
    ec_chrome_stats cs;
    CHECK_MSG(ec_chrome(out, n, 1, &cs, why, sizeof why), "%s", why);
    CHECK_EQ_U64(cs.instants, 3);
    CHECK_MSG(strstr(out, "\"name\":\"deflate [native]\",\"cat\":\"sample\",\"args\":{\"stack\":\"<module>;squeeze;"
                          "zlib_compress [native];deflate [native]\",\"lines\":\"12;6;0;0\",\"native\":true,") !=
                  NULL,
              "%.*s", (int)n, out);
    CHECK(strstr(out, "\"stack\":\"<module>;squeeze;zlib_compress [native];deflate [native]\",\"native\":true,") !=
          NULL);
    CHECK(strstr(out, "\"name\":\"squeeze\",\"cat\":\"sample\",\"args\":{\"stack\":\"thread_run [native];squeeze\","
                      "\"lines\":\"0;7\",\"state\"") != NULL);
    free(out);
    out = ec_export_mem(sw_export_perfetto, t, 0, &n, &rc, err, sizeof err);
    REQUIRE(rc == SW_OK);
    ec_pb_stats ps;
    CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "%s", why);
    CHECK_EQ_U64(ps.instants, 3);
    /* Event names and callstack frames: 2 + 2 deflate, 2 zlib_compress. */
    CHECK_EQ_U64(ec_count(out, n, "deflate [native]"), 4);
    CHECK_EQ_U64(ec_count(out, n, "zlib_compress [native]"), 2);
    CHECK_EQ_U64(ec_count(out, n, "thread_run [native]"), 1);
    /* The category "native" on the two samples whose leaf is native. */
    CHECK_EQ_U64(ec_count(out, n, "\xb2\x01\x06native"), 2);  /* field 22, 6 bytes */
    free(out);
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}

/* A trace with one good SAMPLE_FRAMES + SAMPLES pair, then the given chunk
 * of the given type. */
static sw_trace *with_bad_chunk(const char *p, tg *g, int type, const uint8_t *bad, size_t len)
{
    if (tg_open(g, p, 4096, 0, 0, 1e9) || tg_codes(g, 2, 0))
        return NULL;
    tg_thread *a = tg_add_thread(g, 1001, 140001, "MainThread", 1);
    if (!a)
        return NULL;
    tg_enter(a, SW_OP_CALL, 0);
    tg_exit(a, SW_OP_RETURN);
    sw_tbuf_flush(a->b);
    /* Frame 0: native "f" in "/l.so". */
    static const uint8_t frames[] = {0, SW_FRAME_NATIVE, 1, 'f', 5, '/', 'l', '.', 's', 'o', 0};
    /* One sample of frame 0 with its line list (0), then two bytes of a
     * newer minor's fields. */
    static const uint8_t good[] = {1, 16, 0xe1, 0xc5, 0x08, 0xe9, 0x07, 20, 5, 0, 1, 0, 1, 0, 1, 0, 0x2a, 0x2b};
    if (sw_writer_chunk(g->w, SW_CHUNK_SAMPLE_FRAMES, frames, sizeof frames) ||
        sw_writer_chunk(g->w, SW_CHUNK_SAMPLES, good, sizeof good) || sw_writer_chunk(g->w, type, bad, len) ||
        tg_close(g, 1e9))
        return NULL;
    return tg_open_trace(p);
}

TEST(unknown_frame_kind_is_refused_with_a_clear_message)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    static const uint8_t bad[] = {1, 2 /* kind 2 */, 1, 'g', 0, 0};
    sw_trace *t = with_bad_chunk(p, &g, SW_CHUNK_SAMPLE_FRAMES, bad, sizeof bad);
    REQUIRE(t);
    CHECK_MSG(strstr(sw_trace_damage(t), "sample frame of unknown kind 2") != NULL, "%s", sw_trace_damage(t));
    CHECK_MSG(strstr(sw_trace_damage(t), "SAMPLE_FRAMES chunk at offset") != NULL, "%s", sw_trace_damage(t));
    CHECK(sw_trace_frame(t, 1) == NULL);
    sc_got s = {0};
    CHECK_EQ_I64(sc_collect(t, 0, &s), 0);
    REQUIRE_EQ_U64(s.n, 1);
    CHECK_EQ_U64(s.s[0].depth, 1);
    REQUIRE(s.s[0].lines != NULL);
    CHECK_EQ_U64(s.s[0].lines[0], 0);
    const sw_frame_info *f = sw_trace_frame(t, 0);
    REQUIRE(f);
    CHECK_EQ_U64(f->kind, SW_FRAME_NATIVE);
    CHECK_EQ_STR(f->name, "f");
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}

TEST(line_list_not_matching_the_stack_is_damage)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    /* depth 1 but 2 lines. */
    static const uint8_t bad[] = {1, 15, 0xe1, 0xc5, 0x08, 0xe9, 0x07, 40, 5, 0, 1, 0, 1, 0, 2, 3, 4};
    sw_trace *t = with_bad_chunk(p, &g, SW_CHUNK_SAMPLES, bad, sizeof bad);
    REQUIRE(t);
    CHECK_MSG(strstr(sw_trace_damage(t), "malformed SAMPLES chunk") != NULL, "%s", sw_trace_damage(t));
    CHECK_EQ_U64(sw_trace_sample_count(t), 1);
    sw_trace_free(t);
    tg_free(&g);
    /* A line list cut short: 2 lines announced, 1 in the record. */
    static const uint8_t cut[] = {1, 15, 0xe1, 0xc5, 0x08, 0xe9, 0x07, 40, 5, 0, 1, 0, 2, 0, 0, 2, 3};
    t = with_bad_chunk(p, &g, SW_CHUNK_SAMPLES, cut, sizeof cut);
    REQUIRE(t);
    CHECK_MSG(strstr(sw_trace_damage(t), "malformed SAMPLES chunk") != NULL, "%s", sw_trace_damage(t));
    CHECK_EQ_U64(sw_trace_sample_count(t), 1);
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}

TEST(empty_line_list_means_no_lines)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    /* depth 1, n = 0 lines, then a newer minor's byte. */
    static const uint8_t rec[] = {1, 14, 0xe1, 0xc5, 0x08, 0xe9, 0x07, 40, 5, 0, 1, 0, 1, 0, 0, 0x2a};
    sw_trace *t = with_bad_chunk(p, &g, SW_CHUNK_SAMPLES, rec, sizeof rec);
    REQUIRE(t);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    sc_got s = {0};
    CHECK_EQ_I64(sc_collect(t, 0, &s), 0);
    REQUIRE_EQ_U64(s.n, 2);
    CHECK(s.s[0].lines != NULL);
    CHECK(s.s[1].lines == NULL);
    CHECK_EQ_U64(s.s[1].depth, 1);
    CHECK_EQ_I64(s.s[1].t_ns, 20);
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}

/* Opens data[0, len): it fails with a message or reads; what it reads
 * iterates cleanly (frames, lines) and both exports are well-formed. */
static int read_damaged(const uint8_t *data, size_t len, uint64_t full, const char *what)
{
    sw_trace *t = NULL;
    char err[256] = "", why[160];
    if (sw_trace_open_mem(data, len, &t, err, sizeof err) != SW_OK)
        return CHECK_MSG(err[0] != 0, "%s: no message", what);
    int ok = CHECK_MSG(sw_trace_sample_count(t) <= full, "%s: more samples than written", what);
    sw_sample_cursor *c = sw_sample_cursor_new(t, SIZE_MAX);
    sw_trace_sample s;
    int rc;
    uint64_t n = 0;
    while (c && (rc = sw_sample_cursor_next(c, &s)) == 1) {
        n++;
        for (uint32_t k = 0; k < s.depth; k++) {
            const sw_frame_info *f = sw_trace_frame(t, s.frames[k]);
            if (f && f->kind != SW_FRAME_PYTHON && f->kind != SW_FRAME_NATIVE)
                ok &= CHECK_MSG(0, "%s: frame of kind %u", what, f->kind);
        }
    }
    sw_sample_cursor_free(c);
    ok &= CHECK_MSG(n == sw_trace_sample_count(t), "%s: %llu samples iterated", what, (unsigned long long)n);
    size_t olen;
    char *out = ec_export_mem(sw_export_chrome, t, 0, &olen, &rc, err, sizeof err);
    ec_chrome_stats cs;
    if (rc == SW_OK)
        ok &= CHECK_MSG(ec_chrome(out, olen, 0, &cs, why, sizeof why), "%s: chrome: %s", what, why);
    free(out);
    out = ec_export_mem(sw_export_perfetto, t, 0, &olen, &rc, err, sizeof err);
    ec_pb_stats ps;
    if (rc == SW_OK)
        ok &= CHECK_MSG(ec_perfetto((const uint8_t *)out, olen, 0, &ps, why, sizeof why), "%s: perfetto: %s", what,
                        why);
    free(out);
    sw_trace_free(t);
    return ok;
}

static uint8_t *file_bytes(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = n > 0 ? malloc((size_t)n) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = b ? (size_t)n : 0;
    return b;
}

TEST(truncated_or_flipped_anywhere_reads_cleanly)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(write_trace(p, &g) == SW_OK);
    tg_free(&g);
    size_t len;
    uint8_t *orig = file_bytes(p, &len);
    unlink(p);
    REQUIRE(orig);
    char what[64];
    int ok = 1;
    for (size_t k = 0; k <= len && ok; k++) {
        uint8_t *cut = malloc(k ? k : 1);  /* exact size: ASan sees any overread */
        REQUIRE(cut);
        memcpy(cut, orig, k);
        snprintf(what, sizeof what, "cut at %zu", k);
        ok = read_damaged(cut, k, 3, what);
        free(cut);
    }
    uint8_t *data = malloc(len);
    REQUIRE(data);
    /* Flipping a byte breaks its chunk's checksum: to reach the decoders,
     * the chunk's CRC is recomputed after the flip. */
    for (size_t k = SW_FILE_HEADER_LEN; k < len && ok; k++) {
        for (int v = 0; v < 2 && ok; v++) {
            memcpy(data, orig, len);
            data[k] = v ? (uint8_t)(data[k] ^ 0x01) : 0xff;
            size_t off = SW_FILE_HEADER_LEN;
            while (len - off >= SW_CHUNK_HEADER_LEN) {
                size_t plen = (size_t)orig[off + 4] | (size_t)orig[off + 5] << 8 | (size_t)orig[off + 6] << 16 |
                              (size_t)orig[off + 7] << 24;
                size_t poff = off + SW_CHUNK_HEADER_LEN;
                if (plen > len - poff)
                    break;
                if (k >= poff && k < poff + plen) {
                    uint32_t crc = sw_crc32(0, data + poff, plen);
                    for (int b = 0; b < 4; b++)
                        data[off + 8 + b] = (uint8_t)(crc >> (8 * b));
                }
                off = poff + plen;
            }
            snprintf(what, sizeof what, "byte %zu set to %#x", k, data[k]);
            ok = read_damaged(data, len, 1000, what);
        }
    }
    free(data);
    free(orig);
}
