/*
 * test_crafted.c - the reader on hand-made files: paths the writer never
 * produces (unknown chunk types, gaps and prefixes, EXT events, malformed
 * events, undefined threads), open errors, and inputs with valid checksums
 * but hostile values (huge ids, clock rates and times).
 */
#define _GNU_SOURCE
#include "check.h"
#include "trace/analysis.h"
#include "base/bytes.h"
#include "base/crc32.h"
#include "exportcheck.h"
#include "trace/format.h"
#include "trace/reader.h"
#include "tracegen.h"
#include "base/varint.h"

#include <sys/stat.h>

/* ---- Building files ---- */

static void put_u16(sw_bytes *b, unsigned v)
{
    sw_bytes_u8(b, (uint8_t)v);
    sw_bytes_u8(b, (uint8_t)(v >> 8));
}

static void put_u32(sw_bytes *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        sw_bytes_u8(b, (uint8_t)(v >> (8 * i)));
}

static void file_header(sw_bytes *f, unsigned major, unsigned minor)
{
    sw_bytes_put(f, SW_MAGIC, SW_MAGIC_LEN);
    put_u16(f, major);
    put_u16(f, minor);
    put_u32(f, 0);
}

/* Appends a chunk with a correct checksum and frees the payload. */
static void chunk(sw_bytes *f, int type, sw_bytes *payload)
{
    sw_bytes_u8(f, (uint8_t)type);
    sw_bytes_u8(f, 0);
    put_u16(f, 0);
    put_u32(f, (uint32_t)payload->len);
    put_u32(f, sw_crc32(0, payload->data, payload->len));
    sw_bytes_put(f, payload->data, payload->len);
    sw_bytes_free(payload);
}

/* META with time_shift 0, 1 GHz, tick0 0 (ns = ticks) unless given. */
static void meta(sw_bytes *f, double hz, uint64_t tick0)
{
    sw_bytes m = {0};
    sw_kv_uint(&m, "time_shift", 0);
    sw_kv_f64(&m, "clock_hz", hz);
    sw_kv_uint(&m, "tick0", tick0);
    chunk(f, SW_CHUNK_META, &m);
}

static void code(sw_bytes *f, uint64_t id, const char *qual)
{
    sw_bytes c = {0};
    sw_bytes_varint(&c, id);
    sw_bytes_u8(&c, SW_CODE_PYTHON);
    sw_bytes_str(&c, qual);
    sw_bytes_str(&c, qual);
    sw_bytes_str(&c, "f.py");
    sw_bytes_varint(&c, 1);
    chunk(f, SW_CHUNK_CODE, &c);
}

static void thread(sw_bytes *f, uint64_t index, uint64_t tid, uint64_t ident, const char *name)
{
    sw_bytes t = {0};
    sw_bytes_varint(&t, index);
    sw_bytes_varint(&t, tid);
    sw_bytes_varint(&t, ident);
    sw_bytes_str(&t, name);
    chunk(f, SW_CHUNK_THREAD, &t);
}

/* An events payload under construction. */
typedef struct evs {
    sw_bytes body;
    uint64_t n;
} evs;

static void ev_enter(evs *e, uint64_t delta, unsigned op, uint64_t id)
{
    sw_bytes_varint(&e->body, delta << SW_OP_BITS | op);
    sw_bytes_varint(&e->body, id);
    e->n++;
}

static void ev_exit(evs *e, uint64_t delta, unsigned op)
{
    sw_bytes_varint(&e->body, delta << SW_OP_BITS | op);
    e->n++;
}

static void ev_ext(evs *e, uint64_t delta, uint64_t kind, const void *payload, size_t len)
{
    sw_bytes_varint(&e->body, delta << SW_OP_BITS | SW_OP_EXT);
    sw_bytes_varint(&e->body, kind);
    sw_bytes_varint(&e->body, len);
    sw_bytes_put(&e->body, payload, len);
    e->n++;
}

/* Appends an EVENTS chunk; n_declared < 0 means the real count. */
static void events(sw_bytes *f, uint64_t index, uint64_t seq, uint64_t t0, uint64_t dropped,
                   const uint64_t *prefix, size_t depth, evs *e, long n_declared)
{
    sw_bytes p = {0};
    sw_bytes_varint(&p, index);
    sw_bytes_varint(&p, seq);
    sw_bytes_varint(&p, t0);
    sw_bytes_varint(&p, dropped);
    sw_bytes_varint(&p, depth);
    for (size_t k = 0; k < depth; k++)
        sw_bytes_varint(&p, prefix[k]);
    sw_bytes_varint(&p, n_declared < 0 ? e->n : (uint64_t)n_declared);
    sw_bytes_put(&p, e->body.data, e->body.len);
    sw_bytes_free(&e->body);
    e->n = 0;
    chunk(f, SW_CHUNK_EVENTS, &p);
}

static sw_trace *open_bytes(sw_bytes *f, char *err, size_t errlen)
{
    sw_trace *t = NULL;
    err[0] = 0;
    int rc = sw_trace_open_mem(f->data, f->len, &t, err, errlen);
    CHECK_MSG(rc == SW_OK, "open failed: %s", err);
    return t;
}

static void replay_pos(sw_trace *t, size_t pos, tg_rec *r, int expect_rc)
{
    int rc = tg_replay(t, pos, r);
    CHECK_MSG(rc == expect_rc, "replay returned %d, expected %d", rc, expect_rc);
}

/* Expects events in r: kind, code, depth, synthetic, and time (-1: any). */
static void expect_ev(const tg_rec *r, size_t i, int kind, uint32_t code, uint32_t depth, int synthetic,
                      int64_t t_ns)
{
    if (!CHECK_MSG(i < r->n, "event %zu missing (%zu delivered)", i, r->n))
        return;
    const sw_event *e = &r->ev[i];
    CHECK_MSG(e->kind == kind && e->code == code && e->depth == depth && e->synthetic == synthetic &&
                  (t_ns < 0 || e->t_ns == t_ns),
              "event %zu: got %s code %u depth %u synthetic %d t %lld; expected %s code %u depth %u "
              "synthetic %d t %lld",
              i, tg_kind_name(e->kind), e->code, e->depth, e->synthetic, (long long)e->t_ns,
              tg_kind_name(kind), code, depth, synthetic, (long long)t_ns);
}

/* Replay, stats and both exports succeed and stay well-formed. */
static void exercise_all(sw_trace *t)
{
    sw_stat_row *rows;
    size_t nrows, n;
    CHECK(sw_stats_compute(t, &rows, &nrows) == SW_OK);
    free(rows);
    int rc;
    char err[128], why[200];
    char *out = ec_export_mem(sw_export_chrome, t, 0, &n, &rc, err, sizeof err);
    ec_chrome_stats cs;
    CHECK_EQ_I64(rc, SW_OK);
    CHECK_MSG(ec_chrome(out, n, 1, &cs, why, sizeof why), "chrome: %s", why);
    free(out);
    out = ec_export_mem(sw_export_perfetto, t, 0, &n, &rc, err, sizeof err);
    ec_pb_stats ps;
    CHECK_EQ_I64(rc, SW_OK);
    CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "perfetto: %s", why);
    free(out);
}

/* A file of format 1.minor: its header, then META at 1 GHz (ns = ticks). */
static void begin_file(sw_bytes *f, unsigned minor)
{
    file_header(f, 1, minor);
    meta(f, 1e9, 0);
}

/* Opens f (checked) and replays its first thread into r (checked to
 * succeed); returns the trace, or NULL if it did not open (r then empty). */
static sw_trace *open_replayed(sw_bytes *f, tg_rec *r)
{
    char err[256];
    sw_trace *t = open_bytes(f, err, sizeof err);
    *r = (tg_rec){0};
    if (t)
        replay_pos(t, 0, r, SW_OK);
    return t;
}

/* Checks what every well-formed file allows (exercise_all), then frees
 * the trace and the file's bytes. */
static void end_file(sw_trace *t, sw_bytes *f)
{
    exercise_all(t);
    sw_trace_free(t);
    sw_bytes_free(f);
}

/* ---- Tests ---- */

TEST(open_errors)
{
    char err[256];
    sw_trace *t = (sw_trace *)1;
    CHECK_EQ_I64(sw_trace_open_mem((const uint8_t *)"", 0, &t, err, sizeof err), SW_EFORMAT);
    CHECK(t == NULL);
    CHECK(strstr(err, "magic") != NULL);
    sw_bytes f = {0};
    file_header(&f, 1, 0);
    CHECK_EQ_I64(sw_trace_open_mem(f.data, 15, &t, err, sizeof err), SW_EFORMAT);
    /* Header only, no META. */
    err[0] = 0;
    CHECK_EQ_I64(sw_trace_open_mem(f.data, f.len, &t, err, sizeof err), SW_EFORMAT);
    CHECK_MSG(strstr(err, "no intact header chunk") != NULL, "%s", err);
    sw_bytes_free(&f);
    /* Another major version. */
    file_header(&f, 2, 0);
    meta(&f, 1e9, 0);
    CHECK_EQ_I64(sw_trace_open_mem(f.data, f.len, &t, err, sizeof err), SW_EVERSION);
    CHECK_MSG(strstr(err, "version 2") != NULL, "%s", err);
    sw_bytes_free(&f);
    /* Bad magic (text-mode mangling: \r\n -> \n). */
    begin_file(&f, 0);
    memmove(f.data + 4, f.data + 5, f.len - 5);
    CHECK_EQ_I64(sw_trace_open_mem(f.data, f.len - 1, &t, err, sizeof err), SW_EFORMAT);
    sw_bytes_free(&f);
    /* Files. */
    CHECK_EQ_I64(sw_trace_open_file("/nonexistent-stackwatch/x.swt", &t, err, sizeof err), SW_EIO);
    CHECK_MSG(strstr(err, "cannot open") != NULL, "%s", err);
    CHECK(t == NULL);
    char dir[256];
    snprintf(dir, sizeof dir, "%s/swtest-dir-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    if (mkdir(dir, 0700) == 0) {
        err[0] = 0;
        CHECK(sw_trace_open_file(dir, &t, err, sizeof err) < 0);
        CHECK(err[0] != 0);
        rmdir(dir);
    }
}

TEST(unknown_chunk_type_and_newer_minor)
{
    sw_bytes f = {0};
    file_header(&f, 1, SW_FORMAT_MINOR + 1);  /* a newer minor version is read */
    meta(&f, 1e9, 0);
    code(&f, 0, "a");
    thread(&f, 0, 11, 12, "t");
    evs e = {{0}, 0};
    ev_enter(&e, 10, SW_OP_CALL, 0);
    events(&f, 0, 0, 100, 0, NULL, 0, &e, -1);
    sw_bytes x = {0};
    sw_bytes_put(&x, "future stuff", 12);
    chunk(&f, 77, &x);  /* unknown type, intact: skipped */
    ev_exit(&e, 5, SW_OP_RETURN);
    uint64_t pre[1] = {0};
    events(&f, 0, 1, 110, 0, pre, 1, &e, -1);
    char err[256];
    sw_trace *t = open_bytes(&f, err, sizeof err);
    REQUIRE(t);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    tg_rec r;
    replay_pos(t, 0, &r, SW_OK);
    CHECK_EQ_U64(r.n, 2);
    expect_ev(&r, 0, SW_OP_CALL, 0, 0, 0, 110);
    expect_ev(&r, 1, SW_OP_RETURN, 0, 0, 0, 115);
    tg_rec_free(&r);
    sw_trace_free(t);
    sw_bytes_free(&f);
}

TEST(meta_values_and_overrides)
{
    sw_bytes f = {0};
    file_header(&f, 1, 0);
    sw_bytes m = {0};
    sw_kv_uint(&m, "time_shift", 3);
    sw_kv_sint(&m, "neg", -5);
    sw_kv_str(&m, "s", "hello");
    sw_kv_f64(&m, "f", 1.25);
    sw_kv_uint(&m, "tick0", 800);
    sw_kv_f64(&m, "clock_hz", 4e9);
    chunk(&f, SW_CHUNK_META, &m);
    sw_kv_str(&m, "s", "second");  /* a later META replaces */
    chunk(&f, SW_CHUNK_META, &m);
    sw_kv_f64(&m, "clock_hz_refined", 2e9);  /* END: preferred rate */
    sw_kv_uint(&m, "end_ticks", 8800);
    chunk(&f, SW_CHUNK_END, &m);
    char err[256];
    sw_trace *t = open_bytes(&f, err, sizeof err);
    REQUIRE(t);
    CHECK_EQ_I64(sw_trace_complete(t), 1);
    CHECK_EQ_U64(sw_trace_meta_count(t), 9);
    const sw_meta_entry *e = sw_trace_meta_find(t, "neg");
    CHECK(e && e->type == SW_VAL_SINT && e->i == -5);
    e = sw_trace_meta_find(t, "s");
    CHECK(e && e->type == SW_VAL_BYTES && strcmp(e->s, "second") == 0 && e->slen == 6);
    e = sw_trace_meta_find(t, "f");
    CHECK(e && e->type == SW_VAL_F64 && e->f == 1.25);
    /* units << 3 = ticks; (ticks - 800) / 2 GHz */
    CHECK_EQ_I64(sw_trace_units_to_ns(t, 100), (800 - 800) / 2);
    CHECK_EQ_I64(sw_trace_units_to_ns(t, 1100), (8800 - 800) / 2);
    CHECK_EQ_I64(sw_trace_units_to_ns(t, 0), -400);
    CHECK_EQ_I64(sw_trace_end_ns(t), (8800 - 800) / 2);
    sw_trace_free(t);
    sw_bytes_free(&f);

    /* An unknown value type makes a META chunk malformed: damage at its
     * offset; the entries before it are kept. */
    for (int second = 0; second < 2; second++) {
        file_header(&f, 1, 0);
        if (second)
            meta(&f, 1e9, 0);
        size_t off = f.len;
        sw_kv_uint(&m, "before", 7);
        sw_bytes_str(&m, "k");
        sw_bytes_u8(&m, 9);
        chunk(&f, SW_CHUNK_META, &m);
        t = open_bytes(&f, err, sizeof err);
        if (t) {
            char want[64];
            snprintf(want, sizeof want, "malformed META chunk at offset %zu", off);
            CHECK_MSG(strstr(sw_trace_damage(t), want) != NULL, "%s", sw_trace_damage(t));
            e = sw_trace_meta_find(t, "before");
            CHECK(e && e->u == 7);
            CHECK(sw_trace_meta_find(t, "k") == NULL);
            sw_trace_free(t);
        }
        sw_bytes_free(&f);
    }
}

TEST(threads_defined_late_renamed_or_never)
{
    sw_bytes f = {0};
    begin_file(&f, 0);
    code(&f, 0, "a");
    thread(&f, 0, 11, 12, "first");
    thread(&f, 0, 0, 0, "");        /* tid/ident 0 and no name: nothing changes */
    thread(&f, 0, 0, 0, "renamed");  /* rename only */
    evs e = {{0}, 0};
    ev_enter(&e, 1, SW_OP_CALL, 0);
    ev_exit(&e, 1, SW_OP_RETURN);
    events(&f, 5, 0, 0, 0, NULL, 0, &e, -1);  /* thread 5 is never defined */
    char err[256];
    sw_trace *t = open_bytes(&f, err, sizeof err);
    REQUIRE(t);
    CHECK_EQ_U64(sw_trace_thread_count(t), 2);
    long p0 = tg_thread_pos(t, 0), p5 = tg_thread_pos(t, 5);
    REQUIRE(p0 >= 0 && p5 >= 0);
    const sw_thread_info *ti = sw_trace_thread(t, (size_t)p0);
    CHECK_EQ_STR(ti->name, "renamed");
    CHECK_EQ_U64(ti->native_tid, 11);
    CHECK_EQ_U64(ti->ident, 12);
    ti = sw_trace_thread(t, (size_t)p5);
    CHECK_EQ_STR(ti->name, "");
    CHECK_EQ_U64(ti->native_tid, 0);
    CHECK_EQ_U64(ti->events, 2);
    end_file(t, &f);
}

TEST(chunks_replay_in_sequence_order)
{
    sw_bytes f = {0};
    begin_file(&f, 0);
    code(&f, 0, "a");
    code(&f, 1, "b");
    evs e = {{0}, 0};
    uint64_t pre[1] = {0};
    ev_enter(&e, 1, SW_OP_CALL, 1);
    events(&f, 0, 1, 100, 0, pre, 1, &e, -1);  /* seq 1 first in the file */
    ev_enter(&e, 1, SW_OP_CALL, 0);
    events(&f, 0, 0, 50, 0, NULL, 0, &e, -1);
    tg_rec r;
    sw_trace *t = open_replayed(&f, &r);
    REQUIRE(t);
    CHECK_EQ_U64(r.n, 4);
    expect_ev(&r, 0, SW_OP_CALL, 0, 0, 0, 51);
    expect_ev(&r, 1, SW_OP_CALL, 1, 1, 0, 101);
    expect_ev(&r, 2, SW_OP_RETURN, 1, 1, 1, 101);
    expect_ev(&r, 3, SW_OP_RETURN, 0, 0, 1, 101);
    tg_rec_free(&r);
    sw_trace_free(t);
    sw_bytes_free(&f);
}

TEST(gaps_prefixes_and_dropped_counts)
{
    sw_bytes f = {0};
    begin_file(&f, 0);
    for (int i = 0; i < 6; i++)
        code(&f, (uint64_t)i, "c");
    evs e = {{0}, 0};
    /* seq 0: open 0, 1. */
    ev_enter(&e, 1, SW_OP_CALL, 0);
    ev_enter(&e, 1, SW_OP_CALL, 1);
    events(&f, 0, 0, 0, 0, NULL, 0, &e, -1);
    /* seq 1: agrees with the open frames; 4 events were lost just before. */
    uint64_t p01[2] = {0, 1};
    ev_exit(&e, 1, SW_OP_RETURN);
    events(&f, 0, 1, 10, 4, p01, 2, &e, -1);
    /* seq 2: disagrees (the writer says 0, 2 are open): close, reopen. */
    uint64_t p02[2] = {0, 2};
    ev_exit(&e, 1, SW_OP_YIELD);
    events(&f, 0, 2, 20, 0, p02, 2, &e, -1);
    /* seq 5: a gap (3 and 4 are gone): DROPPED, then reopen 3, 4, 5. */
    uint64_t p345[3] = {3, 4, 5};
    ev_exit(&e, 1, SW_OP_UNWIND);
    events(&f, 0, 5, 30, 0, p345, 3, &e, -1);
    char err[256];
    sw_trace *t = open_bytes(&f, err, sizeof err);
    REQUIRE(t);
    CHECK_EQ_U64(sw_trace_thread(t, 0)->dropped, 4);
    tg_rec r;
    replay_pos(t, 0, &r, SW_OK);
    size_t i = 0;
    expect_ev(&r, i++, SW_OP_CALL, 0, 0, 0, 1);
    expect_ev(&r, i++, SW_OP_CALL, 1, 1, 0, 2);
    expect_ev(&r, i++, SW_EV_DROPPED, 4, 2, 1, 10);  /* count, at the current depth */
    expect_ev(&r, i++, SW_OP_RETURN, 1, 1, 0, 11);
    /* seq 2 starts with 0 open (after the return) but says 0, 2: */
    expect_ev(&r, i++, SW_OP_RETURN, 0, 0, 1, 11);
    expect_ev(&r, i++, SW_OP_CALL, 0, 0, 1, 20);
    expect_ev(&r, i++, SW_OP_CALL, 2, 1, 1, 20);
    expect_ev(&r, i++, SW_OP_YIELD, 2, 1, 0, 21);
    /* gap before seq 5 */
    expect_ev(&r, i++, SW_OP_RETURN, 0, 0, 1, 21);
    expect_ev(&r, i++, SW_EV_DROPPED, 0, 0, 1, 30);
    expect_ev(&r, i++, SW_OP_CALL, 3, 0, 1, 30);
    expect_ev(&r, i++, SW_OP_CALL, 4, 1, 1, 30);
    expect_ev(&r, i++, SW_OP_CALL, 5, 2, 1, 30);
    expect_ev(&r, i++, SW_OP_UNWIND, 5, 2, 0, 31);
    expect_ev(&r, i++, SW_OP_RETURN, 4, 1, 1, 31);
    expect_ev(&r, i++, SW_OP_RETURN, 3, 0, 1, 31);
    CHECK_EQ_U64(r.n, i);
    tg_rec_free(&r);
    /* Stats: only real enters are calls. */
    sw_stat_row *rows;
    size_t nrows;
    REQUIRE(sw_stats_compute(t, &rows, &nrows) == SW_OK);
    for (size_t k = 0; k < nrows; k++)
        CHECK_EQ_U64(rows[k].calls, rows[k].code <= 1 ? 1 : 0);
    free(rows);
    end_file(t, &f);
}

TEST(ext_events_and_stray_returns)
{
    sw_bytes f = {0};
    begin_file(&f, 0);
    code(&f, 0, "a");
    evs e = {{0}, 0};
    ev_exit(&e, 1, SW_OP_RETURN);  /* nothing open: ignored */
    ev_enter(&e, 1, SW_OP_C_CALL, 0);
    uint8_t n17[1] = {17};
    ev_ext(&e, 1, SW_EXT_DROPPED, n17, 1);
    ev_ext(&e, 1, 99, "skip me", 7);  /* unknown kind: skipped */
    ev_exit(&e, 1, SW_OP_C_RETURN);
    ev_exit(&e, 1, SW_OP_RETURN);  /* ignored again */
    events(&f, 0, 0, 0, 0, NULL, 0, &e, -1);
    tg_rec r;
    sw_trace *t = open_replayed(&f, &r);
    REQUIRE(t);
    CHECK_EQ_U64(r.n, 3);
    expect_ev(&r, 0, SW_OP_C_CALL, 0, 0, 0, 2);
    expect_ev(&r, 1, SW_EV_DROPPED, 17, 1, 0, 3);
    expect_ev(&r, 2, SW_OP_C_RETURN, 0, 0, 0, 5);
    tg_rec_free(&r);
    end_file(t, &f);
}

/* Appends a SYSCALL record (format 1.8) to an events payload. */
static void ev_syscall(evs *e, uint64_t delta, const char *name, uint64_t duration)
{
    sw_ext v = {SW_EXT_SYSCALL, 0, SW_EXT_NO_CODE, 0, 0, 0, duration, name, NULL};
    uint8_t buf[64];
    long n = sw_record_encode(SW_EXT_SYSCALL, &v, SW_EXT_STR_MAX, buf, sizeof buf);
    REQUIRE(n > 0);
    ev_ext(e, delta, SW_EXT_SYSCALL, buf, (size_t)n);
}

/* Kernel records (system calls, off-CPU intervals, wakeups, page faults)
 * in a thread's own EVENTS chunk: the writer puts them in THREAD_RECORDS
 * only, so one here is damage (libFuzzer's inputs have them anywhere). The
 * replay refuses them and keeps the rest of the chunk; the damage says how
 * many, once however often the thread is replayed; stats count no system
 * call, and the exports draw no slice of them. */
TEST(kernel_records_in_the_events_are_refused_as_damage)
{
    sw_bytes f = {0};
    begin_file(&f, SW_FORMAT_MINOR);
    code(&f, 0, "a");
    evs e = {{0}, 0};
    ev_enter(&e, 1, SW_OP_CALL, 0);     /* t 1 */
    ev_syscall(&e, 1, "read", 5);       /* t 2 */
    uint8_t fault[64];
    sw_ext v = {SW_EXT_PAGE_FAULT, 0, SW_EXT_NO_CODE, 0, 0x1000, 0, 0, NULL, NULL};
    long nf = sw_record_encode(SW_EXT_PAGE_FAULT, &v, SW_EXT_STR_MAX, fault, sizeof fault);
    REQUIRE(nf > 0);
    ev_ext(&e, 1, SW_EXT_PAGE_FAULT, fault, (size_t)nf);   /* t 3 */
    uint8_t line[64];
    sw_ext l = {SW_EXT_LINE, 0, 0, 7, 0, 0, 0, NULL, NULL};
    long nl = sw_record_encode(SW_EXT_LINE, &l, SW_EXT_STR_MAX, line, sizeof line);
    REQUIRE(nl > 0);
    ev_ext(&e, 1, SW_EXT_LINE, line, (size_t)nl);   /* t 4: kept */
    ev_exit(&e, 2, SW_OP_RETURN);       /* t 6 */
    events(&f, 0, 0, 0, 0, NULL, 0, &e, -1);
    char err[256];
    sw_trace *t = open_bytes(&f, err, sizeof err);
    REQUIRE(t);
    CHECK_EQ_STR(sw_trace_damage(t), "");   /* (the body is read by a replay) */
    for (int pass = 0; pass < 2; pass++) {
        tg_rec r = {0};
        CHECK_EQ_I64(sw_trace_replay_ext(t, 0, SW_REPLAY_EXT, tg_rec_fn, &r), SW_OK);
        REQUIRE_EQ_U64(r.n, 3);
        expect_ev(&r, 0, SW_OP_CALL, 0, 0, 0, 1);
        CHECK_EQ_I64(r.ev[1].kind, SW_EV_EXT);
        CHECK_EQ_I64(r.ev[1].t_ns, 4);
        expect_ev(&r, 2, SW_OP_RETURN, 0, 0, 0, 6);
        tg_rec_free(&r);
        CHECK_EQ_U64(sw_trace_damage_total(t), 1);
    }
    CHECK_MSG(strstr(sw_trace_damage(t), "corrupted: 2 kernel records refused in the events of thread 0, chunk 0") !=
                  NULL,
              "damage: %s", sw_trace_damage(t));
    sw_ext_summary xs;
    REQUIRE(sw_ext_summary_compute(t, &xs) == SW_OK);
    CHECK_EQ_U64(xs.nsyscalls, 0);
    CHECK_EQ_U64(xs.faults, 0);
    size_t n;
    int rc;
    char *out = ec_export_mem(sw_export_chrome, t, 0, &n, &rc, err, sizeof err);
    CHECK_EQ_I64(rc, SW_OK);
    CHECK_MSG(out && !strstr(out, "\"read\"") && !strstr(out, "page fault"), "a refused record was exported: %s",
              out ? out : "(none)");
    free(out);
    end_file(t, &f);
}

/* TEARDOWN (format 1.4): the frame being cleared ends at the event, with
 * the exit op it really has (read ahead, here across a chunk boundary);
 * what its clearing ran comes after it, one level up; its own exit, a
 * duplicate TEARDOWN and one with nothing open are dropped. */
TEST(teardown_ends_the_frame_before_what_its_clearing_runs)
{
    sw_bytes f = {0};
    begin_file(&f, 4);
    for (uint64_t id = 0; id < 4; id++)
        code(&f, id, id == 0 ? "outer" : id == 1 ? "owner" : id == 2 ? "del" : "inner");
    evs e = {{0}, 0};
    ev_ext(&e, 0, SW_EXT_TEARDOWN, "", 0);     /* nothing open: ignored */
    ev_enter(&e, 1, SW_OP_CALL, 0);            /* t1 outer */
    ev_enter(&e, 1, SW_OP_CALL, 1);            /* t2 owner */
    ev_ext(&e, 1, SW_EXT_TEARDOWN, "", 0);     /* t3 owner is cleared */
    ev_enter(&e, 1, SW_OP_CALL, 2);            /* t4 del, run by the clearing */
    ev_ext(&e, 1, SW_EXT_TEARDOWN, "", 0);     /* t5 del is cleared */
    events(&f, 0, 0, 0, 0, NULL, 0, &e, -1);
    uint64_t prefix[3] = {0, 1, 2};
    ev_enter(&e, 1, SW_OP_CALL, 3);            /* t6 inner, run by del's clearing */
    ev_exit(&e, 1, SW_OP_RETURN);              /* t7 */
    ev_ext(&e, 1, SW_EXT_TEARDOWN, "", 0);     /* t8 a second finalizer of del's clearing */
    ev_exit(&e, 1, SW_OP_RETURN);              /* t9 del's own exit: dropped */
    ev_exit(&e, 1, SW_OP_UNWIND);              /* t10 owner's own exit: dropped */
    ev_exit(&e, 1, SW_OP_RETURN);              /* t11 outer */
    events(&f, 0, 1, 5, 0, prefix, 3, &e, -1);
    char err[256];
    sw_trace *t = open_bytes(&f, err, sizeof err);
    REQUIRE(t);
    tg_rec r;
    replay_pos(t, 0, &r, SW_OK);
    CHECK_EQ_U64(r.n, 8);
    expect_ev(&r, 0, SW_OP_CALL, 0, 0, 0, 1);
    expect_ev(&r, 1, SW_OP_CALL, 1, 1, 0, 2);
    expect_ev(&r, 2, SW_OP_UNWIND, 1, 1, 0, 3);
    expect_ev(&r, 3, SW_OP_CALL, 2, 1, 0, 4);
    expect_ev(&r, 4, SW_OP_RETURN, 2, 1, 0, 5);
    expect_ev(&r, 5, SW_OP_CALL, 3, 1, 0, 6);
    expect_ev(&r, 6, SW_OP_RETURN, 3, 1, 0, 7);
    expect_ev(&r, 7, SW_OP_RETURN, 0, 0, 0, 11);
    tg_rec_free(&r);
    sw_stat_row *rows;
    size_t nrows;
    REQUIRE(sw_stats_compute(t, &rows, &nrows) == SW_OK);
    for (size_t k = 0; k < nrows; k++)
        if (rows[k].code == 1)  /* owner's time ends where its clearing starts */
            CHECK_EQ_I64((int64_t)rows[k].total_ns, 1);
    free(rows);
    end_file(t, &f);

    /* The stream ends (a killed process) while the cleared frame's
     * clearing runs: it was ended by the TEARDOWN (as a return, its exit
     * unknown) and is not closed again. */
    f = (sw_bytes){0};
    begin_file(&f, 4);
    code(&f, 0, "owner");
    code(&f, 1, "del");
    ev_enter(&e, 1, SW_OP_CALL, 0);
    ev_ext(&e, 1, SW_EXT_TEARDOWN, "", 0);
    ev_enter(&e, 1, SW_OP_CALL, 1);
    events(&f, 0, 0, 0, 0, NULL, 0, &e, -1);
    t = open_bytes(&f, err, sizeof err);
    REQUIRE(t);
    replay_pos(t, 0, &r, SW_OK);
    CHECK_EQ_U64(r.n, 4);
    expect_ev(&r, 0, SW_OP_CALL, 0, 0, 0, 1);
    expect_ev(&r, 1, SW_OP_RETURN, 0, 0, 0, 2);
    expect_ev(&r, 2, SW_OP_CALL, 1, 0, 0, 3);
    expect_ev(&r, 3, SW_OP_RETURN, 1, 0, 1, -1);
    tg_rec_free(&r);
    end_file(t, &f);
}

/* A TASK_FRAMES chunk (format 1.7) that does not parse is taken as
 * absent, the whole of it: no task is given frames it lists before the
 * entry that does not parse, nor two lists of frames (libFuzzer found
 * a task whose kept frames were never opened for it, so that its calls
 * came at the wrong depth once it ran). */
TEST(task_frames_that_do_not_parse_are_absent)
{
    /* Entries of task 5: one whose second code id is out of range; the
     * same task listed twice. */
    static const uint64_t bad_id[] = {1, 5, 2, 1, (uint64_t)1 << 40};
    static const uint64_t twice[] = {2, 5, 1, 1, 5, 1, 2};
    const uint64_t *entries[] = {bad_id, twice};
    const size_t nentries[] = {sizeof bad_id / sizeof *bad_id, sizeof twice / sizeof *twice};
    for (int v = 0; v < 2; v++) {
        sw_bytes f = {0};
        begin_file(&f, 7);
        for (int i = 0; i < 4; i++)
            code(&f, (uint64_t)i, "c");
        thread(&f, 0, 7, 8, "main");
        sw_bytes task = {0};
        sw_bytes_varint(&task, 5);
        sw_bytes_varint(&task, 0);
        sw_bytes_str(&task, "greenlet");
        chunk(&f, SW_CHUNK_TASK, &task);
        /* thread 0, EVENTS chunk 0, task 0 running, then the entries. */
        sw_bytes tf = {0};
        sw_bytes_varint(&tf, 0);
        sw_bytes_varint(&tf, 0);
        sw_bytes_varint(&tf, 0);
        for (size_t k = 0; k < nentries[v]; k++)
            sw_bytes_varint(&tf, entries[v][k]);
        chunk(&f, SW_CHUNK_TASK_FRAMES, &tf);
        /* The chunk opens with the thread's frame 0; task 5 runs frame 3. */
        evs e = {{0}, 0};
        uint8_t sw[2] = {0, 5};
        ev_ext(&e, 1, SW_EXT_TASK_SWITCH, sw, sizeof sw);
        ev_enter(&e, 1, SW_OP_CALL, 3);
        ev_exit(&e, 1, SW_OP_RETURN);
        uint64_t p0[1] = {0};
        events(&f, 0, 0, 10, 0, p0, 1, &e, -1);
        char err[256];
        sw_trace *t = open_bytes(&f, err, sizeof err);
        REQUIRE(t);
        REQUIRE(sw_trace_thread_count(t) == 2);
        tg_rec r;
        replay_pos(t, 0, &r, SW_OK);
        size_t i = 0;
        expect_ev(&r, i++, SW_OP_CALL, 0, 0, 1, 10);
        expect_ev(&r, i++, SW_OP_RETURN, 0, 0, 1, 13);
        CHECK_EQ_U64(r.n, i);
        tg_rec_free(&r);
        replay_pos(t, 1, &r, SW_OK);
        i = 0;
        expect_ev(&r, i++, SW_OP_CALL, 3, 0, 0, 12);
        expect_ev(&r, i++, SW_OP_RETURN, 3, 0, 0, 13);
        CHECK_EQ_U64(r.n, i);
        tg_rec_free(&r);
        end_file(t, &f);
    }
}

/* TASK_INTERNED entries (format 1.18) name their tasks by STRINGS ids,
 * read once every chunk is: a STRINGS chunk after them still names them,
 * an id without an entry reads as "?", and the later entry of a task,
 * of either type, is its name. */
TEST(interned_task_names_are_looked_up_after_every_chunk)
{
    sw_bytes f = {0};
    begin_file(&f, 18);
    code(&f, 0, "c");
    thread(&f, 0, 7, 8, "main");
    sw_bytes tasks = {0};
    const uint64_t entries[] = {5, 0, 0, 6, 0, 9, 7, 0, 1};   /* task, thread, string id */
    for (size_t i = 0; i < sizeof entries / sizeof *entries; i++)
        sw_bytes_varint(&tasks, entries[i]);
    chunk(&f, SW_CHUNK_TASK_INTERNED, &tasks);
    sw_bytes renamed = {0};   /* task 7 renamed inline, as a TASK entry */
    sw_bytes_varint(&renamed, 7);
    sw_bytes_varint(&renamed, 0);
    sw_bytes_str(&renamed, "greenlet renamed");
    chunk(&f, SW_CHUNK_TASK, &renamed);
    sw_bytes strings = {0};
    sw_bytes_varint(&strings, 0);
    sw_bytes_str(&strings, "Task-1 main");
    sw_bytes_varint(&strings, 1);
    sw_bytes_str(&strings, "Task-2 other");
    chunk(&f, SW_CHUNK_STRINGS, &strings);
    char err[256];
    sw_trace *t = open_bytes(&f, err, sizeof err);
    REQUIRE(t);
    REQUIRE(sw_trace_thread_count(t) == 4);
    const char *names[] = {"main", "Task-1 main", "?", "greenlet renamed"};
    const uint64_t ids[] = {0, 5, 6, 7};
    for (size_t i = 0; i < 4; i++) {
        const sw_thread_info *th = sw_trace_thread(t, i);
        CHECK_EQ_U64(th->task, ids[i]);
        CHECK_MSG(th->name && strcmp(th->name, names[i]) == 0, "thread %zu named %s", i, th->name ? th->name : "(none)");
    }
    end_file(t, &f);
}

TEST(malformed_events_deliver_what_came_before)
{
    static const char *cases[] = {"count too high", "trailing bytes", "ext past end", "code id > u32"};
    for (int c = 0; c < 4; c++) {
        sw_bytes f = {0};
        begin_file(&f, 0);
        code(&f, 0, "a");
        evs e = {{0}, 0};
        ev_enter(&e, 1, SW_OP_CALL, 0);
        ev_enter(&e, 1, SW_OP_CALL, 0);
        long declared = -1;
        if (c == 0)
            declared = 5;
        if (c == 1)
            declared = 1;
        if (c == 2) {
            sw_bytes_varint(&e.body, SW_OP_EXT);
            sw_bytes_varint(&e.body, 99);
            sw_bytes_varint(&e.body, 1000);
            e.n++;
        }
        if (c == 3)
            ev_enter(&e, 1, SW_OP_CALL, 1ull << 33);
        events(&f, 0, 0, 0, 0, NULL, 0, &e, declared);
        char err[256];
        sw_trace *t = open_bytes(&f, err, sizeof err);
        if (!t)
            continue;
        CHECK_EQ_STR(sw_trace_damage(t), "");  /* the body is only read by a replay */
        tg_rec r;
        int rc = tg_replay(t, 0, &r);
        CHECK_MSG(rc == SW_EFORMAT, "%s: replay returned %d", cases[c], rc);
        size_t opened = c == 1 ? 1 : 2;
        CHECK_MSG(r.n == 2 * opened, "%s: %zu events", cases[c], r.n);
        for (size_t k = 0; k < opened && k < r.n; k++)
            expect_ev(&r, k, SW_OP_CALL, 0, (uint32_t)k, 0, (int64_t)k + 1);
        /* Closed at the time of the last event read (for a bad code id the
         * malformed event's own time has been read). */
        for (size_t k = 0; k < opened && opened + k < r.n; k++)
            expect_ev(&r, opened + k, SW_OP_RETURN, 0, (uint32_t)(opened - 1 - k), 1,
                      c == 3 ? 3 : (int64_t)opened);
        CHECK_MSG(strstr(sw_trace_damage(t), "malformed events in thread 0, chunk 0") != NULL, "%s: damage %s",
                  cases[c], sw_trace_damage(t));
        tg_rec_free(&r);
        end_file(t, &f);
    }
}

TEST(hostile_code_id_is_damage_not_gigabytes)
{
    /* A valid checksum around a code id of 2^27: the reader must not size
     * its tables (and stats and exports theirs) by such an id. */
    sw_bytes f = {0};
    begin_file(&f, 0);
    code(&f, 0, "a");
    code(&f, 1u << 27, "far");
    char err[256];
    sw_trace *t = open_bytes(&f, err, sizeof err);
    REQUIRE(t);
    CHECK_MSG(strstr(sw_trace_damage(t), "malformed CODE chunk") != NULL, "damage: \"%s\"", sw_trace_damage(t));
    CHECK(sw_trace_code_limit(t) <= 1024);
    CHECK(sw_trace_code(t, 0) != NULL);
    end_file(t, &f);
}

TEST(hostile_thread_index_is_damage_not_out_of_memory)
{
    for (int kind = 0; kind < 2; kind++) {
        sw_bytes f = {0};
        begin_file(&f, 0);
        code(&f, 0, "a");
        thread(&f, 0, 1, 1, "ok");
        evs e = {{0}, 0};
        ev_enter(&e, 1, SW_OP_CALL, 0);
        events(&f, 0, 0, 0, 0, NULL, 0, &e, -1);
        if (kind == 0) {
            thread(&f, 1ull << 33, 1, 1, "bad");
        } else {
            ev_enter(&e, 1, SW_OP_CALL, 0);
            events(&f, 1ull << 33, 0, 0, 0, NULL, 0, &e, -1);
        }
        char err[256];
        sw_trace *t = open_bytes(&f, err, sizeof err);
        if (t) {
            CHECK_MSG(strstr(sw_trace_damage(t), kind ? "malformed EVENTS chunk" : "malformed THREAD chunk"),
                      "damage: \"%s\"", sw_trace_damage(t));
            CHECK_EQ_U64(sw_trace_thread_count(t), 1);
            CHECK_EQ_U64(sw_trace_thread(t, 0)->events, 1);
            sw_trace_free(t);
        }
        sw_bytes_free(&f);
    }
}

TEST(hostile_clock_keeps_times_ordered_and_defined)
{
    /* clock_hz = 10 kHz: 100 us per tick, so times of 2^40..2^62 ticks are
     * far beyond what an int64 of nanoseconds holds. They must stay
     * ordered (later events are not earlier), and nothing may overflow. */
    sw_bytes f = {0};
    file_header(&f, 1, 0);
    meta(&f, 1e4, 0);
    code(&f, 0, "a");
    evs e = {{0}, 0};
    ev_enter(&e, 1ull << 40, SW_OP_CALL, 0);
    ev_enter(&e, 1ull << 60, SW_OP_CALL, 0);
    ev_exit(&e, 1ull << 60, SW_OP_RETURN);
    ev_exit(&e, 1, SW_OP_RETURN);
    events(&f, 0, 0, 0, 0, NULL, 0, &e, -1);
    tg_rec r;
    sw_trace *t = open_replayed(&f, &r);
    REQUIRE(t);
    REQUIRE(r.n == 4);
    CHECK_EQ_I64(r.ev[0].t_ns, (int64_t)(1ull << 40) * 100000);
    CHECK_MSG(r.ev[1].t_ns > r.ev[0].t_ns, "a time 2^60 ticks later is not later: %lld, %lld",
              (long long)r.ev[0].t_ns, (long long)r.ev[1].t_ns);
    CHECK(r.ev[2].t_ns >= r.ev[1].t_ns && r.ev[3].t_ns >= r.ev[2].t_ns);
    tg_rec_free(&r);
    end_file(t, &f);
}

TEST(hostile_time_span_in_stats)
{
    /* tick0 = 2^63: the first events are 2^62 ns before the calibration
     * point, the returns ~1.5 * 2^62 after: a slice longer than INT64_MAX
     * ns. */
    sw_bytes f = {0};
    file_header(&f, 1, 0);
    meta(&f, 1e9, 1ull << 63);
    code(&f, 0, "a");
    code(&f, 1, "b");
    evs e = {{0}, 0};
    ev_enter(&e, 0, SW_OP_CALL, 0);
    ev_enter(&e, 0, SW_OP_CALL, 1);
    for (int k = 0; k < 5; k++)  /* a delta holds at most 61 bits */
        ev_ext(&e, (1ull << 61) - 1, 99, NULL, 0);
    ev_exit(&e, 0, SW_OP_RETURN);
    ev_exit(&e, 0, SW_OP_RETURN);
    events(&f, 0, 0, 1ull << 62, 0, NULL, 0, &e, -1);
    char err[256];
    sw_trace *t = open_bytes(&f, err, sizeof err);
    REQUIRE(t);
    sw_stat_row *rows;
    size_t nrows;
    REQUIRE(sw_stats_compute(t, &rows, &nrows) == SW_OK);
    CHECK_EQ_U64(nrows, 2);
    for (size_t k = 0; k < nrows; k++)
        CHECK(rows[k].total_ns > 0 && rows[k].own_ns >= 0 && rows[k].own_ns <= rows[k].total_ns);
    free(rows);
    end_file(t, &f);
}

TEST(hostile_clock_origins_in_exports)
{
    /* mono0_ns / boot0_ns near 2^63: adding an event's time to them must
     * not overflow; exported times stay ordered. */
    sw_bytes f = {0};
    file_header(&f, 1, 0);
    sw_bytes m = {0};
    sw_kv_uint(&m, "time_shift", 0);
    sw_kv_f64(&m, "clock_hz", 1e9);
    sw_kv_uint(&m, "mono0_ns", INT64_MAX - 1000);
    sw_kv_uint(&m, "boot0_ns", INT64_MAX - 1000);
    chunk(&f, SW_CHUNK_META, &m);
    code(&f, 0, "a");
    evs e = {{0}, 0};
    ev_enter(&e, 10, SW_OP_CALL, 0);
    ev_exit(&e, 1ull << 40, SW_OP_RETURN);
    ev_enter(&e, 10, SW_OP_CALL, 0);
    ev_exit(&e, 10, SW_OP_RETURN);
    events(&f, 0, 0, 0, 0, NULL, 0, &e, -1);
    char err[256];
    sw_trace *t = open_bytes(&f, err, sizeof err);
    REQUIRE(t);
    exercise_all(t);  /* checks that times do not go back */
    sw_trace_free(t);
    sw_bytes_free(&f);
}
