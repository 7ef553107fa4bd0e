/*
 * tracegen.h - writes synthetic traces with the real writer and remembers
 * what it wrote, so that tests can compare a replay with it. Shared by the
 * unit tests and make_seed.c (the fuzzer's seed corpus). Header-only.
 *
 * A generated thread is a random but well-formed walk: calls, resumptions
 * and C calls push frames; returns, yields and unwinds (C returns for C
 * frames) pop them; tick values strictly increase. Every event is recorded
 * as the reader should deliver it: kind, code id of the frame it opens or
 * closes, depth (0 = outermost) and stored time in units.
 */
#ifndef SW_TRACEGEN_H
#define SW_TRACEGEN_H

#include "base/bytes.h"
#include "trace/format.h"
#include "trace/reader.h"
#include "trace/writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TG_MAX_THREADS 8
#define TG_MAX_DEPTH   4096
#define TG_TICK0       1000000000ull   /* META tick0 */

typedef struct tg_ev {
    uint8_t kind;        /* SW_OP_* */
    uint32_t code;
    uint32_t depth;
    uint64_t units;      /* stored time: ticks >> time_shift */
} tg_ev;

typedef struct tg_thread {
    sw_tbuf *b;
    uint64_t tid, ident;
    const char *name;
    tg_ev *ev;
    size_t n, cap;
    uint32_t stack[TG_MAX_DEPTH];
    uint8_t stack_c[TG_MAX_DEPTH];   /* frame opened by SW_OP_C_CALL */
    uint32_t depth;
    uint64_t ticks;
    uint64_t rng;
    unsigned shift;
    uint32_t npy, nc;                /* code ids: [0,npy) Python, [npy,npy+nc) C */
    uint32_t floor;                  /* tg_step never pops below this depth */
} tg_thread;

typedef struct tg {
    sw_writer *w;
    unsigned shift;
    uint32_t npy, nc;
    tg_thread th[TG_MAX_THREADS];
    int nth;
    uint64_t end_ticks;
} tg;

static inline uint64_t tg_rand(uint64_t *s)
{
    /* xorshift64* */
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Opens path and writes the two META chunks stackwatch writes (the time
 * shift first, then the clock and the description). */
static inline int tg_open(tg *g, const char *path, size_t chunk_bytes, size_t ring_bytes, unsigned shift,
                   double clock_hz)
{
    memset(g, 0, sizeof *g);
    sw_writer_opts o = {chunk_bytes, ring_bytes, shift};
    int rc = sw_writer_open(&g->w, path, &o);
    if (rc)
        return rc;
    g->shift = shift;
    sw_bytes kv = {0};
    sw_kv_uint(&kv, "time_shift", shift);
    rc = sw_writer_meta(g->w, &kv);
    sw_bytes_free(&kv);
    if (rc)
        return rc;
    sw_kv_str(&kv, "producer", "stackwatch");
    sw_kv_str(&kv, "clock", "monotonic");
    sw_kv_f64(&kv, "clock_hz", clock_hz);
    sw_kv_uint(&kv, "tick0", TG_TICK0);
    sw_kv_uint(&kv, "mono0_ns", 5000000000ull);
    sw_kv_uint(&kv, "real0_ns", 1700000000000000000ull);
    sw_kv_uint(&kv, "boot0_ns", 6000000000ull);
    sw_kv_uint(&kv, "pid", 4242);
    sw_kv_uint(&kv, "ring_bytes", ring_bytes);
    sw_kv_uint(&kv, "max_depth", 0);
    sw_kv_str(&kv, "command", "tracegen \"quoted\" \\ arg");
    sw_kv_sint(&kv, "custom_neg", -123456789);
    sw_kv_f64(&kv, "custom_f64", -2.5);
    rc = sw_writer_meta(g->w, &kv);
    sw_bytes_free(&kv);
    return rc;
}

static inline void tg_code_names(uint32_t id, char *name, size_t nlen, char *qual, size_t qlen, char *file,
                          size_t flen)
{
    snprintf(name, nlen, "fn%u", id);
    switch (id % 5) {
    case 1: snprintf(qual, qlen, "Cls\"%u\".m\\x", id); break;     /* JSON escaping */
    case 2: snprintf(qual, qlen, "tab\tnl\n%u", id); break;        /* control characters */
    case 3: snprintf(qual, qlen, "<lambda>%u", id); break;
    default: snprintf(qual, qlen, "mod.Class.fn%u", id); break;
    }
    snprintf(file, flen, "/src/pkg/mod%u.py", id % 7);
}

static inline uint32_t tg_code_line(uint32_t id) { return 10 + id * 3; }

/* Defines npy Python codes (ids 0..npy-1) and nc C functions after them. */
static inline int tg_codes(tg *g, uint32_t npy, uint32_t nc)
{
    g->npy = npy;
    g->nc = nc;
    for (uint32_t id = 0; id < npy + nc; id++) {
        char name[64], qual[96], file[64];
        tg_code_names(id, name, sizeof name, qual, sizeof qual, file, sizeof file);
        int rc = sw_writer_define_code(g->w, id, id < npy ? SW_CODE_PYTHON : SW_CODE_C, name, qual,
                                       file, tg_code_line(id));
        if (rc)
            return rc;
    }
    return SW_OK;
}

static inline tg_thread *tg_add_thread(tg *g, uint64_t tid, uint64_t ident, const char *name, uint64_t seed)
{
    if (g->nth == TG_MAX_THREADS)
        return NULL;
    tg_thread *t = &g->th[g->nth];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    t->ident = ident;
    t->name = name;
    t->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    t->shift = g->shift;
    t->npy = g->npy;
    t->nc = g->nc;
    t->ticks = TG_TICK0 + 1000 * (uint64_t)(g->nth + 1);
    t->b = sw_writer_add_thread(g->w, tid, ident, name, t->ticks);
    if (!t->b)
        return NULL;
    g->nth++;
    return t;
}

static inline void tg_record(tg_thread *t, uint8_t kind, uint32_t code, uint32_t depth)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 1024;
        t->ev = realloc(t->ev, t->cap * sizeof *t->ev);
        if (!t->ev) {
            fprintf(stderr, "tracegen: out of memory\n");
            exit(2);
        }
    }
    t->ev[t->n++] = (tg_ev){kind, code, depth, t->ticks >> t->shift};
}

static inline void tg_tick(tg_thread *t)
{
    uint64_t r = tg_rand(&t->rng);
    t->ticks += 1 + r % 3000;
    if (r % 997 == 0)
        t->ticks += (uint64_t)1 << 32;  /* a long pause: a multi-byte delta */
}

static inline void tg_enter(tg_thread *t, unsigned op, uint32_t code)
{
    tg_tick(t);
    sw_tbuf_enter(t->b, t->ticks, op, code);
    tg_record(t, (uint8_t)op, code, t->depth);
    t->stack[t->depth] = code;
    t->stack_c[t->depth] = op == SW_OP_C_CALL;
    t->depth++;
}

static inline void tg_exit(tg_thread *t, unsigned op)
{
    tg_tick(t);
    sw_tbuf_exit(t->b, t->ticks, op);
    t->depth--;
    tg_record(t, (uint8_t)op, t->stack[t->depth], t->depth);
}

/* One random event; the stack stays below max_depth (and at or above
 * floor, once reached). */
static inline void tg_step(tg_thread *t, uint32_t max_depth)
{
    uint64_t r = tg_rand(&t->rng);
    int enter = t->depth <= t->floor || (t->depth + 1 < max_depth && r % 100 < 52);
    if (t->depth && t->stack_c[t->depth - 1])
        enter = 0;  /* C functions here call nothing */
    r >>= 8;
    if (enter) {
        unsigned k = (unsigned)(r % 100);
        r >>= 8;
        if (t->nc && k < 20)
            tg_enter(t, SW_OP_C_CALL, t->npy + (uint32_t)(r % t->nc));
        else if (k < 35)
            tg_enter(t, SW_OP_RESUME, (uint32_t)(r % t->npy));
        else
            tg_enter(t, SW_OP_CALL, (uint32_t)(r % t->npy));
    } else if (t->stack_c[t->depth - 1]) {
        tg_exit(t, SW_OP_C_RETURN);
    } else {
        unsigned k = (unsigned)(r % 100);
        tg_exit(t, k < 70 ? SW_OP_RETURN : k < 85 ? SW_OP_YIELD : SW_OP_UNWIND);
    }
}

static inline void tg_run(tg_thread *t, size_t nevents, uint32_t max_depth)
{
    for (size_t i = 0; i < nevents; i++)
        tg_step(t, max_depth);
}

/* Runs until the stack is empty. */
/* Writes an EXT event (records.h SW_EXT_*) with the payload fields of its
 * kind's row, from their slots: code and line for located kinds, a/b/c
 * numbers, s1/s2 strings (see records.h, sw_ext; an interned one through
 * the writer's STRINGS); a kind with no row gets an empty payload. Not recorded in t->ev: a plain replay skips it. */
static inline void tg_ext(tg_thread *t, unsigned kind, uint32_t code, uint64_t line, uint64_t a, uint64_t b,
                          uint64_t c, const char *s1, const char *s2)
{
    sw_ext v = {kind, 0, code, line, a, b, c, s1, s2};
    uint8_t p[SW_EXT_MAX];
    long n = sw_record_encode_interned(kind, &v, SIZE_MAX, sw_writer_intern_fn, t->b->w, p, sizeof p);
    tg_tick(t);
    sw_tbuf_ext(t->b, t->ticks, kind, p, n < 0 ? 0 : (size_t)n);
}

/* One EXT event of every kind 2-13, GC start before GC done. */
static inline void tg_ext_all(tg_thread *t)
{
    tg_ext(t, SW_EXT_LINE, 0, 12, 0, 0, 0, NULL, NULL);
    tg_ext(t, SW_EXT_INSTRUCTION, 1, 13, 24, 100, 0, "LOAD_FAST", NULL);
    tg_ext(t, SW_EXT_RAISE, 0, 14, 0, 0, 0, "ValueError", NULL);
    tg_ext(t, SW_EXT_HANDLED, 0, 15, 0, 0, 0, "ValueError", NULL);
    tg_ext(t, SW_EXT_GC_START, 0, 0, 2, 0, 0, NULL, NULL);
    tg_ext(t, SW_EXT_GC_DONE, 0, 0, 2, 17, 1, NULL, NULL);
    tg_ext(t, SW_EXT_NEW_START, 0, 0, 0, 0, 0, "pkg.Klass", "pkg/mod.py");
    tg_ext(t, SW_EXT_NEW_DONE, 0, 0, 0, 0, 0, "pkg.Klass", "pkg/mod.py");
    tg_ext(t, SW_EXT_DEL_START, 0, 0, 0, 0, 0, "pkg.Klass", "pkg/mod.py");
    tg_ext(t, SW_EXT_DEL_DONE, 0, 0, 0, 0, 0, "pkg.Klass", "pkg/mod.py");
    tg_ext(t, SW_EXT_THREAD_START, 0, 0, 4321, 0, 0, "worker \"1\"", NULL);
    tg_ext(t, SW_EXT_THREAD_EXIT, 0, 0, 4321, 0, 0, "worker \"1\"", NULL);
}

static inline void tg_unwind_all(tg_thread *t)
{
    while (t->depth)
        tg_exit(t, t->stack_c[t->depth - 1] ? SW_OP_C_RETURN : SW_OP_RETURN);
}

/* Writes END (with end_ticks after every thread's last event and the given
 * refined clock rate, if > 0) and closes the file. Returns the close code. */
static inline int tg_close(tg *g, double clock_hz_refined)
{
    uint64_t end = TG_TICK0;
    for (int i = 0; i < g->nth; i++)
        if (g->th[i].ticks > end)
            end = g->th[i].ticks;
    g->end_ticks = end + 5000;
    sw_bytes kv = {0};
    sw_kv_uint(&kv, "end_ticks", g->end_ticks);
    if (clock_hz_refined > 0)
        sw_kv_f64(&kv, "clock_hz_refined", clock_hz_refined);
    int rc = sw_writer_close(g->w, &kv);
    sw_bytes_free(&kv);
    return rc;
}

static inline void tg_free(tg *g)
{
    if (g->w)
        sw_writer_free(g->w);
    g->w = NULL;
    for (int i = 0; i < g->nth; i++) {
        free(g->th[i].ev);
        g->th[i].ev = NULL;
    }
}

/* Reads a whole file into memory. */
static inline uint8_t *tg_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

/* ---- Replay recording ---- */

/* Opens the trace file at `path` with the real reader; on failure prints
 * the reader's message and returns NULL. */
static inline sw_trace *tg_open_trace(const char *path)
{
    sw_trace *t = NULL;
    char err[256];
    if (sw_trace_open_file(path, &t, err, sizeof err) != SW_OK) {
        fprintf(stderr, "open: %s\n", err);
        return NULL;
    }
    return t;
}

typedef struct tg_rec {
    sw_event *ev;
    size_t n, cap;
} tg_rec;

static inline int tg_rec_fn(void *ud, const sw_event *ev)
{
    tg_rec *r = ud;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 1024;
        r->ev = realloc(r->ev, r->cap * sizeof *r->ev);
        if (!r->ev) {
            fprintf(stderr, "tracegen: out of memory\n");
            exit(2);
        }
    }
    r->ev[r->n++] = *ev;
    return 0;
}

static inline void tg_rec_free(tg_rec *r)
{
    free(r->ev);
    memset(r, 0, sizeof *r);
}

static inline void tg_rec_push(tg_rec *r, int kind, uint32_t code, uint32_t depth, int64_t t_ns,
                               int synthetic)
{
    sw_event e;
    memset(&e, 0, sizeof e);
    e.t_ns = t_ns;
    e.code = code;
    e.depth = depth;
    e.kind = (uint8_t)kind;
    e.synthetic = (uint8_t)synthetic;
    tg_rec_fn(r, &e);
}

/* The open frames (code ids, outermost first) before event i of th; returns
 * the depth. */
static inline uint32_t tg_stack_at(const tg_thread *th, size_t i, uint32_t *stack)
{
    uint32_t d = 0;
    for (size_t k = 0; k < i; k++) {
        const tg_ev *e = &th->ev[k];
        if (e->kind == SW_OP_CALL || e->kind == SW_OP_RESUME || e->kind == SW_OP_C_CALL)
            stack[d++] = e->code;
        else if (d)
            d--;
    }
    return d;
}

/* What sw_trace_replay should deliver for th when the trace holds exactly
 * its events in the ranges seg[0..nseg) ([from, to) each, in order, not
 * touching: the chunks between them are missing). Before each range that
 * does not start at event 0 (a gap: ring discards, lost chunks): synthetic
 * returns closing what is open, at the time of the last event delivered;
 * then, at the time of the event before the range if that is later, a
 * DROPPED event and synthetic calls reopening the frames open at `from`.
 * Then the range's events. At the end, synthetic returns closing what is
 * still open, at the trace's end time if that is later; or, when the
 * thread's last chunks are known to be lost (tail_lost: END says how many
 * it sealed), a DROPPED event and the returns at the last event's time. */
static inline void tg_expect_ranges(sw_trace *t, const tg_thread *th, const size_t (*seg)[2], size_t nseg,
                                    int tail_lost, tg_rec *out)
{
    static uint32_t stack[TG_MAX_DEPTH + 16];
    int64_t last = INT64_MIN;
    uint32_t d = 0;
    for (size_t j = 0; j < nseg; j++) {
        size_t from = seg[j][0], to = seg[j][1];
        if (from > 0) {
            while (d) {
                d--;
                tg_rec_push(out, SW_OP_RETURN, stack[d], d, last, 1);
            }
            int64_t t0 = sw_trace_units_to_ns(t, th->ev[from - 1].units);
            if (t0 > last)
                last = t0;
            d = tg_stack_at(th, from, stack);
            tg_rec_push(out, SW_EV_DROPPED, 0, 0, last, 1);
            for (uint32_t k = 0; k < d; k++)
                tg_rec_push(out, SW_OP_CALL, stack[k], k, last, 1);
        }
        for (size_t k = from; k < to; k++) {
            const tg_ev *e = &th->ev[k];
            int64_t ns = sw_trace_units_to_ns(t, e->units);
            if (ns > last)
                last = ns;
            tg_rec_push(out, e->kind, e->code, e->depth, last, 0);
            if (e->kind == SW_OP_CALL || e->kind == SW_OP_RESUME || e->kind == SW_OP_C_CALL)
                stack[d++] = e->code;
            else
                d--;
        }
    }
    if (tail_lost)
        tg_rec_push(out, SW_EV_DROPPED, 0, d, last, 1);
    else if (d && sw_trace_end_ns(t) > last)
        last = sw_trace_end_ns(t);
    while (d) {
        d--;
        tg_rec_push(out, SW_OP_RETURN, stack[d], d, last, 1);
    }
}

/* The same for one range [from, to), the thread's last chunk read. */
static inline void tg_expect(sw_trace *t, const tg_thread *th, size_t from, size_t to, tg_rec *out)
{
    const size_t seg[1][2] = {{from, to}};
    tg_expect_ranges(t, th, seg, 1, 0, out);
}

static inline const char *tg_kind_name(int kind)
{
    switch (kind) {
    case SW_OP_CALL: return "CALL";
    case SW_OP_RETURN: return "RETURN";
    case SW_OP_RESUME: return "RESUME";
    case SW_OP_YIELD: return "YIELD";
    case SW_OP_UNWIND: return "UNWIND";
    case SW_OP_C_CALL: return "C_CALL";
    case SW_OP_C_RETURN: return "C_RETURN";
    case SW_EV_DROPPED: return "DROPPED";
    default: return "?";
    }
}

/* Compares two event lists; returns 1 if equal, else 0 with the first
 * difference described in why. */
static inline int tg_same(const tg_rec *got, const tg_rec *exp, char *why, size_t whylen)
{
    size_t n = got->n < exp->n ? got->n : exp->n;
    for (size_t i = 0; i <= n; i++) {
        if (i == n) {
            if (got->n == exp->n)
                return 1;
            snprintf(why, whylen, "%zu events delivered, %zu expected", got->n, exp->n);
            return 0;
        }
        const sw_event *g = &got->ev[i], *e = &exp->ev[i];
        if (g->kind != e->kind || g->code != e->code || g->depth != e->depth || g->t_ns != e->t_ns ||
            g->synthetic != e->synthetic) {
            snprintf(why, whylen,
                     "event %zu of %zu: got %s code %u depth %u t %lld%s, expected %s code %u depth %u t %lld%s",
                     i, exp->n, tg_kind_name(g->kind), g->code, g->depth, (long long)g->t_ns,
                     g->synthetic ? " (synthetic)" : "", tg_kind_name(e->kind), e->code, e->depth,
                     (long long)e->t_ns, e->synthetic ? " (synthetic)" : "");
            return 0;
        }
    }
    return 1;
}

/* Replays thread position pos into a fresh list. */
static inline int tg_replay(sw_trace *t, size_t pos, tg_rec *out)
{
    memset(out, 0, sizeof *out);
    return sw_trace_replay(t, pos, tg_rec_fn, out);
}

/* Position of the thread with writer index `index` in the trace, or -1. */
static inline long tg_thread_pos(const sw_trace *t, uint32_t index)
{
    for (size_t i = 0; i < sw_trace_thread_count(t); i++)
        if (sw_trace_thread(t, i)->index == index)
            return (long)i;
    return -1;
}

/* What a replay hands out, event by event: kind, code, depth, synthetic;
 * the first 63 events and the last (tg_seen_fn is an sw_event_fn). */
typedef struct tg_seen {
    int n;
    int ev[64][4];
} tg_seen;

static inline int tg_seen_fn(void *ud, const sw_event *ev)
{
    tg_seen *s = ud;
    int i = s->n < 63 ? s->n : 63;
    s->ev[i][0] = ev->kind;
    s->ev[i][1] = (int)ev->code;
    s->ev[i][2] = (int)ev->depth;
    s->ev[i][3] = ev->synthetic;
    s->n++;
    return 0;
}

#endif /* SW_TRACEGEN_H */
