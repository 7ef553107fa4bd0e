/*
 * debug_offsets.h - a layout from the _Py_DebugOffsets that CPython 3.13
 * keeps at the start of _PyRuntime (cookie "xdebugpy", the version, then
 * the offsets and sizes of the structures a debugger reads), so that a
 * 3.13 release whose layout is not generated (layouts_known.h) is still
 * read. The bytes come from the target and are untrusted: the cookie,
 * version and build (with the GIL) are checked, every offset must lie
 * inside its structure's stated size and be aligned for its width, every
 * size within what the reader reads at once; then sw_layout_validate.
 *
 * What the debug offsets do not describe is taken from the base layout of
 * the same minor version (the generated one), each such field named in
 * SW_DEBUG_OFFSETS_KEPT (what is read from the offsets: SW_DEBUG_OFFSETS_READ);
 * debug_offsets.c checks at compile time that the two lists name every
 * field of sw_py_layout once, so a field added to the layout but not
 * placed here fails the build.
 */
#ifndef SW_DEBUG_OFFSETS_H
#define SW_DEBUG_OFFSETS_H

#include "base/base.h"
#include "layout.h"

#define SW_DEBUG_OFFSETS_SIZE (73u * 8u)   /* the bytes of 3.13's _Py_DebugOffsets read */

/* The fields of sw_py_layout read (or derived) from the debug offsets, and
 * those kept from the base layout. */
#define SW_DEBUG_OFFSETS_READ(X) \
    X(interp_threads_head) X(tstate_size) X(tstate_next) X(tstate_prev) X(tstate_interp) X(tstate_thread_id) \
    X(tstate_native_thread_id) X(tstate_frame) X(tstate_datastack_chunk) X(tstate_datastack_top) X(frame_size) \
    X(frame_previous) X(frame_code) X(frame_owner) X(frame_instr) X(code_size) X(code_name) X(code_qualname) \
    X(code_filename) X(code_firstlineno) X(code_linetable) X(code_code) X(ob_type) X(str_state) X(str_length) \
    X(str_ascii_data) X(str_compact_data) X(str_legacy_data) X(str_header_size) X(bytes_size) X(bytes_data) \
    X(interp_gil) X(gil_locked) X(gil_last_holder) X(runtime_interp_main) X(version_hex) X(interp_modules) \
    X(frame_localsplus) X(code_varnames) X(interp_size) X(runtime_interp_next_id)
#define SW_DEBUG_OFFSETS_KEPT(X) \
    X(reserved) X(frames_kind) X(pointer_size) X(ob_refcnt) X(cframe_current_frame) X(cframe_previous) X(tstate_root_cframe) \
    X(chunk_data) X(owner_cstack) \
    X(frame_is_entry) X(str_kind_shift) X(str_kind_mask) X(str_compact_mask) X(str_ascii_mask) X(thread_tid) \
    X(runtime_addr) X(runtime_gil) X(gil_size) X(linetable_kind) X(frame_lasti) X(lasti_unit) X(code_type) \
    X(str_type) X(frame_type) X(owner_thread) X(owner_generator) X(gen_state_back) X(gen_executing) \
    X(frame_gen) X(frame_state) X(frame_running) X(frame_globals) X(frame_func) X(interp_trampoline) \
    X(interp_code_counter) X(none_addr) X(managed_kind) X(module_dict) X(dict_keys) X(dict_values) X(keys_log2_size) \
    X(keys_log2_index_bytes) X(keys_kind) X(keys_nentries) X(keys_indices) X(keys_kind_general) X(entry_size) \
    X(entry_key) X(entry_value) X(uentry_size) X(uentry_key) X(uentry_value) X(values_values) X(values_valid) \
    X(long_size) X(long_non_size_bits) X(long_digits) X(long_digit_size) X(long_shift) X(type_flags) \
    X(type_basicsize) X(heaptype_cached_keys) X(managed_dict_back) X(managed_values_back) \
    X(tpflags_managed_dict) X(tpflags_inline_values) X(managed_untag) X(code_cellvars) X(code_freevars) \
    X(tuple_size) X(tuple_items) X(float_value) X(keys_size) X(type_dictoffset) X(type_name) X(cell_ref) \
    X(long_type) X(bool_type) X(float_type) X(bytes_type) X(tuple_type) X(cell_type) X(frame_specials) \
    X(code_nlocalsplus) X(code_stacksize) X(interp_audit_hooks) X(runtime_audit_hooks) \
    X(op_return_value) X(op_return_const) X(op_return_value_instrumented) X(op_return_const_instrumented)

/* Builds *out from len bytes of debug offsets (raw, as read from the start
 * of the target's _PyRuntime) over base, the layout of the same minor
 * version. Returns 0, or SW_EFORMAT / SW_EVERSION / SW_EARG with the
 * reason in err. */
int sw_layout_from_debug_offsets(const unsigned char *raw, size_t len, const sw_py_layout *base, sw_py_layout *out,
                                 char *err, size_t errlen);

#endif
