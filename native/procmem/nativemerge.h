/*
 * nativemerge.h - one stack from a thread's native and Python stacks
 * captured at one instant: each activation of CPython's interpreter
 * function in the native stack is replaced by the Python frames it runs.
 *
 * Python frames come in groups, one per interpreter activation: before
 * 3.11 each frame is its own activation; from 3.11 an activation runs a
 * chain of Python-to-Python calls, and the root-most frame of each chain
 * is marked (3.11: the frame's is_entry; 3.12+: the frame right after it
 * is a C-stack shim frame).
 *
 * Activations and groups are paired from the root: the root end of a
 * stack is stable, while at the leaf end a thread may be caught entering
 * or leaving an activation whose Python frame is not linked in yet or any
 * more (an activation without a group then stays a native frame, where it
 * is; Python groups without an activation go to the leaf end). When the
 * native stack is truncated (only its leaf-most SW_NSTACK_MAX frames were
 * captured) the pairing starts at the leaf instead, and the Python frames
 * left over go to the root end.
 */
#ifndef SW_NATIVEMERGE_H
#define SW_NATIVEMERGE_H

#include "base/base.h"

/* The native side of a merge: nat[0..nn), native frames, leaf first,
 * nat_eval[i] 1 for interpreter activations, truncated 1 if the native
 * stack was cut at its root end; lines (the line each runs) and pcs (its
 * code address) may be NULL. */
typedef struct sw_native_frames {
    sw_sample_code *const *nat;
    const unsigned char *nat_eval;
    const int32_t *lines;
    const uint64_t *pcs;
    uint32_t nn;
    int truncated;
} sw_native_frames;

/* py[0..np): Python frames, leaf first, py_end[i] 1 for the root-most
 * frame of a group; py_lines may be NULL. Writes the merged stack, leaf
 * first, to out and, if out_lines, the lines (a native frame's from
 * n->lines, else 0) and, if out_pcs, each native frame's pc (n->pcs) and
 * 0 for a Python frame; cap must be at least nn + np (else SW_EARG).
 * Returns the merged depth. */
long sw_merge_native(const sw_native_frames *n, sw_sample_code *const *py, const int32_t *py_lines,
                     const unsigned char *py_end, uint32_t np, sw_sample_code **out, int32_t *out_lines,
                     uint64_t *out_pcs, uint32_t cap);

#endif
