/*
 * test_ext.c - EXT events (line, instruction, exception, GC, object and
 * thread events, format 1.1): written with the real writer, decoded by
 * sw_trace_replay_ext exactly (fields, strings, times, depth), malformed
 * payloads flagged without stopping the replay, summaries (counts, GC time)
 * and both exports (instants, GC slices) checked; regions (format 1.6)
 * decoded and exported as slices (Chrome: complete events on the thread;
 * Perfetto: a "regions" track under the thread's).
 */
#define _GNU_SOURCE
#include "trace/analysis.h"
#include "check.h"
#include "trace/trace.h"
#include "exportcheck.h"
#include "tracegen.h"

typedef struct xrec {
    sw_event ev;
    sw_ext x;
    char s1[SW_EXT_STR_MAX + 1], s2[SW_EXT_STR_MAX + 1];
} xrec;

typedef struct xlog {
    xrec *r;
    size_t n, cap;
    size_t others;      /* non-EXT events */
} xlog;

static int xlog_fn(void *ud, const sw_event *ev)
{
    xlog *l = ud;
    if (ev->kind != SW_EV_EXT) {
        l->others++;
        return 0;
    }
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 32;
        l->r = realloc(l->r, l->cap * sizeof *l->r);
        if (!l->r)
            abort();
    }
    xrec *r = &l->r[l->n++];
    r->ev = *ev;
    r->x = *ev->ext;
    snprintf(r->s1, sizeof r->s1, "%s", ev->ext->s1);
    snprintf(r->s2, sizeof r->s2, "%s", ev->ext->s2);
    return 0;
}

/* A trace being written to p (4 KiB chunks, time_shift `shift`) with npy
 * Python codes and nc C functions, and its thread `name` (tid): the
 * thread, or NULL. */
static tg_thread *open_one_thread(tg *g, const char *p, unsigned shift, uint32_t npy, uint32_t nc, uint64_t tid,
                                  uint64_t ident, const char *name, uint64_t seed)
{
    if (tg_open(g, p, 4096, 0, shift, 1e9) != SW_OK || tg_codes(g, npy, nc) != SW_OK)
        return NULL;
    return tg_add_thread(g, tid, ident, name, seed);
}

/* An EXT record of `kind` with the payload given as it is (malformed,
 * unknown or built by hand), one tick after the thread's last event. */
static void raw_ext(tg_thread *a, unsigned kind, const void *payload, size_t len)
{
    tg_tick(a);
    sw_tbuf_ext(a->b, a->ticks, kind, payload, len);
}

/* The trace written to p, closed and opened for reading (NULL: failed). */
static sw_trace *written(tg *g, const char *p)
{
    return tg_close(g, 1e9) == SW_OK ? tg_open_trace(p) : NULL;
}

/* The trace read, its writer's state and its file, gone. */
static void forget(sw_trace *t, tg *g, const char *p)
{
    sw_trace_free(t);
    tg_free(g);
    unlink(p);
}

TEST(every_kind_decodes_exactly)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    tg_thread *a = open_one_thread(&g, p, 1, 4, 1, 7001, 0, "main", 5);
    REQUIRE(a);
    tg_enter(a, SW_OP_CALL, 0);
    tg_enter(a, SW_OP_CALL, 1);
    uint64_t ticks[12];
    static const unsigned kinds[12] = {SW_EXT_LINE, SW_EXT_INSTRUCTION, SW_EXT_RAISE, SW_EXT_HANDLED,
                                       SW_EXT_GC_START, SW_EXT_GC_DONE, SW_EXT_NEW_START, SW_EXT_NEW_DONE,
                                       SW_EXT_DEL_START, SW_EXT_DEL_DONE, SW_EXT_THREAD_START,
                                       SW_EXT_THREAD_EXIT};
    /* tg_ext_all's events, one by one to remember their times. */
    tg_ext(a, SW_EXT_LINE, 0, 12, 0, 0, 0, NULL, NULL), ticks[0] = a->ticks;
    tg_ext(a, SW_EXT_INSTRUCTION, 1, 13, 24, 100, 0, "LOAD_FAST", NULL), ticks[1] = a->ticks;
    tg_ext(a, SW_EXT_RAISE, 0, 14, 0, 0, 0, "ValueError", NULL), ticks[2] = a->ticks;
    tg_ext(a, SW_EXT_HANDLED, 0, 15, 0, 0, 0, "ValueError", NULL), ticks[3] = a->ticks;
    tg_ext(a, SW_EXT_GC_START, 0, 0, 2, 0, 0, NULL, NULL), ticks[4] = a->ticks;
    tg_ext(a, SW_EXT_GC_DONE, 0, 0, 2, 17, 1, NULL, NULL), ticks[5] = a->ticks;
    for (int k = 6; k < 10; k++)
        tg_ext(a, kinds[k], 0, 0, 0, 0, 0, "pkg.Klass", "pkg/mod.py"), ticks[k] = a->ticks;
    tg_ext(a, SW_EXT_THREAD_START, 0, 0, 4321, 0, 0, "worker \"1\"", NULL), ticks[10] = a->ticks;
    tg_exit(a, SW_OP_RETURN);
    tg_ext(a, SW_EXT_THREAD_EXIT, 0, 0, 4321, 0, 0, "worker \"1\"", NULL), ticks[11] = a->ticks;
    tg_exit(a, SW_OP_RETURN);
    sw_trace *t = written(&g, p);
    REQUIRE(t);
    /* The plain replay is unchanged by the EXT events. */
    tg_rec got, exp = {0};
    CHECK_EQ_I64(tg_replay(t, 0, &got), SW_OK);
    tg_expect(t, a, 0, a->n, &exp);
    char why[256];
    CHECK_MSG(tg_same(&got, &exp, why, sizeof why), "%s", why);
    tg_rec_free(&got);
    tg_rec_free(&exp);
    xlog l = {0};
    CHECK_EQ_I64(sw_trace_replay_ext(t, 0, SW_REPLAY_EXT, xlog_fn, &l), SW_OK);
    REQUIRE_EQ_U64(l.n, 12);
    CHECK_EQ_U64(l.others, 4);
    for (int k = 0; k < 12; k++) {
        const xrec *r = &l.r[k];
        CHECK_EQ_U64(r->x.kind, kinds[k]);
        CHECK_EQ_U64(r->x.malformed, 0);
        CHECK_EQ_I64(r->ev.t_ns, sw_trace_units_to_ns(t, ticks[k] >> 1));
        CHECK_EQ_U64(r->ev.depth, k == 11 ? 1 : 2);
        CHECK_EQ_U64(r->ev.code, r->x.code);
    }
    CHECK_EQ_U64(l.r[0].x.code, 0);
    CHECK_EQ_U64(l.r[0].x.line, 12);
    CHECK_EQ_U64(l.r[1].x.code, 1);
    CHECK_EQ_U64(l.r[1].x.line, 13);
    CHECK_EQ_U64(l.r[1].x.a, 24);
    CHECK_EQ_U64(l.r[1].x.b, 100);
    CHECK_EQ_STR(l.r[1].s1, "LOAD_FAST");
    CHECK_EQ_STR(l.r[2].s1, "ValueError");
    CHECK_EQ_U64(l.r[3].x.line, 15);
    CHECK_EQ_U64(l.r[4].x.code, SW_EXT_NO_CODE);
    CHECK_EQ_U64(l.r[4].x.a, 2);
    CHECK_EQ_U64(l.r[5].x.a, 2);
    CHECK_EQ_U64(l.r[5].x.b, 17);
    CHECK_EQ_U64(l.r[5].x.c, 1);
    CHECK_EQ_STR(l.r[8].s1, "pkg.Klass");
    CHECK_EQ_STR(l.r[8].s2, "pkg/mod.py");
    CHECK_EQ_STR(l.r[10].s1, "worker \"1\"");
    CHECK_EQ_U64(l.r[10].x.a, 4321);
    /* Summary. */
    sw_ext_summary s;
    REQUIRE(sw_ext_summary_compute(t, &s) == SW_OK);
    for (int k = 0; k < 12; k++)
        CHECK_EQ_U64(s.count[kinds[k]], 1);
    CHECK_EQ_U64(s.count[SW_EXT_DROPPED], 0);
    CHECK_EQ_U64(s.gc_pairs, 1);
    CHECK_EQ_I64(s.gc_ns, l.r[5].ev.t_ns - l.r[4].ev.t_ns);
    CHECK_EQ_U64(s.gc_collected, 17);
    CHECK_EQ_U64(s.gc_uncollectable, 1);
    free(l.r);
    forget(t, &g, p);
}

/* "No code" (a task event located nowhere) is its own value, not code 0
 * (format 1.14): SW_EXT_NO_CODE, written as it is; a larger number is no
 * code id (malformed), and 0 is still the first code. */
TEST(no_code_is_not_code_zero)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    tg_thread *a = open_one_thread(&g, p, 1, 2, 0, 7003, 0, "m", 6);
    REQUIRE(a);
    tg_enter(a, SW_OP_CALL, 0);
    tg_ext(a, SW_EXT_TASK_BLOCK, SW_EXT_NO_CODE, 0, 6, 0, 0, "sleep", NULL);
    tg_ext(a, SW_EXT_TASK_BLOCK, 0, 3, 6, 0, 0, "sleep", NULL);
    tg_ext(a, SW_EXT_TASK_BLOCK, 1, 4, 6, 0, 0, "sleep", NULL);
    /* One more than the largest code id: malformed. */
    const uint8_t over[] = {0x80, 0x80, 0x80, 0x80, 0x10, 3, 6, 5, 's', 'l', 'e', 'e', 'p'};
    raw_ext(a, SW_EXT_TASK_BLOCK, over, sizeof over);
    tg_exit(a, SW_OP_RETURN);
    sw_trace *t = written(&g, p);
    REQUIRE(t);
    xlog l = {0};
    CHECK_EQ_I64(sw_trace_replay_ext(t, 0, SW_REPLAY_EXT, xlog_fn, &l), SW_OK);
    REQUIRE_EQ_U64(l.n, 4);
    static const uint32_t want[3] = {SW_EXT_NO_CODE, 0, 1};
    for (unsigned k = 0; k < 3; k++) {
        CHECK_EQ_U64(l.r[k].x.malformed, 0);
        CHECK_EQ_U64(l.r[k].x.code, want[k]);
        CHECK_EQ_U64(l.r[k].ev.code, want[k]);
        CHECK_EQ_STR(l.r[k].s1, "sleep");
    }
    CHECK_EQ_U64(l.r[3].x.malformed, 1);
    free(l.r);
    forget(t, &g, p);
}

/* Format 1.16: the channel of a task event is interned (a STRINGS entry,
 * written once) and reads as the string; the older kinds, the channel
 * inline, read as before; an id with no entry reads as "?". */
TEST(interned_channels_read_as_their_strings)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    tg_thread *a = open_one_thread(&g, p, 1, 2, 0, 7004, 0, "m", 6);
    REQUIRE(a);
    tg_enter(a, SW_OP_CALL, 0);
    tg_ext(a, SW_EXT_TASK_SEND, 0, 3, 1, 0, 0, "Queue 0x10", "42");
    tg_ext(a, SW_EXT_TASK_SEND, 0, 4, 1, 0, 0, "Queue 0x10", "43");
    tg_ext(a, SW_EXT_TASK_RECEIVE, 0, 5, 2, 0, 0, "Queue 0x20", "42");
    tg_ext(a, SW_EXT_TASK_SEND_INLINE, 0, 6, 1, 0, 0, "Queue 0x10", "44");   /* a 1.15 writer's */
    const uint8_t no_entry[] = {0, 7, 1, 9, 2, '4', '5'};   /* code 0, line 7, peer 1, channel id 9, "45" */
    raw_ext(a, SW_EXT_TASK_SEND, no_entry, sizeof no_entry);
    tg_exit(a, SW_OP_RETURN);
    sw_trace *t = written(&g, p);
    REQUIRE(t);
    xlog l = {0};
    CHECK_EQ_I64(sw_trace_replay_ext(t, 0, SW_REPLAY_EXT, xlog_fn, &l), SW_OK);
    REQUIRE_EQ_U64(l.n, 5);
    static const char *const channel[5] = {"Queue 0x10", "Queue 0x10", "Queue 0x20", "Queue 0x10", "?"};
    static const char *const value[5] = {"42", "43", "42", "44", "45"};
    for (unsigned k = 0; k < 5; k++) {
        CHECK_EQ_U64(l.r[k].x.malformed, 0);
        CHECK_EQ_U64(l.r[k].x.line, k + 3);
        CHECK_EQ_STR(l.r[k].s1, channel[k]);
        CHECK_EQ_STR(l.r[k].s2, value[k]);
    }
    /* The interned kind is shorter than the inline one, and cannot be
     * encoded without a table to intern into. */
    sw_ext v = {.code = 0, .line = 3, .a = 1, .s1 = "Queue 0x10", .s2 = "42"};
    uint8_t buf[64];
    CHECK_EQ_I64(sw_record_encode(SW_EXT_TASK_SEND, &v, 200, buf, sizeof buf), -1);
    CHECK_EQ_I64(sw_record_encode(SW_EXT_TASK_SEND_INLINE, &v, 200, buf, sizeof buf), 3 + 11 + 3);
    free(l.r);
    forget(t, &g, p);
}

TEST(malformed_payloads_are_flagged_and_the_replay_goes_on)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    tg_thread *a = open_one_thread(&g, p, 0, 2, 0, 7002, 0, "m", 6);
    REQUIRE(a);
    tg_enter(a, SW_OP_CALL, 0);
    /* Each known kind with an empty payload: all need at least one field. */
    for (unsigned k = SW_EXT_LINE; k <= SW_EXT_THREAD_EXIT; k++) {
        raw_ext(a, k, "", 0);
    }
    /* A string running past its payload. */
    uint8_t bad_str[] = {3, 7, 50, 'a', 'b'};  /* code 3, line 7, str of 50 bytes: only 2 */
    raw_ext(a, SW_EXT_RAISE, bad_str, sizeof bad_str);
    /* Unknown kinds are skipped; trailing bytes after a kind's fields are
     * ignored (a newer minor version may add fields). */
    raw_ext(a, 99, "xyz", 3);
    uint8_t longer[] = {1, 9, 0x7f, 0x7f};  /* LINE code 1, line 9, two extra bytes */
    raw_ext(a, SW_EXT_LINE, longer, sizeof longer);
    /* A long name is cut at SW_EXT_STR_MAX bytes, not inside a character. */
    uint8_t big[400];
    sw_bytes pl = {0};
    memset(big, 'a', sizeof big);
    big[254] = 0xc3, big[255] = 0xa9;  /* "é" straddles the cut */
    sw_bytes_varint(&pl, 0);
    sw_bytes_varint(&pl, 1);
    sw_bytes_varint(&pl, 300);
    sw_bytes_put(&pl, big, 300);
    raw_ext(a, SW_EXT_RAISE, pl.data, pl.len);
    sw_bytes_free(&pl);
    tg_exit(a, SW_OP_RETURN);
    sw_trace *t = written(&g, p);
    REQUIRE(t);
    xlog l = {0};
    CHECK_EQ_I64(sw_trace_replay_ext(t, 0, SW_REPLAY_EXT, xlog_fn, &l), SW_OK);
    CHECK_EQ_U64(l.others, 2);
    REQUIRE_EQ_U64(l.n, 12 + 3);
    for (unsigned k = 0; k < 12; k++) {
        CHECK_EQ_U64(l.r[k].x.kind, SW_EXT_LINE + k);
        CHECK_EQ_U64(l.r[k].x.malformed, 1);
        CHECK_EQ_STR(l.r[k].s1, "");
    }
    CHECK_EQ_U64(l.r[12].x.malformed, 1);
    CHECK_EQ_U64(l.r[12].x.code, 3);
    CHECK_EQ_U64(l.r[13].x.malformed, 0);
    CHECK_EQ_U64(l.r[13].x.kind, SW_EXT_LINE);
    CHECK_EQ_U64(l.r[13].x.code, 1);
    CHECK_EQ_U64(l.r[13].x.line, 9);
    CHECK_EQ_U64(l.r[14].x.malformed, 0);
    CHECK_EQ_U64(strlen(l.r[14].s1), 254);
    sw_ext_summary s;
    REQUIRE(sw_ext_summary_compute(t, &s) == SW_OK);
    CHECK_EQ_U64(s.malformed, 13);
    CHECK_EQ_U64(s.count[SW_EXT_RAISE], 3);
    CHECK_EQ_U64(s.gc_pairs, 0);
    /* Exports stay well-formed. */
    char err[256], why[160];
    size_t n;
    int rc;
    char *out = ec_export_mem(sw_export_chrome, t, 0, &n, &rc, err, sizeof err);
    ec_chrome_stats cs;
    CHECK_EQ_I64(rc, SW_OK);
    CHECK_MSG(ec_chrome(out, n, 1, &cs, why, sizeof why), "%s", why);
    CHECK_EQ_U64(cs.instants, 15);
    CHECK(strstr(out, "\"malformed\":true") != NULL);
    free(out);
    out = ec_export_mem(sw_export_perfetto, t, 0, &n, &rc, err, sizeof err);
    ec_pb_stats ps;
    CHECK_EQ_I64(rc, SW_OK);
    CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "%s", why);
    CHECK_EQ_U64(ps.instants, 15);
    free(out);
    free(l.r);
    forget(t, &g, p);
}

/* The intern function of test_wake_cause: every string is entry 7. */
static int intern_as_7(void *ctx, const char *s, size_t len, uint64_t *id)
{
    (void)ctx;
    (void)s;
    (void)len;
    *id = 7;
    return 0;
}

/* TASK_WAKE's cause (format 1.19, SW_FT_VARINT_LATER) is written only when
 * it is not 0: a wake by a task keeps the bytes of 1.16-1.18; a wake by
 * I/O (cause 8) has one byte more and decodes with it; a 1.18 record
 * decodes with cause 0. */
TEST(a_wakes_cause_is_written_only_when_not_0)
{
    char s1[SW_EXT_STR_MAX + 1], s2[SW_EXT_STR_MAX + 1];
    sw_ext x;
    uint8_t buf[64];
    const uint8_t old[] = {3, 12, 5, 0x92, 0x21, 7};   /* code 3, line 12, task 5, native id 4242, channel 7 */
    sw_ext v = {.code = 3, .line = 12, .a = 5, .c = 4242, .s1 = "sock"};
    long n = sw_record_encode_interned(SW_EXT_TASK_WAKE, &v, SW_EXT_STR_MAX, intern_as_7, NULL, buf, sizeof buf);
    REQUIRE(n == (long)sizeof old);
    CHECK(memcmp(buf, old, sizeof old) == 0);
    sw_record_decode(SW_EXT_TASK_WAKE, old, sizeof old, NULL, s1, s2, &x);
    CHECK_EQ_U64(x.malformed, 0);
    CHECK_EQ_U64(x.a, 5);
    CHECK_EQ_U64(x.b, 0);
    CHECK_EQ_U64(x.c, 4242);
    v.b = 8;
    n = sw_record_encode_interned(SW_EXT_TASK_WAKE, &v, SW_EXT_STR_MAX, intern_as_7, NULL, buf, sizeof buf);
    REQUIRE(n == (long)sizeof old + 1);
    CHECK(memcmp(buf, old, sizeof old) == 0 && buf[sizeof old] == 8);
    sw_record_decode(SW_EXT_TASK_WAKE, buf, (size_t)n, NULL, s1, s2, &x);
    CHECK_EQ_U64(x.malformed, 0);
    CHECK_EQ_U64(x.a, 5);
    CHECK_EQ_U64(x.b, 8);
    const sw_record_kind *k = sw_record_kind_of(SW_EXT_TASK_WAKE);
    REQUIRE(k && k->nfields == 6);
    CHECK(k->fields[5].later && k->fields[5].type == SW_FT_VARINT && k->fields[5].slot == SW_SLOT_B);
}

/* Fields a later minor appended to a row (records.h SW_FT_LATER: OFF_CPU's
 * next_tid and next_comm, WAKEUP's comm, format 1.15; ON_CPU's prev_tid
 * and prev_comm, 1.17) may be absent: an
 * older trace's record decodes whole, with 0 / "" for them; present, they
 * decode; a payload cut inside one, or before them, is malformed. */
TEST(fields_a_later_minor_appended_may_be_absent)
{
    char s1[SW_EXT_STR_MAX + 1], s2[SW_EXT_STR_MAX + 1];
    sw_ext x;
    const uint8_t old_off[] = {8, 's', 'l', 'e', 'e', 'p', 'i', 'n', 'g', 1, 1};   /* 1.10: reason, cpu, state */
    sw_record_decode(SW_EXT_OFF_CPU, old_off, sizeof old_off, NULL, s1, s2, &x);
    CHECK_EQ_U64(x.malformed, 0);
    CHECK_EQ_STR(x.s1, "sleeping");
    CHECK_EQ_U64(x.a, 1);
    CHECK_EQ_U64(x.b, 1);
    CHECK_EQ_U64(x.c, 0);
    CHECK_EQ_STR(x.s2, "");
    uint8_t buf[64];
    sw_ext v = {.s1 = "sleeping", .a = 1, .b = 1, .c = 4242, .s2 = "kworker/0:2"};
    long n = sw_record_encode(SW_EXT_OFF_CPU, &v, SW_EXT_STR_MAX, buf, sizeof buf);
    REQUIRE(n == (long)sizeof old_off + 2 + 1 + 11);
    CHECK(memcmp(buf, old_off, sizeof old_off) == 0);
    sw_record_decode(SW_EXT_OFF_CPU, buf, (size_t)n, NULL, s1, s2, &x);
    CHECK_EQ_U64(x.malformed, 0);
    CHECK_EQ_U64(x.c, 4242);
    CHECK_EQ_STR(x.s2, "kworker/0:2");
    sw_record_decode(SW_EXT_OFF_CPU, buf, (size_t)n - 3, NULL, s1, s2, &x);   /* the name cut short */
    CHECK_EQ_U64(x.malformed, 1);
    sw_record_decode(SW_EXT_OFF_CPU, old_off, sizeof old_off - 1, NULL, s1, s2, &x);   /* no state */
    CHECK_EQ_U64(x.malformed, 1);
    const uint8_t old_wake[] = {0x90, 0x4e, 1};   /* 1.10: tid 10000, cpu 1 */
    sw_record_decode(SW_EXT_WAKEUP, old_wake, sizeof old_wake, NULL, s1, s2, &x);
    CHECK_EQ_U64(x.malformed, 0);
    CHECK_EQ_U64(x.a, 10000);
    CHECK_EQ_STR(x.s1, "");
    const sw_record_kind *k = sw_record_kind_of(SW_EXT_OFF_CPU);
    REQUIRE(k && k->nfields == 5);
    CHECK(!k->fields[2].later && k->fields[3].later && k->fields[4].later);
    CHECK_EQ_U64(k->fields[3].type, SW_FT_TID);
    CHECK_EQ_U64(k->fields[4].type, SW_FT_STR);
    /* ON_CPU's prev_tid (in the line slot: an ON_CPU is located nowhere)
     * and prev_comm, format 1.17 */
    const uint8_t old_on[] = {1, 0, 0};   /* 1.10: next_cpu 1, no waker */
    sw_record_decode(SW_EXT_ON_CPU, old_on, sizeof old_on, NULL, s1, s2, &x);
    CHECK_EQ_U64(x.malformed, 0);
    CHECK_EQ_U64(x.a, 1);
    CHECK_EQ_U64(x.line, 0);
    CHECK_EQ_STR(x.s1, "");
    sw_ext on = {.a = 1, .line = 4243, .s1 = "swapper/1"};
    n = sw_record_encode(SW_EXT_ON_CPU, &on, SW_EXT_STR_MAX, buf, sizeof buf);
    REQUIRE(n == (long)sizeof old_on + 2 + 1 + 9);
    CHECK(memcmp(buf, old_on, sizeof old_on) == 0);
    sw_record_decode(SW_EXT_ON_CPU, buf, (size_t)n, NULL, s1, s2, &x);
    CHECK_EQ_U64(x.malformed, 0);
    CHECK_EQ_U64(x.line, 4243);
    CHECK_EQ_STR(x.s1, "swapper/1");
}

TEST(large_payloads_fill_chunks_without_loss)
{
    /* EXT events of up to SW_EXT_MAX bytes between calls, into 4 KiB
     * chunks: an event that does not fit seals the chunk first; none is
     * dropped and all read back in order. */
    tg g;
    const char *p = check_tmp_file(".swt");
    tg_thread *a = open_one_thread(&g, p, 0, 2, 0, 7003, 0, "big", 8);
    REQUIRE(a);
    uint8_t payload[SW_EXT_MAX];
    int n = 0;
    for (int i = 0; i < 200; i++) {
        tg_enter(a, SW_OP_CALL, (uint32_t)(i % 2));
        size_t len = 3 + (size_t)(i * 37) % (SW_EXT_MAX - 3);
        sw_bytes pl = {0};
        sw_bytes_varint(&pl, 0);          /* RAISE: code, line, str type */
        sw_bytes_varint(&pl, (uint64_t)i);
        memset(payload, 'a' + i % 26, sizeof payload);
        size_t slen = len - 3 > 200 ? 200 : len - 3;
        sw_bytes_varint(&pl, slen);
        sw_bytes_put(&pl, payload, slen);
        raw_ext(a, SW_EXT_RAISE, pl.data, pl.len);
        sw_bytes_free(&pl);
        n++;
        tg_exit(a, SW_OP_RETURN);
    }
    CHECK_EQ_U64(a->b->dropped, 0);
    sw_trace *t = written(&g, p);
    REQUIRE(t);
    CHECK(sw_trace_thread(t, 0)->chunks >= 5);
    xlog l = {0};
    CHECK_EQ_I64(sw_trace_replay_ext(t, 0, SW_REPLAY_EXT, xlog_fn, &l), SW_OK);
    CHECK_EQ_U64(l.others, 400);
    REQUIRE_EQ_U64(l.n, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        if (!CHECK_EQ_U64(l.r[i].x.line, (uint64_t)i))
            break;
        CHECK_EQ_U64(l.r[i].x.malformed, 0);
        CHECK_EQ_U64(l.r[i].ev.depth, 1);
    }
    free(l.r);
    forget(t, &g, p);
}

/* Counts occurrences of needle in s. */
static size_t count_of(const char *s, const char *needle)
{
    size_t n = 0;
    for (const char *q = s; (q = strstr(q, needle)) != NULL; q++)
        n++;
    return n;
}

/* A trace being written to p with 4 codes (one C function) and two
 * threads, "main" (tid) and "other" (tid + 1). Returns 1 on success. */
static int open_two_threads(tg *g, const char *p, uint64_t tid, tg_thread **a, tg_thread **b)
{
    *a = open_one_thread(g, p, 0, 4, 1, tid, 0, "main", 7);
    *b = *a ? tg_add_thread(g, tid + 1, 0, "other", 8) : NULL;
    return *b != NULL;
}

TEST(exports_show_instants_and_gc_slices)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    tg_thread *a, *b;
    REQUIRE(open_two_threads(&g, p, 7003, &a, &b));
    tg_enter(a, SW_OP_CALL, 0);
    tg_ext_all(a);               /* 10 instants and one GC slice */
    tg_ext(a, SW_EXT_GC_DONE, 0, 0, 0, 1, 0, NULL, NULL);  /* done without start: an instant */
    tg_ext(a, SW_EXT_GC_START, 0, 0, 1, 0, 0, NULL, NULL);
    tg_ext(a, SW_EXT_GC_START, 0, 0, 0, 0, 0, NULL, NULL); /* closes the previous one unfinished */
    tg_exit(a, SW_OP_RETURN);     /* the second stays open: closed at the thread's end */
    tg_enter(b, SW_OP_CALL, 1);
    tg_ext(b, SW_EXT_LINE, 1, 5, 0, 0, 0, NULL, NULL);
    tg_exit(b, SW_OP_RETURN);
    sw_trace *t = written(&g, p);
    REQUIRE(t);
    char err[256], why[160];
    size_t n;
    int rc;
    char *out = ec_export_mem(sw_export_chrome, t, 0, &n, &rc, err, sizeof err);
    ec_chrome_stats cs;
    REQUIRE(rc == SW_OK);
    CHECK_MSG(ec_chrome(out, n, 1, &cs, why, sizeof why), "%s", why);
    CHECK_EQ_U64(cs.instants, 10 + 1 + 1);
    CHECK_EQ_U64(cs.completes, 3);
    CHECK_EQ_U64(count_of(out, "unfinished"), 2);
    CHECK(strstr(out, "\"name\":\"GC (generation 2)\",\"cat\":\"gc\",\"args\":{\"generation\":2,"
                      "\"collected\":17,\"uncollectable\":1}") != NULL);
    CHECK(strstr(out, "\"name\":\"raise ValueError\",\"cat\":\"exception\",\"args\":{\"function\":") != NULL);
    CHECK(strstr(out, "\"name\":\"thread start worker \\\"1\\\"\"") != NULL);
    CHECK(strstr(out, "\"name\":\"line 5\",\"cat\":\"line\"") != NULL);
    CHECK(strstr(out, "\"opname\":\"LOAD_FAST\"") != NULL);
    CHECK(strstr(out, "\"class\":\"pkg.Klass\",\"file\":\"pkg/mod.py\"") != NULL);
    free(out);
    out = ec_export_mem(sw_export_perfetto, t, 0, &n, &rc, err, sizeof err);
    ec_pb_stats ps;
    REQUIRE(rc == SW_OK);
    CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "%s", why);
    CHECK_EQ_U64(ps.instants, 10 + 1 + 1);
    CHECK_EQ_U64(ps.begins, 2 + 3);       /* two calls, three GC slices */
    CHECK_EQ_U64(ps.descriptors, 1 + 2 + 1);  /* process, threads, one GC track */
    CHECK(memmem(out, n, "GC (generation 2)", 17) != NULL);
    CHECK(memmem(out, n, "ValueError", 10) != NULL);
    free(out);
    /* With a minimum duration the EXT events stay. */
    out = ec_export_mem(sw_export_perfetto, t, 1000000000, &n, &rc, err, sizeof err);
    REQUIRE(rc == SW_OK);
    CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "%s", why);
    CHECK_EQ_U64(ps.instants, 12);
    CHECK_EQ_U64(ps.begins, 3);
    free(out);
    forget(t, &g, p);
}

TEST(regions_decode_and_export_as_slices)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    tg_thread *a, *b;
    REQUIRE(open_two_threads(&g, p, 7005, &a, &b));
    tg_enter(a, SW_OP_CALL, 0);
    tg_ext(a, SW_EXT_REGION_BEGIN, 0, 0, 0, 0, 0, "outer", NULL);
    tg_enter(a, SW_OP_CALL, 1);
    tg_ext(a, SW_EXT_REGION_BEGIN, 0, 0, 0, 0, 0, "inner \"q\"", NULL);
    tg_ext(a, SW_EXT_REGION_END, 0, 0, 0, 0, 0, NULL, NULL);
    tg_exit(a, SW_OP_RETURN);
    tg_ext(a, SW_EXT_REGION_END, 0, 0, 0, 0, 0, NULL, NULL);
    raw_ext(a, SW_EXT_REGION_BEGIN, "", 0);   /* malformed: "?" */
    tg_ext(a, SW_EXT_REGION_END, 0, 0, 0, 0, 0, NULL, NULL);
    tg_ext(a, SW_EXT_REGION_BEGIN, 0, 0, 0, 0, 0, "open", NULL);   /* closed at the thread's end */
    tg_exit(a, SW_OP_RETURN);
    tg_enter(b, SW_OP_CALL, 1);
    tg_ext(b, SW_EXT_REGION_END, 0, 0, 0, 0, 0, NULL, NULL);      /* an end without a begin: nothing */
    tg_exit(b, SW_OP_RETURN);
    sw_trace *t = written(&g, p);
    REQUIRE(t);
    xlog l = {0};
    REQUIRE(sw_trace_replay_ext(t, 0, SW_REPLAY_EXT, xlog_fn, &l) == SW_OK);
    REQUIRE(l.n == 7);
    static const unsigned kinds[7] = {SW_EXT_REGION_BEGIN, SW_EXT_REGION_BEGIN, SW_EXT_REGION_END,
                                      SW_EXT_REGION_END, SW_EXT_REGION_BEGIN, SW_EXT_REGION_END,
                                      SW_EXT_REGION_BEGIN};
    static const uint32_t depths[7] = {1, 2, 2, 1, 1, 1, 1};
    for (size_t k = 0; k < 7; k++) {
        CHECK_EQ_U64(l.r[k].x.kind, kinds[k]);
        CHECK_EQ_U64(l.r[k].ev.depth, depths[k]);
        CHECK_EQ_U64(l.r[k].x.malformed, k == 4);
    }
    CHECK_EQ_STR(l.r[0].s1, "outer");
    CHECK_EQ_STR(l.r[1].s1, "inner \"q\"");
    CHECK_EQ_STR(l.r[6].s1, "open");
    free(l.r);
    sw_ext_summary s;
    REQUIRE(sw_ext_summary_compute(t, &s) == SW_OK);
    CHECK_EQ_U64(s.count[SW_EXT_REGION_BEGIN], 4);
    CHECK_EQ_U64(s.count[SW_EXT_REGION_END], 4);
    CHECK_EQ_U64(s.malformed, 1);
    char err[256], why[160];
    size_t n;
    int rc;
    char *out = ec_export_mem(sw_export_chrome, t, 0, &n, &rc, err, sizeof err);
    ec_chrome_stats cs;
    REQUIRE(rc == SW_OK);
    CHECK_MSG(ec_chrome(out, n, 0, &cs, why, sizeof why), "%s", why);
    CHECK_EQ_U64(cs.completes, 4);
    CHECK_EQ_U64(cs.instants, 0);
    CHECK_EQ_U64(count_of(out, "\"cat\":\"region\""), 4);
    CHECK_EQ_U64(count_of(out, "\"unfinished\":true"), 1);
    CHECK(strstr(out, "\"name\":\"inner \\\"q\\\"\",\"cat\":\"region\"") != NULL);
    CHECK(strstr(out, "\"name\":\"?\",\"cat\":\"region\"") != NULL);
    free(out);
    out = ec_export_mem(sw_export_perfetto, t, 0, &n, &rc, err, sizeof err);
    ec_pb_stats ps;
    REQUIRE(rc == SW_OK);
    CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "%s", why);
    CHECK_EQ_U64(ps.begins, 3 + 4);           /* three calls, four regions (balanced: checked) */
    CHECK_EQ_U64(ps.instants, 0);
    CHECK_EQ_U64(ps.descriptors, 1 + 2 + 1);  /* process, threads, one regions track */
    CHECK(memmem(out, n, "regions", 7) != NULL && memmem(out, n, "outer", 5) != NULL);
    free(out);
    forget(t, &g, p);
}

/* CPU records (format 1.13, run --cpu), written through sw_tbuf_cpu
 * before each call as the tracer does: one when the thread moves, and
 * one at the start of every chunk, so that the CPU of each call is the
 * last record's, read whole or from any chunk on (20,000 calls moving
 * between 3 CPUs every 100, in 4 KiB chunks). */
typedef struct cpu_walk {
    long cpu;                /* the last CPU record's, -1: none yet */
    size_t calls, records, wrong, before_record;
    const uint32_t *expected;   /* per call, when read whole */
} cpu_walk;

static int cpu_walk_fn(void *ud, const sw_event *ev)
{
    cpu_walk *w = ud;
    if (ev->kind == SW_EV_EXT && ev->ext && ev->ext->kind == SW_EXT_CPU) {
        w->cpu = (long)ev->ext->a;
        w->records++;
    } else if (ev->kind == SW_OP_CALL) {
        if (w->cpu < 0)
            w->before_record++;
        else if (w->expected && (uint32_t)w->cpu != w->expected[w->calls])
            w->wrong++;
        w->calls++;
    }
    return 0;
}

TEST(cpu_records_give_each_call_its_cpu_from_any_chunk)
{
    enum { CALLS = 20000 };
    static uint32_t cpu_of[CALLS];
    tg g;
    const char *p = check_tmp_file(".swt");
    tg_thread *a = open_one_thread(&g, p, 0, 4, 0, 1001, 140001, "MainThread", 7);
    REQUIRE(a);
    size_t moves = 0;
    for (uint32_t i = 0; i < CALLS; i++) {
        cpu_of[i] = (i / 100) % 3;
        moves += i == 0 || cpu_of[i] != cpu_of[i - 1];
        sw_tbuf_cpu(a->b, a->ticks, cpu_of[i]);
        tg_enter(a, SW_OP_CALL, i % 4);
        tg_exit(a, SW_OP_RETURN);
    }
    sw_trace *t = written(&g, p);
    REQUIRE(t);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    cpu_walk w = {-1, 0, 0, 0, 0, cpu_of};
    REQUIRE(sw_trace_replay_ext(t, 0, SW_REPLAY_EXT, cpu_walk_fn, &w) == SW_OK);
    CHECK_EQ_U64(w.calls, CALLS);
    CHECK_EQ_U64(w.wrong, 0);
    CHECK_EQ_U64(w.before_record, 0);
    size_t chunks = (size_t)sw_trace_thread(t, 0)->chunks;
    CHECK(chunks > 10);
    /* one per move, and one at each chunk's start that is no move */
    CHECK_MSG(w.records >= moves && w.records <= moves + chunks, "%zu records, %zu moves, %zu chunks", w.records,
              moves, chunks);
    /* From the middle: the chunk read first starts with its CPU (before
     * it, at most the synthetic call reopening a frame open at its start;
     * without it, up to the next move: tens of calls). */
    cpu_walk mid = {-1, 0, 0, 0, 0, NULL};
    int64_t half = (int64_t)(a->ticks - TG_TICK0) / 2;
    REQUIRE(sw_trace_replay_from(t, 0, SW_REPLAY_EXT, half, cpu_walk_fn, &mid) == SW_OK);
    CHECK(mid.calls > 0 && mid.calls < CALLS);
    CHECK_MSG(mid.before_record <= 1, "%zu calls before the first CPU record", mid.before_record);
    forget(t, &g, p);
}
