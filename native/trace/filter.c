/*
 * filter.c - filtered replays of a trace (see filter.h): a layer between
 * the reader's replay and its consumer that keeps its own stack of the
 * frames open (kept or not) and hands on only what the filter keeps.
 */
#include "filter.h"

#include "base/base.h"
#include "format.h"

#include <stdlib.h>
#include <string.h>

void sw_filter_all(sw_filter *f)
{
    memset(f, 0, sizeof *f);
    f->start_ns = INT64_MIN;
    f->stop_ns = INT64_MAX;
}

static int has_globs(char *const *g) { return g && g[0]; }

int sw_filter_has_thread(const sw_filter *f, size_t thread)
{
    return !f || !f->threads || (thread < f->nthreads && f->threads[thread]);
}

int sw_filter_in_window(const sw_filter *f, int64_t t_ns)
{
    return !f || (t_ns >= f->start_ns && t_ns <= f->stop_ns);
}

struct sw_filtered {
    sw_trace *t;
    sw_filter f;
    int all;                 /* no frame is left out and no window: replays pass through */
    uint8_t *keep;           /* per code id: its frames are kept (include/exclude) */
    uint32_t limit;          /* code ids with an entry in keep */
    uint8_t keep_undefined;  /* for ids without a definition */
};

/* 1 if a function's frames are kept: it matches an include glob (when
 * there are any) and no exclude glob, by qualified name, name or file. */
static int keeps(const sw_filter *f, const sw_code_info *ci)
{
    const char *fields[3] = {ci ? ci->qualname : "?", ci ? ci->name : "?", ci ? ci->filename : ""};
    return sw_globs_keep(f->include, f->exclude, fields, 3);
}

int sw_filtered_new(sw_trace *t, const sw_filter *f, sw_filtered **out)
{
    *out = NULL;
    sw_filtered *fl = calloc(1, sizeof *fl);
    if (!fl)
        return SW_ENOMEM;
    fl->t = t;
    if (f)
        fl->f = *f;
    else
        sw_filter_all(&fl->f);
    const sw_filter *g = &fl->f;
    fl->all = g->start_ns == INT64_MIN && g->stop_ns == INT64_MAX && !g->max_depth && !has_globs(g->include) &&
              !has_globs(g->exclude);
    if (has_globs(g->include) || has_globs(g->exclude)) {
        fl->limit = sw_trace_code_limit(t);
        fl->keep = malloc(fl->limit ? fl->limit : 1);
        if (!fl->keep) {
            free(fl);
            return SW_ENOMEM;
        }
        for (uint32_t id = 0; id < fl->limit; id++)
            fl->keep[id] = (uint8_t)keeps(g, sw_trace_code(t, id));
        fl->keep_undefined = (uint8_t)keeps(g, NULL);
    }
    *out = fl;
    return SW_OK;
}

void sw_filtered_free(sw_filtered *fl)
{
    if (!fl)
        return;
    free(fl->keep);
    free(fl);
}

/* One frame the stream has open. */
typedef struct open_frame {
    uint32_t code;
    uint8_t kind;            /* the enter event's SW_OP_* */
    uint8_t kept;
} open_frame;

typedef struct fstate {
    const sw_filtered *fl;
    sw_event_fn fn;
    void *ud;
    open_frame *stack;
    size_t depth, cap;
    uint32_t kept;           /* kept frames open */
    int open;                /* the window has opened */
    int stopped;             /* it has closed: the replay was asked to stop */
    int oom;
} fstate;

static int is_enter(int kind) { return kind == SW_OP_CALL || kind == SW_OP_RESUME || kind == SW_OP_C_CALL; }
static int is_exit(int kind)
{
    return kind == SW_OP_RETURN || kind == SW_OP_YIELD || kind == SW_OP_UNWIND || kind == SW_OP_C_RETURN;
}

static int emit(fstate *s, int kind, uint32_t code, uint32_t depth, int64_t t_ns, int synthetic, const sw_event *ev)
{
    sw_event e = {t_ns, code, depth, (uint8_t)kind, (uint8_t)synthetic, ev ? ev->ext : NULL, ev ? ev->sample : NULL};
    return s->fn(s->ud, &e);
}

/* Opens the window at t_ns: the kept frames open then, by synthetic calls. */
static int open_window(fstate *s, int64_t t_ns)
{
    s->open = 1;
    uint32_t d = 0;
    for (size_t i = 0; i < s->depth; i++) {
        if (!s->stack[i].kept)
            continue;
        int rc = emit(s, s->stack[i].kind, s->stack[i].code, d++, t_ns, 1, NULL);
        if (rc)
            return rc;
    }
    return 0;
}

/* What the filter's callback returns to stop the replay once the window
 * has closed (no consumer's value: filter.h's callers see 0). */
#define WINDOW_CLOSED 0x57570001

/* Closes the window at t_ns: the kept frames open then, by synthetic
 * returns, innermost first. */
static int close_window(fstate *s, int64_t t_ns)
{
    s->stopped = 1;
    uint32_t d = s->kept;
    for (size_t i = s->depth; i-- > 0;) {
        if (!s->stack[i].kept)
            continue;
        int rc = emit(s, s->stack[i].kind == SW_OP_C_CALL ? SW_OP_C_RETURN : SW_OP_RETURN, s->stack[i].code, --d, t_ns,
                      1, NULL);
        if (rc)
            return rc;
    }
    return WINDOW_CLOSED;
}

static int filter_event(void *ud, const sw_event *ev)
{
    fstate *s = ud;
    const sw_filtered *fl = s->fl;
    int rc;
    if (s->stopped)
        return WINDOW_CLOSED;
    if (ev->t_ns > fl->f.stop_ns) {
        /* Frames open across the whole window are in it. */
        if (!s->open && (rc = open_window(s, fl->f.start_ns)))
            return rc;
        return close_window(s, fl->f.stop_ns);
    }
    if (!s->open && ev->t_ns >= fl->f.start_ns && (rc = open_window(s, fl->f.start_ns)))
        return rc;
    if (is_enter(ev->kind)) {
        open_frame *st = sw_array_grow(s->stack, &s->cap, s->depth + 1, sizeof *st, 256);
        if (!st)
            return s->oom = 1;
        s->stack = st;
        int keep = fl->keep ? (ev->code < fl->limit ? fl->keep[ev->code] : fl->keep_undefined) : 1;
        if (fl->f.max_depth && s->kept >= fl->f.max_depth)
            keep = 0;
        s->stack[s->depth++] = (open_frame){ev->code, ev->kind, (uint8_t)keep};
        if (!keep)
            return 0;
        s->kept++;
        return s->open ? emit(s, ev->kind, ev->code, s->kept - 1, ev->t_ns, ev->synthetic, ev) : 0;
    }
    if (is_exit(ev->kind)) {
        if (!s->depth)
            return 0;   /* the replay balances its stream: cannot happen */
        if (!s->stack[--s->depth].kept)
            return 0;
        s->kept--;
        return s->open ? emit(s, ev->kind, ev->code, s->kept, ev->t_ns, ev->synthetic, ev) : 0;
    }
    return s->open ? emit(s, ev->kind, ev->code, s->kept, ev->t_ns, ev->synthetic, ev) : 0;
}

int sw_filtered_replay(sw_filtered *fl, size_t i, unsigned flags, sw_event_fn fn, void *ud)
{
    if (!sw_filter_has_thread(&fl->f, i) || fl->f.start_ns > fl->f.stop_ns)
        return SW_OK;
    if (fl->all)
        return sw_trace_replay_ext(fl->t, i, flags, fn, ud);
    fstate s;
    memset(&s, 0, sizeof s);
    s.fl = fl;
    s.fn = fn;
    s.ud = ud;
    int rc = sw_trace_replay_from(fl->t, i, flags, fl->f.start_ns, filter_event, &s);
    free(s.stack);
    if (s.oom)
        return SW_ENOMEM;
    if (rc == WINDOW_CLOSED)
        rc = SW_OK;
    return rc;
}
