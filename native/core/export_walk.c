/*
 * export_walk.c - the slice walk the exporters share: replays every thread
 * and drops slices shorter than the minimum duration together with their
 * matching ends (children of a dropped slice are kept if long enough).
 */
#include "export.h"

#include "analysis.h"
#include "bytes.h"
#include "format.h"

#include <stdlib.h>

typedef struct walk {
    sw_slice_fn fn;
    void *ud;
    size_t thread;
    const int64_t *dur;
    size_t ndur, next;
    int64_t min;
    uint8_t *kept;           /* per open slice: was its start emitted */
    size_t depth, cap;
    int oom;
} walk;

static int walk_event(void *ud, const sw_event *ev)
{
    walk *w = ud;
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
        int rc = sw_trace_replay(t, th, walk_event, &w);
        free(dur);
        free(w.kept);
        if (w.oom)
            return SW_ENOMEM;
        if (rc > 0)
            return SW_EIO;  /* the consumer failed (e.g. a write error) */
    }
    return SW_OK;
}
