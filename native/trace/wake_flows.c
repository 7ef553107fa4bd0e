/*
 * wake_flows.c - the flows of wakeups between threads of a trace
 * (wake_flows.h): one pass over the THREAD_RECORDS side stream collects
 * each thread's off-CPU intervals (OFF_CPU..ON_CPU, and from its start to
 * a first ON_CPU: a new thread's first run) and the wakeups, then
 * each wakeup of a thread of the trace is matched to the interval it fell
 * in, if any; and the switches are ordered per CPU to find those between
 * two threads of the trace.
 */
#include "wake_flows.h"

#include "base/base.h"
#include "side_streams.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A scheduler record of a thread (OFF_CPU, ON_CPU or WAKEUP). */
typedef struct sched_rec {
    size_t thread;
    int64_t t;
    uint32_t kind;
    uint64_t wakee;          /* WAKEUP: the woken thread's tid; OFF_CPU: next_tid */
    uint64_t cpu;            /* OFF_CPU: the CPU left; ON_CPU: the CPU taken */
    size_t order;            /* in the file: ties keep it */
} sched_rec;

/* A switch in (thread, time) that another thread's switch out wrote. */
typedef struct joined_in {
    size_t thread;
    int64_t t;
} joined_in;

/* An off-CPU interval of a thread; on = INT64_MAX: it never switched in again. */
typedef struct off_interval {
    size_t thread;
    int64_t off, on;
} off_interval;

typedef struct wake_start {
    size_t thread;
    int64_t t;
    uint64_t wakee;
    uint64_t id;
} wake_start;

typedef struct tid_pos {
    uint64_t tid;
    size_t pos;
} tid_pos;

struct sw_wake_flows {
    sw_export_opts opts;
    sw_export_task_flow *flows;   /* o's task flows and the wakee ends, by thread then time */
    char (*names)[48];            /* the wakee ends' names */
    wake_start *starts;           /* by thread, time, wakee */
    size_t nstarts;
    tid_pos *tids;                /* the threads by native tid */
    size_t nthreads;
    joined_in *joined;            /* by thread, time */
    size_t njoined, joined_cap;
};

/* Records of the same key (thread or CPU), by time, then file order. */
static int cmp_same_key(uint64_t kx, uint64_t ky, const sched_rec *x, const sched_rec *y)
{
    if (kx != ky)
        return kx < ky ? -1 : 1;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_sched_rec(const void *a, const void *b)
{
    const sched_rec *x = a, *y = b;
    return cmp_same_key(x->thread, y->thread, x, y);
}

static int cmp_cpu_rec(const void *a, const void *b)
{
    const sched_rec *x = a, *y = b;
    return cmp_same_key(x->cpu, y->cpu, x, y);
}

static int cmp_joined(const void *a, const void *b)
{
    const joined_in *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

static int cmp_tid_pos(const void *a, const void *b)
{
    const tid_pos *x = a, *y = b;
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int cmp_start(const void *a, const void *b)
{
    const wake_start *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->wakee < y->wakee ? -1 : x->wakee > y->wakee;
}

/* Flow ends by thread, then time. */
static int end_order(const sw_export_task_flow *x, const sw_export_task_flow *y)
{
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

static int cmp_end(const void *a, const void *b)
{
    const sw_export_task_flow *x = a, *y = b;
    int c = end_order(x, y);
    return c ? c : x->id < y->id ? -1 : x->id > y->id;
}

/* Both ends name a flow by the wakee's tid and the wakeup's time. */
static uint64_t flow_id(uint64_t wakee_tid, int64_t t_wake)
{
    return sw_hash_u64(wakee_tid * 0x9E3779B97F4A7C15ull ^ (uint64_t)t_wake) | 1;
}

/* The wakee's off-CPU interval holding t (off <= t < on), or NULL.
 * iv[lo..hi) are the wakee's, sorted by off and disjoint. */
static const off_interval *interval_at(const off_interval *iv, size_t lo, size_t hi, int64_t t)
{
    size_t a = lo, b = hi;
    while (a < b) {   /* the first with off > t */
        size_t mid = a + (b - a) / 2;
        if (iv[mid].off <= t)
            a = mid + 1;
        else
            b = mid;
    }
    return a > lo && t < iv[a - 1].on ? &iv[a - 1] : NULL;
}

/* Collects the scheduler records of the threads of the trace. */
static int collect(sw_trace *t, sched_rec **out, size_t *n)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    sw_trec_cursor *c = sw_trec_cursor_new(t, SIZE_MAX);
    if (!c)
        return SW_ENOMEM;
    sw_trace_trec r;
    int rc;
    while ((rc = sw_trec_cursor_next(c, &r)) == 1) {
        const sw_ext *x = r.ext;
        if (x->malformed || (x->kind != SW_EXT_OFF_CPU && x->kind != SW_EXT_ON_CPU && x->kind != SW_EXT_WAKEUP))
            continue;
        sched_rec *g = sw_array_grow(*out, &cap, *n + 1, sizeof *g, 256);
        if (!g) {
            rc = SW_ENOMEM;
            break;
        }
        *out = g;
        g[*n] = (sched_rec){r.thread, r.t_ns, x->kind, x->kind == SW_EXT_WAKEUP ? x->a : x->kind == SW_EXT_OFF_CPU ? x->c : 0,
                            x->kind == SW_EXT_WAKEUP ? 0 : x->a, *n};
        (*n)++;
    }
    sw_trec_cursor_free(c);
    if (rc < 0)
        return rc == SW_ENOMEM ? SW_ENOMEM : SW_EIO;
    if (*n > 1)
        qsort(*out, *n, sizeof **out, cmp_sched_rec);
    return SW_OK;
}

/* The switches between two threads of the trace that the export keeps:
 * on a CPU, a switch out of thread A to thread B (OFF_CPU's next_tid)
 * followed by B's switch in, with no other switch of the trace's threads
 * on that CPU between, are one switch of the kernel's. recs: by thread,
 * then time (reordered here). */
static int join_switches(sw_wake_flows *wf, const sw_filter *f, sched_rec *recs, size_t nrecs)
{
    size_t n = 0;
    for (size_t k = 0; k < nrecs; k++)
        if (recs[k].kind != SW_EXT_WAKEUP)
            recs[n++] = recs[k];
    if (n > 1)
        qsort(recs, n, sizeof *recs, cmp_cpu_rec);
    for (size_t k = 1; k < n; k++) {
        const sched_rec *out = &recs[k - 1], *in = &recs[k];
        if (out->cpu != in->cpu || out->kind != SW_EXT_OFF_CPU || in->kind != SW_EXT_ON_CPU || !out->wakee ||
            wf->tids == NULL)
            continue;
        tid_pos key = {out->wakee, 0};
        const tid_pos *b = bsearch(&key, wf->tids, wf->nthreads, sizeof key, cmp_tid_pos);
        if (!b || b->pos != in->thread || b->pos == out->thread || !sw_filter_has_thread(f, out->thread) ||
            !sw_filter_in_window(f, out->t))
            continue;
        joined_in *j = sw_array_grow(wf->joined, &wf->joined_cap, wf->njoined + 1, sizeof *j, 64);
        if (!j)
            return SW_ENOMEM;
        wf->joined = j;
        j[wf->njoined++] = (joined_in){in->thread, in->t};
    }
    if (wf->njoined > 1)
        qsort(wf->joined, wf->njoined, sizeof *wf->joined, cmp_joined);
    return SW_OK;
}

int sw_wake_flows_new(sw_trace *t, const sw_export_opts *o, sw_wake_flows **out)
{
    *out = NULL;
    sw_wake_flows *wf = calloc(1, sizeof *wf);
    if (!wf)
        return SW_ENOMEM;
    if (o)
        wf->opts = *o;
    const sw_filter *f = o ? o->filter : NULL;
    sched_rec *recs = NULL;
    size_t nrecs = 0, nthreads = sw_trace_thread_count(t);
    int rc = collect(t, &recs, &nrecs);
    tid_pos *tids = wf->tids = rc ? NULL : malloc((nthreads ? nthreads : 1) * sizeof *tids);
    wf->nthreads = nthreads;
    off_interval *iv = rc ? NULL : malloc((nrecs ? nrecs : 1) * sizeof *iv);
    size_t *first = rc ? NULL : calloc(nthreads + 1, sizeof *first);   /* per thread: its first interval */
    sw_export_task_flow *ends = rc ? NULL : malloc((nrecs ? nrecs : 1) * sizeof *ends);
    wf->names = rc ? NULL : malloc((nrecs ? nrecs : 1) * sizeof *wf->names);
    wf->starts = rc ? NULL : malloc((nrecs ? nrecs : 1) * sizeof *wf->starts);
    if (!rc && (!tids || !iv || !first || !ends || !wf->names || !wf->starts))
        rc = SW_ENOMEM;
    size_t niv = 0, nends = 0;
    if (!rc) {
        for (size_t i = 0; i < nthreads; i++)
            tids[i] = (tid_pos){sw_trace_thread(t, i)->native_tid, i};
        if (nthreads > 1)
            qsort(tids, nthreads, sizeof *tids, cmp_tid_pos);
        /* Each thread's intervals, in order (recs are by thread, then time). */
        size_t th = SIZE_MAX;
        int64_t off = 0;
        int is_off = 0, switched = 0;
        for (size_t k = 0; k < nrecs; k++) {
            const sched_rec *r = &recs[k];
            if (r->thread != th) {
                if (is_off)
                    iv[niv++] = (off_interval){th, off, INT64_MAX};
                is_off = switched = 0;
                th = r->thread;
            }
            if (r->kind == SW_EXT_OFF_CPU) {
                if (is_off)   /* two switches out: the first one's end was lost */
                    iv[niv++] = (off_interval){th, off, r->t};
                is_off = 1;
                off = r->t;
            } else if (r->kind == SW_EXT_ON_CPU && (is_off || !switched)) {
                /* (a first switch in: a new thread's first run, off CPU since it began) */
                iv[niv++] = (off_interval){th, is_off ? off : INT64_MIN, r->t};
                is_off = 0;
            }
            switched |= r->kind != SW_EXT_WAKEUP;
        }
        if (is_off)
            iv[niv++] = (off_interval){th, off, INT64_MAX};
        for (size_t i = 0, k = 0; i <= nthreads; i++) {
            while (k < niv && iv[k].thread < i)
                k++;
            first[i] = k;
        }
        /* Each wakeup of another thread of the trace. */
        for (size_t k = 0; k < nrecs; k++) {
            const sched_rec *r = &recs[k];
            if (r->kind != SW_EXT_WAKEUP || !r->wakee || !sw_filter_has_thread(f, r->thread) ||
                !sw_filter_in_window(f, r->t))
                continue;
            tid_pos key = {r->wakee, 0};
            const tid_pos *w = bsearch(&key, tids, nthreads, sizeof *tids, cmp_tid_pos);
            if (!w || w->pos == r->thread || !sw_filter_has_thread(f, w->pos))
                continue;
            const off_interval *in = interval_at(iv, first[w->pos], first[w->pos + 1], r->t);
            if (in && in->on == INT64_MAX)
                continue;   /* it never ran again while traced */
            uint64_t id = flow_id(r->wakee, r->t);
            const sw_thread_info *waker = sw_trace_thread(t, r->thread);
            snprintf(wf->names[nends], sizeof wf->names[nends], in ? "woken by %llu" : "woken by %llu (runnable)",
                     (unsigned long long)waker->native_tid);
            ends[nends] = (sw_export_task_flow){id, w->pos, in ? in->on : r->t, 1, wf->names[nends], "sched"};
            nends++;
            wf->starts[wf->nstarts++] = (wake_start){r->thread, r->t, r->wakee, id};
        }
        if (wf->nstarts > 1)
            qsort(wf->starts, wf->nstarts, sizeof *wf->starts, cmp_start);
        rc = join_switches(wf, f, recs, nrecs);
        if (nends > 1)
            qsort(ends, nends, sizeof *ends, cmp_end);
    }
    /* o's task flows and the ends, merged (task flows first at a tie). */
    size_t ntask = o && o->task_flows ? o->ntask_flows : 0;
    if (!rc && nends) {
        wf->flows = malloc((ntask + nends) * sizeof *wf->flows);
        if (!wf->flows) {
            rc = SW_ENOMEM;
        } else {
            size_t i = 0, j = 0, n = 0;
            while (i < ntask || j < nends)
                if (j == nends || (i < ntask && end_order(&o->task_flows[i], &ends[j]) <= 0))
                    wf->flows[n++] = o->task_flows[i++];
                else
                    wf->flows[n++] = ends[j++];
            wf->opts.task_flows = wf->flows;
            wf->opts.ntask_flows = n;
        }
    }
    free(recs);
    free(iv);
    free(first);
    free(ends);
    if (rc) {
        sw_wake_flows_free(wf);
        return rc;
    }
    *out = wf;
    return SW_OK;
}

const sw_export_opts *sw_wake_flows_opts(const sw_wake_flows *wf)
{
    return &wf->opts;
}

uint64_t sw_wake_flow_start(const sw_wake_flows *wf, size_t thread, int64_t t_ns, const sw_ext *x)
{
    if (!wf || x->kind != SW_EXT_WAKEUP || x->malformed)
        return 0;
    wake_start key = {thread, t_ns, x->a, 0};
    const wake_start *s = bsearch(&key, wf->starts, wf->nstarts, sizeof key, cmp_start);
    return s ? s->id : 0;
}

const sw_thread_info *sw_wake_flows_thread(const sw_wake_flows *wf, sw_trace *t, uint64_t tid)
{
    tid_pos key = {tid, 0};
    const tid_pos *w = tid ? bsearch(&key, wf->tids, wf->nthreads, sizeof key, cmp_tid_pos) : NULL;
    return w ? sw_trace_thread(t, w->pos) : NULL;
}

int sw_wake_flows_switch_joined(const sw_wake_flows *wf, size_t thread, int64_t t_ns, const sw_ext *x)
{
    if (!wf || x->kind != SW_EXT_ON_CPU || x->malformed)
        return 0;
    joined_in key = {thread, t_ns};
    return bsearch(&key, wf->joined, wf->njoined, sizeof key, cmp_joined) != NULL;
}

int sw_wake_flows_shows(const sw_wake_flows *wf, const sw_ext *x)
{
    if (!wf || x->kind != SW_EXT_WAKEUP || x->malformed)
        return 1;
    tid_pos key = {x->a, 0};
    const tid_pos *w = x->a ? bsearch(&key, wf->tids, wf->nthreads, sizeof key, cmp_tid_pos) : NULL;
    return !w || sw_filter_has_thread(wf->opts.filter, w->pos);
}

size_t sw_wake_flow_count(const sw_wake_flows *wf)
{
    return wf ? wf->nstarts : 0;
}

void sw_wake_flows_free(sw_wake_flows *wf)
{
    if (!wf)
        return;
    free(wf->flows);
    free(wf->names);
    free(wf->starts);
    free(wf->tids);
    free(wf->joined);
    free(wf);
}
