/*
 * test_flush_all.c - sw_writer_flush_all (a process about to exec): every
 * event recorded so far is in the file while the writer stays open, which
 * then reads like the file of a killed process with nothing lost; events
 * recorded after it (the exec failed) and the normal close make the whole
 * trace, exact, in streaming and in ring mode.
 */
#define _GNU_SOURCE
#include "check.h"
#include "trace/analysis.h"
#include "tracegen.h"

static void check_thread(sw_trace *t, tg_thread *th, uint32_t index)
{
    long pos = tg_thread_pos(t, index);
    REQUIRE(pos >= 0);
    tg_rec got, exp = {0};
    CHECK_EQ_I64(tg_replay(t, (size_t)pos, &got), SW_OK);
    tg_expect(t, th, 0, th->n, &exp);
    char why[300];
    CHECK_MSG(tg_same(&got, &exp, why, sizeof why), "thread %u: %s", index, why);
    tg_rec_free(&got);
    tg_rec_free(&exp);
}

static void flush_then_continue(size_t ring_bytes)
{
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, ring_bytes, 1, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 12, 3) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 11, 21, "a", 51);
    tg_thread *b = tg_add_thread(&g, 12, 22, "b", 52);
    REQUIRE(a && b);
    tg_run(a, 3000, 12);   /* several chunks, and records still pending */
    tg_run(b, 40, 5);      /* only pending records */
    size_t na = a->n, nb = b->n;
    sw_writer_flush_all(g.w);

    /* The file as an exec would leave it. */
    sw_trace *t;
    char err[256];
    REQUIRE(sw_trace_open_file(path, &t, err, sizeof err) == SW_OK);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    CHECK_EQ_I64(sw_trace_complete(t), 0);
    const sw_thread_info *ta = sw_trace_thread(t, (size_t)tg_thread_pos(t, 0));
    const sw_thread_info *tb = sw_trace_thread(t, (size_t)tg_thread_pos(t, 1));
    REQUIRE(ta && tb);
    CHECK_EQ_U64(ta->events, na);
    CHECK_EQ_U64(tb->events, nb);
    CHECK_EQ_U64(ta->dropped + tb->dropped, 0);
    sw_trace_free(t);

    /* The exec failed: the program goes on, then stops normally. */
    tg_run(a, 500, 12);
    tg_run(b, 500, 5);
    REQUIRE(tg_close(&g, 1e9) == SW_OK);
    REQUIRE(sw_trace_open_file(path, &t, err, sizeof err) == SW_OK);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    CHECK_EQ_I64(sw_trace_complete(t), 1);
    check_thread(t, a, 0);
    check_thread(t, b, 1);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

TEST(streaming_writer_flushes_everything_and_goes_on)
{
    flush_then_continue(0);
}

TEST(ring_is_written_and_emptied_and_goes_on)
{
    flush_then_continue(1 << 20);
}
