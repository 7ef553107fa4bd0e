/*
 * layout.c - checking an sw_py_layout once, before any reading (layout.h).
 */
#include "layout.h"

#include <stddef.h>
#include <stdio.h>

/* The tripwire: SW_PY_LAYOUT_FIELDS names every field of sw_py_layout, in
 * order and width, or the build fails. A struct made from the list puts
 * each field where sw_py_layout has it, and the list's bytes add up to
 * the whole struct (which has no padding), so no field is left out. */
#define FROM_LIST(name, bits) uint##bits##_t name;
struct layout_from_list { SW_PY_LAYOUT_FIELDS(FROM_LIST) };
#undef FROM_LIST
#define SAME_PLACE(name, bits)                                                                        \
    _Static_assert(offsetof(struct layout_from_list, name) == offsetof(sw_py_layout, name) &&        \
                       sizeof(((sw_py_layout *)0)->name) * 8 == (bits),                               \
                   "SW_PY_LAYOUT_FIELDS: " #name " is not where or as wide as sw_py_layout has it");
SW_PY_LAYOUT_FIELDS(SAME_PLACE)
#undef SAME_PLACE
#define BYTES(name, bits) +(bits) / 8
_Static_assert(0 SW_PY_LAYOUT_FIELDS(BYTES) == sizeof(sw_py_layout),
               "SW_PY_LAYOUT_FIELDS does not name every field of sw_py_layout (or the struct has padding)");
#undef BYTES

/* Each row: a field's offset, its width, and the size of what is read. */
#define SW_LAYOUT_FIELDS(X, l, P)                                      \
    X(ob_type, (l)->ob_type, P, (l)->code_size)                        \
    X(tstate_next, (l)->tstate_next, P, (l)->tstate_size)              \
    X(tstate_prev, (l)->tstate_prev, P, (l)->tstate_size)              \
    X(tstate_interp, (l)->tstate_interp, P, (l)->tstate_size)          \
    X(tstate_thread_id, (l)->tstate_thread_id, P, (l)->tstate_size)    \
    X(tstate_frame, (l)->tstate_frame, P, (l)->tstate_size)            \
    X(frame_previous, (l)->frame_previous, P, (l)->frame_size)         \
    X(frame_code, (l)->frame_code, P, (l)->frame_size)                 \
    X(frame_refcnt, (l)->ob_refcnt, P, (l)->frames_kind == SW_FRAMES_OBJECTS ? (l)->frame_size : SW_LAYOUT_MAX_READ) \
    X(frame_type, (l)->ob_type, P, (l)->frames_kind == SW_FRAMES_OBJECTS ? (l)->frame_size : SW_LAYOUT_MAX_READ) \
    X(code_name, (l)->code_name, P, (l)->code_size)                    \
    X(code_qualname, (l)->code_qualname, P, (l)->code_size)            \
    X(code_filename, (l)->code_filename, P, (l)->code_size)            \
    X(code_firstlineno, (l)->code_firstlineno, 4, (l)->code_size)      \
    X(str_type, (l)->ob_type, P, (l)->str_header_size)                 \
    X(str_length, (l)->str_length, P, (l)->str_header_size)            \
    X(str_state, (l)->str_state, 4, (l)->str_header_size)

#define SW_LAYOUT_OPTIONAL(X, l, P)                                                \
    X(tstate_native_thread_id, (l)->tstate_native_thread_id, P, (l)->tstate_size)  \
    X(tstate_datastack_chunk, (l)->tstate_datastack_chunk, P, (l)->tstate_size)    \
    X(tstate_datastack_top, (l)->tstate_datastack_top, P, (l)->tstate_size)        \
    X(frame_owner, (l)->frame_owner, 1, (l)->frame_size)                           \
    X(str_legacy_data, (l)->str_legacy_data, P, (l)->str_header_size)             \
    X(frame_lasti, (l)->frame_lasti, 4, (l)->frame_size)                           \
    X(frame_instr, (l)->frame_instr, P, (l)->frame_size)                           \
    X(frame_is_entry, (l)->frame_is_entry, 1, (l)->frame_size)                     \
    X(frame_gen, (l)->frame_gen, P, (l)->frame_size)                               \
    X(frame_func, (l)->frame_func, P, (l)->frame_size)                             \
    X(frame_globals, (l)->frame_globals, P, (l)->frame_size)                       \
    X(frame_state, (l)->frame_state, 1, (l)->frame_size)                           \
    X(code_linetable, (l)->code_linetable, P, (l)->code_size)                     \
    X(code_nlocalsplus, (l)->code_nlocalsplus, 4, (l)->code_size)                 \
    X(code_stacksize, (l)->code_stacksize, 4, (l)->code_size)

int sw_layout_validate(const sw_py_layout *l, char *err, size_t errlen)
{
    const uint32_t P = (uint32_t)sizeof(void *);
#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return SW_EARG; } while (0)
    if (l->pointer_size != P || P != 8)
        FAIL("pointer size %u: the reader handles 64-bit processes only (its own is %u)", l->pointer_size, P);
    if (l->frames_kind != SW_FRAMES_OBJECTS && l->frames_kind != SW_FRAMES_INTERP)
        FAIL("unknown frame kind %u", l->frames_kind);
    if (l->tstate_size > SW_LAYOUT_MAX_READ || l->frame_size > SW_LAYOUT_MAX_READ ||
        l->code_size > SW_LAYOUT_MAX_READ || l->str_header_size > SW_LAYOUT_MAX_READ)
        FAIL("an object size exceeds %u bytes", SW_LAYOUT_MAX_READ);
#define CHECK(name, off, width, size)                                                  \
    if ((uint64_t)(off) + (width) > (size))                                            \
        FAIL("field %s (offset %u) lies outside the %u bytes read", #name, (off), (size));
#define CHECK_OPT(name, off, width, size) \
    if ((off) != SW_NO_OFFSET) { CHECK(name, off, width, size) }
    SW_LAYOUT_FIELDS(CHECK, l, P)
    SW_LAYOUT_OPTIONAL(CHECK_OPT, l, P)
#undef CHECK_OPT
#undef CHECK
    if (l->cframe_current_frame != SW_NO_OFFSET && l->cframe_current_frame > SW_LAYOUT_MAX_READ - P)
        FAIL("cframe offset %u out of range", l->cframe_current_frame);
    /* (the cframe's two words are read as one: pystack.c leaf_frame) */
    if (l->cframe_current_frame != SW_NO_OFFSET
            ? l->cframe_previous != l->cframe_current_frame + P || l->tstate_root_cframe == SW_NO_OFFSET
            : l->cframe_previous != SW_NO_OFFSET || l->tstate_root_cframe != SW_NO_OFFSET)
        FAIL("a cframe's previous must follow its current frame, with the thread state's root cframe");
    if (l->frames_kind == SW_FRAMES_INTERP &&
        (l->tstate_datastack_chunk == SW_NO_OFFSET) != (l->tstate_datastack_top == SW_NO_OFFSET))
        FAIL("datastack chunk and top must be given together");
    if ((l->code_nlocalsplus == SW_NO_OFFSET) != (l->code_stacksize == SW_NO_OFFSET) ||
        (l->code_nlocalsplus != SW_NO_OFFSET && (l->frames_kind != SW_FRAMES_INTERP || l->frame_specials == 0 ||
                                                 l->frame_specials > SW_LAYOUT_MAX_READ / 8)))
        FAIL("the frame size of a code object is not described consistently");
    if (l->gil_size != SW_NO_OFFSET) {
        if (l->gil_size > SW_LAYOUT_MAX_READ || l->gil_locked == SW_NO_OFFSET || l->gil_last_holder == SW_NO_OFFSET ||
            (uint64_t)l->gil_locked + 4 > l->gil_size || (uint64_t)l->gil_last_holder + P > l->gil_size)
            FAIL("the GIL's fields lie outside its %u bytes", l->gil_size);
        if ((l->runtime_gil == SW_NO_OFFSET || !l->runtime_addr) == (l->interp_gil == SW_NO_OFFSET))
            FAIL("the GIL must be found either in _PyRuntime or through the interpreter");
        if (l->interp_gil != SW_NO_OFFSET && l->interp_gil > SW_LAYOUT_MAX_READ - P)
            FAIL("interpreter GIL offset %u out of range", l->interp_gil);
    }
    if (l->linetable_kind != 0) {
        if (l->linetable_kind > 3 || l->code_linetable == SW_NO_OFFSET ||
            (l->frame_lasti == SW_NO_OFFSET) == (l->frame_instr == SW_NO_OFFSET) ||
            (l->frame_lasti != SW_NO_OFFSET && l->lasti_unit != 1 && l->lasti_unit != 2) ||
            l->bytes_size > 64 - P || l->bytes_data > 64 || l->code_code > SW_LAYOUT_MAX_READ * 16u)
            FAIL("the line table fields are not described consistently");
    }
    if (l->runtime_interp_main != SW_NO_OFFSET && l->runtime_interp_main > (1u << 20))
        FAIL("interpreters.main offset %u out of range", l->runtime_interp_main);
    if (l->frames_kind == SW_FRAMES_INTERP && l->frame_owner != SW_NO_OFFSET &&
        (l->owner_thread > 255 || l->owner_generator > 255 || l->gen_state_back == 0 ||
         l->gen_state_back > SW_GEN_STATE_BACK_MAX || l->gen_executing > 255 ||
         (l->owner_cstack != SW_NO_OFFSET && l->owner_cstack > 255)))
        FAIL("the frame owners and the generator state are not described consistently");
    if (l->interp_trampoline != SW_NO_OFFSET && l->interp_trampoline > (1u << 24))   /* PyInterpreterState is large */
        FAIL("interpreter trampoline offset %u out of range", l->interp_trampoline);
    if ((l->interp_code_counter != SW_NO_OFFSET) != (l->runtime_interp_next_id != SW_NO_OFFSET) ||
        (l->interp_code_counter != SW_NO_OFFSET &&
         (l->interp_code_counter > (1u << 24) || l->interp_code_counter % 4 || l->runtime_interp_next_id > (1u << 20) ||
          l->runtime_interp_next_id % 8 || l->runtime_interp_main == SW_NO_OFFSET)))
        FAIL("the counter of code objects made is not described consistently");
    if ((l->interp_audit_hooks != SW_NO_OFFSET) != (l->runtime_audit_hooks != SW_NO_OFFSET) ||
        (l->interp_audit_hooks != SW_NO_OFFSET &&
         (l->interp_audit_hooks > (1u << 24) || l->interp_audit_hooks % 8 || l->runtime_audit_hooks > (1u << 20) ||
          l->runtime_audit_hooks % 8)))
        FAIL("the audit hooks are not described consistently");
    const uint32_t ops[] = {l->op_return_value, l->op_return_const, l->op_return_value_instrumented,
                            l->op_return_const_instrumented};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i] != SW_NO_OFFSET && (ops[i] > 255 || l->frame_instr == SW_NO_OFFSET))
            FAIL("a return opcode is out of range, or told without the frames' instruction");
    if (l->thread_tid != SW_NO_OFFSET && l->thread_tid > SW_LAYOUT_MAX_READ - 4)
        FAIL("thread tid offset %u out of range", l->thread_tid);
    if (l->str_kind_mask == 0 || l->str_kind_shift > 31 || l->str_compact_mask == 0 || l->str_ascii_mask == 0)
        FAIL("the str state bit field is not described");
    if (l->str_ascii_data > SW_LAYOUT_MAX_READ || l->str_compact_data > SW_LAYOUT_MAX_READ ||
        l->chunk_data > SW_LAYOUT_MAX_READ)
        FAIL("a data offset is out of range");
#undef FAIL
    if (errlen)
        err[0] = 0;
    return SW_OK;
}
