/*
 * history.c - call trees over time (see history.h).
 *
 * Entries live in one array, oldest first; evicting the oldest moves the
 * others down (one move of at most maxlen pointers per cycle).
 */
#include "history.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

struct sw_history {
    sw_functab *ft;
    size_t maxlen;
    sw_history_entry *entries;
    size_t n, cap;
    uint64_t evicted, evicted_samples;
};

sw_history *sw_history_new(sw_functab *ft, size_t maxlen)
{
    if (!ft)
        return NULL;
    sw_history *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->ft = ft;
    h->maxlen = maxlen;
    return h;
}

static void entry_clear(sw_history_entry *e)
{
    for (size_t i = 0; i < e->ntrees; i++) {
        sw_calltree_free(e->trees[i].tree);
        sw_calltree_cursor_free(&e->trees[i].cursor);
    }
    free(e->trees);
    memset(e, 0, sizeof *e);
}

void sw_history_free(sw_history *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n; i++)
        entry_clear(&h->entries[i]);
    free(h->entries);
    free(h);
}

sw_functab *sw_history_functab(const sw_history *h)
{
    return h->ft;
}

int sw_history_push(sw_history *h, int64_t start_ns, int64_t end_ns, sw_history_entry **out)
{
    *out = NULL;
    if (end_ns < start_ns || (h->n && start_ns < h->entries[h->n - 1].start_ns))
        return SW_EARG;
    if (h->maxlen && h->n == h->maxlen) {
        h->evicted++;
        h->evicted_samples += h->entries[0].samples;
        entry_clear(&h->entries[0]);
        memmove(h->entries, h->entries + 1, (h->n - 1) * sizeof *h->entries);
        h->n--;
    } else {
        sw_history_entry *ne = sw_array_grow(h->entries, &h->cap, h->n + 1, sizeof *ne, 16);
        if (!ne)
            return SW_ENOMEM;
        h->entries = ne;
    }
    sw_history_entry *e = &h->entries[h->n++];
    memset(e, 0, sizeof *e);
    e->start_ns = start_ns;
    e->end_ns = end_ns;
    *out = e;
    return SW_OK;
}

static sw_history_tree *find_tree(sw_history_entry *e, uint64_t thread_id)
{
    /* The last tree first: samples of one thread tend to come in runs. */
    for (size_t i = e->ntrees; i > 0; i--)
        if (e->trees[i - 1].thread_id == thread_id)
            return &e->trees[i - 1];
    return NULL;
}

int sw_history_entry_tree(sw_history *h, sw_history_entry *e, uint64_t thread_id, sw_calltree **out)
{
    sw_history_tree *ht = find_tree(e, thread_id);
    if (ht) {
        *out = ht->tree;
        return SW_OK;
    }
    *out = NULL;
    sw_history_tree *nt = sw_array_grow(e->trees, &e->cap, e->ntrees + 1, sizeof *nt, 4);
    if (!nt)
        return SW_ENOMEM;
    e->trees = nt;
    sw_calltree *t = sw_calltree_new(h->ft);
    if (!t)
        return SW_ENOMEM;
    e->trees[e->ntrees++] = (sw_history_tree){thread_id, t, {0}};
    *out = t;
    return SW_OK;
}

int sw_history_entry_add(sw_history *h, sw_history_entry *e, uint64_t thread_id, const uint32_t *funcs, size_t n,
                         uint64_t count, uint64_t weight)
{
    sw_calltree *t;
    int rc = sw_history_entry_tree(h, e, thread_id, &t);
    sw_history_tree *ht = rc == SW_OK ? find_tree(e, thread_id) : NULL;
    if (ht)
        rc = sw_calltree_add_cursor(t, &ht->cursor, funcs, n, count, weight);
    if (rc == SW_OK)
        e->samples += count;
    return rc;
}

size_t sw_history_len(const sw_history *h)
{
    return h->n;
}

sw_history_entry *sw_history_get(const sw_history *h, size_t i)
{
    return i < h->n ? &h->entries[i] : NULL;
}

sw_history_entry *sw_history_newest(const sw_history *h)
{
    return h->n ? &h->entries[h->n - 1] : NULL;
}

uint64_t sw_history_evicted(const sw_history *h)
{
    return h->evicted;
}

uint64_t sw_history_evicted_samples(const sw_history *h)
{
    return h->evicted_samples;
}

void sw_history_set_evicted(sw_history *h, uint64_t entries, uint64_t samples)
{
    h->evicted = entries;
    h->evicted_samples = samples;
}

int sw_history_in_window(const sw_history_entry *e, int64_t start_ns, int64_t stop_ns)
{
    return e->start_ns <= stop_ns && (e->end_ns > start_ns || e->start_ns >= start_ns);
}

/* Merges thread_id's trees of the entries in the window into dst. */
static int window_thread(const sw_history *h, int64_t start_ns, int64_t stop_ns, uint64_t thread_id,
                         sw_calltree *dst)
{
    for (size_t i = 0; i < h->n; i++) {
        const sw_history_entry *e = &h->entries[i];
        if (!sw_history_in_window(e, start_ns, stop_ns))
            continue;
        for (size_t k = 0; k < e->ntrees; k++) {
            if (e->trees[k].thread_id != thread_id)
                continue;
            int rc = sw_calltree_merge(dst, e->trees[k].tree);
            if (rc != SW_OK)
                return rc;
        }
    }
    return SW_OK;
}

int sw_history_window(const sw_history *h, int64_t start_ns, int64_t stop_ns, int all_threads, uint64_t thread_id,
                      sw_calltree *dst)
{
    if (!all_threads)
        return window_thread(h, start_ns, stop_ns, thread_id, dst);
    /* Thread by thread, in order of first appearance: so the merged tree's
     * children come in the order the profile's own merge of its threads'
     * whole-run trees gives them (same collapsed output, line for line). */
    uint64_t *seen = NULL;
    size_t nseen = 0, cap = 0;
    int rc = SW_OK;
    for (size_t i = 0; i < h->n && rc == SW_OK; i++) {
        const sw_history_entry *e = &h->entries[i];
        if (!sw_history_in_window(e, start_ns, stop_ns))
            continue;
        for (size_t k = 0; k < e->ntrees && rc == SW_OK; k++) {
            size_t j = 0;
            while (j < nseen && seen[j] != e->trees[k].thread_id)
                j++;
            if (j < nseen)
                continue;
            uint64_t *ns = sw_array_grow(seen, &cap, nseen + 1, sizeof *ns, 8);
            if (!ns) {
                rc = SW_ENOMEM;
                break;
            }
            seen = ns;
            seen[nseen++] = e->trees[k].thread_id;
            rc = window_thread(h, start_ns, stop_ns, e->trees[k].thread_id, dst);
        }
    }
    free(seen);
    return rc;
}
