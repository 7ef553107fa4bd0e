/*
 * trace_trees.c - call trees of an exact trace, from its replay (see
 * trace_trees.h): a stack of open calls, each with its node, start and the
 * time of its children, so that each call adds its own time to its node
 * when it ends.
 */
#include "trace_trees.h"

#include "base/base.h"
#include "format.h"

#include <stdlib.h>
#include <string.h>

typedef struct open_call {
    uint32_t node;
    uint8_t counted;         /* a call the trace recorded (not synthetic) */
    int64_t start, child;
} open_call;

typedef struct builder {
    sw_trace *t;
    sw_functab *ft;
    uint32_t *func;          /* per code id: its function in ft, or SW_NODE_NONE */
    uint32_t limit;
    uint32_t undefined;      /* the function of ids without a definition, or SW_NODE_NONE */
    sw_calltree *tree;
    size_t max_nodes;        /* of every tree together; 0: no limit */
    size_t done_nodes;       /* of the trees of the threads before this one */
    open_call *stack;
    size_t depth, cap;
    int rc;
} builder;

/* The function of a code id, interned on first use. */
static uint32_t func_of(builder *b, uint32_t code)
{
    uint32_t *slot = code < b->limit ? &b->func[code] : &b->undefined;
    if (*slot != SW_NODE_NONE)
        return *slot;
    const sw_code_info *ci = sw_trace_code(b->t, code);
    const char *name = ci ? ci->qualname : "?", *file = ci ? ci->filename : "";
    int32_t line = ci ? (int32_t)(ci->firstlineno > INT32_MAX ? INT32_MAX : ci->firstlineno) : 0;
    uint32_t id;
    if (sw_functab_intern(b->ft, name, strlen(name), file, strlen(file), line, &id) != SW_OK)
        return SW_NODE_NONE;
    return *slot = id;
}

static int tree_event(void *ud, const sw_event *ev)
{
    builder *b = ud;
    int enter = ev->kind == SW_OP_CALL || ev->kind == SW_OP_RESUME || ev->kind == SW_OP_C_CALL;
    int exit_ = ev->kind == SW_OP_RETURN || ev->kind == SW_OP_YIELD || ev->kind == SW_OP_UNWIND ||
                ev->kind == SW_OP_C_RETURN;
    if (enter) {
        uint32_t parent = b->depth ? b->stack[b->depth - 1].node : SW_CALLTREE_ROOT, node;
        uint32_t fn = func_of(b, ev->code);
        open_call *st = sw_array_grow(b->stack, &b->cap, b->depth + 1, sizeof *st, 256);
        if (!st || fn == SW_NODE_NONE || sw_calltree_child(b->tree, parent, fn, &node) != SW_OK ||
            (b->max_nodes && b->done_nodes + sw_calltree_node_count(b->tree) > b->max_nodes)) {
            b->rc = SW_ENOMEM;
            return 1;
        }
        b->stack = st;
        b->stack[b->depth++] = (open_call){node, (uint8_t)!ev->synthetic, ev->t_ns, 0};
    } else if (exit_ && b->depth) {
        open_call c = b->stack[--b->depth];
        int64_t dur = ev->t_ns - c.start;
        if (dur < 0)
            dur = 0;   /* (replays never go back in time) */
        sw_calltree_add_own(b->tree, c.node, c.counted, (uint64_t)(dur - (c.child < dur ? c.child : dur)));
        if (b->depth)
            b->stack[b->depth - 1].child += dur;
    }
    return 0;
}

int sw_trace_trees(sw_trace *t, const sw_filter *f, sw_functab *ft, size_t max_nodes, sw_calltree **trees)
{
    size_t n = sw_trace_thread_count(t);
    memset(trees, 0, n * sizeof *trees);
    builder b;
    memset(&b, 0, sizeof b);
    b.t = t;
    b.ft = ft;
    b.limit = sw_trace_code_limit(t);
    b.undefined = SW_NODE_NONE;
    b.max_nodes = max_nodes;
    b.func = malloc((b.limit ? b.limit : 1) * sizeof *b.func);
    sw_filtered *fl = NULL;
    int rc = b.func && sw_filtered_new(t, f, &fl) == SW_OK ? SW_OK : SW_ENOMEM;
    for (uint32_t i = 0; rc == SW_OK && i < b.limit; i++)
        b.func[i] = SW_NODE_NONE;
    for (size_t th = 0; th < n && rc == SW_OK; th++) {
        if (!sw_filter_has_thread(f, th))
            continue;
        if (!(trees[th] = b.tree = sw_calltree_new(ft))) {
            rc = SW_ENOMEM;
            break;
        }
        b.depth = 0;
        int r = sw_filtered_replay(fl, th, 0, tree_event, &b);
        if (b.rc)
            rc = b.rc;
        else if (r == SW_ENOMEM || r == SW_EIO || r == SW_ECANCELED)
            rc = r;
        sw_calltree_sum_up(b.tree);
        b.done_nodes += sw_calltree_node_count(b.tree);
    }
    sw_filtered_free(fl);
    free(b.func);
    free(b.stack);
    if (rc) {
        for (size_t th = 0; th < n; th++) {
            sw_calltree_free(trees[th]);
            trees[th] = NULL;
        }
    }
    return rc;
}
