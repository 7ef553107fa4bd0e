/*
 * export_walk.c - the slice walk the exporters share: replays every thread
 * and drops slices shorter than the minimum duration together with their
 * matching ends (children of a dropped slice are kept if long enough).
 * EXT events (SW_EV_EXT) are passed on as they are.
 */
#include "export_walk.h"

#include "analysis.h"
#include "base/base.h"
#include "format.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct walk {
    sw_slice_fn fn;
    void *ud;
    size_t thread;
    const int64_t *dur;
    size_t ndur, next;
    int64_t min;
    int64_t last_ns;         /* time of the last event replayed */
    sw_sample_cursor *sc;    /* the thread's samples */
    sw_trace_sample sample; /* the next sample, if has_next */
    int has_next;
    uint8_t *kept;           /* per open slice: was its start emitted */
    size_t depth, cap;
    int oom;
} walk;

/* Hands fn the thread's samples up to time `until`. */
static int samples_until(walk *w, int64_t until)
{
    while (w->has_next && w->sample.t_ns <= until) {
        sw_event se = {w->sample.t_ns, 0, 0, SW_WALK_SAMPLE, 0, NULL, &w->sample};
        if (w->sample.t_ns > w->last_ns)
            w->last_ns = w->sample.t_ns;
        int rc = w->fn(w->ud, w->thread, &se);
        if (rc)
            return rc;
        int n = sw_sample_cursor_next(w->sc, &w->sample);
        if (n < 0)
            return w->oom = 1;
        w->has_next = n == 1;
    }
    return 0;
}

static int walk_event(void *ud, const sw_event *ev)
{
    walk *w = ud;
    int src = samples_until(w, ev->t_ns);
    if (src)
        return src;
    if (ev->t_ns > w->last_ns)
        w->last_ns = ev->t_ns;
    int enter = ev->kind == SW_OP_CALL || ev->kind == SW_OP_RESUME || ev->kind == SW_OP_C_CALL;
    int exit_ = ev->kind == SW_OP_RETURN || ev->kind == SW_OP_YIELD || ev->kind == SW_OP_UNWIND ||
                ev->kind == SW_OP_C_RETURN;
    if (enter) {
        int keep = 1;
        if (w->dur) {
            keep = w->next < w->ndur && w->dur[w->next] >= w->min;
            w->next++;
        }
        uint8_t *k = sw_array_grow(w->kept, &w->cap, w->depth + 1, 1, 256);
        if (!k)
            return w->oom = 1;
        w->kept = k;
        w->kept[w->depth++] = (uint8_t)keep;
        return keep ? w->fn(w->ud, w->thread, ev) : 0;
    }
    if (exit_) {
        if (!w->depth)
            return 0;
        return w->kept[--w->depth] ? w->fn(w->ud, w->thread, ev) : 0;
    }
    return w->fn(w->ud, w->thread, ev);
}

int sw_export_walk(sw_trace *t, int64_t min_duration_ns, sw_slice_fn fn, void *ud)
{
    for (size_t th = 0; th < sw_trace_thread_count(t); th++) {
        walk w = {0};
        w.fn = fn;
        w.ud = ud;
        w.thread = th;
        w.min = min_duration_ns;
        int64_t *dur = NULL;
        if (min_duration_ns > 0) {
            if (sw_slice_durations(t, th, &dur, &w.ndur))
                return SW_ENOMEM;
            w.dur = dur;
        }
        w.last_ns = INT64_MIN;
        w.sc = sw_sample_cursor_new(t, th);
        int n = w.sc ? sw_sample_cursor_next(w.sc, &w.sample) : SW_ENOMEM;
        if (n < 0)
            w.oom = 1;
        w.has_next = n == 1;
        int rc = w.oom ? 1 : sw_trace_replay_ext(t, th, SW_REPLAY_EXT, walk_event, &w);
        if (rc == SW_OK || rc < 0)
            rc = samples_until(&w, INT64_MAX) ? 1 : rc;
        if (rc == SW_OK || rc < 0) {
            sw_event end = {w.last_ns == INT64_MIN ? 0 : w.last_ns, 0, 0, SW_WALK_THREAD_END, 1, NULL, NULL};
            if (fn(ud, th, &end))
                rc = 1;
        }
        sw_sample_cursor_free(w.sc);
        free(dur);
        free(w.kept);
        if (w.oom)
            return SW_ENOMEM;
        if (rc > 0)
            return SW_EIO;  /* the consumer failed (e.g. a write error) */
    }
    return SW_OK;
}

const char *sw_export_ext_name(const sw_ext *x, char *buf, size_t len, const char **category)
{
    const char *cat = "event", *what = "event";
    int with_s1 = 1;
    switch (x->kind) {
    case SW_EXT_LINE:
        *category = "line";
        snprintf(buf, len, "line %llu", (unsigned long long)x->line);
        return buf;
    case SW_EXT_INSTRUCTION: cat = "instruction"; what = "instruction"; break;
    case SW_EXT_RAISE: cat = "exception"; what = "raise"; break;
    case SW_EXT_HANDLED: cat = "exception"; what = "handled"; break;
    case SW_EXT_GC_START: cat = "gc"; what = "GC start"; with_s1 = 0; break;
    case SW_EXT_GC_DONE: cat = "gc"; what = "GC done"; with_s1 = 0; break;
    case SW_EXT_NEW_START: cat = "object"; what = "new start"; break;
    case SW_EXT_NEW_DONE: cat = "object"; what = "new done"; break;
    case SW_EXT_DEL_START: cat = "object"; what = "delete start"; break;
    case SW_EXT_DEL_DONE: cat = "object"; what = "delete done"; break;
    case SW_EXT_THREAD_START: cat = "thread"; what = "thread start"; break;
    case SW_EXT_THREAD_EXIT: cat = "thread"; what = "thread exit"; break;
    case SW_EXT_REGION_BEGIN: cat = "region"; what = "region"; break;
    case SW_EXT_REGION_END: cat = "region"; what = "region end"; with_s1 = 0; break;
    default: with_s1 = 0; break;
    }
    *category = cat;
    if (with_s1 && x->s1 && x->s1[0])
        snprintf(buf, len, "%s %s", what, x->s1);
    else
        snprintf(buf, len, "%s", what);
    return buf;
}
