/*
 * analysis.c - per-function statistics and slice durations computed by
 * replaying a trace (see analysis.h).
 */
#include "analysis.h"

#include "base/base.h"
#include "format.h"

#include <stdlib.h>
#include <string.h>

static int is_enter(int kind) { return kind == SW_OP_CALL || kind == SW_OP_RESUME || kind == SW_OP_C_CALL; }
static int is_exit(int kind)
{
    return kind == SW_OP_RETURN || kind == SW_OP_YIELD || kind == SW_OP_UNWIND || kind == SW_OP_C_RETURN;
}

typedef struct open_frame {
    uint32_t code;
    int64_t start, child;
} open_frame;

typedef struct stats_state {
    uint32_t limit;
    uint64_t *calls;
    int64_t *total, *own;
    uint32_t *active;
    open_frame *stack;
    size_t depth, cap;
    int oom;
} stats_state;

static int stats_event(void *ud, const sw_event *ev)
{
    stats_state *s = ud;
    if (ev->code >= s->limit && (is_enter(ev->kind) || is_exit(ev->kind)))
        return 0;  /* an id with no definition: nothing to attribute */
    if (is_enter(ev->kind)) {
        open_frame *st = sw_array_grow(s->stack, &s->cap, s->depth + 1, sizeof *st, 256);
        if (!st) {
            s->oom = 1;
            return 1;
        }
        s->stack = st;
        s->stack[s->depth++] = (open_frame){ev->code, ev->t_ns, 0};
        s->active[ev->code]++;
        if (!ev->synthetic)
            s->calls[ev->code]++;
    } else if (is_exit(ev->kind) && s->depth) {
        open_frame f = s->stack[--s->depth];
        int64_t dur = ev->t_ns - f.start;
        if (dur < 0)
            dur = 0;
        s->own[f.code] += dur - f.child;
        if (s->depth)
            s->stack[s->depth - 1].child += dur;
        if (--s->active[f.code] == 0)
            s->total[f.code] += dur;
    }
    return 0;
}

int sw_stats_compute(sw_trace *t, sw_stat_row **rows, size_t *nrows)
{
    *rows = NULL;
    *nrows = 0;
    stats_state s = {0};
    s.limit = sw_trace_code_limit(t);
    size_t n = s.limit ? s.limit : 1;
    s.calls = calloc(n, sizeof *s.calls);
    s.total = calloc(n, sizeof *s.total);
    s.own = calloc(n, sizeof *s.own);
    s.active = calloc(n, sizeof *s.active);
    sw_stat_row *out = NULL;
    size_t nout = 0, cap = 0;
    int rc = SW_OK;
    if (!s.calls || !s.total || !s.own || !s.active) {
        rc = SW_ENOMEM;
        goto done;
    }
    for (size_t th = 0; th < sw_trace_thread_count(t); th++) {
        memset(s.calls, 0, n * sizeof *s.calls);
        memset(s.total, 0, n * sizeof *s.total);
        memset(s.own, 0, n * sizeof *s.own);
        memset(s.active, 0, n * sizeof *s.active);
        s.depth = 0;
        sw_trace_replay(t, th, stats_event, &s);
        if (s.oom) {
            rc = SW_ENOMEM;
            goto done;
        }
        for (uint32_t c = 0; c < s.limit; c++) {
            if (!s.calls[c] && !s.total[c])
                continue;
            if (nout == cap) {
                cap = cap ? cap * 2 : 64;
                sw_stat_row *o = realloc(out, cap * sizeof *o);
                if (!o) {
                    rc = SW_ENOMEM;
                    goto done;
                }
                out = o;
            }
            out[nout++] = (sw_stat_row){(uint32_t)th, c, s.calls[c], s.total[c], s.own[c]};
        }
    }
done:
    free(s.calls);
    free(s.total);
    free(s.own);
    free(s.active);
    free(s.stack);
    if (rc) {
        free(out);
        return rc;
    }
    *rows = out;
    *nrows = nout;
    return SW_OK;
}

typedef struct dur_state {
    int64_t *dur;
    size_t n, cap;
    size_t *open;      /* indexes into dur of the open slices */
    size_t depth, open_cap;
    int oom;
} dur_state;

static int dur_event(void *ud, const sw_event *ev)
{
    dur_state *s = ud;
    if (is_enter(ev->kind)) {
        int64_t *d = sw_array_grow(s->dur, &s->cap, s->n + 1, sizeof *d, 1024);
        if (!d)
            return s->oom = 1;
        s->dur = d;
        size_t *o = sw_array_grow(s->open, &s->open_cap, s->depth + 1, sizeof *o, 256);
        if (!o)
            return s->oom = 1;
        s->open = o;
        s->dur[s->n] = ev->t_ns;  /* start, until the exit replaces it */
        s->open[s->depth++] = s->n++;
    } else if (is_exit(ev->kind) && s->depth) {
        size_t i = s->open[--s->depth];
        s->dur[i] = ev->t_ns - s->dur[i];
    }
    return 0;
}

int sw_slice_durations(sw_trace *t, size_t thread, int64_t **dur, size_t *n)
{
    dur_state s = {0};
    int rc = sw_trace_replay(t, thread, dur_event, &s);
    free(s.open);
    if (s.oom) {
        free(s.dur);
        return SW_ENOMEM;
    }
    (void)rc;
    *dur = s.dur;
    *n = s.n;
    return SW_OK;
}

typedef struct ext_state {
    sw_ext_summary *out;
    int gc_open;             /* a collection started on this thread */
    int64_t gc_start;
} ext_state;

static int ext_event(void *ud, const sw_event *ev)
{
    ext_state *s = ud;
    if (ev->kind != SW_EV_EXT || !ev->ext)
        return 0;
    const sw_ext *x = ev->ext;
    sw_ext_summary *o = s->out;
    if (x->kind < SW_EXT_KIND_LIMIT)
        o->count[x->kind]++;
    if (x->malformed) {
        o->malformed++;
        return 0;
    }
    if (x->kind == SW_EXT_GC_START) {
        s->gc_open = 1;
        s->gc_start = ev->t_ns;
    } else if (x->kind == SW_EXT_GC_DONE) {
        o->gc_collected += x->b;
        o->gc_uncollectable += x->c;
        if (s->gc_open && ev->t_ns >= s->gc_start) {
            /* Times are within +-2^61 ns (reader.c): the difference fits;
             * the sum saturates. */
            int64_t d = ev->t_ns - s->gc_start;
            o->gc_pairs++;
            o->gc_ns = o->gc_ns > INT64_MAX - d ? INT64_MAX : o->gc_ns + d;
        }
        s->gc_open = 0;
    }
    return 0;
}

int sw_ext_summary_compute(sw_trace *t, sw_ext_summary *out)
{
    memset(out, 0, sizeof *out);
    for (size_t th = 0; th < sw_trace_thread_count(t); th++) {
        ext_state s = {out, 0, 0};
        int rc = sw_trace_replay_ext(t, th, SW_REPLAY_EXT, ext_event, &s);
        if (rc == SW_ENOMEM)
            return rc;
    }
    return SW_OK;
}
