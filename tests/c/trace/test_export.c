/*
 * test_export.c - the Chrome JSON and Perfetto protobuf exporters: output
 * is well-formed (strict JSON; a sequence of Trace.packet messages), slices
 * are balanced and match the replay one for one, names are escaped, the
 * minimum-duration filter drops exactly the short slices, write errors are
 * reported as such; the ends of flows between tasks (sw_export_opts
 * .task_flows) are marks on their tracks at their times, in order.
 */
#define _GNU_SOURCE
#include "check.h"
#include "trace/analysis.h"
#include "exportcheck.h"
#include "tracegen.h"

typedef struct counts {
    size_t enters, exits, dropped, kept;  /* kept: slices >= min duration */
} counts;

static int is_enter(int k) { return k == SW_OP_CALL || k == SW_OP_RESUME || k == SW_OP_C_CALL; }

static counts replay_counts(sw_trace *t, int64_t min_ns)
{
    counts c = {0, 0, 0, 0};
    for (size_t i = 0; i < sw_trace_thread_count(t); i++) {
        tg_rec r;
        tg_replay(t, i, &r);
        for (size_t k = 0; k < r.n; k++) {
            if (is_enter(r.ev[k].kind))
                c.enters++;
            else if (r.ev[k].kind == SW_EV_DROPPED)
                c.dropped++;
            else
                c.exits++;
        }
        tg_rec_free(&r);
        int64_t *dur;
        size_t n;
        if (sw_slice_durations(t, i, &dur, &n) == SW_OK) {
            for (size_t k = 0; k < n; k++)
                c.kept += dur[k] >= min_ns;
            free(dur);
        }
    }
    return c;
}

/* A trace of two threads, the first with frames left open at the end; in
 * ring mode its oldest chunks are discarded (DROPPED events on replay). */
static sw_trace *make(tg *g, int ring)
{
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    if (tg_open(g, path, 4096, ring ? 2 * 4096 : 0, 0, 1e9) || tg_codes(g, 15, 4))
        return NULL;
    tg_thread *a = tg_add_thread(g, 3001, 1, "main \"thread\"", 61);
    tg_thread *b = tg_add_thread(g, 3002, 2, "", 62);  /* exported as "thread" */
    if (!a || !b)
        return NULL;
    for (uint32_t k = 0; k < 4; k++)
        tg_enter(a, SW_OP_CALL, 1 + k);  /* codes 1 and 2 have names that need escaping */
    a->floor = 4;
    tg_run(a, ring ? 12000 : 3000, 12);
    tg_run(b, 2000, 8);
    tg_unwind_all(b);
    if (tg_close(g, 1e9))
        return NULL;
    sw_trace *t = NULL;
    char err[256];
    sw_trace_open_file(path, &t, err, sizeof err);
    unlink(path);
    return t;
}

static void check_chrome(sw_trace *t, int64_t min_ns)
{
    counts c = replay_counts(t, min_ns);
    size_t n;
    int rc;
    char err[128], why[200];
    char *out = ec_export_mem(sw_export_chrome, t, min_ns, &n, &rc, err, sizeof err);
    REQUIRE(out != NULL);
    CHECK_EQ_I64(rc, SW_OK);
    ec_chrome_stats cs;
    if (CHECK_MSG(ec_chrome(out, n, 1, &cs, why, sizeof why), "chrome output: %s", why)) {
        CHECK_EQ_U64(cs.begins, min_ns > 0 ? c.kept : c.enters);
        CHECK_EQ_U64(cs.ends, cs.begins);
        CHECK_EQ_U64(cs.instants, c.dropped);
        CHECK_EQ_U64(cs.metadata, 1 + sw_trace_thread_count(t));
    }
    if (min_ns > 0)
        CHECK(c.kept < c.enters);  /* the filter had something to do */
    else
        CHECK_EQ_U64(c.exits, c.enters);
    /* Escaping of names with quotes, backslashes and control characters. */
    CHECK_MSG(strstr(out, "\"name\":\"Cls\\\"1\\\".m\\\\x\"") != NULL, "escaped qualname of code 1 missing");
    CHECK_MSG(strstr(out, "\"name\":\"tab\\u0009nl\\u000a2\"") != NULL, "escaped qualname of code 2 missing");
    CHECK(strstr(out, "\"args\":{\"name\":\"main \\\"thread\\\"\"}") != NULL);
    CHECK(strstr(out, "\"args\":{\"name\":\"thread\"}") != NULL);  /* unnamed thread */
    CHECK(strstr(out, "\"args\":{\"name\":\"tracegen \\\"quoted\\\" \\\\ arg\"}") != NULL);
    CHECK(strstr(out, "\"pid\":4242") != NULL);
    CHECK(strstr(out, "\"tid\":3001") != NULL && strstr(out, "\"tid\":3002") != NULL);
    /* Timestamps: microseconds of CLOCK_MONOTONIC (mono0_ns + t) with ns
     * decimals; check the first slice of the first thread. */
    if (min_ns == 0) {
        tg_rec r;
        tg_replay(t, 0, &r);
        if (CHECK(r.n > 0)) {
            int64_t ns = 5000000000ll + r.ev[0].t_ns;
            char want[64];
            snprintf(want, sizeof want, "\"ts\":%lld.%03lld,", (long long)(ns / 1000), (long long)(ns % 1000));
            CHECK_MSG(strstr(out, want) != NULL, "%s not found", want);
        }
        tg_rec_free(&r);
    }
    free(out);
}

static void check_perfetto(sw_trace *t, int64_t min_ns)
{
    counts c = replay_counts(t, min_ns);
    size_t n;
    int rc;
    char err[128], why[200];
    char *out = ec_export_mem(sw_export_perfetto, t, min_ns, &n, &rc, err, sizeof err);
    REQUIRE(out != NULL);
    CHECK_EQ_I64(rc, SW_OK);
    ec_pb_stats ps;
    if (CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "perfetto output: %s", why)) {
        size_t begins = min_ns > 0 ? c.kept : c.enters;
        CHECK_EQ_U64(ps.descriptors, 1 + sw_trace_thread_count(t));
        CHECK_EQ_U64(ps.begins, begins);
        CHECK_EQ_U64(ps.ends, begins);
        CHECK_EQ_U64(ps.instants, c.dropped);
        /* One packet starts each thread's sequence (state, defaults, clock);
         * then one per event, each timed by a delta on the thread's
         * incremental clock and on the thread's track by default. */
        CHECK(ps.sequences <= sw_trace_thread_count(t) && (ps.sequences > 0) == (begins + c.dropped > 0));
        CHECK_EQ_U64(ps.packets, ps.descriptors + ps.sequences + 2 * begins + c.dropped);
        CHECK_EQ_U64(ps.incremental, 2 * begins + c.dropped);
        CHECK_EQ_U64(ps.default_track, 2 * begins + c.dropped);
        CHECK(ps.interned_names > 0 && ps.interned_names <= 19 * sw_trace_thread_count(t));
    }
    /* Names are interned, not repeated: the qualname of code 1 appears
     * once per sequence at most. */
    size_t hits = 0;
    for (const char *p = out; (p = memmem(p, n - (size_t)(p - out), "Cls\"1\".m\\x", 10)); p++)
        hits++;
    CHECK(hits >= 1 && hits <= 2 * sw_trace_thread_count(t));
    free(out);
}

TEST(chrome_balanced_valid_escaped)
{
    tg g;
    sw_trace *t = make(&g, 0);
    REQUIRE(t);
    check_chrome(t, 0);
    sw_trace_free(t);
    tg_free(&g);
}

TEST(chrome_ring_has_dropped_instants)
{
    tg g;
    sw_trace *t = make(&g, 1);
    REQUIRE(t);
    CHECK(replay_counts(t, 0).dropped > 0);
    check_chrome(t, 0);
    sw_trace_free(t);
    tg_free(&g);
}

TEST(chrome_min_duration_filter)
{
    tg g;
    sw_trace *t = make(&g, 0);
    REQUIRE(t);
    check_chrome(t, 3000);
    check_chrome(t, 20000);
    sw_trace_free(t);
    tg_free(&g);
}

TEST(perfetto_packets_valid)
{
    tg g;
    sw_trace *t = make(&g, 0);
    REQUIRE(t);
    check_perfetto(t, 0);
    sw_trace_free(t);
    tg_free(&g);
    t = make(&g, 1);
    REQUIRE(t);
    check_perfetto(t, 0);
    sw_trace_free(t);
    tg_free(&g);
}

TEST(perfetto_min_duration_filter)
{
    tg g;
    sw_trace *t = make(&g, 0);
    REQUIRE(t);
    check_perfetto(t, 3000);
    check_perfetto(t, 20000);
    sw_trace_free(t);
    tg_free(&g);
}

TEST(empty_trace_exports)
{
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_close(&g, 0) == SW_OK);
    sw_trace *t;
    char err[128], why[200];
    REQUIRE(sw_trace_open_file(path, &t, err, sizeof err) == SW_OK);
    size_t n;
    int rc;
    char *out = ec_export_mem(sw_export_chrome, t, 0, &n, &rc, err, sizeof err);
    CHECK_EQ_I64(rc, SW_OK);
    ec_chrome_stats cs;
    CHECK_MSG(ec_chrome(out, n, 1, &cs, why, sizeof why), "%s", why);
    CHECK_EQ_U64(cs.metadata, 1);
    CHECK_EQ_U64(cs.begins, 0);
    free(out);
    out = ec_export_mem(sw_export_perfetto, t, 0, &n, &rc, err, sizeof err);
    CHECK_EQ_I64(rc, SW_OK);
    ec_pb_stats ps;
    CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "%s", why);
    CHECK_EQ_U64(ps.packets, 1);
    CHECK_EQ_U64(ps.descriptors, 1);
    free(out);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

TEST(write_errors_are_reported_as_write_errors)
{
    /* Every write to /dev/full fails (ENOSPC). */
    FILE *f = fopen("/dev/full", "w");
    if (!f) {
        printf("      (no /dev/full here: nothing to check)\n");
        return;
    }
    fclose(f);
    tg g;
    sw_trace *t = make(&g, 0);
    REQUIRE(t);
    static int (*const fns[2])(sw_trace *, FILE *, const sw_export_opts *, char *, size_t) = {
        sw_export_chrome, sw_export_perfetto};
    static const char *names[2] = {"chrome", "perfetto"};
    for (int k = 0; k < 2; k++) {
        for (int buffered = 0; buffered < 2; buffered++) {
            f = fopen("/dev/full", "w");
            REQUIRE(f);
            if (!buffered)
                setvbuf(f, NULL, _IONBF, 0);
            char err[128] = "";
            int rc = fns[k](t, f, NULL, err, sizeof err);
            CHECK_MSG(rc == SW_EIO, "%s (%s): rc %d (%s), expected SW_EIO", names[k],
                      buffered ? "buffered" : "unbuffered", rc, sw_strerror(rc));
            CHECK_MSG(strcmp(err, "write error") == 0, "%s (%s): message \"%s\"", names[k],
                      buffered ? "buffered" : "unbuffered", err);
            fclose(f);
        }
    }
    sw_trace_free(t);
    tg_free(&g);
}

/* Runs an exporter with task flows into a memory stream (as ec_export_mem). */
static char *export_flows(int (*fn)(sw_trace *, FILE *, const sw_export_opts *, char *, size_t), sw_trace *t,
                          const sw_export_task_flow *flows, size_t nflows, size_t *len, int *rc)
{
    char *buf = NULL, err[128];
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return NULL;
    sw_export_opts o = {0, NULL, NULL, NULL, flows, nflows};
    *rc = fn(t, f, &o, err, sizeof err);
    fclose(f);
    *len = n;
    return buf;
}

/* The bytes of a TrackEvent's fixed64 field `field` holding `id`. */
static size_t count_fixed64(const char *out, size_t n, unsigned field, uint64_t id)
{
    uint8_t want[10];
    uint64_t tag = ((uint64_t)field << 3) | 1;
    want[0] = (uint8_t)(0x80 | (tag & 0x7f));
    want[1] = (uint8_t)(tag >> 7);
    for (int i = 0; i < 8; i++)
        want[2 + i] = (uint8_t)(id >> (8 * i));
    size_t c = 0;
    for (const char *q = out; (q = memmem(q, n - (size_t)(q - out), want, sizeof want)) != NULL; q++)
        c++;
    return c;
}

TEST(task_flows_are_marks_at_their_times)
{
    tg g;
    sw_trace *t = make(&g, 0);
    REQUIRE(t);
    counts c = replay_counts(t, 0);
    tg_rec a, b;
    tg_replay(t, 0, &a);
    tg_replay(t, 1, &b);
    REQUIRE(a.n > 20 && b.n > 20);
    /* A flow from thread 0 to thread 1, one back, and an end on thread 1
     * after its last event (written after its slices are closed). */
    sw_export_task_flow flows[] = {
        {7, 0, a.ev[10].t_ns, 0, "create", NULL},
        {8, 0, a.ev[20].t_ns, 1, "received", NULL},
        {7, 1, b.ev[10].t_ns, 1, "created", NULL},
        {8, 1, b.ev[5].t_ns + 1, 0, "send", NULL},
        {9, 1, b.ev[b.n - 1].t_ns + 1000, 1, "woken", NULL},
    };
    /* (sorted by thread then time, as the exporters need) */
    sw_export_task_flow tmp = flows[2];
    flows[2] = flows[3];
    flows[3] = tmp;
    size_t n;
    int rc;
    char why[200];
    char *out = export_flows(sw_export_chrome, t, flows, 5, &n, &rc);
    REQUIRE(out);
    CHECK_EQ_I64(rc, SW_OK);
    ec_chrome_stats cs;
    if (CHECK_MSG(ec_chrome(out, n, 1, &cs, why, sizeof why), "chrome output: %s", why)) {
        CHECK_EQ_U64(cs.begins, c.enters + 5);   /* a zero-length slice per end */
        CHECK_EQ_U64(cs.ends, cs.begins);
        CHECK_EQ_U64(cs.flow_starts, 2);
        CHECK_EQ_U64(cs.flow_ends, 3);
    }
    CHECK(strstr(out, "\"ph\":\"s\",\"pid\":4242,\"tid\":3001") != NULL);
    CHECK(strstr(out, "\"ph\":\"f\",\"bp\":\"e\",\"pid\":4242,\"tid\":3002") != NULL);
    CHECK_EQ_U64(ec_count(out, n, "\"id\":7,"), 2);
    CHECK_EQ_U64(ec_count(out, n, "\"name\":\"woken\""), 2);   /* its slice and its "f" */
    free(out);
    out = export_flows(sw_export_perfetto, t, flows, 5, &n, &rc);
    REQUIRE(out);
    CHECK_EQ_I64(rc, SW_OK);
    ec_pb_stats ps;
    if (CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "perfetto output: %s", why)) {
        CHECK_EQ_U64(ps.instants, c.dropped + 5);   /* time never goes back on a sequence: checked */
        CHECK_EQ_U64(ps.begins, c.enters);
    }
    CHECK_EQ_U64(count_fixed64(out, n, 47, 7), 1);   /* flow_ids */
    CHECK_EQ_U64(count_fixed64(out, n, 48, 7), 1);   /* terminating_flow_ids */
    CHECK_EQ_U64(count_fixed64(out, n, 47, 8), 1);
    CHECK_EQ_U64(count_fixed64(out, n, 48, 8), 1);
    CHECK_EQ_U64(count_fixed64(out, n, 48, 9), 1);
    free(out);
    tg_rec_free(&a);
    tg_rec_free(&b);
    sw_trace_free(t);
    tg_free(&g);
}
