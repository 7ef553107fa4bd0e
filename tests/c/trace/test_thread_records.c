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
