/*
 * merge.c - several traces as one timeline (merge.h): the processes in
 * order of their start, the flows from each child's parent, then each
 * trace written by its exporter as one part of the output.
 */
#include "merge.h"

#include "base/base.h"
#include "format.h"

#include <stdlib.h>
#include <string.h>

typedef struct proc {
    sw_trace *t;
    sw_export_part part;
    uint64_t pid, parent_pid;
    uint64_t mono0;          /* CLOCK_MONOTONIC ns at the trace's clock origin */
    sw_export_flow *flows;   /* owned; part.flows points here */
    size_t nflows, cap;
} proc;

/* An integer META key of either integer type; 0 if absent. */
static uint64_t meta_uint(sw_trace *t, const char *key)
{
    const sw_meta_entry *e = sw_trace_meta_find(t, key);
    if (!e)
        return 0;
    if (e->type == SW_VAL_UINT)
        return e->u;
    return e->type == SW_VAL_SINT && e->i > 0 ? (uint64_t)e->i : 0;
}

/* The pre-pass over a parent's threads: which slice is the innermost one
 * open at each child's start (its ordinal among the slice begins the walk
 * hands over for that thread, as the exporters count them). */
typedef struct marks {
    sw_export_flow *f;       /* the parent's flows, by thread then time */
    size_t n, k;             /* k: the next to place */
    size_t thread;           /* the thread being walked */
    uint64_t *open;          /* ordinals of its open slices */
    size_t depth, cap;
    uint64_t begins;
    int oom;
} marks;

/* Places the flows of the current thread that start before t_ns (and
 * leaves those of threads the walk did not hand over unplaced). */
static void place_until(marks *m, int64_t t_ns)
{
    for (; m->k < m->n && m->f[m->k].thread < m->thread; m->k++)
        ;
    for (; m->k < m->n && m->f[m->k].thread == m->thread && m->f[m->k].t_ns < t_ns; m->k++)
        m->f[m->k].begin = m->depth ? m->open[m->depth - 1] : UINT64_MAX;
}

static int mark_event(void *ud, size_t thread, const sw_event *ev)
{
    marks *m = ud;
    if (thread != m->thread) {
        m->thread = thread;
        m->depth = 0;
        m->begins = 0;
    }
    if (ev->kind == SW_WALK_THREAD_END) {
        place_until(m, INT64_MAX);
        return m->k == m->n;   /* every flow placed: stop the walk */
    }
    int enter = ev->kind == SW_OP_CALL || ev->kind == SW_OP_RESUME || ev->kind == SW_OP_C_CALL;
    int exit_ = ev->kind == SW_OP_RETURN || ev->kind == SW_OP_YIELD || ev->kind == SW_OP_UNWIND ||
                ev->kind == SW_OP_C_RETURN;
    if (!enter && !exit_)
        return 0;
    place_until(m, ev->t_ns + 1);   /* a child started at t is inside what is open at t */
    if (enter) {
        uint64_t *o = sw_array_grow(m->open, &m->cap, m->depth + 1, sizeof *o, 64);
        if (!o)
            return m->oom = 1;
        m->open = o;
        m->open[m->depth++] = m->begins++;
    } else if (m->depth) {
        m->depth--;
    }
    return 0;
}

static int by_thread_time(const void *a, const void *b)
{
    const sw_export_flow *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
}

static int by_thread_begin(const void *a, const void *b)
{
    const sw_export_flow *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

static int by_start(const void *a, const void *b)
{
    const proc *x = a, *y = b;
    return (x->mono0 > y->mono0) - (x->mono0 < y->mono0);
}

/* The parent of process c: among the traces of its parent_pid, the last
 * one started before the child was (its own pid only if it exec'd). */
static proc *parent_of(proc *ps, size_t n, size_t c, uint64_t spawn_mono)
{
    proc *best = NULL;
    for (size_t i = 0; i < n; i++) {
        if (i == c || ps[i].pid != ps[c].parent_pid || ps[i].mono0 > spawn_mono)
            continue;
        if (!best || ps[i].mono0 > best->mono0)
            best = &ps[i];
    }
    return best;
}

/* Each child's flow, from the thread of its parent that started it; then
 * each flow's slice (a pre-pass walk of each parent that started any). */
static int link(proc *ps, size_t n, const sw_export_opts *o)
{
    for (size_t c = 0; c < n; c++) {
        uint64_t tid = meta_uint(ps[c].t, "spawn_tid"), when = meta_uint(ps[c].t, "spawn_mono_ns");
        proc *par = ps[c].parent_pid && tid && when ? parent_of(ps, n, c, when) : NULL;
        if (!par)
            continue;
        size_t th = 0, nth = sw_trace_thread_count(par->t);
        while (th < nth && sw_trace_thread(par->t, th)->native_tid != tid)
            th++;
        if (th == nth)
            continue;
        sw_export_flow *f = sw_array_grow(par->flows, &par->cap, par->nflows + 1, sizeof *f, 8);
        if (!f)
            return SW_ENOMEM;
        par->flows = f;
        f[par->nflows++] = (sw_export_flow){c + 1, th, UINT64_MAX, (int64_t)(when - par->mono0)};
    }
    for (size_t i = 0; i < n; i++) {
        proc *par = &ps[i];
        if (!par->nflows)
            continue;
        qsort(par->flows, par->nflows, sizeof *par->flows, by_thread_time);
        marks m = {par->flows, par->nflows, 0, 0, NULL, 0, 0, 0, 0};
        int rc = sw_export_walk(par->t, o, mark_event, &m);
        free(m.open);
        if (m.oom || rc == SW_ENOMEM)
            return SW_ENOMEM;
        qsort(par->flows, par->nflows, sizeof *par->flows, by_thread_begin);
        par->part.flows = par->flows;
        par->part.nflows = par->nflows;
        for (size_t k = 0; k < par->nflows; k++)   /* a flow's id is its child's position + 1 */
            if (par->flows[k].begin != UINT64_MAX)
                ps[par->flows[k].id - 1].part.in_flow = par->flows[k].id;
    }
    return SW_OK;
}

int sw_export_merged(sw_trace *const *traces, size_t n, sw_export_fn write, FILE *out,
                     const sw_export_opts *o, char *err, size_t errlen)
{
    proc *ps = calloc(n ? n : 1, sizeof *ps);
    if (!ps) {
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        ps[i].t = traces[i];
        ps[i].pid = meta_uint(traces[i], "pid");
        ps[i].parent_pid = meta_uint(traces[i], "parent_pid");
        ps[i].mono0 = meta_uint(traces[i], "mono0_ns");
    }
    qsort(ps, n, sizeof *ps, by_start);   /* the flows' ids are positions in this order */
    uint32_t seq = 0;
    for (size_t i = 0; i < n; i++) {
        sw_export_part *p = &ps[i].part;
        p->key = ps[i].pid;
        for (size_t j = 0; j < i; j++)   /* processes of one pid (execs) get keys of their own */
            if (ps[j].part.key == p->key)
                p->key += (uint64_t)1 << 32, j = (size_t)-1;
        p->seq_base = seq;
        seq += (uint32_t)sw_trace_thread_count(ps[i].t);
        p->first = i == 0;
        p->last = i + 1 == n;
    }
    int rc = link(ps, n, o);
    if (rc)
        snprintf(err, errlen, "out of memory");
    for (size_t i = 0; rc == SW_OK && i < n; i++) {
        sw_export_opts po = {0};
        if (o)
            po = *o;
        po.part = &ps[i].part;
        rc = write(ps[i].t, out, &po, err, errlen);
    }
    for (size_t i = 0; i < n; i++)
        free(ps[i].flows);
    free(ps);
    return rc;
}
