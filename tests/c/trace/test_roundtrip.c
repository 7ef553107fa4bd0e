/*
 * test_roundtrip.c - the writer and the reader together: what is written
 * (META, codes, threads, nested events over many sealed chunks) is what a
 * replay delivers, with exact times, and what stats and slice durations
 * compute from it.
 */
#define _GNU_SOURCE
#include "check.h"
#include "trace/analysis.h"
#include "tracegen.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>

/* ---- Helpers ---- */

static int is_enter(int k) { return k == SW_OP_CALL || k == SW_OP_RESUME || k == SW_OP_C_CALL; }

/* Checks every thread's replay against what was generated (events
 * [0, n): nothing was lost). */
static void check_replays(sw_trace *t, tg *g)
{
    for (int i = 0; i < g->nth; i++) {
        tg_thread *th = &g->th[i];
        long pos = tg_thread_pos(t, (uint32_t)i);
        if (th->n == 0 && pos < 0)
            continue;  /* never had events (may still be defined) */
        if (!CHECK_MSG(pos >= 0, "thread %d missing", i))
            continue;
        tg_rec got, exp = {0};
        CHECK_EQ_I64(tg_replay(t, (size_t)pos, &got), SW_OK);
        tg_expect(t, th, 0, th->n, &exp);
        char why[256];
        CHECK_MSG(tg_same(&got, &exp, why, sizeof why), "thread %d: %s", i, why);
        for (size_t k = 1; k < got.n; k++)
            if (!CHECK_MSG(got.ev[k].t_ns >= got.ev[k - 1].t_ns, "thread %d: time goes back at %zu", i, k))
                break;
        tg_rec_free(&got);
        tg_rec_free(&exp);
    }
}

/* Stats computed independently from a replay, the way analysis.h defines
 * them: calls = non-synthetic enters; total = inclusive time counted once
 * per outermost activation of the code; own = exclusive time. */
typedef struct exp_stats {
    uint64_t *calls;
    int64_t *total, *own;
    uint32_t *active;
} exp_stats;

static void expected_stats(const tg_rec *r, uint32_t limit, exp_stats *s)
{
    s->calls = calloc(limit, sizeof *s->calls);
    s->total = calloc(limit, sizeof *s->total);
    s->own = calloc(limit, sizeof *s->own);
    s->active = calloc(limit, sizeof *s->active);
    struct { uint32_t code; int64_t start, child; } st[TG_MAX_DEPTH + 16];
    size_t d = 0;
    for (size_t i = 0; i < r->n; i++) {
        const sw_event *e = &r->ev[i];
        if (is_enter(e->kind)) {
            st[d].code = e->code;
            st[d].start = e->t_ns;
            st[d].child = 0;
            d++;
            s->active[e->code]++;
            if (!e->synthetic)
                s->calls[e->code]++;
        } else if (e->kind != SW_EV_DROPPED && d) {
            d--;
            int64_t dur = e->t_ns - st[d].start;
            s->own[st[d].code] += dur - st[d].child;
            if (d)
                st[d - 1].child += dur;
            if (--s->active[st[d].code] == 0)
                s->total[st[d].code] += dur;
        }
    }
}

static void free_stats(exp_stats *s)
{
    free(s->calls);
    free(s->total);
    free(s->own);
    free(s->active);
}

/* sw_stats_compute gives exactly the independently computed rows. */
static void check_stats(sw_trace *t)
{
    sw_stat_row *rows = NULL;
    size_t nrows = 0;
    REQUIRE(sw_stats_compute(t, &rows, &nrows) == SW_OK);
    uint32_t limit = sw_trace_code_limit(t);
    size_t expected_rows = 0;
    for (size_t th = 0; th < sw_trace_thread_count(t); th++) {
        tg_rec r;
        CHECK_EQ_I64(tg_replay(t, th, &r), SW_OK);
        exp_stats s;
        expected_stats(&r, limit ? limit : 1, &s);
        for (uint32_t c = 0; c < limit; c++) {
            const sw_stat_row *row = NULL;
            for (size_t k = 0; k < nrows; k++)
                if (rows[k].thread == th && rows[k].code == c)
                    row = &rows[k];
            if (!s.calls[c] && !s.total[c]) {
                CHECK_MSG(row == NULL, "thread %zu code %u: unexpected row", th, c);
                continue;
            }
            expected_rows++;
            if (!CHECK_MSG(row != NULL, "thread %zu code %u: no row (%llu calls)", th, c,
                           (unsigned long long)s.calls[c]))
                continue;
            CHECK_EQ_U64(row->calls, s.calls[c]);
            CHECK_EQ_I64(row->total_ns, s.total[c]);
            CHECK_EQ_I64(row->own_ns, s.own[c]);
            CHECK(row->own_ns >= 0 && row->own_ns <= row->total_ns);
        }
        free_stats(&s);
        tg_rec_free(&r);
    }
    CHECK_EQ_U64(nrows, expected_rows);
    free(rows);
}

/* Slice durations: one per enter, in order, end minus start. */
static void check_durations(sw_trace *t)
{
    for (size_t th = 0; th < sw_trace_thread_count(t); th++) {
        tg_rec r;
        tg_replay(t, th, &r);
        int64_t *dur = NULL;
        size_t n = 0;
        CHECK_EQ_I64(sw_slice_durations(t, th, &dur, &n), SW_OK);
        size_t *open = malloc((r.n + 1) * sizeof *open), d = 0, k = 0;
        int64_t *exp = malloc((r.n + 1) * sizeof *exp);
        for (size_t i = 0; i < r.n; i++) {
            if (is_enter(r.ev[i].kind)) {
                exp[k] = r.ev[i].t_ns;
                open[d++] = k++;
            } else if (r.ev[i].kind != SW_EV_DROPPED && d) {
                size_t j = open[--d];
                exp[j] = r.ev[i].t_ns - exp[j];
            }
        }
        CHECK_EQ_U64(n, k);
        for (size_t i = 0; i < n && i < k; i++)
            if (!CHECK_EQ_I64(dur[i], exp[i]))
                break;
        free(open);
        free(exp);
        free(dur);
        tg_rec_free(&r);
    }
}

static const sw_meta_entry *meta(sw_trace *t, const char *key, int type)
{
    const sw_meta_entry *e = sw_trace_meta_find(t, key);
    CHECK_MSG(e != NULL, "meta key %s missing", key);
    if (e)
        CHECK_MSG(e->type == type, "meta key %s: type %d, expected %d", key, e->type, type);
    return e;
}

static size_t count_chunks(const uint8_t *buf, size_t len, int type)
{
    size_t off = SW_FILE_HEADER_LEN, n = 0;
    while (len - off >= SW_CHUNK_HEADER_LEN) {
        size_t plen = (size_t)buf[off + 4] | (size_t)buf[off + 5] << 8 | (size_t)buf[off + 6] << 16 |
                      (size_t)buf[off + 7] << 24;
        if (buf[off] == type)
            n++;
        off += SW_CHUNK_HEADER_LEN + plen;
    }
    return n;
}

/* ---- Tests ---- */

TEST(stream_round_trip)
{
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 0, 2, 3e9) == SW_OK);
    REQUIRE(tg_codes(&g, 40, 8) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1001, 7001, "MainThread", 1);
    tg_thread *b = tg_add_thread(&g, 1002, 7002, "worker", 2);
    tg_thread *c = tg_add_thread(&g, 1003, 7003, "idle", 3);  /* no events at all */
    REQUIRE(a && b && c);
    for (int round = 0; round < 40; round++) {
        tg_run(a, 500, 30);
        tg_run(b, 300, 10);
        if (round == 20)
            CHECK_EQ_I64(sw_writer_thread_name(g.w, 1, "worker-renamed"), SW_OK);
    }
    tg_unwind_all(b);  /* a keeps frames open: closed by the reader at the end */
    CHECK(a->depth > 0);
    REQUIRE(tg_close(&g, 2e9) == SW_OK);
    sw_writer_totals tot;
    sw_writer_totals_get(g.w, &tot);
    CHECK_EQ_U64(tot.events, a->n + b->n);
    CHECK_EQ_U64(tot.dropped, 0);
    CHECK_EQ_U64(tot.threads, 3);
    CHECK_EQ_U64(tot.codes, 48);
    char msg[64] = "x";
    CHECK_EQ_I64(sw_writer_error(g.w, msg, sizeof msg), 0);
    CHECK_EQ_STR(msg, "");
    CHECK_EQ_I64(sw_writer_close(g.w, NULL), SW_ESTATE);  /* only once */

    size_t flen;
    uint8_t *file = tg_slurp(path, &flen);
    REQUIRE(file != NULL);
    CHECK_EQ_U64(tot.bytes, flen);
    CHECK(count_chunks(file, flen, SW_CHUNK_EVENTS) >= 20);  /* many sealed chunks */
    CHECK_EQ_U64(tot.chunks, count_chunks(file, flen, SW_CHUNK_META) + count_chunks(file, flen, SW_CHUNK_CODE) +
                                 count_chunks(file, flen, SW_CHUNK_THREAD) +
                                 count_chunks(file, flen, SW_CHUNK_EVENTS) + count_chunks(file, flen, SW_CHUNK_END));
    free(file);

    sw_trace *t = NULL;
    char err[256] = "";
    REQUIRE(sw_trace_open_file(path, &t, err, sizeof err) == SW_OK);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    CHECK_EQ_I64(sw_trace_complete(t), 1);

    /* META, then END values. */
    const sw_meta_entry *e;
    if ((e = meta(t, "time_shift", SW_VAL_UINT)))
        CHECK_EQ_U64(e->u, 2);
    if ((e = meta(t, "clock_hz", SW_VAL_F64)))
        CHECK(e->f == 3e9);
    if ((e = meta(t, "clock_hz_refined", SW_VAL_F64)))
        CHECK(e->f == 2e9);
    if ((e = meta(t, "tick0", SW_VAL_UINT)))
        CHECK_EQ_U64(e->u, TG_TICK0);
    if ((e = meta(t, "pid", SW_VAL_UINT)))
        CHECK_EQ_U64(e->u, 4242);
    if ((e = meta(t, "command", SW_VAL_BYTES))) {
        CHECK_EQ_STR(e->s, "tracegen \"quoted\" \\ arg");
        CHECK_EQ_U64(e->slen, strlen("tracegen \"quoted\" \\ arg"));
    }
    if ((e = meta(t, "custom_neg", SW_VAL_SINT)))
        CHECK_EQ_I64(e->i, -123456789);
    if ((e = meta(t, "custom_f64", SW_VAL_F64)))
        CHECK(e->f == -2.5);
    if ((e = meta(t, "events", SW_VAL_UINT)))
        CHECK_EQ_U64(e->u, a->n + b->n);
    if ((e = meta(t, "dropped", SW_VAL_UINT)))
        CHECK_EQ_U64(e->u, 0);
    if ((e = meta(t, "end_ticks", SW_VAL_UINT)))
        CHECK_EQ_U64(e->u, g.end_ticks);
    CHECK(sw_trace_meta_find(t, "no such key") == NULL);
    CHECK(sw_trace_meta_find(t, "error") == NULL);
    CHECK(sw_trace_meta_count(t) >= 17);
    CHECK(sw_trace_meta(t, sw_trace_meta_count(t)) == NULL);

    /* Time conversion: ticks = units << 2, ns = (ticks - tick0) / 2 GHz. */
    for (uint64_t u = TG_TICK0 >> 2; u < (TG_TICK0 >> 2) + 5000000; u += 99991)
        CHECK_EQ_I64(sw_trace_units_to_ns(t, u), (int64_t)((u << 2) - TG_TICK0) / 2);
    CHECK_EQ_I64(sw_trace_end_ns(t), (int64_t)(((g.end_ticks >> 2) << 2) - TG_TICK0) / 2);

    /* Threads. */
    CHECK_EQ_U64(sw_trace_thread_count(t), 3);
    CHECK(sw_trace_thread(t, 3) == NULL);
    static const char *names[] = {"MainThread", "worker-renamed", "idle"};
    for (uint32_t i = 0; i < 3; i++) {
        long pos = tg_thread_pos(t, i);
        if (!CHECK(pos >= 0))
            continue;
        const sw_thread_info *ti = sw_trace_thread(t, (size_t)pos);
        CHECK_EQ_U64(ti->index, i);
        CHECK_EQ_U64(ti->native_tid, 1001 + i);  /* kept by the rename */
        CHECK_EQ_U64(ti->ident, 7001 + i);
        CHECK_EQ_STR(ti->name, names[i]);
        CHECK_EQ_U64(ti->events, g.th[i].n);
        CHECK_EQ_U64(ti->dropped, 0);
    }
    CHECK(sw_trace_thread(t, (size_t)tg_thread_pos(t, 0))->chunks >= 10);
    CHECK_EQ_U64(sw_trace_thread(t, (size_t)tg_thread_pos(t, 2))->chunks, 0);

    /* Codes. */
    CHECK(sw_trace_code_limit(t) >= 48);
    for (uint32_t id = 0; id < 48; id++) {
        const sw_code_info *ci = sw_trace_code(t, id);
        if (!CHECK_MSG(ci != NULL, "code %u missing", id))
            continue;
        char name[64], qual[96], fname[64];
        tg_code_names(id, name, sizeof name, qual, sizeof qual, fname, sizeof fname);
        CHECK_EQ_U64(ci->id, id);
        CHECK_EQ_U64(ci->kind, id < 40 ? SW_CODE_PYTHON : SW_CODE_C);
        CHECK_EQ_STR(ci->name, name);
        CHECK_EQ_STR(ci->qualname, qual);
        CHECK_EQ_STR(ci->filename, fname);
        CHECK_EQ_U64(ci->firstlineno, tg_code_line(id));
    }
    for (uint32_t id = 48; id <= sw_trace_code_limit(t); id++)
        CHECK(sw_trace_code(t, id) == NULL);

    check_replays(t, &g);
    check_stats(t);
    check_durations(t);

    /* Bad thread position; a callback that stops the replay. */
    tg_rec r = {0};
    CHECK_EQ_I64(sw_trace_replay(t, 3, tg_rec_fn, &r), SW_EARG);
    CHECK_EQ_U64(r.n, 0);

    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

static int stop_at_ten(void *ud, const sw_event *ev)
{
    (void)ev;
    return ++*(int *)ud == 10 ? 42 : 0;
}

TEST(replay_stops_when_callback_asks)
{
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 5, 0) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1, 1, "a", 9);
    REQUIRE(a);
    tg_run(a, 3000, 8);
    REQUIRE(tg_close(&g, 0) == SW_OK);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    int n = 0;
    CHECK_EQ_I64(sw_trace_replay(t, 0, stop_at_ten, &n), 42);
    CHECK_EQ_I64(n, 10);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

TEST(deep_stack_across_chunks)
{
    /* Depth 1500: beyond the writer's initial frame stack, and every chunk
     * starts with a long prefix of open frames. */
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 300, 3) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 77, 0, "deep", 4);
    REQUIRE(a);
    for (int i = 0; i < 1500; i++)
        tg_enter(a, i % 3 ? SW_OP_CALL : SW_OP_RESUME, (uint32_t)(i % 300));
    tg_run(a, 4000, 1510);
    for (int i = 0; i < 3; i++) {
        tg_unwind_all(a);
        for (int k = 0; k < 1200; k++)
            tg_enter(a, SW_OP_CALL, (uint32_t)(k * 7 % 300));
    }
    REQUIRE(tg_close(&g, 0) == SW_OK);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    CHECK(sw_trace_thread(t, 0)->chunks >= 4);
    check_replays(t, &g);
    check_stats(t);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

TEST(large_time_deltas_exact)
{
    /* Shift 0, pauses of 2^32 ticks and more: multi-byte deltas; clock_hz
     * absent from END, so META's rate (1 GHz: ns = ticks - tick0) is used. */
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 4, 1) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1, 0, "", 5);
    REQUIRE(a);
    for (int i = 0; i < 400; i++) {
        a->ticks += (uint64_t)(i % 7) << (20 + i % 20);
        tg_step(a, 6);
    }
    REQUIRE(tg_close(&g, 0) == SW_OK);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    for (size_t i = 0; i < a->n; i++)
        if (!CHECK_EQ_I64(sw_trace_units_to_ns(t, a->ev[i].units), (int64_t)(a->ev[i].units - TG_TICK0)))
            break;
    CHECK_EQ_STR(sw_trace_thread(t, 0)->name, "");
    check_replays(t, &g);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

TEST(clock_going_back_is_clamped)
{
    /* The writer encodes deltas as events happen; a clock that goes back
     * (e.g. TSCs not in step across CPUs) gives a delta of 0, never a
     * wrapped-around huge one: times never go back in the replay. */
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 4, 0) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1, 0, "back", 9);
    REQUIRE(a);
    uint64_t t0 = TG_TICK0 + 5000;
    sw_tbuf_enter(a->b, t0, SW_OP_CALL, 1);
    sw_tbuf_enter(a->b, t0 - 3000, SW_OP_CALL, 2);     /* back: recorded at t0 */
    sw_tbuf_exit(a->b, t0 + 10, SW_OP_RETURN);
    sw_tbuf_exit(a->b, t0 - (1ull << 40), SW_OP_RETURN);  /* far back */
    REQUIRE(tg_close(&g, 0) == SW_OK);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    tg_rec got = {0};
    CHECK_EQ_I64(tg_replay(t, 0, &got), SW_OK);
    REQUIRE(got.n == 4);
    int64_t expect[4] = {5000, 5000, 5010, 5010};
    for (int i = 0; i < 4; i++)
        CHECK_EQ_I64(got.ev[i].t_ns, expect[i]);
    CHECK_EQ_U64(got.ev[1].code, 2);
    CHECK_EQ_U64(got.ev[1].depth, 1);
    tg_rec_free(&got);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

TEST(unpaired_exit_stops_the_thread_safely)
{
    /* sw_tbuf_put_exit_paired trusts that the frame's start was recorded;
     * if not, the next start must stop the thread with an error, never
     * write outside the frame stack. */
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 4, 0) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1, 0, "unpaired", 3);
    REQUIRE(a);
    uint64_t t0 = TG_TICK0 + 100;
    sw_tbuf_enter(a->b, t0, SW_OP_CALL, 1);
    sw_tbuf_put_exit_paired(a->b, t0 + 1, SW_OP_RETURN);
    sw_tbuf_put_exit_paired(a->b, t0 + 2, SW_OP_RETURN);   /* one too many */
    CHECK(!sw_tbuf_enter_fits(a->b));
    sw_tbuf_enter(a->b, t0 + 3, SW_OP_CALL, 2);           /* dropped */
    sw_tbuf_enter(a->b, t0 + 4, SW_OP_CALL, 2);           /* dropped */
    CHECK(a->b->broken);
    CHECK_EQ_U64(a->b->dropped, 2);
    char msg[256];
    CHECK_EQ_I64(sw_writer_error(g.w, msg, sizeof msg), SW_ESTATE);
    CHECK(strstr(msg, "out of step") != NULL);
    CHECK_EQ_I64(tg_close(&g, 0), SW_ESTATE);
    tg_free(&g);
    unlink(path);
}

TEST(explicit_flushes_keep_sequence_dense)
{
    /* Flushing with nothing recorded writes no chunk and leaves no gap
     * (a gap would show as a DROPPED event on replay). */
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 0, 1, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 6, 2) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1, 0, "a", 11);
    tg_thread *b = tg_add_thread(&g, 2, 0, "b", 12);
    REQUIRE(a && b);
    for (int i = 0; i < 12; i++) {
        tg_run(a, 7, 5);
        sw_tbuf_flush(a->b);
        sw_tbuf_flush(a->b);  /* empty */
        sw_tbuf_flush(b->b);  /* empty on odd rounds */
        if (i % 2 == 0)
            tg_run(b, 3, 3);
    }
    sw_tbuf_finish(b->b);
    REQUIRE(tg_close(&g, 0) == SW_OK);
    size_t flen;
    uint8_t *file = tg_slurp(path, &flen);
    REQUIRE(file);
    CHECK_EQ_U64(count_chunks(file, flen, SW_CHUNK_EVENTS), 12 + 6);
    free(file);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    CHECK_EQ_U64(sw_trace_thread(t, (size_t)tg_thread_pos(t, 0))->chunks, 12);
    CHECK_EQ_U64(sw_trace_thread(t, (size_t)tg_thread_pos(t, 1))->chunks, 6);
    check_replays(t, &g);
    check_stats(t);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

TEST(code_redefinition_and_late_definitions)
{
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 3, 0) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1, 0, "a", 13);
    REQUIRE(a);
    tg_run(a, 50, 4);
    sw_tbuf_flush(a->b);
    /* Defined after events were written: goes out before the next chunk. */
    CHECK_EQ_I64(sw_writer_define_code(g.w, 3, SW_CODE_C, "late", "mod.late", "<builtin>", 0), SW_OK);
    CHECK_EQ_I64(sw_writer_define_code(g.w, 1, SW_CODE_PYTHON, "again", "Again.again", "b.py", 99), SW_OK);
    g.npy = a->npy = 4;
    tg_run(a, 50, 4);
    REQUIRE(tg_close(&g, 0) == SW_OK);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    const sw_code_info *ci = sw_trace_code(t, 3);
    if (CHECK(ci != NULL)) {
        CHECK_EQ_STR(ci->qualname, "mod.late");
        CHECK_EQ_U64(ci->kind, SW_CODE_C);
    }
    ci = sw_trace_code(t, 1);
    if (CHECK(ci != NULL)) {  /* the later definition wins */
        CHECK_EQ_STR(ci->name, "again");
        CHECK_EQ_STR(ci->filename, "b.py");
        CHECK_EQ_U64(ci->firstlineno, 99);
    }
    check_replays(t, &g);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

typedef struct worker {
    tg_thread *t;
    size_t n;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    for (size_t i = 0; i < w->n; i++) {
        tg_step(w->t, 20);
        if (i % 5000 == 0)
            sched_yield();
    }
    tg_unwind_all(w->t);
    sw_tbuf_finish(w->t->b);
    return NULL;
}

TEST(concurrent_threads)
{
    /* Four threads append to their own buffers at once; chunks are written
     * under the writer's lock and definitions queued from several threads. */
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 0, 1, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 30, 5) == SW_OK);
    worker ws[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        ws[i].t = tg_add_thread(&g, 100 + (uint64_t)i, 200 + (uint64_t)i, "w", 20 + (uint64_t)i);
        REQUIRE(ws[i].t);
        ws[i].n = 40000;
    }
    for (int i = 0; i < 4; i++)
        REQUIRE(pthread_create(&th[i], NULL, worker_main, &ws[i]) == 0);
    for (int k = 0; k < 50; k++) {  /* meanwhile: renames, definitions */
        char name[32];
        snprintf(name, sizeof name, "w%d", k);
        sw_writer_thread_name(g.w, (uint32_t)(k % 4), name);
        sw_writer_define_code(g.w, 35 + (uint32_t)k, SW_CODE_C, "x", "x", "", 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    REQUIRE(tg_close(&g, 0) == SW_OK);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    CHECK_EQ_STR(sw_trace_damage(t), "");
    CHECK_EQ_U64(sw_trace_thread_count(t), 4);
    for (uint32_t i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "w%u", 48 + i < 50 ? 48 + i : 44 + i);  /* the last rename */
        CHECK_EQ_STR(sw_trace_thread(t, (size_t)tg_thread_pos(t, i))->name, name);
    }
    CHECK(sw_trace_code(t, 84) != NULL);
    check_replays(t, &g);
    check_stats(t);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

TEST(writer_arguments_and_errors)
{
    sw_writer *w = (sw_writer *)1;
    sw_writer_opts o = {4096, 0, 0};
    CHECK_EQ_I64(sw_writer_open(&w, NULL, &o), SW_EARG);
    CHECK(w == NULL);
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    sw_writer_opts small = {4095, 0, 0};
    CHECK_EQ_I64(sw_writer_open(&w, path, &small), SW_EARG);
    sw_writer_opts huge = {SW_CHUNK_MAX, 0, 0};
    CHECK_EQ_I64(sw_writer_open(&w, path, &huge), SW_EARG);
    sw_writer_opts shift = {4096, 0, 21};
    CHECK_EQ_I64(sw_writer_open(&w, path, &shift), SW_EARG);
    CHECK_EQ_I64(sw_writer_open(&w, path, NULL), SW_EARG);
    errno = 0;
    CHECK_EQ_I64(sw_writer_open(&w, "/nonexistent-dir-stackwatch/x.swt", &o), SW_EIO);
    CHECK_EQ_I64(errno, ENOENT);
    CHECK(w == NULL);
    sw_writer_free(NULL);

    /* A minimal valid writer: header + END only. */
    REQUIRE(sw_writer_open(&w, path, &o) == SW_OK);
    sw_bytes kv = {0};
    sw_kv_uint(&kv, "time_shift", 0);
    CHECK_EQ_I64(sw_writer_meta(w, &kv), SW_OK);
    sw_bytes_free(&kv);
    kv.failed = 1;  /* a builder that ran out of memory is refused */
    CHECK_EQ_I64(sw_writer_meta(w, &kv), SW_ENOMEM);
    CHECK_EQ_I64(sw_writer_close(w, NULL), SW_OK);
    sw_writer_free(w);
    size_t flen;
    uint8_t *file = tg_slurp(path, &flen);
    REQUIRE(file);
    CHECK(flen > SW_FILE_HEADER_LEN);
    CHECK_EQ_MEM(file, SW_MAGIC, SW_MAGIC_LEN);
    CHECK_EQ_U64(file[8] | file[9] << 8, SW_FORMAT_MAJOR);
    CHECK_EQ_U64(file[10] | file[11] << 8, SW_FORMAT_MINOR);
    CHECK_EQ_U64(file[12] | file[13] | file[14] | file[15], 0);
    CHECK_EQ_U64(count_chunks(file, flen, SW_CHUNK_END), 1);
    free(file);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    CHECK_EQ_U64(sw_trace_thread_count(t), 0);
    CHECK_EQ_I64(sw_trace_complete(t), 1);
    CHECK_EQ_I64(sw_trace_end_ns(t), -1);  /* no end_ticks */
    sw_stat_row *rows = (sw_stat_row *)1;
    size_t nrows = 99;
    CHECK_EQ_I64(sw_stats_compute(t, &rows, &nrows), SW_OK);
    CHECK_EQ_U64(nrows, 0);
    free(rows);
    sw_trace_free(t);
    sw_trace_free(NULL);
    unlink(path);
}

TEST(write_error_is_reported_and_counted)
{
    sw_writer *w;
    sw_writer_opts o = {4096, 0, 0};
    /* /dev/full accepts open() but every write fails: the header cannot be
     * written. */
    if (access("/dev/full", W_OK) == 0)
        CHECK_EQ_I64(sw_writer_open(&w, "/dev/full", &o), SW_EIO);

    /* A file size limit (this test runs in its own process) makes writes
     * fail part-way: the writer keeps going, counts the lost events as
     * dropped, reports the first error, and what reached the file reads. */
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {30000, 30000};
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 10, 2) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 1, 0, "a", 31);
    REQUIRE(a);
    tg_run(a, 40000, 12);
    CHECK_EQ_I64(tg_close(&g, 1e9), SW_EIO);
    char msg[256];
    CHECK_EQ_I64(sw_writer_error(g.w, msg, sizeof msg), SW_EIO);
    CHECK_MSG(strstr(msg, "writing the trace file") != NULL, "error message: %s", msg);
    sw_writer_totals tot;
    sw_writer_totals_get(g.w, &tot);
    CHECK_EQ_U64(tot.events, a->n);
    CHECK(tot.dropped > 0 && tot.dropped < a->n);
    CHECK(tot.bytes <= 30000);

    sw_trace *t = tg_open_trace(path);

    REQUIRE(t);
    CHECK_EQ_I64(sw_trace_complete(t), 0);  /* END could not be written */
    const sw_thread_info *ti = sw_trace_thread(t, 0);
    REQUIRE(ti != NULL);
    CHECK(ti->chunks >= 2);
    /* Exactly the events that were not counted as dropped reached the file. */
    CHECK_EQ_U64(ti->events, a->n - tot.dropped);
    tg_rec got, exp = {0};
    sw_trace_replay(t, 0, tg_rec_fn, (memset(&got, 0, sizeof got), &got));
    tg_expect(t, a, 0, ti->events, &exp);
    char why[256];
    CHECK_MSG(tg_same(&got, &exp, why, sizeof why), "%s", why);
    tg_rec_free(&got);
    tg_rec_free(&exp);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}
