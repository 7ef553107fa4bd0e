/*
 * nativemerge.c - merging native and Python frames (nativemerge.h).
 */
#include "nativemerge.h"

/* Where the merge writes. */
typedef struct merged {
    sw_sample_code **out;
    int32_t *lines;
    uint64_t *pcs;
    uint32_t m;
} merged;

static void put(merged *o, sw_sample_code *frame, int32_t line, uint64_t pc)
{
    o->out[o->m] = frame;
    if (o->lines)
        o->lines[o->m] = line;
    if (o->pcs)
        o->pcs[o->m] = pc;
    o->m++;
}

/* Native frame i, with its line and pc where given. */
static void put_native(merged *o, const sw_native_frames *n, uint32_t i)
{
    put(o, n->nat[i], n->lines ? n->lines[i] : 0, n->pcs ? n->pcs[i] : 0);
}

#define PY_LINE(p) (py_lines ? py_lines[p] : 0)

/* Leaf first: the n-th activation from the leaf runs the n-th group from
 * the leaf; Python frames left over go to the root end. */
static void from_leaf(const sw_native_frames *n, sw_sample_code *const *py, const int32_t *py_lines,
                      const unsigned char *py_end, uint32_t np, merged *o)
{
    uint32_t p = 0;
    for (uint32_t i = 0; i < n->nn; i++) {
        if (!n->nat_eval[i] || p == np) {
            put_native(o, n, i);
            continue;
        }
        for (;;) {
            put(o, py[p], PY_LINE(p), 0);
            if (py_end[p++] || p == np)
                break;
        }
    }
    for (; p < np; p++)
        put(o, py[p], PY_LINE(p), 0);
}

/* Root first, written root first and then reversed: the n-th activation
 * from the root runs the n-th group from the root (a group starts at its
 * root-most frame and runs leafwards up to the next group's root-most
 * frame); Python frames left over go to the leaf end. */
static void from_root(const sw_native_frames *n, sw_sample_code *const *py, const int32_t *py_lines,
                      const unsigned char *py_end, uint32_t np, merged *o)
{
    uint32_t p = np;      /* py[p - 1] is the next Python frame, root first */
    for (uint32_t i = n->nn; i-- > 0;) {
        if (!n->nat_eval[i] || p == 0) {
            put_native(o, n, i);
            continue;
        }
        do {
            p--;
            put(o, py[p], PY_LINE(p), 0);
        } while (p > 0 && !py_end[p - 1]);
    }
    while (p > 0) {
        p--;
        put(o, py[p], PY_LINE(p), 0);
    }
    for (uint32_t a = 0, b = o->m; a + 1 < b; a++, b--) {
        sw_sample_code *t = o->out[a];
        o->out[a] = o->out[b - 1];
        o->out[b - 1] = t;
        if (o->lines) {
            int32_t l = o->lines[a];
            o->lines[a] = o->lines[b - 1];
            o->lines[b - 1] = l;
        }
        if (o->pcs) {
            uint64_t c = o->pcs[a];
            o->pcs[a] = o->pcs[b - 1];
            o->pcs[b - 1] = c;
        }
    }
}

long sw_merge_native(const sw_native_frames *n, sw_sample_code *const *py, const int32_t *py_lines,
                     const unsigned char *py_end, uint32_t np, sw_sample_code **out, int32_t *out_lines,
                     uint64_t *out_pcs, uint32_t cap)
{
    if ((uint64_t)n->nn + np > cap)
        return SW_EARG;
    merged o = {out, out_lines, out_pcs, 0};
    if (n->truncated)
        from_leaf(n, py, py_lines, py_end, np, &o);
    else
        from_root(n, py, py_lines, py_end, np, &o);
    return (long)o.m;
}
