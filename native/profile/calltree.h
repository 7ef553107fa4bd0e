/*
 * calltree.h - a call tree of sampled stacks (what a statistical profiler
 * aggregates into), and the function table its nodes refer to.
 *
 * A function is identified by (name, file, first line). A node is one
 * function at one call path; its `count` is the number of samples whose
 * stack passes through it (inclusive) and `self` the number in which it is
 * the leaf. Each sample also carries a weight (the wall time it stands
 * for, in ns), summed the same way into `weight` and `self_weight`. The
 * root node (SW_CALLTREE_ROOT) stands for "any stack"; its count is the
 * number of samples added.
 *
 * Ownership: a tree borrows its function table (several trees may share
 * one); the table must outlive every tree using it. Nothing here is
 * thread-safe: callers serialise access (profile.c does).
 * Functions return 0 or a negative SW_E* code.
 */
#ifndef SW_CALLTREE_H
#define SW_CALLTREE_H

#include "base/base.h"

/* ---- function table ---- */

typedef struct sw_functab sw_functab;

typedef struct sw_func {
    const char *name;      /* UTF-8, NUL-terminated, owned by the table */
    const char *filename;
    int32_t line;          /* first line of the function */
} sw_func;

sw_functab *sw_functab_new(void);   /* NULL if out of memory */
void sw_functab_free(sw_functab *ft);

/* The id of (name, filename, line), adding it if new. The strings are
 * copied (name_len/filename_len bytes, need not be NUL-terminated). */
int sw_functab_intern(sw_functab *ft, const char *name, size_t name_len, const char *filename,
                      size_t filename_len, int32_t line, uint32_t *id);
/* Gives function id another file and first line (a native function's
 * source, found after its samples were added: sw_symbols_sources_later).
 * SW_EARG for an unknown id, or (unchanged) if another function is
 * already (its name, file, line). */
int sw_functab_set_source(sw_functab *ft, uint32_t id, const char *file, size_t fl, int32_t line);
uint32_t sw_functab_count(const sw_functab *ft);
/* The function with this id, or NULL if the id is out of range. */
const sw_func *sw_functab_get(const sw_functab *ft, uint32_t id);

/* ---- call tree ---- */

typedef struct sw_calltree sw_calltree;

#define SW_CALLTREE_ROOT 0u
#define SW_NODE_NONE 0xffffffffu

typedef struct sw_calltree_node {
    uint32_t func;          /* function id; SW_NODE_NONE for the root */
    uint32_t parent;        /* SW_NODE_NONE for the root */
    uint32_t first_child;   /* SW_NODE_NONE if none; children in insertion order */
    uint32_t last_child;
    uint32_t next_sibling;
    uint32_t depth;         /* 0 for the root */
    uint64_t count;         /* samples through this node */
    uint64_t self;          /* samples ending at this node */
    uint64_t weight;        /* summed weight of the samples through this node */
    uint64_t self_weight;   /* summed weight of the samples ending here */
} sw_calltree_node;

sw_calltree *sw_calltree_new(sw_functab *ft);   /* NULL if out of memory */
void sw_calltree_free(sw_calltree *t);
sw_functab *sw_calltree_functab(const sw_calltree *t);

/* Adds `count` samples of one stack, of total weight `weight`: funcs[0]
 * is the outermost (root-most) function, funcs[n-1] the leaf. n may be 0
 * (a sample with no Python frames: it counts at the root only). */
int sw_calltree_add(sw_calltree *t, const uint32_t *funcs, size_t n, uint64_t count, uint64_t weight);

/* A cursor remembers the last path added through it (node ids stay valid
 * as a tree grows), so that adding a stack that shares its root-most
 * frames with the previous one looks up only the frames after them:
 * consecutive samples of a thread mostly do. Zero-initialise; one cursor
 * serves one tree (it resets when used with another). */
typedef struct sw_calltree_cursor {
    const sw_calltree *tree;
    uint32_t *funcs, *nodes;   /* funcs[i] is at node nodes[i] */
    size_t n, cap;
} sw_calltree_cursor;
/* As sw_calltree_add, through the cursor; the counts through the nodes
 * (count, weight) are summed up when the tree is next read. */
int sw_calltree_add_cursor(sw_calltree *t, sw_calltree_cursor *c, const uint32_t *funcs, size_t n, uint64_t count,
                           uint64_t weight);
void sw_calltree_cursor_free(sw_calltree_cursor *c);

/* Adds every sample of src to dst. If they use different function tables,
 * src's functions are interned into dst's. dst != src. */
int sw_calltree_merge(sw_calltree *dst, const sw_calltree *src);
/* As sw_calltree_merge, with src's root mapped to dst's node `under`
 * instead of dst's root: src's stacks become callees of under's path
 * (whose nodes, up to the root, count src's samples too). SW_EARG if under
 * is no node of dst. */
int sw_calltree_merge_under(sw_calltree *dst, const sw_calltree *src, uint32_t under);

/* Building a tree node by node (the call trees of exact traces, where a
 * path is walked one call at a time): the child of `parent` for func,
 * created if missing (*id: its node). Returns 0 or SW_ENOMEM. */
int sw_calltree_child(sw_calltree *t, uint32_t parent, uint32_t func, uint32_t *id);
/* Adds to a node's own counts (self, self_weight) only; then
 * sw_calltree_sum_up() sets every node's count and weight to the sums of
 * self and self_weight over its subtree. */
void sw_calltree_add_own(sw_calltree *t, uint32_t id, uint64_t count, uint64_t weight);
void sw_calltree_sum_up(sw_calltree *t);

/* A copy of src into dst (an empty tree on src's function table) with
 * some frames left out: those whose function keep[func] is 0 (keep NULL:
 * none), whose callees become their caller's and their own counts their
 * caller's own; and, with max_depth > 0, those deeper than max_depth kept
 * frames, whose counts go to their ancestor at that depth. */
int sw_calltree_filter(sw_calltree *dst, const sw_calltree *src, const uint8_t *keep, uint32_t max_depth);

size_t sw_calltree_node_count(const sw_calltree *t);
/* The node with this id, or NULL if out of range. Valid until the next
 * change of the tree. */
const sw_calltree_node *sw_calltree_get_node(const sw_calltree *t, uint32_t id);
uint64_t sw_calltree_total(const sw_calltree *t);

/* Visits every node in depth-first pre-order (parents before children,
 * children in insertion order), the root first. A visitor returning
 * nonzero stops the walk; sw_calltree_walk then returns that value. */
typedef int (*sw_calltree_visit)(void *ud, const sw_calltree *t, uint32_t id, const sw_calltree_node *n);
int sw_calltree_walk(const sw_calltree *t, sw_calltree_visit fn, void *ud);

#endif
