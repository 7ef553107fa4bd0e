/*
 * nativemerge.h - one stack from a thread's native and Python stacks
 * captured at one instant: each activation of CPython's interpreter
 * function in the native stack is replaced by the Python frames it runs.
 *
 * Python frames come in groups, one per interpreter activation: before
 * 3.11 each frame is its own activation; from 3.11 an activation runs a
 * chain of Python-to-Python calls, and the root-most frame of each chain
 * is marked (3.11: the frame's is_entry; 3.12+: the frame right after it
 * is a C-stack shim frame). The n-th interpreter activation from the leaf
 * runs the n-th group from the leaf. If the native stack has fewer
 * activations than there are groups (it was cut at SW_NSTACK_MAX frames,
 * or unwinding stopped early), the remaining Python frames follow at the
 * root end; an activation with no group left stays as a native frame.
 */
#ifndef SW_NATIVEMERGE_H
#define SW_NATIVEMERGE_H

#include "../core/sample.h"

/* nat[0..nn): native frames, leaf first, nat_eval[i] 1 for interpreter
 * activations; py[0..np): Python frames, leaf first, py_end[i] 1 for the
 * root-most frame of a group; py_lines may be NULL. Writes at most cap
 * frames (leaf first) to out and, if out_lines, their lines (0 for native
 * frames). Returns the number written. */
uint32_t sw_merge_native(sw_sample_code *const *nat, const unsigned char *nat_eval, uint32_t nn,
                         sw_sample_code *const *py, const int32_t *py_lines, const unsigned char *py_end, uint32_t np,
                         sw_sample_code **out, int32_t *out_lines, uint32_t cap);

#endif
