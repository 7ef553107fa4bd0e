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
 * tests/c/procmem/test_layouts.c checks that the two lists name every field
 * of sw_py_layout, so a field added to the layout but not placed here
 * fails that test.
 */
#ifndef SW_DEBUG_OFFSETS_H
#define SW_DEBUG_OFFSETS_H

#include "base/base.h"
#include "layout.h"

#define SW_DEBUG_OFFSETS_SIZE (73u * 8u)   /* the bytes of 3.13's _Py_DebugOffsets read */

/* The fields of sw_py_layout read (or derived) from the debug offsets, and
 * those kept from the base layout. */
#define SW_DEBUG_OFFSETS_READ                                                                           \
    "interp_threads_head tstate_size tstate_next tstate_interp tstate_thread_id tstate_native_thread_id " \
    "tstate_frame tstate_datastack_chunk tstate_datastack_top frame_size frame_previous frame_code "       \
    "frame_owner frame_instr code_size code_name code_qualname code_filename code_firstlineno "            \
    "code_linetable code_code ob_type str_state str_length str_ascii_data str_compact_data "               \
    "str_legacy_data str_header_size bytes_size bytes_data interp_gil gil_locked gil_last_holder "         \
    "runtime_interp_main version_hex interp_modules frame_localsplus code_varnames interp_size "          \
    "runtime_interp_next_id"
#define SW_DEBUG_OFFSETS_KEPT                                                                           \
    "frames_kind pointer_size ob_refcnt cframe_current_frame chunk_data owner_cstack frame_is_entry "      \
    "str_kind_shift str_kind_mask str_compact_mask str_ascii_mask thread_tid runtime_addr runtime_gil "    \
    "gil_size linetable_kind frame_lasti lasti_unit code_type str_type frame_type owner_thread "         \
    "owner_generator gen_state_back gen_executing frame_gen frame_state frame_running frame_globals "      \
    "frame_func interp_trampoline interp_code_counter none_addr managed_kind module_dict dict_keys dict_values keys_log2_size " \
    "keys_log2_index_bytes keys_kind keys_nentries keys_indices keys_kind_general entry_size entry_key "    \
    "entry_value uentry_size uentry_key uentry_value values_values values_valid long_size "                 \
    "long_non_size_bits long_digits long_digit_size long_shift type_flags type_basicsize "                 \
    "heaptype_cached_keys managed_dict_back managed_values_back tpflags_managed_dict "                      \
    "tpflags_inline_values managed_untag code_cellvars code_freevars tuple_size tuple_items float_value "  \
    "keys_size type_dictoffset type_name cell_ref long_type bool_type float_type bytes_type tuple_type cell_type"

/* Builds *out from len bytes of debug offsets (raw, as read from the start
 * of the target's _PyRuntime) over base, the layout of the same minor
 * version. Returns 0, or SW_EFORMAT / SW_EVERSION / SW_EARG with the
 * reason in err. */
int sw_layout_from_debug_offsets(const unsigned char *raw, size_t len, const sw_py_layout *base, sw_py_layout *out,
                                 char *err, size_t errlen);

#endif
