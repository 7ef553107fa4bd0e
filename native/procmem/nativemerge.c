/*
 * nativemerge.c - merging native and Python frames (nativemerge.h).
 */
#include "nativemerge.h"

#define PUT(frame, line)            \
    do {                            \
        out[m] = (frame);           \
        if (out_lines)              \
            out_lines[m] = (line);  \
        m++;                        \
    } while (0)
#define PY_LINE(p) (py_lines ? py_lines[p] : 0)

/* Leaf first: the n-th activation from the leaf runs the n-th group from
 * the leaf; Python frames left over go to the root end. */
static uint32_t from_leaf(sw_sample_code *const *nat, const unsigned char *nat_eval, uint32_t nn,
                          sw_sample_code *const *py, const int32_t *py_lines, const unsigned char *py_end, uint32_t np,
                          sw_sample_code **out, int32_t *out_lines)
{
    uint32_t m = 0, p = 0;
    for (uint32_t i = 0; i < nn; i++) {
        if (!nat_eval[i] || p == np) {
            PUT(nat[i], 0);
            continue;
        }
        for (;;) {
            PUT(py[p], PY_LINE(p));
            if (py_end[p++] || p == np)
                break;
        }
    }
    for (; p < np; p++)
        PUT(py[p], PY_LINE(p));
    return m;
}

/* Root first, written root first and then reversed: the n-th activation
 * from the root runs the n-th group from the root (a group starts at its
 * root-most frame and runs leafwards up to the next group's root-most
 * frame); Python frames left over go to the leaf end. */
static uint32_t from_root(sw_sample_code *const *nat, const unsigned char *nat_eval, uint32_t nn,
                          sw_sample_code *const *py, const int32_t *py_lines, const unsigned char *py_end, uint32_t np,
                          sw_sample_code **out, int32_t *out_lines)
{
    uint32_t m = 0, p = np;      /* py[p - 1] is the next Python frame, root first */
    for (uint32_t i = nn; i-- > 0;) {
        if (!nat_eval[i] || p == 0) {
            PUT(nat[i], 0);
            continue;
        }
        do {
            p--;
            PUT(py[p], PY_LINE(p));
        } while (p > 0 && !py_end[p - 1]);
    }
    while (p > 0) {
        p--;
        PUT(py[p], PY_LINE(p));
    }
    for (uint32_t a = 0, b = m; a + 1 < b; a++, b--) {
        sw_sample_code *t = out[a];
        out[a] = out[b - 1];
        out[b - 1] = t;
        if (out_lines) {
            int32_t l = out_lines[a];
            out_lines[a] = out_lines[b - 1];
            out_lines[b - 1] = l;
        }
    }
    return m;
}

long sw_merge_native(sw_sample_code *const *nat, const unsigned char *nat_eval, uint32_t nn, int truncated,
                     sw_sample_code *const *py, const int32_t *py_lines, const unsigned char *py_end, uint32_t np,
                     sw_sample_code **out, int32_t *out_lines, uint32_t cap)
{
    if ((uint64_t)nn + np > cap)
        return SW_EARG;
    if (truncated)
        return (long)from_leaf(nat, nat_eval, nn, py, py_lines, py_end, np, out, out_lines);
    return (long)from_root(nat, nat_eval, nn, py, py_lines, py_end, np, out, out_lines);
}
