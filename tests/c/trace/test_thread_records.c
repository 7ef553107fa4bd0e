/*
 * test_thread_records.c - records of threads written by another thread
 * (format 1.8, THREAD_RECORDS chunks: the kernel reader's system calls):
 * written by the stream (thread_records.c) beside a tracegen trace, read
 * back exactly (times on the trace clock, threads matched by native tid,
 * unknown tids counted and never delivered), counted by stats (time per
 * system call, kernel records lost), and in both exports a system call is
 * a slice on its thread nested in the frame around it, ended at its end or
 * at the thread's next frame event, whichever comes first.
 */
#define _GNU_SOURCE
#include "check.h"
#include "trace/trace.h"
#include "exportcheck.h"
#include "trace/sample_stream.h"
#include "samplecheck.h"
#include "tracegen.h"
#include "trace/wake_flows.h"

#define MONO0 5000000000ull   /* tracegen's META mono0_ns; its clock: 1 GHz, t_ns = ticks - tick0 */

static void syscall_rec(sw_trec_stream *st, uint64_t tid, uint64_t t_ns, const char *name, long nr, int64_t ret,
                        uint64_t dur)
{
    sw_ext v = {.s1 = name, .a = (uint64_t)nr, .b = (uint64_t)ret, .c = dur};
    CHECK_EQ_I64(sw_trec_stream_add(st, tid, MONO0 + t_ns, SW_EXT_SYSCALL, &v), 0);
}

/* Thread 1001: f from 1000 ns to 5000 ns; a write inside it (2000, 500 ns
 * long), a read that the kernel says ends at 5800, after f returned (its
 * slice must end at 5000), records lost at 3000, and a write of a thread
 * the trace does not have. */
static int write_trace(const char *p, tg *g)
{
    if (tg_open(g, p, 4096, 0, 0, 1e9) || tg_codes(g, 2, 0))
        return -1;
    tg_thread *a = tg_add_thread(g, 1001, 140001, "MainThread", 1);
    if (!a)
        return -1;
    sw_tbuf_enter(a->b, TG_TICK0 + 1000, SW_OP_CALL, 0);
    sw_tbuf_exit(a->b, TG_TICK0 + 5000, SW_OP_RETURN);
    a->ticks = TG_TICK0 + 5000;
    sw_trec_stream *st = sw_trec_stream_new(g->w, MONO0);
    if (!st)
        return -1;
    syscall_rec(st, 1001, 2000, "write", 1, 10, 500);
    sw_ext lost = {.a = 3};
    CHECK_EQ_I64(sw_trec_stream_add(st, 1001, MONO0 + 3000, SW_EXT_KERNEL_LOST, &lost), 0);
    syscall_rec(st, 1001, 4800, "read", 0, -11, 1000);
    syscall_rec(st, 4242, 2500, "write", 1, 3, 100);
    /* Samples of the thread between them: one inside the write (2300), one
     * after its end and before the next record (2600); the exports must
     * keep every sequence's time in order. */
    static sw_sample_code codes[1] = {SC_CODE(0x1000, "f", "/app/prog.py", 10)};
    static const int stack[] = {0};
    sw_sample_stream *ss = sw_sample_stream_new(g->w, MONO0, NULL);
    if (!ss)
        return -1;
    sc_feed(ss, codes, 140001, 1001, (int64_t)MONO0 + 2300, 1, 1, stack, NULL);
    sc_feed(ss, codes, 140001, 1001, (int64_t)MONO0 + 2600, 1, 1, stack, NULL);
    int src = sw_sample_stream_flush(ss);
    sw_sample_stream_free(ss);
    if (src)
        return -1;
    uint64_t n, nlost;
    int rc = sw_trec_stream_flush(st);
    sw_trec_stream_counts(st, &n, &nlost);
    sw_trec_stream_free(st);
    if (rc || n != 4 || nlost)
        return -1;
    return tg_close(g, 1e9);
}

TEST(records_read_back_exactly)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(write_trace(p, &g) == SW_OK);
    sw_trace *t = tg_open_trace(p);
    REQUIRE(t);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    CHECK_EQ_U64(sw_trace_thread_record_count(t), 3);
    CHECK_EQ_U64(sw_trace_thread_records_unattributed(t), 1);
    CHECK_EQ_U64(sw_trace_thread_count(t), 1);   /* no thread made up for tid 4242 */
    sw_trec_cursor *c = sw_trec_cursor_new(t, 0);
    REQUIRE(c);
    sw_trace_trec r;
    REQUIRE((sw_trec_cursor_next(c, &r)) == 1);
    CHECK_EQ_I64(r.t_ns, 2000);
    CHECK_EQ_U64(r.ext->kind, SW_EXT_SYSCALL);
    CHECK_EQ_STR(r.ext->s1, "write");
    CHECK_EQ_U64(r.ext->a, 1);
    CHECK_EQ_I64((int64_t)r.ext->b, 10);
    CHECK_EQ_U64(r.ext->c, 500);
    REQUIRE((sw_trec_cursor_next(c, &r)) == 1);
    CHECK_EQ_U64(r.ext->kind, SW_EXT_KERNEL_LOST);
    CHECK_EQ_U64(r.ext->a, 3);
    REQUIRE((sw_trec_cursor_next(c, &r)) == 1);
    CHECK_EQ_STR(r.ext->s1, "read");
    CHECK_EQ_I64((int64_t)r.ext->b, -11);
    CHECK_EQ_I64(sw_trec_cursor_next(c, &r), 0);
    sw_trec_cursor_free(c);
    sw_ext_summary s;
    REQUIRE((sw_ext_summary_compute(t, &s)) == 0);
    CHECK_EQ_U64(s.count[SW_EXT_SYSCALL], 2);
    CHECK_EQ_U64(s.kernel_lost, 3);
    REQUIRE_EQ_U64(s.nsyscalls, 2);
    CHECK_EQ_STR(s.syscalls[0].name, "write");
    CHECK_EQ_I64(s.syscalls[0].total_ns, 500);
    CHECK_EQ_U64(s.syscalls[1].errors, 1);
    /* Both calls began inside f (code 0): its row has both. */
    sw_kernel_fn_row *rows;
    size_t nrows;
    REQUIRE(sw_kernel_by_function(t, NULL, &rows, &nrows) == 0);
    REQUIRE_EQ_U64(nrows, 1);
    CHECK_EQ_U64(rows[0].thread, 0);
    CHECK_EQ_U64(rows[0].code, 0);
    CHECK_EQ_U64(rows[0].calls, 2);
    CHECK_EQ_I64(rows[0].total_ns, 1500);
    free(rows);
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}

TEST(a_syscall_is_a_slice_inside_its_frame_in_both_exports)
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
    CHECK_EQ_U64(ec_count(out, n, "\"cat\":\"syscall\""), 2);
    /* (ts: mono0 + t, in us) write: 2.0 .. 2.5 us; read: 4.8 .. 5.0 us (f returns at 5.0), its
     * end before f's */
    const char *w = strstr(out, "\"ts\":5000002.000,\"name\":\"write\",\"cat\":\"syscall\"");
    CHECK(w != NULL);
    CHECK(w && strstr(w, "{\"ph\":\"E\",\"pid\":") && strstr(w, "\"ts\":5000002.500}") != NULL);
    const char *rd = strstr(out, "\"ts\":5000004.800,\"name\":\"read\",\"cat\":\"syscall\","
                                 "\"args\":{\"name\":\"read\",\"nr\":0,"
                                 "\"ret\":-11,\"duration\":1000}");
    CHECK(rd != NULL);
    CHECK_EQ_U64(ec_count(out, n, "\"ts\":5000005.000}"), 2);   /* the read's E, then f's */
    CHECK(strstr(out, "\"name\":\"kernel records lost 3\"") != NULL);
    free(out);
    out = ec_export_mem(sw_export_perfetto, t, 0, &n, &rc, err, sizeof err);
    REQUIRE(rc == SW_OK);
    ec_pb_stats ps;
    CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "%s", why);
    CHECK_EQ_U64(ec_count(out, n, "syscall"), 2);
    CHECK_EQ_U64(ec_count(out, n, "kernel records lost"), 1);
    free(out);
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}

TEST(malformed_records_chunk_is_damage)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(tg_open(&g, p, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 1, 0) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1001, 140001, "MainThread", 1);
    REQUIRE(a);
    tg_enter(a, SW_OP_CALL, 0);
    tg_exit(a, SW_OP_RETURN);
    /* n = 2 records, the second's length past the end */
    static const uint8_t bad[] = {2, 0xe9, 0x07, 0, 17, 0, 0xe9, 0x07, 0, 17, 40, 1};
    REQUIRE((sw_writer_chunk(g.w, SW_CHUNK_THREAD_RECORDS, bad, sizeof bad)) == 0);
    REQUIRE(tg_close(&g, 1e9) == SW_OK);
    sw_trace *t = tg_open_trace(p);
    REQUIRE(t);
    CHECK(strstr(sw_trace_damage(t), "malformed THREAD_RECORDS chunk") != NULL);
    CHECK_EQ_U64(sw_trace_thread_record_count(t), 0);
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}

/* What the export walk hands out, in order: kind and time. */
typedef struct walked {
    int n;
    int kind[32];
    int64_t t[32];
} walked;

static int walk_note(void *ud, size_t thread, const sw_event *ev)
{
    (void)thread;
    walked *w = ud;
    if (w->n < 32) {
        w->kind[w->n] = ev->kind == SW_EV_EXT ? 100 + (int)ev->ext->kind : ev->kind;
        w->t[w->n] = ev->t_ns;
    }
    w->n++;
    return 0;
}

/* The side streams (side_streams.h) of a thread are merged N-way by time
 * among its events, items of the same time in the order of the table of
 * streams (its records before its samples); each stream's cursor reads
 * what the samples' and the records' own cursors read. */
TEST(side_streams_merge_by_time_ties_in_table_order)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(tg_open(&g, p, 4096, 0, 0, 1e9) == SW_OK && tg_codes(&g, 1, 0) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1001, 140001, "MainThread", 1);
    REQUIRE(a);
    sw_tbuf_enter(a->b, TG_TICK0 + 1000, SW_OP_CALL, 0);
    sw_tbuf_exit(a->b, TG_TICK0 + 5000, SW_OP_RETURN);
    a->ticks = TG_TICK0 + 5000;
    sw_trec_stream *st = sw_trec_stream_new(g.w, MONO0);
    sw_sample_stream *ss = sw_sample_stream_new(g.w, MONO0, NULL);
    REQUIRE(st && ss);
    syscall_rec(st, 1001, 2000, "write", 1, 10, 100);
    sw_ext lost = {.a = 3};
    CHECK_EQ_I64(sw_trec_stream_add(st, 1001, MONO0 + 3000, SW_EXT_KERNEL_LOST, &lost), 0);
    static sw_sample_code codes[1] = {SC_CODE(0x1000, "f", "/app/prog.py", 10)};
    static const int stack[] = {0};
    static const int64_t at[] = {1500, 2000, 2500, 3000};
    for (int i = 0; i < 4; i++)
        sc_feed(ss, codes, 140001, 1001, (int64_t)MONO0 + at[i], 1, 1, stack, NULL);
    /* The samples' chunk first in the file: the order is the time's, not the file's. */
    REQUIRE(sw_sample_stream_flush(ss) == 0);
    REQUIRE(sw_trec_stream_flush(st) == 0);
    sw_sample_stream_free(ss);
    sw_trec_stream_free(st);
    REQUIRE(tg_close(&g, 1e9) == SW_OK);
    sw_trace *t = tg_open_trace(p);
    REQUIRE(t);
    CHECK_EQ_U64(sw_side_stream_records(t, SW_SIDE_SAMPLES), 4);
    CHECK_EQ_U64(sw_side_stream_records(t, SW_SIDE_THREAD_RECORDS), 2);
    CHECK_EQ_STR(sw_side_stream_name(SW_SIDE_SAMPLES), "samples");
    walked w = {0};
    REQUIRE(sw_export_walk(t, NULL, walk_note, &w) == SW_OK);
    static const int kinds[] = {SW_OP_CALL, SW_EV_SAMPLE, 100 + SW_EXT_SYSCALL, SW_EV_SAMPLE, SW_WALK_SLICE_END,
                                SW_EV_SAMPLE, 100 + SW_EXT_KERNEL_LOST, SW_EV_SAMPLE, SW_OP_RETURN, SW_WALK_THREAD_END};
    static const int64_t times[] = {1000, 1500, 2000, 2000, 2100, 2500, 3000, 3000, 5000, 5000};
    if (CHECK_EQ_I64(w.n, 10))
        for (int i = 0; i < 10; i++)
            CHECK_MSG(w.kind[i] == kinds[i] && w.t[i] == times[i], "item %d: kind %d at %lld, expected %d at %lld", i,
                      w.kind[i], (long long)w.t[i], kinds[i], (long long)times[i]);
    /* One cursor for any stream, of one thread or of all. */
    for (unsigned kind = 0; kind < SW_SIDE_STREAM_COUNT; kind++) {
        sw_side_cursor *c = sw_side_cursor_new(t, kind, SIZE_MAX);
        REQUIRE(c);
        sw_side_item it;
        int n = 0, r;
        int64_t last = INT64_MIN;
        while ((r = sw_side_cursor_next(c, &it)) == 1) {
            CHECK(it.t_ns >= last && it.thread == 0);
            CHECK(kind == SW_SIDE_SAMPLES ? it.event == SW_EV_SAMPLE && it.sample && !it.ext
                                          : it.event == SW_EV_EXT && it.ext && !it.sample);
            last = it.t_ns;
            n++;
        }
        CHECK_EQ_I64(r, 0);
        CHECK_EQ_I64(n, kind == SW_SIDE_SAMPLES ? 4 : 2);
        sw_side_cursor_free(c);
    }
    CHECK(sw_side_cursor_new(t, SW_SIDE_STREAM_COUNT, 0) == NULL);
    sw_trace_free(t);
    tg_free(&g);
}

static void sched_rec(sw_trec_stream *st, uint64_t tid, uint64_t t_ns, uint32_t kind, const char *reason, uint64_t a,
                      uint64_t b, uint64_t c)
{
    sw_ext v = {.s1 = reason, .a = a, .b = b, .c = c};
    CHECK_EQ_I64(sw_trec_stream_add(st, tid, MONO0 + t_ns, kind, &v), 0);
}

/* Wakeups between threads (format 1.10), by construction: thread 1002 is
 * off CPU (sleeping) from 1500 to 2500 and thread 1001 wakes it at 2000
 * (a flow to its switch in at 2500), wakes it again at 3000 while it runs
 * (it was runnable: a flow to 1002's track at 3000), wakes thread 4242
 * (no thread of the trace: no flow; named kworker/1:0, format 1.15) at
 * 3500, and wakes 1002 at 4100 while it is off CPU from 4000 to the end
 * (it never ran again: no flow). An export that leaves 1002 out shows
 * none of its wakeups, and only the wakeup of 4242. 1002's switch in at
 * 2500 is 1001's switch out to it on CPU 1 just before (format 1.15: its
 * next_tid): one switch, written whole once. */
TEST(wakeup_flows_end_at_the_switch_in_or_at_a_runnable_wakee)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(tg_open(&g, p, 4096, 0, 0, 1e9) == SW_OK && tg_codes(&g, 2, 0) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1001, 140001, "MainThread", 1);
    tg_thread *b = tg_add_thread(&g, 1002, 140002, "pong", 2);
    REQUIRE(a && b);
    sw_tbuf_enter(a->b, TG_TICK0 + 1000, SW_OP_CALL, 0);
    sw_tbuf_exit(a->b, TG_TICK0 + 5000, SW_OP_RETURN);
    sw_tbuf_enter(b->b, TG_TICK0 + 1000, SW_OP_CALL, 1);
    sw_tbuf_exit(b->b, TG_TICK0 + 5000, SW_OP_RETURN);
    a->ticks = b->ticks = TG_TICK0 + 5000;
    sw_trec_stream *st = sw_trec_stream_new(g.w, MONO0);
    REQUIRE(st);
    sched_rec(st, 1002, 1500, SW_EXT_OFF_CPU, "sleeping", 0, 1, 0);
    sched_rec(st, 1001, 2000, SW_EXT_WAKEUP, NULL, 1002, 1, 0);
    sched_rec(st, 1001, 2499, SW_EXT_OFF_CPU, "preempted", 1, 0, 1002);
    sched_rec(st, 1002, 2500, SW_EXT_ON_CPU, NULL, 1, 1001, 500);
    sched_rec(st, 1001, 2600, SW_EXT_ON_CPU, NULL, 0, 0, 0);
    sched_rec(st, 1001, 3000, SW_EXT_WAKEUP, NULL, 1002, 1, 0);
    sched_rec(st, 1001, 3500, SW_EXT_WAKEUP, "kworker/1:0", 4242, 0, 0);
    sched_rec(st, 1002, 4000, SW_EXT_OFF_CPU, "preempted", 1, 0, 0);
    sched_rec(st, 1001, 4100, SW_EXT_WAKEUP, NULL, 1002, 1, 0);
    REQUIRE(sw_trec_stream_flush(st) == 0);
    sw_trec_stream_free(st);
    REQUIRE(tg_close(&g, 1e9) == SW_OK);
    sw_trace *t = tg_open_trace(p);
    REQUIRE(t);
    sw_wake_flows *wf;
    REQUIRE(sw_wake_flows_new(t, NULL, &wf) == SW_OK);
    CHECK_EQ_U64(sw_wake_flow_count(wf), 2);
    const sw_export_opts *o = sw_wake_flows_opts(wf);
    REQUIRE_EQ_U64(o->ntask_flows, 2);
    sw_ext w = {.kind = SW_EXT_WAKEUP, .a = 1002};
    CHECK(o->task_flows[0].thread == 1 && o->task_flows[0].t_ns == 2500 && o->task_flows[0].ends);
    CHECK_EQ_STR(o->task_flows[0].name, "woken by 1001");
    CHECK(o->task_flows[0].id == sw_wake_flow_start(wf, 0, 2000, &w));
    CHECK(o->task_flows[1].thread == 1 && o->task_flows[1].t_ns == 3000);
    CHECK_EQ_STR(o->task_flows[1].name, "woken by 1001 (runnable)");
    CHECK(o->task_flows[1].id == sw_wake_flow_start(wf, 0, 3000, &w));
    CHECK_EQ_STR(o->task_flows[1].category, "sched");
    CHECK(sw_wake_flow_start(wf, 0, 4100, &w) == 0 && sw_wake_flow_start(wf, 1, 2000, &w) == 0);
    w.a = 4242;
    CHECK(sw_wake_flow_start(wf, 0, 3500, &w) == 0);
    sw_ext on = {.kind = SW_EXT_ON_CPU};
    CHECK(sw_wake_flows_switch_joined(wf, 1, 2500, &on));
    CHECK(!sw_wake_flows_switch_joined(wf, 0, 2600, &on) && !sw_wake_flows_switch_joined(wf, 1, 2499, &on));
    sw_wake_flows_free(wf);
    /* Chrome: each flow's start ("s") in a zero-length slice "wakeup
     * 1002" on 1001, its end ("f") in one named after it on 1002. */
    char err[256], why[160];
    size_t n;
    int rc;
    char *out = ec_export_mem(sw_export_chrome, t, 0, &n, &rc, err, sizeof err);
    REQUIRE(rc == SW_OK);
    ec_chrome_stats cs;
    CHECK_MSG(ec_chrome(out, n, 1, &cs, why, sizeof why), "%s", why);
    CHECK_EQ_U64(ec_count(out, n, "\"tid\":1001,\"ts\":5000002.000,\"id\":"), 1);
    CHECK_EQ_U64(ec_count(out, n, "\"tid\":1001,\"ts\":5000003.000,\"id\":"), 1);
    CHECK_EQ_U64(cs.flow_starts, 2);
    CHECK_EQ_U64(ec_count(out, n, "\"tid\":1002,\"ts\":5000002.500,\"id\":"), 1);
    CHECK_EQ_U64(ec_count(out, n, "\"tid\":1002,\"ts\":5000003.000,\"id\":"), 1);
    CHECK_EQ_U64(cs.flow_ends, 2);
    CHECK_EQ_U64(ec_count(out, n, "\"name\":\"woken by 1001 (runnable)\""), 2);   /* its slice's B and its "f" */
    CHECK_EQ_U64(ec_count(out, n, "\"name\":\"wakeup 4242\""), 1);   /* an instant only */
    free(out);
    /* Perfetto: the same flows, and the switches and wakings as ftrace
     * events (3 out, 1 in: 1002's is 1001's switch out, 4 wakings: 4242's
     * named). */
    out = ec_export_mem(sw_export_perfetto, t, 0, &n, &rc, err, sizeof err);
    REQUIRE(rc == SW_OK);
    ec_pb_stats ps;
    CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "%s", why);
    CHECK_EQ_U64(ps.ftrace, 8);
    CHECK_EQ_U64(ec_count(out, n, "woken by 1001 (runnable)"), 1);
    CHECK_EQ_U64(ec_count(out, n, "woken by 1001"), 2);
    CHECK_EQ_U64(ec_count(out, n, "kworker/1:0"), 2);   /* the sched_waking's comm, the instant's arg */
    free(out);
    /* 1002 left out: the wakeup of 4242 alone, in both. */
    static const uint8_t only_first[] = {1, 0};
    sw_filter f;
    sw_filter_all(&f);
    f.threads = only_first;
    f.nthreads = 2;
    sw_export_opts fo = {0, &f, NULL, NULL, NULL, 0};
    for (int k = 0; k < 2; k++) {
        char *buf = NULL;
        FILE *mf = open_memstream(&buf, &n);
        REQUIRE(mf);
        CHECK_EQ_I64((k ? sw_export_perfetto : sw_export_chrome)(t, mf, &fo, err, sizeof err), SW_OK);
        fclose(mf);
        CHECK_EQ_U64(ec_count(buf, n, "wakeup 1002"), 0);
        CHECK_EQ_U64(ec_count(buf, n, "wakeup 4242"), 1);
        CHECK_EQ_U64(ec_count(buf, n, "woken by"), 0);
        if (k) {
            CHECK_MSG(ec_perfetto((const uint8_t *)buf, n, 1, &ps, why, sizeof why), "%s", why);
            CHECK_EQ_U64(ps.ftrace, 3);   /* 1001's two switches, the waking of 4242 */
        }
        free(buf);
    }
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}
