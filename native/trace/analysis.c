/*
 * analysis.c - per-function statistics and slice durations computed by
 * replaying a trace (see analysis.h).
 */
#include "analysis.h"

#include "base/base.h"
#include "export_walk.h"
#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_enter(int kind) { return kind == SW_OP_CALL || kind == SW_OP_RESUME || kind == SW_OP_C_CALL; }
static int is_exit(int kind)
{
    return kind == SW_OP_RETURN || kind == SW_OP_YIELD || kind == SW_OP_UNWIND || kind == SW_OP_C_RETURN;
}

typedef struct open_frame {
    uint32_t code;
    uint32_t edge;           /* index in the edges, or SW_HT_NONE */
    int64_t start, child;
} open_frame;

/* The calls of one caller to one callee, while a thread is replayed. */
typedef struct edge {
    uint32_t caller, callee;
    uint32_t active;         /* calls of this pair open */
    uint64_t calls, prim;
    int64_t total, own, inclusive;
} edge;

typedef struct stats_state {
    uint32_t limit;
    uint64_t *calls, *prim;
    int64_t *total, *own;
    uint32_t *active;
    open_frame *stack;
    size_t depth, cap;
    int with_edges;
    edge *edges;
    size_t nedges, edges_cap;
    sw_hashtab edge_index;   /* caller << 32 | callee -> index in edges */
    int oom;
} stats_state;

/* The index of the pair (caller, callee), added if new; SW_HT_NONE when
 * out of memory. */
static uint32_t edge_of(stats_state *s, uint32_t caller, uint32_t callee)
{
    uint64_t key = (uint64_t)caller << 32 | callee, h = sw_hash_u64(key);
    uint32_t pos, i;
    for (i = sw_hashtab_first(&s->edge_index, h, &pos); i != SW_HT_NONE; i = sw_hashtab_next(&s->edge_index, h, &pos))
        if (s->edges[i].caller == caller && s->edges[i].callee == callee)
            return i;
    edge *e = sw_array_grow(s->edges, &s->edges_cap, s->nedges + 1, sizeof *e, 64);
    if (!e || s->nedges >= SW_HT_NONE - 1)
        return SW_HT_NONE;
    s->edges = e;
    if (sw_hashtab_add_after(&s->edge_index, h, (uint32_t)s->nedges, pos) != SW_OK)
        return SW_HT_NONE;
    memset(&s->edges[s->nedges], 0, sizeof *s->edges);
    s->edges[s->nedges].caller = caller;
    s->edges[s->nedges].callee = callee;
    return (uint32_t)s->nedges++;
}

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
        uint32_t e = SW_HT_NONE;
        if (s->with_edges) {
            e = edge_of(s, s->depth ? s->stack[s->depth - 1].code : SW_NO_CALLER, ev->code);
            if (e == SW_HT_NONE) {
                s->oom = 1;
                return 1;
            }
            if (!ev->synthetic) {
                s->edges[e].calls++;
                s->edges[e].prim += s->edges[e].active == 0;
            }
            s->edges[e].active++;
        }
        s->stack[s->depth++] = (open_frame){ev->code, e, ev->t_ns, 0};
        if (!ev->synthetic) {
            s->calls[ev->code]++;
            s->prim[ev->code] += s->active[ev->code] == 0;
        }
        s->active[ev->code]++;
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
        if (f.edge != SW_HT_NONE) {
            edge *e = &s->edges[f.edge];
            e->own += dur - f.child;
            e->inclusive += dur;
            if (--e->active == 0)
                e->total += dur;
        }
    }
    return 0;
}

/* Appends an element to a growing array of rows; 0 when out of memory. */
static int append_row(void **rows, size_t *n, size_t *cap, const void *row, size_t size)
{
    char *r = sw_array_grow(*rows, cap, *n + 1, size, 64);
    if (!r)
        return 0;
    *rows = r;
    memcpy(r + *n * size, row, size);
    (*n)++;
    return 1;
}

int sw_stats_filtered(sw_trace *t, const sw_filter *f, sw_stat_row **rows, size_t *nrows, sw_edge_row **edges,
                      size_t *nedges)
{
    *rows = NULL;
    *nrows = 0;
    if (edges) {
        *edges = NULL;
        *nedges = 0;
    }
    stats_state s;
    memset(&s, 0, sizeof s);
    s.limit = sw_trace_code_limit(t);
    s.with_edges = edges != NULL;
    size_t n = s.limit ? s.limit : 1;
    s.calls = calloc(n, sizeof *s.calls);
    s.prim = calloc(n, sizeof *s.prim);
    s.total = calloc(n, sizeof *s.total);
    s.own = calloc(n, sizeof *s.own);
    s.active = calloc(n, sizeof *s.active);
    sw_stat_row *out = NULL;
    sw_edge_row *eout = NULL;
    size_t nout = 0, cap = 0, neout = 0, ecap = 0;
    sw_filtered *fl = NULL;
    int rc = SW_OK;
    if (!s.calls || !s.prim || !s.total || !s.own || !s.active || sw_filtered_new(t, f, &fl) != SW_OK) {
        rc = SW_ENOMEM;
        goto done;
    }
    for (size_t th = 0; th < sw_trace_thread_count(t); th++) {
        if (!sw_filter_has_thread(f, th))
            continue;
        memset(s.calls, 0, n * sizeof *s.calls);
        memset(s.prim, 0, n * sizeof *s.prim);
        memset(s.total, 0, n * sizeof *s.total);
        memset(s.own, 0, n * sizeof *s.own);
        memset(s.active, 0, n * sizeof *s.active);
        s.depth = 0;
        s.nedges = 0;
        sw_hashtab_clear(&s.edge_index);
        int r = sw_filtered_replay(fl, th, 0, stats_event, &s);
        if (s.oom || r == SW_ENOMEM) {
            rc = SW_ENOMEM;
            goto done;
        }
        if (r == SW_EIO || r == SW_ECANCELED) {
            rc = r;
            goto done;
        }
        for (uint32_t c = 0; c < s.limit; c++) {
            if (!s.calls[c] && !s.total[c])
                continue;
            sw_stat_row row = {(uint32_t)th, c, s.calls[c], s.total[c], s.own[c], s.prim[c]};
            if (!append_row((void **)&out, &nout, &cap, &row, sizeof row)) {
                rc = SW_ENOMEM;
                goto done;
            }
        }
        for (size_t k = 0; k < s.nedges; k++) {
            const edge *e = &s.edges[k];
            if (!e->calls && !e->total)
                continue;
            sw_edge_row row = {(uint32_t)th, e->caller, e->callee, e->calls, e->prim, e->total, e->own, e->inclusive};
            if (!append_row((void **)&eout, &neout, &ecap, &row, sizeof row)) {
                rc = SW_ENOMEM;
                goto done;
            }
        }
    }
done:
    sw_filtered_free(fl);
    free(s.calls);
    free(s.prim);
    free(s.total);
    free(s.own);
    free(s.active);
    free(s.stack);
    free(s.edges);
    sw_hashtab_free(&s.edge_index);
    if (rc) {
        free(out);
        free(eout);
        return rc;
    }
    *rows = out;
    *nrows = nout;
    if (edges) {
        *edges = eout;
        *nedges = neout;
    }
    return SW_OK;
}

int sw_stats_compute(sw_trace *t, sw_stat_row **rows, size_t *nrows)
{
    return sw_stats_filtered(t, NULL, rows, nrows, NULL, NULL);
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
    const sw_record_kind *k = sw_record_kind_of(x->kind);
    if (!k || k->stat != SW_RSTAT_GC)
        return 0;
    if (k->shape == SW_RS_OPEN) {
        s->gc_open = 1;
        s->gc_start = ev->t_ns;
    } else if (k->shape == SW_RS_CLOSE) {
        o->gc_collected += x->b;
        o->gc_uncollectable += x->c;
        if (s->gc_open && ev->t_ns >= s->gc_start) {
            /* Times are within +-2^61 ns (the reader's): the difference fits;
             * the sum saturates. */
            int64_t d = ev->t_ns - s->gc_start;
            o->gc_pairs++;
            o->gc_ns = o->gc_ns > INT64_MAX - d ? INT64_MAX : o->gc_ns + d;
        }
        s->gc_open = 0;
    }
    return 0;
}

/* One system call (a record of stat SYSCALL) into its name's row. */
static void add_syscall(sw_ext_summary *o, const sw_ext *x)
{
    const char *name = x->s1 && x->s1[0] ? x->s1 : "?";
    size_t i = 0;
    while (i < o->nsyscalls && strcmp(o->syscalls[i].name, name) != 0)
        i++;
    if (i == o->nsyscalls) {
        if (o->nsyscalls == SW_SYSCALL_ROWS) {
            i = SW_SYSCALL_ROWS - 1;
            snprintf(o->syscalls[i].name, sizeof o->syscalls[i].name, "(others)");
        } else {
            snprintf(o->syscalls[i].name, sizeof o->syscalls[i].name, "%s", name);
            o->nsyscalls++;
        }
    }
    struct sw_syscall_row *r = &o->syscalls[i];
    int64_t ret = (int64_t)x->b;
    int64_t d = x->c > INT64_MAX / 4 ? INT64_MAX / 4 : (int64_t)x->c;
    r->calls++;
    r->errors += ret < 0 && ret >= -4095;
    r->total_ns = r->total_ns > INT64_MAX - d ? INT64_MAX : r->total_ns + d;
}

static int64_t add_sat(int64_t sum, int64_t d)
{
    return sum > INT64_MAX - d ? INT64_MAX : sum + d;
}

/* The records written by another thread, through the filter's threads and
 * window. */
static int thread_records_summary(sw_trace *t, const sw_filter *f, sw_ext_summary *o)
{
    size_t nthreads = sw_trace_thread_count(t);
    int64_t *off_since = malloc((nthreads ? nthreads : 1) * sizeof *off_since);   /* INT64_MIN: on CPU */
    sw_trec_cursor *c = off_since ? sw_trec_cursor_new(t, SIZE_MAX) : NULL;
    if (!c) {
        free(off_since);
        return SW_ENOMEM;
    }
    for (size_t i = 0; i < nthreads; i++)
        off_since[i] = INT64_MIN;
    sw_trace_trec r;
    int n;
    while ((n = sw_trec_cursor_next(c, &r)) == 1) {
        if (!sw_filter_has_thread(f, r.thread) || !sw_filter_in_window(f, r.t_ns))
            continue;
        const sw_ext *x = r.ext;
        if (x->kind < SW_EXT_KIND_LIMIT)
            o->count[x->kind]++;
        if (x->malformed) {
            o->malformed++;
            continue;
        }
        const sw_record_kind *k = sw_record_kind_of(x->kind);
        if (k && k->stat == SW_RSTAT_SYSCALL)
            add_syscall(o, x);
        else if (k && k->stat == SW_RSTAT_KERNEL_LOST)
            o->kernel_lost += x->a;
        else if (k && k->stat == SW_RSTAT_FAULT)
            o->faults++;
        else if (k && k->stat == SW_RSTAT_OFF_CPU && r.thread < nthreads) {
            if (k->shape == SW_RS_OPEN) {
                off_since[r.thread] = r.t_ns;
            } else if (off_since[r.thread] != INT64_MIN && r.t_ns >= off_since[r.thread]) {
                o->off_cpu_pairs++;
                o->off_cpu_ns = add_sat(o->off_cpu_ns, r.t_ns - off_since[r.thread]);
                off_since[r.thread] = INT64_MIN;
            }
        }
    }
    sw_trec_cursor_free(c);
    free(off_since);
    return n < 0 ? n : SW_OK;
}

int sw_ext_summary_filtered(sw_trace *t, const sw_filter *f, sw_ext_summary *out)
{
    memset(out, 0, sizeof *out);
    sw_filtered *fl;
    if (sw_filtered_new(t, f, &fl) != SW_OK)
        return SW_ENOMEM;
    int rc = SW_OK;
    for (size_t th = 0; th < sw_trace_thread_count(t) && rc == SW_OK; th++) {
        ext_state s = {out, 0, 0};
        rc = sw_filtered_replay(fl, th, SW_REPLAY_EXT, ext_event, &s);
        if (rc != SW_ENOMEM && rc != SW_EIO && rc != SW_ECANCELED)
            rc = SW_OK;   /* a malformed chunk: what it gave counts */
    }
    sw_filtered_free(fl);
    if (rc == SW_OK)
        rc = thread_records_summary(t, f, out);
    return rc;
}

int sw_ext_summary_compute(sw_trace *t, sw_ext_summary *out)
{
    return sw_ext_summary_filtered(t, NULL, out);
}

/* ---- the kernel's events per function ---- */

typedef struct fn_walk {
    sw_kernel_fn_row *rows;
    size_t n, cap;
    uint64_t *keys;          /* thread << 32 | code, parallel to rows */
    size_t keys_cap;
    sw_hashtab index;
    uint32_t *stack;         /* the thread's open frames' codes */
    size_t depth, stack_cap;
    size_t thread;
    int off_open;            /* an interval off CPU is open on the thread */
    uint32_t off_code;       /* the innermost frame's code when it began */
    int64_t off_start;
    int oom;
} fn_walk;

/* The row of (thread, code), added when new; NULL when out of memory. */
static sw_kernel_fn_row *fn_row(fn_walk *w, size_t thread, uint32_t code)
{
    uint64_t key = (uint64_t)thread << 32 | code;
    uint32_t i = sw_hashtab_get_u64(&w->index, w->keys, key);
    if (i == SW_HT_NONE) {
        sw_kernel_fn_row *r = sw_array_grow(w->rows, &w->cap, w->n + 1, sizeof *r, 64);
        if (r)
            w->rows = r;
        uint64_t *kk = r ? sw_array_grow(w->keys, &w->keys_cap, w->n + 1, sizeof *kk, 64) : NULL;
        if (kk)
            w->keys = kk;
        if (!kk || sw_hashtab_add(&w->index, sw_hash_u64(key), (uint32_t)w->n))
            return NULL;
        i = (uint32_t)w->n++;
        w->keys[i] = key;
        w->rows[i] = (sw_kernel_fn_row){(uint32_t)thread, code, 0, 0, 0, 0, 0};
    }
    return &w->rows[i];
}

static int fn_event(void *ud, size_t thread, const sw_event *ev)
{
    fn_walk *w = ud;
    if (thread != w->thread) {
        w->thread = thread;
        w->depth = 0;
        w->off_open = 0;
    }
    switch (ev->kind) {
    case SW_OP_CALL:
    case SW_OP_RESUME:
    case SW_OP_C_CALL: {
        uint32_t *s = sw_array_grow(w->stack, &w->stack_cap, w->depth + 1, sizeof *s, 256);
        if (!s)
            return w->oom = 1;
        w->stack = s;
        w->stack[w->depth++] = ev->code;
        return 0;
    }
    case SW_OP_RETURN:
    case SW_OP_YIELD:
    case SW_OP_UNWIND:
    case SW_OP_C_RETURN:
        if (w->depth)
            w->depth--;
        return 0;
    case SW_EV_EXT:
        break;
    default:
        return 0;
    }
    const sw_record_kind *k = ev->ext && !ev->ext->malformed ? sw_record_kind_of(ev->ext->kind) : NULL;
    if (!k || (k->stat != SW_RSTAT_SYSCALL && k->stat != SW_RSTAT_OFF_CPU && k->stat != SW_RSTAT_FAULT))
        return 0;
    uint32_t code = w->depth ? w->stack[w->depth - 1] : SW_NO_CALLER;
    if (k->stat == SW_RSTAT_OFF_CPU && k->shape == SW_RS_OPEN) {
        w->off_open = 1;
        w->off_code = code;
        w->off_start = ev->t_ns;
        return 0;
    }
    if (k->stat == SW_RSTAT_OFF_CPU) {   /* its CLOSE: the interval counts where it began */
        if (!w->off_open || ev->t_ns < w->off_start)
            return 0;
        w->off_open = 0;
        code = w->off_code;
    }
    sw_kernel_fn_row *r = fn_row(w, thread, code);
    if (!r)
        return w->oom = 1;
    if (k->stat == SW_RSTAT_FAULT) {
        r->faults++;
    } else if (k->stat == SW_RSTAT_OFF_CPU) {
        r->off_cpu++;
        r->off_cpu_ns = add_sat(r->off_cpu_ns, ev->t_ns - w->off_start);
    } else {
        r->calls++;
        r->total_ns = add_sat(r->total_ns, ev->ext->c > INT64_MAX / 4 ? INT64_MAX / 4 : (int64_t)ev->ext->c);
    }
    return 0;
}

int sw_kernel_by_function(sw_trace *t, const sw_filter *f, sw_kernel_fn_row **rows, size_t *nrows)
{
    *rows = NULL;
    *nrows = 0;
    if (!sw_trace_thread_record_count(t))
        return SW_OK;   /* no kernel event: no walk */
    fn_walk w = {0};
    w.thread = SIZE_MAX;
    sw_export_opts o = {0, f, NULL, NULL, NULL, 0};
    int rc = sw_export_walk(t, &o, fn_event, &w);
    free(w.keys);
    free(w.stack);
    sw_hashtab_free(&w.index);
    if (w.oom)
        rc = SW_ENOMEM;
    if (rc != SW_OK) {
        free(w.rows);
        return rc;
    }
    *rows = w.rows;
    *nrows = w.n;
    return SW_OK;
}
