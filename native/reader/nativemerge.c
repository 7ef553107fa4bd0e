/*
 * nativemerge.c - merging native and Python frames (nativemerge.h).
 */
#include "nativemerge.h"

uint32_t sw_merge_native(sw_sample_code *const *nat, const unsigned char *nat_eval, uint32_t nn,
                         sw_sample_code *const *py, const int32_t *py_lines, const unsigned char *py_end, uint32_t np,
                         sw_sample_code **out, int32_t *out_lines, uint32_t cap)
{
    uint32_t m = 0, p = 0;
#define PUT(frame, line)                       \
    do {                                       \
        if (m == cap)                          \
            return m;                          \
        out[m] = (frame);                      \
        if (out_lines)                         \
            out_lines[m] = (line);             \
        m++;                                   \
    } while (0)
    for (uint32_t i = 0; i < nn; i++) {
        if (!nat_eval[i] || p == np) {
            PUT(nat[i], 0);
            continue;
        }
        /* This activation runs the next group of Python frames. */
        for (;;) {
            PUT(py[p], py_lines ? py_lines[p] : 0);
            int end = py_end[p];
            p++;
            if (end || p == np)
                break;
        }
    }
    while (p < np) {
        PUT(py[p], py_lines ? py_lines[p] : 0);
        p++;
    }
#undef PUT
    return m;
}
