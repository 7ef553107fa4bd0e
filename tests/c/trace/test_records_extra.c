/*
 * test_records_extra.c - a new row of the table of EXT record kinds
 * (native/trace/records.h) reaches every consumer with no other edit. This
 * test is built with the rows of trace/records_extra_rows.h added, and
 * linked with the trace room built with them too (tests/c/meson.build):
 * an instant kind with a field of every type and an OPEN..CLOSE pair are
 * written by the table's encoder, decoded by the reader, counted by the
 * summary of stats, and shown by both exports (names, categories, args,
 * the pair's slice on a track of its own), beside the kinds of the
 * shipped table, whose GC slices are unchanged.
 */
#define _GNU_SOURCE
#include "trace/analysis.h"
#include "check.h"
#include "trace/trace.h"
#include "exportcheck.h"
#include "tracegen.h"

typedef struct seen {
    sw_ext x[8];
    char s1[8][SW_EXT_STR_MAX + 1], s2[8][SW_EXT_STR_MAX + 1];
    size_t n;
} seen;

static int keep_ext(void *ud, const sw_event *ev)
{
    seen *s = ud;
    if (ev->kind != SW_EV_EXT || s->n == 8)
        return 0;
    s->x[s->n] = *ev->ext;
    snprintf(s->s1[s->n], sizeof s->s1[0], "%s", ev->ext->s1);
    snprintf(s->s2[s->n], sizeof s->s2[0], "%s", ev->ext->s2);
    s->n++;
    return 0;
}

TEST(the_rows_are_in_the_table)
{
    const sw_record_kind *k = sw_record_kind_of(SW_EXT_TASK_SWITCH);
    REQUIRE(k);
    CHECK_EQ_STR(k->name, "task_switch");
    CHECK_EQ_U64(k->nfields, 6);
    CHECK_EQ_U64(SW_EXT_KIND_LIMIT, 43);
    CHECK(sw_record_kind_of(39) == NULL);
    CHECK(sw_record_kind_of(SW_EXT_WAIT_END)->pair == SW_EXT_WAIT_BEGIN);
}

TEST(a_new_kind_is_written_read_counted_and_exported)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(tg_open(&g, p, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 4, 1) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 9001, 0, "main", 3);
    REQUIRE(a);
    tg_enter(a, SW_OP_CALL, 0);
    tg_ext(a, SW_EXT_TASK_SWITCH, 3, 7, (uint64_t)-5, 99, 0, "t1", "n");
    tg_ext(a, SW_EXT_WAIT_BEGIN, 0, 0, 0, 0, 0, "L", NULL);
    tg_ext(a, SW_EXT_GC_START, 0, 0, 2, 0, 0, NULL, NULL);
    tg_ext(a, SW_EXT_WAIT_END, 0, 0, 3, 0, 0, "L", NULL);
    tg_ext(a, SW_EXT_GC_DONE, 0, 0, 2, 17, 1, NULL, NULL);
    tg_ext(a, SW_EXT_WAIT_BEGIN, 0, 0, 0, 0, 0, "M", NULL);   /* left open: unfinished */
    tg_exit(a, SW_OP_RETURN);
    REQUIRE(tg_close(&g, 1e9) == SW_OK);
    sw_trace *t = tg_open_trace(p);
    REQUIRE(t);

    /* The reader decodes every field into its slot. */
    seen s = {0};
    REQUIRE(sw_trace_replay_ext(t, 0, SW_REPLAY_EXT, keep_ext, &s) == SW_OK);
    REQUIRE(s.n == 6);
    CHECK_EQ_U64(s.x[0].kind, SW_EXT_TASK_SWITCH);
    CHECK_EQ_U64(s.x[0].malformed, 0);
    CHECK_EQ_U64(s.x[0].code, 3);
    CHECK_EQ_U64(s.x[0].line, 7);
    CHECK_EQ_U64(s.x[0].a, (uint64_t)-5);
    CHECK_EQ_U64(s.x[0].b, 99);
    CHECK_EQ_STR(s.s1[0], "t1");
    CHECK_EQ_STR(s.s2[0], "n");
    CHECK_EQ_U64(s.x[3].kind, SW_EXT_WAIT_END);
    CHECK_EQ_U64(s.x[3].a, 3);
    CHECK_EQ_STR(s.s1[3], "L");

    /* Stats count it. */
    sw_ext_summary xs;
    REQUIRE(sw_ext_summary_compute(t, &xs) == SW_OK);
    CHECK_EQ_U64(xs.count[SW_EXT_TASK_SWITCH], 1);
    CHECK_EQ_U64(xs.count[SW_EXT_WAIT_BEGIN], 2);
    CHECK_EQ_U64(xs.count[SW_EXT_WAIT_END], 1);
    CHECK_EQ_U64(xs.gc_pairs, 1);
    CHECK_EQ_U64(xs.malformed, 0);

    /* Chrome: the instant with its args in the row's order, the pair as a
     * complete event (and the open one unfinished), GC as before. */
    char err[256], why[160];
    size_t n;
    int rc;
    char *out = ec_export_mem(sw_export_chrome, t, 0, &n, &rc, err, sizeof err);
    REQUIRE(rc == SW_OK);
    ec_chrome_stats cs;
    CHECK_MSG(ec_chrome(out, n, 1, &cs, why, sizeof why), "%s", why);
    CHECK_EQ_U64(cs.instants, 1);
    CHECK_EQ_U64(cs.completes, 3);
    CHECK(strstr(out, "\"name\":\"switch to t1\",\"cat\":\"task\",\"args\":{\"function\":\"<lambda>3\","
                      "\"file\":\"/src/pkg/mod3.py\",\"line\":7,\"task\":\"t1\",\"drift\":-5,\"waker\":99,"
                      "\"note\":\"n\"}}") != NULL);
    CHECK(strstr(out, "\"name\":\"wait (lock L)\",\"cat\":\"wait\",\"args\":{\"lock\":\"L\",\"spins\":3}}") != NULL);
    CHECK(strstr(out, "\"name\":\"wait (lock M) unfinished\",\"cat\":\"wait\",\"args\":{\"lock\":\"M\"}}") != NULL);
    CHECK(strstr(out, "\"name\":\"GC (generation 2)\",\"cat\":\"gc\",\"args\":{\"generation\":2,"
                      "\"collected\":17,\"uncollectable\":1}}") != NULL);
    free(out);

    /* Perfetto: the instant, and the pair's slices on a "wait" track of
     * their own beside the "GC" track. */
    out = ec_export_mem(sw_export_perfetto, t, 0, &n, &rc, err, sizeof err);
    REQUIRE(rc == SW_OK);
    ec_pb_stats ps;
    CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "%s", why);
    CHECK_EQ_U64(ps.instants, 1);
    CHECK_EQ_U64(ps.begins, 1 + 2 + 1);         /* the call, two waits, one GC */
    CHECK_EQ_U64(ps.descriptors, 1 + 1 + 2);    /* process, thread, GC and wait tracks */
    CHECK(memmem(out, n, "switch to t1", 12) != NULL);
    CHECK(memmem(out, n, "wait (lock L)", 13) != NULL);
    CHECK(memmem(out, n, "spins", 5) != NULL);
    CHECK(memmem(out, n, "drift", 5) != NULL);
    free(out);
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}
