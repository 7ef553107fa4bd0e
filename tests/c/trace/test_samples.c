/*
 * test_samples.c - sampler samples in the trace file (format 1.2): written
 * by the sample stream (sample_stream.c) beside a tracegen trace, read back
 * exactly (times on the trace clock, threads matched by ident or given an
 * entry of their own, frames outermost first, own frames left out), merged
 * into both exports in time order, samples inside an ignored code object
 * (the attach's pending call) cut whole with their callees, and malformed
 * SAMPLES chunks reported as damage without losing what came before.
 */
#define _GNU_SOURCE
#include "check.h"
#include "trace/trace.h"
#include "exportcheck.h"
#include "trace/sample_stream.h"
#include "samplecheck.h"
#include "tracegen.h"

#define MONO0 5000000000ull   /* tracegen's META mono0_ns */

/* Code objects as the stack reader hands them out. */
static sw_sample_code codes[4] = {
    SC_CODE(0x1000, "main", "/app/prog.py", 10),
    SC_CODE(0x2000, "work", "/app/prog.py", 20),
    SC_CODE(0x3000, "wrapper", "/site/stackwatch/cli.py", 5),
    SC_CODE(0x4000, "leaf \"q\"", "/app/lib.py", 30),
};

/* Feeds one sample: frames given outermost first (the sink takes them
 * innermost first). */
static void feed(sw_sample_stream *st, uint64_t ident, uint64_t tid, int64_t mono, uint32_t state, int n,
                 const int *outer_first)
{
    sc_feed(st, codes, ident, tid, mono, state, n, outer_first, NULL);
}

/* A trace of two threads (idents 140001, 140002) with calls, and samples of
 * them and of a third thread the trace never saw. */
static int write_trace(const char *p, tg *g, int with_samples)
{
    if (tg_open(g, p, 4096, 0, 0, 1e9) || tg_codes(g, 3, 0))
        return -1;
    tg_thread *a = tg_add_thread(g, 1001, 140001, "MainThread", 1);
    tg_thread *b = tg_add_thread(g, 1002, 140002, "worker", 2);
    if (!a || !b)
        return -1;
    tg_enter(a, SW_OP_CALL, 0);
    tg_enter(b, SW_OP_CALL, 1);
    for (int i = 0; i < 4; i++)
        codes[i].sink_id = SW_NO_ID;
    if (with_samples) {
        sw_sample_stream *st = sw_sample_stream_new(g->w, MONO0, "/site/stackwatch/");
        if (!st)
            return -1;
        /* Times: tracegen's clock is 1 GHz from tick0 = 1e9 at mono0. */
        static const int s1[] = {2, 0, 1}, s2[] = {0, 1, 3}, s3[] = {1}, own[] = {0, 1, 2};
        feed(st, 140001, 1001, (int64_t)MONO0 + 100, 1, 3, s1);
        feed(st, 140002, 1002, (int64_t)MONO0 + 200, 3, 3, s2);
        feed(st, 999, 3003, (int64_t)MONO0 + 300, 2, 1, s3);
        feed(st, 140001, 1001, (int64_t)MONO0 + 400, 0, 0, NULL);  /* failed: no frames */
        /* The thread runs stackwatch's own code (innermost): nothing of
         * the program, not stored, counted. */
        feed(st, 140002, 1002, (int64_t)MONO0 + 500, 1, 3, own);
        int rc = sw_sample_stream_flush(st);
        sw_sample_stream_stats ss;
        sw_sample_stream_stats_get(st, &ss);
        sw_sample_stream_free(st);
        if (rc || ss.samples != 4 || ss.frames != 3 || ss.lost || ss.cut != 1)
            return -1;
    }
    tg_exit(a, SW_OP_RETURN);
    tg_exit(b, SW_OP_RETURN);
    return tg_close(g, 1e9);
}

TEST(samples_read_back_exactly)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(write_trace(p, &g, 1) == SW_OK);
    sw_trace *t = tg_open_trace(p);
    REQUIRE(t);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    CHECK_EQ_U64(sw_trace_sample_count(t), 4);
    CHECK_EQ_U64(sw_trace_samples_unattributed(t), 0);
    REQUIRE_EQ_U64(sw_trace_thread_count(t), 3);  /* the unknown thread got an entry */
    CHECK_EQ_U64(sw_trace_thread(t, 0)->samples, 2);
    CHECK_EQ_U64(sw_trace_thread(t, 1)->samples, 1);
    const sw_thread_info *third = sw_trace_thread(t, 2);
    CHECK_EQ_U64(third->samples, 1);
    CHECK_EQ_U64(third->ident, 999);
    CHECK_EQ_U64(third->native_tid, 3003);
    CHECK_EQ_U64(third->chunks, 0);
    /* Frames: defined on first use, the skipped one never. */
    CHECK_EQ_U64(sw_trace_frame_limit(t) >= 3, 1);
    const sw_frame_info *f0 = sw_trace_frame(t, 0);
    REQUIRE(f0);
    CHECK_EQ_STR(f0->name, "work");  /* the first sample's innermost frame */
    CHECK_EQ_STR(f0->filename, "/app/prog.py");
    CHECK_EQ_U64(f0->line, 20);
    CHECK_EQ_U64(f0->kind, SW_FRAME_PYTHON);
    CHECK(sw_trace_frame(t, 3) == NULL);
    sc_got a = {0};
    CHECK_EQ_I64(sc_collect(t, 0, &a), 0);
    REQUIRE_EQ_U64(a.n, 2);
    CHECK_EQ_I64(a.s[0].t_ns, 100);
    CHECK_EQ_U64(a.s[0].depth, 2);  /* the wrapper frame left out */
    CHECK_EQ_STR(sw_trace_frame(t, a.s[0].frames[0])->name, "main");
    CHECK_EQ_STR(sw_trace_frame(t, a.s[0].frames[1])->name, "work");
    CHECK_EQ_U64(a.s[0].state, 1);
    CHECK_EQ_U64(a.s[0].weight_ns, 1000000);
    CHECK_EQ_U64(a.s[0].cpu_ns, UINT64_MAX);
    CHECK_EQ_I64(a.s[1].t_ns, 400);
    CHECK_EQ_U64(a.s[1].depth, 0);
    sc_got all = {0};
    CHECK_EQ_I64(sc_collect(t, SIZE_MAX, &all), 0);
    REQUIRE_EQ_U64(all.n, 4);
    CHECK_EQ_U64(all.s[1].thread, 1);
    CHECK_EQ_U64(all.s[1].depth, 3);
    CHECK_EQ_STR(sw_trace_frame(t, all.s[1].frames[2])->name, "leaf \"q\"");
    CHECK_EQ_U64(all.s[2].thread, 2);
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}

/* A sample any of whose frames runs an ignored code object is cut whole:
 * its callees (a program function stackwatch's code called) and the
 * frames outside it too; one of the others is stored as before. */
TEST(samples_inside_an_ignored_code_are_cut_whole)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(tg_open(&g, p, 4096, 0, 0, 1e9) == SW_OK);
    sw_sample_stream *st = sw_sample_stream_new(g.w, MONO0, "/site/stackwatch/");
    REQUIRE(st);
    for (int i = 0; i < 4; i++)
        codes[i].sink_id = SW_NO_ID;
    uint64_t nine[9] = {0};
    CHECK_EQ_I64(sw_sample_stream_set_ignore(st, nine, 9), SW_EARG);
    const uint64_t work = codes[1].addr;
    REQUIRE(sw_sample_stream_set_ignore(st, &work, 1) == SW_OK);
    static const int callee[] = {0, 1, 3}, under_own[] = {0, 1, 2, 3}, leaf[] = {1}, kept[] = {0, 3};
    feed(st, 1, 1, (int64_t)MONO0 + 100, 1, 3, callee);       /* main > work > leaf */
    feed(st, 1, 1, (int64_t)MONO0 + 200, 1, 4, under_own);    /* main > work > stackwatch > leaf */
    feed(st, 1, 1, (int64_t)MONO0 + 300, 1, 1, leaf);         /* work */
    feed(st, 1, 1, (int64_t)MONO0 + 400, 1, 2, kept);         /* main > leaf */
    CHECK_EQ_I64(sw_sample_stream_flush(st), SW_OK);
    sw_sample_stream_stats ss;
    sw_sample_stream_stats_get(st, &ss);
    CHECK_EQ_U64(ss.samples, 1);
    CHECK_EQ_U64(ss.cut, 3);
    CHECK_EQ_U64(ss.frames, 2);   /* main and leaf: a cut sample defines none */
    sw_sample_stream_free(st);
    REQUIRE(tg_close(&g, 1e9) == SW_OK);
    sw_trace *t = tg_open_trace(p);
    REQUIRE(t);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    sc_got a = {0};
    CHECK_EQ_I64(sc_collect(t, SIZE_MAX, &a), 0);
    REQUIRE_EQ_U64(a.n, 1);
    CHECK_EQ_I64(a.s[0].t_ns, 400);
    REQUIRE_EQ_U64(a.s[0].depth, 2);
    CHECK_EQ_STR(sw_trace_frame(t, a.s[0].frames[0])->name, "main");
    CHECK_EQ_STR(sw_trace_frame(t, a.s[0].frames[1])->name, "leaf \"q\"");
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}

TEST(samples_in_both_exports)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(write_trace(p, &g, 1) == SW_OK);
    sw_trace *t = tg_open_trace(p);
    REQUIRE(t);
    char err[256], why[160];
    size_t n;
    int rc;
    char *out = ec_export_mem(sw_export_chrome, t, 0, &n, &rc, err, sizeof err);
    REQUIRE(rc == SW_OK);
    ec_chrome_stats cs;
    CHECK_MSG(ec_chrome(out, n, 1, &cs, why, sizeof why), "%s", why);
    CHECK_EQ_U64(cs.instants, 4);
    CHECK_EQ_U64(ec_count(out, n, "\"cat\":\"sample\""), 4);
    CHECK(strstr(out, "\"name\":\"work\",\"cat\":\"sample\",\"args\":{\"stack\":\"main;work\",\"state\":\"running\"") !=
          NULL);
    CHECK(strstr(out, "\"stack\":\"main;work;leaf \\\"q\\\"\",\"state\":\"idle\"") != NULL);
    CHECK(strstr(out, "\"name\":\"(no Python frame)\"") != NULL);
    free(out);
    out = ec_export_mem(sw_export_perfetto, t, 0, &n, &rc, err, sizeof err);
    REQUIRE(rc == SW_OK);
    ec_pb_stats ps;
    CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "%s", why);
    CHECK_EQ_U64(ps.instants, 4);
    CHECK_EQ_U64(ps.descriptors, 1 + 3 + 3);  /* process, 3 threads, 3 "samples" tracks */
    CHECK_EQ_U64(ec_count(out, n, "samples"), 3);
    CHECK_EQ_U64(ec_count(out, n, "/app/lib.py"), 1);
    free(out);
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}

TEST(malformed_samples_are_damage_after_the_good_part)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(tg_open(&g, p, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 2, 0) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1001, 140001, "MainThread", 1);
    REQUIRE(a);
    tg_enter(a, SW_OP_CALL, 0);
    tg_exit(a, SW_OP_RETURN);
    sw_tbuf_flush(a->b);
    /* A good chunk: one sample whose record has two bytes more than this
     * reader knows (a newer minor's fields, after the 1.3 line list),
     * naming frame 7 never defined. */
    uint8_t good[] = {1, 16, 0xe1, 0xc5, 0x08 /* ident 140001 */, 0xe9, 0x07 /* tid 1001 */, 20 /* t = 10 */,
                      5, 0, 1, 0, 1, 7, 1, 9 /* line 9 */, 0xaa, 0xbb};
    REQUIRE(sw_writer_chunk(g.w, SW_CHUNK_SAMPLES, good, sizeof good) == SW_OK);
    /* A bad one: the sample says it is longer than the chunk. */
    uint8_t bad[] = {1, 40, 1, 2};
    REQUIRE(sw_writer_chunk(g.w, SW_CHUNK_SAMPLES, bad, sizeof bad) == SW_OK);
    REQUIRE(tg_close(&g, 1e9) == SW_OK);
    sw_trace *t = tg_open_trace(p);
    REQUIRE(t);
    CHECK_MSG(strstr(sw_trace_damage(t), "malformed SAMPLES chunk") != NULL, "%s", sw_trace_damage(t));
    CHECK_EQ_U64(sw_trace_sample_count(t), 1);
    sc_got s = {0};
    CHECK_EQ_I64(sc_collect(t, 0, &s), 0);
    REQUIRE_EQ_U64(s.n, 1);
    CHECK_EQ_I64(s.s[0].t_ns, 10);
    CHECK_EQ_U64(s.s[0].depth, 1);
    CHECK_EQ_U64(s.s[0].frames[0], 7);
    CHECK_EQ_U64(s.s[0].weight_ns, 5);
    REQUIRE(s.s[0].lines != NULL);
    CHECK_EQ_U64(s.s[0].lines[0], 9);
    char err[256], why[160];
    size_t n;
    int rc;
    char *out = ec_export_mem(sw_export_chrome, t, 0, &n, &rc, err, sizeof err);
    REQUIRE(rc == SW_OK);
    ec_chrome_stats cs;
    CHECK_MSG(ec_chrome(out, n, 1, &cs, why, sizeof why), "%s", why);
    CHECK(strstr(out, "\"name\":\"?\",\"cat\":\"sample\"") != NULL);
    free(out);
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}

TEST(stream_flushes_by_size_and_time)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(tg_open(&g, p, 4096, 0, 0, 1e9) == SW_OK);
    sw_sample_stream *st = sw_sample_stream_new(g.w, MONO0, NULL);
    REQUIRE(st);
    for (int i = 0; i < 4; i++)
        codes[i].sink_id = SW_NO_ID;
    static const int deep[] = {0, 1, 2, 3, 0, 1, 2, 3};
    /* 20000 samples 1 us apart: the 64 KiB threshold flushes several times. */
    for (int i = 0; i < 20000; i++)
        feed(st, 7, 7, (int64_t)MONO0 + i * 1000, 1, 8, deep);
    sw_sample_stream_stats ss;
    sw_sample_stream_stats_get(st, &ss);
    CHECK(ss.chunks >= 3);
    /* 300 ms later: the time threshold flushes at once. */
    uint64_t before = ss.chunks;
    feed(st, 7, 7, (int64_t)MONO0 + 400000000, 1, 8, deep);
    sw_sample_stream_stats_get(st, &ss);
    CHECK_EQ_U64(ss.chunks, before + 1);
    CHECK_EQ_I64(sw_sample_stream_flush(st), SW_OK);
    sw_sample_stream_free(st);
    REQUIRE(tg_close(&g, 1e9) == SW_OK);
    /* After close, writing is refused, never a crash. */
    CHECK_EQ_I64(sw_writer_chunk(g.w, SW_CHUNK_SAMPLES, "x", 1), SW_ESTATE);
    sw_trace *t = tg_open_trace(p);
    REQUIRE(t);
    CHECK_EQ_U64(sw_trace_sample_count(t), 20001);
    CHECK_EQ_U64(sw_trace_thread_count(t), 1);
    sc_got s = {0};
    CHECK_EQ_I64(sc_collect(t, 0, &s), 1);  /* stopped early: 64 collected */
    CHECK_EQ_U64(s.s[63].t_ns, 63000);
    CHECK_EQ_U64(s.s[63].depth, 8);
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}
