/*
 * export_walk.c - the slice walk the exporters share: replays every thread
 * and drops slices shorter than the minimum duration together with their
 * matching ends (children of a dropped slice are kept if long enough).
 * EXT events (SW_EV_EXT) are passed on as they are.
 */
#include "export_walk.h"

#include "base/base.h"
#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct walk {
    sw_slice_fn fn;
    void *ud;
    size_t thread;
    const sw_filter *filter;
    const uint8_t *longer;   /* bit k: the thread's k-th slice lasts at least the minimum */
    size_t nlonger, next;
    int64_t last_ns;         /* time of the last event replayed */
    sw_sample_cursor *sc;    /* the thread's samples */
    sw_trace_sample sample; /* the next sample, if has_next */
    int has_next;
    sw_trec_cursor *rc;      /* the thread's records written by another thread */
    sw_trace_trec rec;       /* the next one, if has_rec */
    int has_rec;
    int64_t slice_end;       /* a SLICE record's end, pending; INT64_MIN: none */
    uint8_t *kept;           /* per open slice: was its start emitted */
    size_t depth, cap;
    int oom;
} walk;

static int is_enter(int kind) { return kind == SW_OP_CALL || kind == SW_OP_RESUME || kind == SW_OP_C_CALL; }
static int is_exit(int kind)
{
    return kind == SW_OP_RETURN || kind == SW_OP_YIELD || kind == SW_OP_UNWIND || kind == SW_OP_C_RETURN;
}

/* The first pass of a walk with a minimum duration: one bit per slice, in
 * the order of their starts, set for those that last long enough. */
typedef struct long_slices {
    uint8_t *bits;
    size_t n, cap;
    int64_t min;
    size_t *open;            /* slice numbers of the open slices */
    int64_t *start;          /* and their starts */
    size_t depth, open_cap, start_cap;
    int oom;
} long_slices;

static int long_event(void *ud, const sw_event *ev)
{
    long_slices *l = ud;
    if (is_enter(ev->kind)) {
        uint8_t *b = sw_array_grow(l->bits, &l->cap, l->n / 8 + 1, 1, 1024);
        size_t *o = b ? sw_array_grow(l->open, &l->open_cap, l->depth + 1, sizeof *o, 256) : NULL;
        if (o)
            l->open = o;
        int64_t *st = o ? sw_array_grow(l->start, &l->start_cap, l->depth + 1, sizeof *st, 256) : NULL;
        if (b)
            l->bits = b;
        if (!st)
            return l->oom = 1;
        l->start = st;
        if (l->n % 8 == 0)
            l->bits[l->n / 8] = 0;
        l->open[l->depth] = l->n++;
        l->start[l->depth++] = ev->t_ns;
    } else if (is_exit(ev->kind) && l->depth) {
        l->depth--;
        if (ev->t_ns - l->start[l->depth] >= l->min)
            l->bits[l->open[l->depth] / 8] |= (uint8_t)(1u << (l->open[l->depth] % 8));
    }
    return 0;
}

/* Ends the pending SLICE record's slice (records.h SW_RS_SLICE) at its
 * end, or at `at` when that comes first. */
static int slice_close(walk *w, int64_t at)
{
    if (w->slice_end == INT64_MIN)
        return 0;
    int64_t t = w->slice_end < at ? w->slice_end : at;
    w->slice_end = INT64_MIN;
    if (t > w->last_ns)
        w->last_ns = t;
    sw_event se = {t, 0, (uint32_t)w->depth, SW_WALK_SLICE_END, 0, NULL, NULL};
    return w->fn(w->ud, w->thread, &se);
}

/* Hands fn the thread's records (written by another thread) in the window
 * up to time `until`. */
static int records_until(walk *w, int64_t until)
{
    while (w->has_rec && w->rec.t_ns <= until) {
        int rc = 0;
        if (w->slice_end != INT64_MIN && w->slice_end <= w->rec.t_ns)
            rc = slice_close(w, w->rec.t_ns);
        const sw_record_kind *k = sw_record_kind_of(w->rec.ext->kind);
        int slice = k && k->shape == SW_RS_SLICE && !w->rec.ext->malformed;
        if (!rc && slice)
            rc = slice_close(w, w->rec.t_ns);   /* one at a time on a thread */
        if (!rc && sw_filter_in_window(w->filter, w->rec.t_ns)) {
            sw_event se = {w->rec.t_ns, w->rec.ext->code, (uint32_t)w->depth, SW_EV_EXT, 0, w->rec.ext, NULL};
            if (w->rec.t_ns > w->last_ns)
                w->last_ns = w->rec.t_ns;
            rc = w->fn(w->ud, w->thread, &se);
            if (!rc && slice)
                w->slice_end = w->rec.t_ns + (int64_t)(w->rec.ext->c > INT64_MAX / 2 ? INT64_MAX / 2 : w->rec.ext->c);
        }
        if (rc)
            return rc;
        int n = sw_trec_cursor_next(w->rc, &w->rec);
        if (n < 0)
            return w->oom = 1;
        w->has_rec = n == 1;
    }
    return 0;
}

/* Hands fn the thread's samples in the window up to time `until`. */
static int samples_until(walk *w, int64_t until)
{
    while (w->has_next && w->sample.t_ns <= until) {
        if (sw_filter_in_window(w->filter, w->sample.t_ns)) {
            sw_event se = {w->sample.t_ns, 0, 0, SW_WALK_SAMPLE, 0, NULL, &w->sample};
            if (w->sample.t_ns > w->last_ns)
                w->last_ns = w->sample.t_ns;
            int rc = w->fn(w->ud, w->thread, &se);
            if (rc)
                return rc;
        }
        int n = sw_sample_cursor_next(w->sc, &w->sample);
        if (n < 0)
            return w->oom = 1;
        w->has_next = n == 1;
    }
    return 0;
}

/* Hands fn the thread's side records and samples up to time `until`,
 * merged in time order (a pending SLICE ends first once its end has come). */
static int side_until(walk *w, int64_t until)
{
    for (;;) {
        int64_t tr = w->has_rec ? w->rec.t_ns : INT64_MAX, ts = w->has_next ? w->sample.t_ns : INT64_MAX;
        int64_t t = tr < ts ? tr : ts;
        if (t > until || t == INT64_MAX)
            return 0;
        int rc = w->slice_end <= t ? slice_close(w, t) : 0;
        if (!rc)
            rc = tr <= ts ? records_until(w, tr) : samples_until(w, ts);
        if (rc)
            return rc;
    }
}

static int walk_event(void *ud, const sw_event *ev)
{
    walk *w = ud;
    int src = side_until(w, ev->t_ns);
    if (!src && (is_enter(ev->kind) || is_exit(ev->kind) || w->slice_end <= ev->t_ns))
        src = slice_close(w, ev->t_ns);   /* a system call ends before its thread's next frame event */
    if (src)
        return src;
    if (ev->t_ns > w->last_ns)
        w->last_ns = ev->t_ns;
    if (is_enter(ev->kind)) {
        int keep = 1;
        if (w->longer) {
            keep = w->next < w->nlonger && (w->longer[w->next / 8] >> (w->next % 8) & 1);
            w->next++;
        }
        uint8_t *k = sw_array_grow(w->kept, &w->cap, w->depth + 1, 1, 256);
        if (!k)
            return w->oom = 1;
        w->kept = k;
        w->kept[w->depth++] = (uint8_t)keep;
        return keep ? w->fn(w->ud, w->thread, ev) : 0;
    }
    if (is_exit(ev->kind)) {
        if (!w->depth)
            return 0;
        return w->kept[--w->depth] ? w->fn(w->ud, w->thread, ev) : 0;
    }
    return w->fn(w->ud, w->thread, ev);
}

int sw_export_walk(sw_trace *t, const sw_export_opts *o, sw_slice_fn fn, void *ud)
{
    const sw_filter *f = o ? o->filter : NULL;
    int64_t min_duration_ns = o ? o->min_duration_ns : 0;
    sw_filtered *fl;
    if (sw_filtered_new(t, f, &fl) != SW_OK)
        return SW_ENOMEM;
    int result = SW_OK;
    for (size_t th = 0; th < sw_trace_thread_count(t) && result == SW_OK; th++) {
        if (!sw_filter_has_thread(f, th))
            continue;
        walk w = {0};
        w.fn = fn;
        w.ud = ud;
        w.thread = th;
        w.filter = f;
        long_slices l = {0};
        l.min = min_duration_ns;
        if (min_duration_ns > 0) {
            int rc = sw_filtered_replay(fl, th, 0, long_event, &l);
            free(l.open);
            free(l.start);
            if (l.oom || rc == SW_ENOMEM || rc == SW_EIO || rc == SW_ECANCELED) {
                free(l.bits);
                result = l.oom ? SW_ENOMEM : rc;
                break;
            }
            w.longer = l.bits;
            w.nlonger = l.n;
            if (!l.bits)
                w.longer = (const uint8_t *)"";   /* no slice: none is long */
        }
        w.last_ns = INT64_MIN;
        w.sc = sw_sample_cursor_new(t, th);
        int n = w.sc ? sw_sample_cursor_next(w.sc, &w.sample) : SW_ENOMEM;
        if (n < 0)
            w.oom = 1;
        w.has_next = n == 1;
        w.slice_end = INT64_MIN;
        w.rc = sw_trec_cursor_new(t, th);
        n = w.rc ? sw_trec_cursor_next(w.rc, &w.rec) : SW_ENOMEM;
        if (n < 0)
            w.oom = 1;
        w.has_rec = n == 1;
        int rc = w.oom ? 1 : sw_filtered_replay(fl, th, SW_REPLAY_EXT, walk_event, &w);
        if (rc == SW_OK || (rc < 0 && rc != SW_EIO && rc != SW_ECANCELED && rc != SW_ENOMEM))
            rc = side_until(&w, INT64_MAX) || slice_close(&w, INT64_MAX) ? 1 : SW_OK;
        if (rc == SW_OK) {
            sw_event end = {w.last_ns == INT64_MIN ? 0 : w.last_ns, 0, 0, SW_WALK_THREAD_END, 1, NULL, NULL};
            if (fn(ud, th, &end))
                rc = 1;
        }
        sw_sample_cursor_free(w.sc);
        sw_trec_cursor_free(w.rc);
        free(l.bits);
        free(w.kept);
        if (w.oom || rc == SW_ENOMEM)
            result = SW_ENOMEM;
        else if (rc == SW_EIO || rc == SW_ECANCELED)
            result = rc;
        else if (rc > 0)
            result = SW_EIO;  /* the consumer failed (e.g. a write error) */
    }
    sw_filtered_free(fl);
    return result;
}

const sw_export_task_flow *sw_export_task_flow_due(const sw_export_opts *o, size_t *next, size_t thread,
                                                   int64_t t_ns)
{
    if (!o || !o->task_flows)
        return NULL;
    while (*next < o->ntask_flows && o->task_flows[*next].thread < thread)
        (*next)++;   /* a thread the walk skipped */
    if (*next < o->ntask_flows && o->task_flows[*next].thread == thread && o->task_flows[*next].t_ns <= t_ns)
        return &o->task_flows[(*next)++];
    return NULL;
}

const char *sw_export_ext_name(const sw_ext *x, char *buf, size_t len, const char **category)
{
    const sw_record_kind *k = sw_record_kind_of(x->kind);
    *category = k ? k->category : "event";
    const char *label = k ? k->label : "event";
    unsigned title = k ? k->title : SW_SLOT_NONE;
    if (title == SW_SLOT_S1 || title == SW_SLOT_S2) {
        const char *s = sw_ext_string(x, title);
        if (s && s[0]) {
            snprintf(buf, len, "%s %s", label, s);
            return buf;
        }
    } else if (title != SW_SLOT_NONE) {
        snprintf(buf, len, "%s %llu", label, (unsigned long long)sw_ext_number(x, title));
        return buf;
    }
    snprintf(buf, len, "%s", label);
    return buf;
}

const sw_record_kind *sw_export_pair_open(const sw_ext *x)
{
    const sw_record_kind *k = x->malformed ? NULL : sw_record_kind_of(x->kind);
    return k && k->shape == SW_RS_OPEN ? k : NULL;
}

const sw_record_kind *sw_export_pair_close(const sw_ext *x)
{
    const sw_record_kind *k = x->malformed ? NULL : sw_record_kind_of(x->kind);
    return k && k->shape == SW_RS_CLOSE ? sw_record_kind_of(k->pair) : NULL;
}

int sw_export_pair_index(const sw_record_kind *open)
{
    int i = 0;
    for (size_t j = 0; j < sw_record_kind_count; j++) {
        if (&sw_record_kinds[j] == open)
            return i;
        if (sw_record_kinds[j].shape == SW_RS_OPEN)
            i++;
    }
    return -1;
}

int sw_export_pair_count(void)
{
    int n = 0;
    for (size_t j = 0; j < sw_record_kind_count; j++)
        n += sw_record_kinds[j].shape == SW_RS_OPEN;
    return n;
}

int sw_export_field_in(const sw_record_kind *k, const char *name)
{
    for (unsigned i = 0; k && i < k->nfields; i++)
        if (strcmp(k->fields[i].name, name) == 0)
            return 1;
    return 0;
}

void sw_export_slice_name(const sw_record_kind *open, const sw_ext *x, char *buf, size_t len)
{
    if (open->nfields && open->fields[0].type != SW_FT_STR && open->fields[0].type != SW_FT_CODE)
        snprintf(buf, len, "%s (%s %llu)", open->track, open->fields[0].name,
                 (unsigned long long)sw_ext_number(x, open->fields[0].slot));
    else if (open->nfields && open->fields[0].type == SW_FT_STR)
        snprintf(buf, len, "%s (%s %s)", open->track, open->fields[0].name, sw_ext_string(x, open->fields[0].slot));
    else
        snprintf(buf, len, "%s", open->track);
}

const char *sw_export_record_slice(const sw_ext *x, const char **category)
{
    const sw_record_kind *k = x->malformed ? NULL : sw_record_kind_of(x->kind);
    if (!k || k->shape != SW_RS_SLICE)
        return NULL;
    *category = k->category;
    const char *s = k->title == SW_SLOT_S1 || k->title == SW_SLOT_S2 ? sw_ext_string(x, k->title) : NULL;
    return s && s[0] ? s : k->label;
}
