/*
 * export_walk.c - the slice walk the exporters share: replays every thread
 * and drops slices shorter than the minimum duration together with their
 * matching ends (children of a dropped slice are kept if long enough),
 * with the thread's side streams (side_streams.h) merged in by time.
 * EXT events (SW_EV_EXT) are passed on as they are.
 */
#include "export_walk.h"

#include "base/base.h"
#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A side stream of the thread walked: its cursor and its next item. */
typedef struct side_head {
    sw_side_cursor *c;
    sw_side_item item;       /* the next item, if has */
    int has;
} side_head;

typedef struct walk {
    sw_slice_fn fn;
    void *ud;
    size_t thread;
    const sw_filter *filter;
    const uint8_t *longer;   /* bit k: the thread's k-th slice lasts at least the minimum */
    size_t nlonger, next;
    int64_t last_ns;         /* time of the last event replayed */
    side_head side[SW_SIDE_STREAM_COUNT];   /* the thread's side streams */
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

/* 1 when x is a SLICE kind's record (records.h SW_RS_SLICE: a system
 * call) whose slice the exporters draw. */
static int is_slice_record(const sw_ext *x)
{
    const sw_record_kind *k = x ? sw_record_kind_of(x->kind) : NULL;
    return k && k->shape == SW_RS_SLICE && !x->malformed;
}

/* The slice of the SLICE record x just handed to fn at t_ns is pending
 * until its end (its duration, slot C). */
static void slice_open(walk *w, const sw_ext *x, int64_t t_ns)
{
    w->slice_end = t_ns + (int64_t)(x->c > INT64_MAX / 2 ? INT64_MAX / 2 : x->c);
}

/* Reads side stream k's next item. */
static int side_advance(walk *w, side_head *h)
{
    int n = sw_side_cursor_next(h->c, &h->item);
    if (n < 0)
        return w->oom = 1;
    h->has = n == 1;
    return 0;
}

/* Hands fn the items of side stream h in the window up to time `until`.
 * An EXT record of a SLICE kind (records.h: a system call) opens a slice
 * on the thread's track, ended (SW_WALK_SLICE_END) at its end or at the
 * next such record, whichever comes first. */
static int stream_until(walk *w, side_head *h, int64_t until)
{
    while (h->has && h->item.t_ns <= until) {
        const sw_side_item *it = &h->item;
        int rc = 0;
        if (w->slice_end != INT64_MIN && w->slice_end <= it->t_ns)
            rc = slice_close(w, it->t_ns);
        int slice = is_slice_record(it->ext);
        if (!rc && slice)
            rc = slice_close(w, it->t_ns);   /* one at a time on a thread */
        if (!rc && sw_filter_in_window(w->filter, it->t_ns)) {
            uint32_t code = it->ext ? it->ext->code : 0;
            sw_event se = {it->t_ns, code, (uint32_t)w->depth, it->event, 0, it->ext, it->sample};
            if (it->t_ns > w->last_ns)
                w->last_ns = it->t_ns;
            rc = w->fn(w->ud, w->thread, &se);
            if (!rc && slice)
                slice_open(w, it->ext, it->t_ns);
        }
        if (rc || side_advance(w, h))
            return rc ? rc : 1;
    }
    return 0;
}

/* Hands fn the thread's side streams' items up to time `until`, merged
 * N-way in time order (at equal times, in the order of the table of
 * streams); a pending SLICE ends first once its end has come. */
static int side_until(walk *w, int64_t until)
{
    for (;;) {
        side_head *first = NULL;
        for (size_t k = 0; k < SW_SIDE_STREAM_COUNT; k++)
            if (w->side[k].has && (!first || w->side[k].item.t_ns < first->item.t_ns))
                first = &w->side[k];
        if (!first || first->item.t_ns > until)
            return 0;
        int64_t t = first->item.t_ns;
        int rc = w->slice_end <= t ? slice_close(w, t) : 0;
        if (!rc)
            rc = stream_until(w, first, t);
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
    /* (SLICE records come from side streams only: the replay refuses a
     * kernel record in the thread's own events, records.h
     * sw_record_side_only.) */
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
        w.slice_end = INT64_MIN;
        for (unsigned k = 0; k < SW_SIDE_STREAM_COUNT && !w.oom; k++) {
            w.side[k].c = sw_side_cursor_new(t, k, th);
            if (!w.side[k].c)
                w.oom = 1;
            else
                side_advance(&w, &w.side[k]);
        }
        int rc = w.oom ? 1 : sw_filtered_replay(fl, th, SW_REPLAY_EXT, walk_event, &w);
        if (rc == SW_OK || (rc < 0 && rc != SW_EIO && rc != SW_ECANCELED && rc != SW_ENOMEM))
            rc = side_until(&w, INT64_MAX) || slice_close(&w, INT64_MAX) ? 1 : SW_OK;
        if (rc == SW_OK) {
            sw_event end = {w.last_ns == INT64_MIN ? 0 : w.last_ns, 0, 0, SW_WALK_THREAD_END, 1, NULL, NULL};
            if (fn(ud, th, &end))
                rc = 1;
        }
        for (unsigned k = 0; k < SW_SIDE_STREAM_COUNT; k++)
            sw_side_cursor_free(w.side[k].c);
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
        snprintf(buf, len, "%s (%s)", open->track, sw_ext_string(x, open->fields[0].slot));   /* "off CPU (sleeping)" */
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
