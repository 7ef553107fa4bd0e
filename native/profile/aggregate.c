/*
 * aggregate.c - the live profile: samples aggregated into per-thread call trees (aggregate.h).
 */
#define _GNU_SOURCE
#include "aggregate.h"
#include "lineids.h"

#include "base/base.h"

#include <fnmatch.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct sw_profile {
    pthread_mutex_t lock;
    sw_functab *ft;
    sw_profile_thread *threads;
    size_t nthreads, cap;
    size_t last;             /* index of the thread seen last (a lookup hint) */
    uint32_t *funcs;         /* scratch: one stack, root first */
    size_t funcs_cap;
    uint32_t truncated_id;   /* id of the "<truncated>" pseudo-function, or SW_NO_ID */
    uint64_t samples, dropped, cut, off_cpu, left_out;
    int mode;
    int skip_idle, gil_only;   /* sw_profile_set_keep */
    sw_profile_filters f;
    /* History (sw_profile_set_history): NULL when off. */
    sw_history *hist;
    int64_t cycle_ns, wall_offset_ns, origin_ns;   /* origin: wall clock of cycle 0's start */
    uint64_t hist_dropped;
    /* Omitted files (sw_profile_set_omit): globs, and per function id
     * 0 = not decided yet, 1 = kept, 2 = omitted. */
    char **omit;
    size_t nomit;
    uint8_t *omit_state;
    size_t omit_cap;
    sw_lineids *lineids;     /* samples with lines: (function, line) -> id; made on first use */
};

sw_profile *sw_profile_new(void)
{
    sw_profile *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->ft = sw_functab_new();
    if (!p->ft || pthread_mutex_init(&p->lock, NULL) != 0) {
        sw_functab_free(p->ft);
        free(p);
        return NULL;
    }
    p->truncated_id = SW_NO_ID;
    return p;
}

void sw_profile_free(sw_profile *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nthreads; i++) {
        sw_calltree_free(p->threads[i].tree);
        sw_calltree_cursor_free(&p->threads[i].cursor);
    }
    free(p->threads);
    free(p->funcs);
    sw_history_free(p->hist);
    for (size_t i = 0; i < p->nomit; i++)
        free(p->omit[i]);
    free(p->omit);
    free(p->omit_state);
    sw_lineids_free(p->lineids);
    sw_functab_free(p->ft);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void sw_profile_lock(sw_profile *p)
{
    pthread_mutex_lock(&p->lock);
}

void sw_profile_unlock(sw_profile *p)
{
    pthread_mutex_unlock(&p->lock);
}

static sw_profile_thread *find_thread(sw_profile *p, uint64_t thread_id)
{
    if (p->last < p->nthreads && p->threads[p->last].thread_id == thread_id)
        return &p->threads[p->last];
    for (size_t i = 0; i < p->nthreads; i++) {
        if (p->threads[i].thread_id == thread_id) {
            p->last = i;
            return &p->threads[i];
        }
    }
    return NULL;
}

static sw_profile_thread *thread_for(sw_profile *p, const sw_sample *s)
{
    sw_profile_thread *th = find_thread(p, s->thread_id);
    if (th)
        return th;
    if (p->nthreads >= SW_PROFILE_MAX_THREADS)
        return NULL;
    if (p->nthreads == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 8;
        sw_profile_thread *nt = realloc(p->threads, nc * sizeof *nt);
        if (!nt)
            return NULL;
        p->threads = nt;
        p->cap = nc;
    }
    sw_calltree *t = sw_calltree_new(p->ft);
    if (!t)
        return NULL;
    p->last = p->nthreads++;
    p->threads[p->last] = (sw_profile_thread){.thread_id = s->thread_id, .native_tid = s->native_tid,
                                              .first_ns = s->t_ns, .last_ns = s->t_ns, .tree = t};
    return &p->threads[p->last];
}

int sw_profile_set_filters(sw_profile *p, uint64_t anchor, const uint64_t *follow, size_t nfollow,
                           const uint64_t *ignore, size_t nignore, const uint64_t *elide, size_t nelide)
{
    if (nfollow > SW_PROFILE_MAX_FILTER || nignore > SW_PROFILE_MAX_FILTER || nelide > SW_PROFILE_MAX_FILTER)
        return SW_EARG;
    pthread_mutex_lock(&p->lock);
    p->f.anchor = anchor;
    for (size_t i = 0; i < nfollow; i++)
        p->f.follow[i] = follow[i];
    p->f.nfollow = nfollow;
    for (size_t i = 0; i < nignore; i++)
        p->f.ignore[i] = ignore[i];
    p->f.nignore = nignore;
    for (size_t i = 0; i < nelide; i++)
        p->f.elide[i] = elide[i];
    p->f.nelide = nelide;
    pthread_mutex_unlock(&p->lock);
    return SW_OK;
}

int sw_profile_set_mode(sw_profile *p, int mode)
{
    if (mode != SW_PROFILE_WALL && mode != SW_PROFILE_CPU)
        return SW_EARG;
    pthread_mutex_lock(&p->lock);
    p->mode = mode;
    pthread_mutex_unlock(&p->lock);
    return SW_OK;
}

static int in_list(const uint64_t *list, size_t n, uint64_t addr)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == addr)
            return 1;
    return 0;
}

/* 1 if one of the `depth` leaf-most frames (those left after the root
 * cut) runs an ignored code object. */
static int ignored(const sw_profile *p, const sw_sample *s, uint32_t depth)
{
    for (uint32_t i = 0; p->f.nignore && i < depth; i++)
        if (in_list(p->f.ignore, p->f.nignore, s->frames[i]->addr))
            return 1;
    return 0;
}

/* How many frames (from the leaf) remain after the root cut. */
static uint32_t depth_after_cut(const sw_profile *p, const sw_sample *s)
{
    if (!p->f.anchor)
        return s->depth;
    uint32_t i = s->depth;
    while (i > 0 && s->frames[i - 1]->addr != p->f.anchor)
        i--;
    if (i == 0)
        return s->depth;        /* no anchor: keep it all */
    i--;                        /* frames[i] is the anchor: drop it and its callers */
    while (i > 0 && in_list(p->f.follow, p->f.nfollow, s->frames[i - 1]->addr))
        i--;
    /* Native mode: the C frames through which the wrapper calls the program. */
    while (i > 0 && sw_sample_code_is_native(s->frames[i - 1]))
        i--;
    return i;
}

/* 1 if function `id`'s file matches an omit glob (decided once per id). */
static int omitted(sw_profile *p, uint32_t id)
{
    if (id >= p->omit_cap) {
        size_t old = p->omit_cap;
        uint8_t *ns = sw_array_grow(p->omit_state, &p->omit_cap, (size_t)id + 1, 1, 256);
        if (!ns)
            return 0;   /* out of memory: keep the frame rather than lose the sample */
        memset(ns + old, 0, p->omit_cap - old);
        p->omit_state = ns;
    }
    if (!p->omit_state[id]) {
        const sw_func *f = sw_functab_get(p->ft, id);
        p->omit_state[id] = 1;
        for (size_t i = 0; f && i < p->nomit; i++)
            if (fnmatch(p->omit[i], f->filename, 0) == 0)
                p->omit_state[id] = 2;
    }
    return p->omit_state[id] == 2;
}

/* Fills p->funcs with the `depth` leaf-most frames of s, root first.
 * Returns the length or -1. */
static long stack_funcs(sw_profile *p, sw_sample *s, uint32_t depth)
{
    size_t need = (size_t)s->depth + 1;
    if (need > p->funcs_cap) {
        uint32_t *nf = realloc(p->funcs, need * sizeof *nf);
        if (!nf)
            return -1;
        p->funcs = nf;
        p->funcs_cap = need;
    }
    size_t n = 0;
    if ((s->flags & SW_SAMPLE_TRUNCATED) && depth == s->depth) {
        if (p->truncated_id == SW_NO_ID &&
            sw_functab_intern(p->ft, "<truncated>", 11, "", 0, 0, &p->truncated_id) != SW_OK)
            return -1;
        p->funcs[n++] = p->truncated_id;
    }
    for (uint32_t i = depth; i > 0; i--) {
        sw_sample_code *c = s->frames[i - 1];
        if (p->f.nelide && in_list(p->f.elide, p->f.nelide, c->addr))
            continue;
        if (c->sink_id == SW_NO_ID &&
            sw_functab_intern(p->ft, c->name, c->name_len, c->filename, c->filename_len, c->firstlineno,
                              &c->sink_id) != SW_OK) {
            c->sink_id = SW_NO_ID;
            return -1;
        }
        if (p->nomit && omitted(p, c->sink_id))
            continue;
        uint32_t id = c->sink_id;
        /* --lines: the node is (function, line being run). */
        if (s->lines && s->lines[i - 1] > 0 && s->lines[i - 1] != c->firstlineno &&
            ((!p->lineids && !(p->lineids = sw_lineids_new())) ||
             sw_lineids_get(p->lineids, p->ft, c->sink_id, s->lines[i - 1], &id) != SW_OK))
            return -1;
        p->funcs[n++] = id;
    }
    return (long)n;
}

/* Counts what the thread was doing in sample s. */
static void count_state(sw_profile_thread *th, const sw_sample *s)
{
    th->states[s->state < SW_STATE_COUNT ? s->state : SW_STATE_UNKNOWN]++;
    th->gil_held += (s->flags & SW_SAMPLE_GIL_HELD) != 0;
    if (s->cpu_ns != SW_NO_CPU)
        th->cpu_ns += s->cpu_ns;
    if (s->native_tid)
        th->native_tid = s->native_tid;
    th->last_ns = s->t_ns;
}

/* Adds the stack in p->funcs to the thread's tree of the cycle sample s
 * falls in, opening that cycle's entry if it is not the newest. */
static void history_add(sw_profile *p, const sw_sample *s, uint64_t thread_id, size_t n, uint64_t weight)
{
    if (!p->hist)
        return;
    int64_t wall = s->t_ns + p->wall_offset_ns;
    sw_history_entry *e = sw_history_newest(p->hist);
    if (!e || wall >= e->end_ns) {
        int64_t k = wall > p->origin_ns ? (wall - p->origin_ns) / p->cycle_ns : 0;
        int64_t start = p->origin_ns + k * p->cycle_ns;
        if (e && start < e->end_ns)
            start = e->end_ns;   /* never overlap the previous cycle */
        if (sw_history_push(p->hist, start, start + p->cycle_ns, &e) != SW_OK)
            e = NULL;
    }
    if (!e || sw_history_entry_add(p->hist, e, thread_id, p->funcs, n, 1, weight) != SW_OK)
        p->hist_dropped++;
}

void sw_profile_sink(void *ud, sw_sample *s)
{
    sw_profile *p = ud;
    pthread_mutex_lock(&p->lock);
    int cpu_mode = p->mode == SW_PROFILE_CPU;
    uint64_t weight = cpu_mode && s->cpu_ns != SW_NO_CPU ? s->cpu_ns : s->weight_ns;
    if (s->flags & SW_SAMPLE_FAILED) {
        sw_profile_thread *th = find_thread(p, s->thread_id);
        if (th)
            th->pending_ns += weight;
        pthread_mutex_unlock(&p->lock);
        return;
    }
    uint32_t depth = s->flags & SW_SAMPLE_NOT_WALKED ? 0 : depth_after_cut(p, s);
    if (!(s->flags & SW_SAMPLE_NOT_WALKED) && (depth == 0 || ignored(p, s, depth))) {
        p->cut++;
        pthread_mutex_unlock(&p->lock);
        return;
    }
    if ((p->skip_idle && s->state == SW_STATE_IDLE) || (p->gil_only && !(s->flags & SW_SAMPLE_GIL_HELD)) ||
        (s->flags & SW_SAMPLE_NOT_WALKED)) {
        /* Left out by choice (sw_profile_set_keep): the thread is known
         * with its state; the wall time it stands for goes nowhere. */
        sw_profile_thread *th = thread_for(p, s);
        if (th)
            count_state(th, s);
        p->left_out++;
        pthread_mutex_unlock(&p->lock);
        return;
    }
    if (cpu_mode && (s->state == SW_STATE_IDLE || s->state == SW_STATE_GIL_WAIT)) {
        /* Off the CPU: not stored, but the thread is known with its state. */
        sw_profile_thread *th = thread_for(p, s);
        if (!th) {
            p->dropped++;
        } else {
            count_state(th, s);
            th->off_cpu++;
            th->pending_ns += weight;
            p->off_cpu++;
        }
        pthread_mutex_unlock(&p->lock);
        return;
    }
    long n = stack_funcs(p, s, depth);
    sw_profile_thread *th = n > 0 ? thread_for(p, s) : NULL;
    if (n == 0) {
        p->cut++;            /* every frame was elided */
    } else if (!th || sw_calltree_add_cursor(th->tree, &th->cursor, p->funcs, (size_t)n, 1, weight + th->pending_ns) !=
                          SW_OK) {
        p->dropped++;
    } else {
        history_add(p, s, th->thread_id, (size_t)n, weight + th->pending_ns);
        th->pending_ns = 0;
        th->samples++;
        count_state(th, s);
        p->samples++;
    }
    pthread_mutex_unlock(&p->lock);
}

sw_functab *sw_profile_functab(sw_profile *p)
{
    return p->ft;
}

size_t sw_profile_thread_count(const sw_profile *p)
{
    return p->nthreads;
}

const sw_profile_thread *sw_profile_thread_get(const sw_profile *p, size_t i)
{
    return i < p->nthreads ? &p->threads[i] : NULL;
}

uint64_t sw_profile_samples(const sw_profile *p)
{
    return p->samples;
}

uint64_t sw_profile_dropped(const sw_profile *p)
{
    return p->dropped;
}

uint64_t sw_profile_cut(const sw_profile *p)
{
    return p->cut;
}

uint64_t sw_profile_off_cpu(const sw_profile *p)
{
    return p->off_cpu;
}

void sw_profile_set_keep(sw_profile *p, int skip_idle, int gil_only)
{
    pthread_mutex_lock(&p->lock);
    p->skip_idle = skip_idle != 0;
    p->gil_only = gil_only != 0;
    pthread_mutex_unlock(&p->lock);
}

uint64_t sw_profile_left_out(const sw_profile *p)
{
    return p->left_out;
}

int sw_profile_mode(const sw_profile *p)
{
    return p->mode;
}

sw_calltree *sw_profile_merged(sw_profile *p)
{
    sw_calltree *t = sw_calltree_new(p->ft);
    for (size_t i = 0; t && i < p->nthreads; i++) {
        if (sw_calltree_merge(t, p->threads[i].tree) != SW_OK) {
            sw_calltree_free(t);
            t = NULL;
        }
    }
    return t;
}

int sw_profile_set_history(sw_profile *p, int64_t cycle_ns, size_t maxlen, int64_t wall_offset_ns,
                           int64_t origin_ns)
{
    if (cycle_ns < 0)
        return SW_EARG;
    sw_history *h = NULL;
    if (cycle_ns > 0 && !(h = sw_history_new(p->ft, maxlen)))
        return SW_ENOMEM;
    pthread_mutex_lock(&p->lock);
    sw_history_free(p->hist);
    p->hist = h;
    p->cycle_ns = cycle_ns;
    p->wall_offset_ns = wall_offset_ns;
    p->origin_ns = origin_ns + wall_offset_ns;
    pthread_mutex_unlock(&p->lock);
    return SW_OK;
}

sw_history *sw_profile_history(sw_profile *p)
{
    return p->hist;
}

uint64_t sw_profile_history_dropped(const sw_profile *p)
{
    return p->hist_dropped;
}

void sw_profile_end_history(sw_profile *p, int64_t now_ns)
{
    pthread_mutex_lock(&p->lock);
    sw_history_entry *e = p->hist ? sw_history_newest(p->hist) : NULL;
    int64_t wall = now_ns + p->wall_offset_ns;
    if (e && wall < e->end_ns)
        e->end_ns = wall > e->start_ns ? wall : e->start_ns;
    pthread_mutex_unlock(&p->lock);
}

int sw_profile_set_omit(sw_profile *p, const char *const *globs, size_t n)
{
    if (n > SW_PROFILE_MAX_OMIT)
        return SW_EARG;
    char **copy = calloc(n ? n : 1, sizeof *copy);
    if (!copy)
        return SW_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!globs[i] || !(copy[i] = strdup(globs[i]))) {
            for (size_t k = 0; k < i; k++)
                free(copy[k]);
            free(copy);
            return globs[i] ? SW_ENOMEM : SW_EARG;
        }
    }
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < p->nomit; i++)
        free(p->omit[i]);
    free(p->omit);
    p->omit = copy;
    p->nomit = n;
    if (p->omit_state)
        memset(p->omit_state, 0, p->omit_cap);
    pthread_mutex_unlock(&p->lock);
    return SW_OK;
}
