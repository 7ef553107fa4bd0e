/*
 * calltree.c - the function table and the call tree (see calltree.h).
 *
 * Both index their entries with base/hashtab.h: functions by the hash of
 * (name, file, line), children by (parent, func) packed in one key. A tree
 * finds the child (parent, func) through one table for the whole tree
 * rather than per-node child lists, so a node with thousands of children
 * costs no more than one with two.
 */
#include "calltree.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

/* ---- function table ---- */

struct sw_functab {
    sw_func *funcs;
    uint32_t (*lens)[2];   /* the byte lengths of each name and filename */
    uint32_t n, cap;
    sw_hashtab index;      /* hash of (name, filename, line) -> id */
};

sw_functab *sw_functab_new(void)
{
    sw_functab *ft = calloc(1, sizeof *ft);
    if (ft && sw_hashtab_reserve(&ft->index, 128) != SW_OK) {
        free(ft);
        return NULL;
    }
    return ft;
}

void sw_functab_free(sw_functab *ft)
{
    if (!ft)
        return;
    for (uint32_t i = 0; i < ft->n; i++) {
        free((char *)ft->funcs[i].name);
        free((char *)ft->funcs[i].filename);
    }
    free(ft->funcs);
    free(ft->lens);
    sw_hashtab_free(&ft->index);
    free(ft);
}

static uint64_t func_hash(const char *name, size_t nl, const char *file, size_t fl, int32_t line)
{
    return sw_hash_u64(sw_hash_bytes(file, fl, sw_hash_bytes(name, nl, 0)) ^ (uint32_t)line);
}

/* 1 with *id if the table holds (name, file, line) of hash h, else 0
 * with *pos where it would be added. */
static int func_find(sw_functab *ft, const char *name, size_t nl, const char *file, size_t fl, int32_t line,
                     uint64_t h, uint32_t *pos, uint32_t *id)
{
    for (uint32_t i = sw_hashtab_first(&ft->index, h, pos); i != SW_HT_NONE; i = sw_hashtab_next(&ft->index, h, pos)) {
        const sw_func *f = &ft->funcs[i];
        if (f->line == line && ft->lens[i][0] == nl && ft->lens[i][1] == fl && memcmp(f->name, name, nl) == 0 &&
            memcmp(f->filename, file, fl) == 0) {
            *id = i;
            return 1;
        }
    }
    return 0;
}

int sw_functab_intern(sw_functab *ft, const char *name, size_t nl, const char *file, size_t fl, int32_t line,
                      uint32_t *id)
{
    uint64_t h = func_hash(name, nl, file, fl, line);
    uint32_t pos;
    if (func_find(ft, name, nl, file, fl, line, h, &pos, id))
        return SW_OK;
    if (ft->n >= 0x7fffffffu || nl > UINT32_MAX || fl > UINT32_MAX)
        return SW_ENOMEM;
    if (ft->n == ft->cap) {
        uint32_t nc = ft->cap ? ft->cap * 2 : 64;
        sw_func *nf = realloc(ft->funcs, nc * sizeof *nf);
        if (nf)
            ft->funcs = nf;
        uint32_t(*ln)[2] = nf ? realloc(ft->lens, nc * sizeof *ln) : NULL;
        if (!ln)
            return SW_ENOMEM;
        ft->lens = ln;
        ft->cap = nc;
    }
    char *n = sw_dup_n(name, nl), *f = sw_dup_n(file, fl);
    if (!n || !f || sw_hashtab_add_after(&ft->index, h, ft->n, pos) != SW_OK) {
        free(n);
        free(f);
        return SW_ENOMEM;
    }
    uint32_t i = ft->n++;
    ft->funcs[i] = (sw_func){n, f, line};
    ft->lens[i][0] = (uint32_t)nl;
    ft->lens[i][1] = (uint32_t)fl;
    *id = i;
    return SW_OK;
}

int sw_functab_set_source(sw_functab *ft, uint32_t id, const char *file, size_t fl, int32_t line)
{
    if (id >= ft->n || fl > UINT32_MAX)
        return SW_EARG;
    sw_func *f = &ft->funcs[id];
    uint64_t h = func_hash(f->name, ft->lens[id][0], file, fl, line);
    uint32_t same, pos;
    if (func_find(ft, f->name, ft->lens[id][0], file, fl, line, h, &pos, &same))
        return same == id ? SW_OK : SW_EARG;
    char *copy = sw_dup_n(file, fl);
    /* (the old key's index entry stays: its strings no longer match) */
    if (!copy || sw_hashtab_add_after(&ft->index, h, id, pos) != SW_OK) {
        free(copy);
        return SW_ENOMEM;
    }
    free((char *)f->filename);
    f->filename = copy;
    f->line = line;
    ft->lens[id][1] = (uint32_t)fl;
    return SW_OK;
}

uint32_t sw_functab_count(const sw_functab *ft)
{
    return ft->n;
}

const sw_func *sw_functab_get(const sw_functab *ft, uint32_t id)
{
    return id < ft->n ? &ft->funcs[id] : NULL;
}

/* ---- call tree ---- */

struct sw_calltree {
    sw_functab *ft;
    sw_calltree_node *nodes;
    uint32_t n, cap;
    sw_hashtab children;   /* hash of (parent << 32 | func) -> node index */
    int unsummed;          /* count and weight behind self and self_weight (settle) */
};

/* Samples added through a cursor count at their leaf only (self,
 * self_weight): the counts through each node are summed up when the tree
 * is next read, not on every sample (a 30-deep stack: 30 nodes' sums
 * changed per sample, the sampler's aggregation at 100,000 samples/s).
 * Readers of a tree hold the lock its writer holds (the profile's). */
static void settle(const sw_calltree *ct)
{
    if (ct->unsummed)
        sw_calltree_sum_up((sw_calltree *)ct);   /* (made by sw_calltree_new: never a const object) */
}

sw_calltree *sw_calltree_new(sw_functab *ft)
{
    sw_calltree *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->ft = ft;
    t->cap = 64;
    t->nodes = malloc(t->cap * sizeof *t->nodes);
    if (!t->nodes || sw_hashtab_reserve(&t->children, 32) != SW_OK) {
        sw_calltree_free(t);
        return NULL;
    }
    t->nodes[0] = (sw_calltree_node){SW_NODE_NONE, SW_NODE_NONE, SW_NODE_NONE, SW_NODE_NONE, SW_NODE_NONE, 0, 0, 0,
                                     0, 0};
    t->n = 1;
    return t;
}

void sw_calltree_free(sw_calltree *t)
{
    if (!t)
        return;
    free(t->nodes);
    sw_hashtab_free(&t->children);
    free(t);
}

sw_functab *sw_calltree_functab(const sw_calltree *t)
{
    return t->ft;
}

/* The child of `parent` for `func`, created if missing. Returns the node
 * index, or SW_NODE_NONE if out of memory. */
static uint32_t child_of(sw_calltree *t, uint32_t parent, uint32_t func)
{
    uint64_t h = sw_hash_u64((uint64_t)parent << 32 | func);
    uint32_t pos, i;
    for (i = sw_hashtab_first(&t->children, h, &pos); i != SW_HT_NONE; i = sw_hashtab_next(&t->children, h, &pos))
        if (t->nodes[i].parent == parent && t->nodes[i].func == func)
            return i;
    /* Not there: pos is past the empty slot the lookup ended on. */
    if (t->n >= 0x7ffffffeu)
        return SW_NODE_NONE;
    if (t->n == t->cap) {
        sw_calltree_node *nn = realloc(t->nodes, (size_t)t->cap * 2 * sizeof *nn);
        if (!nn)
            return SW_NODE_NONE;
        t->nodes = nn;
        t->cap *= 2;
    }
    if (sw_hashtab_add_after(&t->children, h, t->n, pos) != SW_OK)
        return SW_NODE_NONE;
    i = t->n++;
    sw_calltree_node *p = &t->nodes[parent];
    t->nodes[i] = (sw_calltree_node){func, parent, SW_NODE_NONE, SW_NODE_NONE, SW_NODE_NONE, p->depth + 1, 0, 0, 0, 0};
    if (p->last_child == SW_NODE_NONE)
        p->first_child = i;
    else
        t->nodes[p->last_child].next_sibling = i;
    p->last_child = i;
    return i;
}

int sw_calltree_add(sw_calltree *t, const uint32_t *funcs, size_t n, uint64_t count, uint64_t weight)
{
    /* Find or create the whole path first, so that a failure leaves the
     * counts untouched (at worst some zero-count nodes exist). */
    uint32_t cur = SW_CALLTREE_ROOT;
    for (size_t i = 0; i < n; i++) {
        cur = child_of(t, cur, funcs[i]);
        if (cur == SW_NODE_NONE)
            return SW_ENOMEM;
    }
    t->nodes[cur].self += count;
    t->nodes[cur].self_weight += weight;
    for (uint32_t k = cur; k != SW_NODE_NONE; k = t->nodes[k].parent) {
        t->nodes[k].count += count;
        t->nodes[k].weight += weight;
    }
    return SW_OK;
}

int sw_calltree_merge(sw_calltree *dst, const sw_calltree *src)
{
    return sw_calltree_merge_under(dst, src, SW_CALLTREE_ROOT);
}

int sw_calltree_merge_under(sw_calltree *dst, const sw_calltree *src, uint32_t under)
{
    if (dst == src || under >= dst->n)
        return SW_EARG;
    settle(src);
    /* map[i] = the dst node for src node i; parents come before children in
     * src's node array (a node is created after its parent). */
    uint32_t *map = malloc((size_t)src->n * sizeof *map);
    if (!map)
        return SW_ENOMEM;
    /* Room for every node of src at once (an empty dst takes them all):
     * the child table does not grow step by step. A failure here is not
     * one: it just grows as it goes. */
    (void)sw_hashtab_reserve(&dst->children, dst->n + src->n);
    int rc = SW_OK;
    map[0] = under;
    for (uint32_t i = 1; i < src->n && rc == SW_OK; i++) {
        const sw_calltree_node *s = &src->nodes[i];
        uint32_t func = s->func;
        if (src->ft != dst->ft) {
            const sw_func *f = sw_functab_get(src->ft, func);
            rc = f ? sw_functab_intern(dst->ft, f->name, strlen(f->name), f->filename, strlen(f->filename), f->line,
                                       &func)
                   : SW_EARG;
            if (rc)
                break;
        }
        map[i] = child_of(dst, map[s->parent], func);
        if (map[i] == SW_NODE_NONE)
            rc = SW_ENOMEM;
    }
    if (rc == SW_OK) {
        for (uint32_t i = 0; i < src->n; i++) {
            dst->nodes[map[i]].count += src->nodes[i].count;
            dst->nodes[map[i]].self += src->nodes[i].self;
            dst->nodes[map[i]].weight += src->nodes[i].weight;
            dst->nodes[map[i]].self_weight += src->nodes[i].self_weight;
        }
        /* under's ancestors count src's samples too. */
        for (uint32_t a = under; a != SW_CALLTREE_ROOT;) {
            a = dst->nodes[a].parent;
            dst->nodes[a].count += src->nodes[0].count;
            dst->nodes[a].weight += src->nodes[0].weight;
        }
    }
    free(map);
    return rc;
}

int sw_calltree_child(sw_calltree *t, uint32_t parent, uint32_t func, uint32_t *id)
{
    if (parent >= t->n)
        return SW_EARG;
    *id = child_of(t, parent, func);
    return *id == SW_NODE_NONE ? SW_ENOMEM : SW_OK;
}

void sw_calltree_add_own(sw_calltree *t, uint32_t id, uint64_t count, uint64_t weight)
{
    if (id < t->n) {
        t->nodes[id].self += count;
        t->nodes[id].self_weight += weight;
    }
}

void sw_calltree_sum_up(sw_calltree *t)
{
    t->unsummed = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        t->nodes[i].count = t->nodes[i].self;
        t->nodes[i].weight = t->nodes[i].self_weight;
    }
    /* A node comes after its parent in the array: from the last node
     * back, every node's sums are complete when they reach its parent. */
    for (uint32_t i = t->n; i-- > 1;) {
        sw_calltree_node *p = &t->nodes[t->nodes[i].parent];
        p->count += t->nodes[i].count;
        p->weight += t->nodes[i].weight;
    }
}

int sw_calltree_filter(sw_calltree *dst, const sw_calltree *src, const uint8_t *keep, uint32_t max_depth)
{
    if (dst == src || dst->ft != src->ft)
        return SW_EARG;
    uint32_t *map = malloc((size_t)src->n * sizeof *map);
    if (!map)
        return SW_ENOMEM;
    int rc = SW_OK;
    map[0] = SW_CALLTREE_ROOT;
    for (uint32_t i = 1; i < src->n && rc == SW_OK; i++) {
        const sw_calltree_node *s = &src->nodes[i];
        uint32_t up = map[s->parent];
        int kept = (!keep || keep[s->func]) && (!max_depth || dst->nodes[up].depth < max_depth);
        if (!kept) {
            map[i] = up;
        } else if ((map[i] = child_of(dst, up, s->func)) == SW_NODE_NONE) {
            rc = SW_ENOMEM;
        }
    }
    if (rc == SW_OK) {
        for (uint32_t i = 0; i < src->n; i++)
            sw_calltree_add_own(dst, map[i], src->nodes[i].self, src->nodes[i].self_weight);
        sw_calltree_sum_up(dst);
    }
    free(map);
    return rc;
}

size_t sw_calltree_node_count(const sw_calltree *t)
{
    return t->n;
}

const sw_calltree_node *sw_calltree_get_node(const sw_calltree *t, uint32_t id)
{
    settle(t);
    return id < t->n ? &t->nodes[id] : NULL;
}

uint64_t sw_calltree_total(const sw_calltree *t)
{
    settle(t);
    return t->nodes[0].count;
}

int sw_calltree_walk(const sw_calltree *t, sw_calltree_visit fn, void *ud)
{
    /* Iterative pre-order: descend to the first child, else move to the
     * next sibling of the nearest ancestor that has one. */
    settle(t);
    uint32_t cur = SW_CALLTREE_ROOT;
    while (cur != SW_NODE_NONE) {
        const sw_calltree_node *n = &t->nodes[cur];
        int rc = fn(ud, t, cur, n);
        if (rc)
            return rc;
        if (n->first_child != SW_NODE_NONE) {
            cur = n->first_child;
            continue;
        }
        while (cur != SW_NODE_NONE && t->nodes[cur].next_sibling == SW_NODE_NONE)
            cur = t->nodes[cur].parent;
        if (cur != SW_NODE_NONE)
            cur = t->nodes[cur].next_sibling;
    }
    return 0;
}

/* ---- adding through a cursor ---- */

void sw_calltree_cursor_free(sw_calltree_cursor *c)
{
    free(c->funcs);
    free(c->nodes);
    memset(c, 0, sizeof *c);
}

int sw_calltree_add_cursor(sw_calltree *t, sw_calltree_cursor *c, const uint32_t *funcs, size_t n, uint64_t count,
                           uint64_t weight)
{
    if (c->tree != t) {
        c->tree = t;
        c->n = 0;
    }
    if (n > c->cap) {
        uint32_t *nf = realloc(c->funcs, n * sizeof *nf);
        if (nf)
            c->funcs = nf;
        uint32_t *nn = nf ? realloc(c->nodes, n * sizeof *nn) : NULL;
        if (!nn)
            return SW_ENOMEM;
        c->nodes = nn;
        c->cap = n;
    }
    size_t k = 0, same_len = n < c->n ? n : c->n;
    while (k < same_len && c->funcs[k] == funcs[k])
        k++;
    uint32_t cur = k ? c->nodes[k - 1] : SW_CALLTREE_ROOT;
    for (size_t i = k; i < n; i++) {
        cur = child_of(t, cur, funcs[i]);
        if (cur == SW_NODE_NONE) {
            c->n = i;   /* the prefix before i is still right */
            return SW_ENOMEM;
        }
        c->funcs[i] = funcs[i];
        c->nodes[i] = cur;
    }
    c->n = n;
    t->nodes[cur].self += count;
    t->nodes[cur].self_weight += weight;
    t->unsummed = 1;   /* (settle) */
    return SW_OK;
}
