/*
 * debug_offsets.c - a layout from 3.13's _Py_DebugOffsets, checked as
 * untrusted input (see debug_offsets.h).
 */
#include "debug_offsets.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The tripwire: the two lists name every field of sw_py_layout once, or
 * the build fails. Each name listed is an enumerator (a name listed twice
 * is defined twice) and a field of the struct (offsetof), and there are as
 * many as SW_PY_LAYOUT_FIELDS has fields (which layout.c checks against
 * the struct). */
#define PLACED(name) PLACED_##name,
enum { SW_DEBUG_OFFSETS_READ(PLACED) SW_DEBUG_OFFSETS_KEPT(PLACED) N_PLACED };
#undef PLACED
#define FIELD(name, bits) FIELD_##name,
enum { SW_PY_LAYOUT_FIELDS(FIELD) N_FIELDS };
#undef FIELD
#define IS_FIELD(name) _Static_assert(offsetof(sw_py_layout, name) < sizeof(sw_py_layout), #name);
SW_DEBUG_OFFSETS_READ(IS_FIELD)
SW_DEBUG_OFFSETS_KEPT(IS_FIELD)
#undef IS_FIELD
_Static_assert((int)N_PLACED == (int)N_FIELDS, "a field of sw_py_layout is in neither SW_DEBUG_OFFSETS_READ nor _KEPT");

/* Word indexes into _Py_DebugOffsets (3.13): each structure's size comes
 * first, then its offsets, in the order of pycore_runtime.h. */
enum {
    W_VERSION = 1, W_FREE_THREADED = 2,
    W_RUNTIME_SIZE = 3, W_INTERPRETERS_HEAD = 5,
    W_INTERP_SIZE = 6, W_THREADS_HEAD = 9, W_IMPORTS_MODULES = 11, W_CEVAL_GIL = 14, W_GIL = 15, W_GIL_LOCKED = 17,
    W_GIL_HOLDER = 18,
    W_TSTATE_SIZE = 19, W_TSTATE_PREV = 20, W_TSTATE_NEXT = 21, W_TSTATE_INTERP = 22, W_CURRENT_FRAME = 23, W_THREAD_ID = 24,
    W_NATIVE_THREAD_ID = 25, W_DATASTACK_CHUNK = 26,
    W_FRAME_SIZE = 28, W_FRAME_PREVIOUS = 29, W_FRAME_EXECUTABLE = 30, W_FRAME_INSTR = 31, W_FRAME_LOCALSPLUS = 32,
    W_FRAME_OWNER = 33,
    W_CODE_SIZE = 34, W_CODE_FILENAME = 35, W_CODE_NAME = 36, W_CODE_QUALNAME = 37, W_CODE_LINETABLE = 38,
    W_CODE_FIRSTLINENO = 39, W_CODE_LOCALSPLUSNAMES = 41, W_CODE_ADAPTIVE = 43,
    W_OBJECT_SIZE = 44, W_OB_TYPE = 45,
    W_BYTES_SIZE = 64, W_BYTES_OB_SIZE = 65, W_BYTES_SVAL = 66,
    W_STR_SIZE = 67, W_STR_STATE = 68, W_STR_LENGTH = 69, W_STR_ASCII_SIZE = 70,
};

#define MAX2(a, b) ((a) > (b) ? (a) : (b))

static uint64_t word(const unsigned char *raw, unsigned i)
{
    uint64_t v;
    memcpy(&v, raw + 8u * i, sizeof v);
    return v;
}

int sw_layout_from_debug_offsets(const unsigned char *raw, size_t len, const sw_py_layout *base, sw_py_layout *out,
                                 char *err, size_t errlen)
{
#define FAIL(rc, ...) do { snprintf(err, errlen, __VA_ARGS__); return (rc); } while (0)
    if (len < SW_DEBUG_OFFSETS_SIZE || memcmp(raw, "xdebugpy", 8) != 0)
        FAIL(SW_EFORMAT, "_PyRuntime does not begin with _Py_DebugOffsets (no \"xdebugpy\" cookie)");
    uint64_t version = word(raw, W_VERSION);
    if ((version >> 16) != 0x030D || (base->version_hex >> 16) != 0x030D)
        FAIL(SW_EVERSION, "debug offsets of version %#llx: only 3.13's are understood",
             (unsigned long long)version);
    if (word(raw, W_FREE_THREADED) != 0)
        FAIL(SW_EVERSION, "a free-threaded build (no GIL): not supported");
    /* Each offset within its structure, aligned for its width. */
    static const struct { unsigned size, field, width; } checks[] = {
        {W_RUNTIME_SIZE, W_INTERPRETERS_HEAD, 8}, {W_INTERP_SIZE, W_THREADS_HEAD, 8},
        {W_INTERP_SIZE, W_IMPORTS_MODULES, 8},
        {W_INTERP_SIZE, W_CEVAL_GIL, 8}, {W_INTERP_SIZE, W_GIL, 8}, {W_INTERP_SIZE, W_GIL_LOCKED, 4},
        {W_INTERP_SIZE, W_GIL_HOLDER, 8}, {W_TSTATE_SIZE, W_TSTATE_PREV, 8}, {W_TSTATE_SIZE, W_TSTATE_NEXT, 8},
        {W_TSTATE_SIZE, W_TSTATE_INTERP, 8},
        {W_TSTATE_SIZE, W_CURRENT_FRAME, 8}, {W_TSTATE_SIZE, W_THREAD_ID, 8},
        {W_TSTATE_SIZE, W_NATIVE_THREAD_ID, 8}, {W_TSTATE_SIZE, W_DATASTACK_CHUNK, 8},
        {W_FRAME_SIZE, W_FRAME_PREVIOUS, 8}, {W_FRAME_SIZE, W_FRAME_EXECUTABLE, 8},
        {W_FRAME_SIZE, W_FRAME_INSTR, 8}, {W_FRAME_SIZE, W_FRAME_OWNER, 1}, {W_FRAME_SIZE, W_FRAME_LOCALSPLUS, 8},
        {W_CODE_SIZE, W_CODE_FILENAME, 8}, {W_CODE_SIZE, W_CODE_NAME, 8}, {W_CODE_SIZE, W_CODE_QUALNAME, 8},
        {W_CODE_SIZE, W_CODE_LINETABLE, 8}, {W_CODE_SIZE, W_CODE_FIRSTLINENO, 4}, {W_CODE_SIZE, W_CODE_LOCALSPLUSNAMES, 8},
        {W_CODE_SIZE, W_CODE_ADAPTIVE, 1}, {W_OBJECT_SIZE, W_OB_TYPE, 8},
        {W_BYTES_SIZE, W_BYTES_OB_SIZE, 8}, {W_BYTES_SIZE, W_BYTES_SVAL, 1},
        {W_STR_SIZE, W_STR_STATE, 4}, {W_STR_SIZE, W_STR_LENGTH, 8}, {W_STR_SIZE, W_STR_ASCII_SIZE, 1},
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        uint64_t size = word(raw, checks[i].size), off = word(raw, checks[i].field);
        if (size > (1u << 24) || off >= size || off + checks[i].width > size || off % checks[i].width)
            FAIL(SW_EARG, "debug offset %u (%llu) lies outside its structure of %llu bytes or is misaligned",
                 checks[i].field, (unsigned long long)off, (unsigned long long)size);
    }
    /* The objects read whole (offsets below stay under these sizes). */
    static const unsigned read_whole[] = {W_TSTATE_SIZE, W_CODE_SIZE, W_STR_SIZE};
    for (size_t i = 0; i < sizeof read_whole / sizeof read_whole[0]; i++)
        if (word(raw, read_whole[i]) > SW_LAYOUT_MAX_READ)
            FAIL(SW_EARG, "a structure of %llu bytes is larger than the reader reads at once",
                 (unsigned long long)word(raw, read_whole[i]));
    uint64_t gil = word(raw, W_GIL), locked = word(raw, W_GIL_LOCKED), holder = word(raw, W_GIL_HOLDER);
    if (base->gil_size == SW_NO_OFFSET || locked < gil || holder < gil || locked - gil + 4 > base->gil_size ||
        holder - gil + 8 > base->gil_size)
        FAIL(SW_EARG, "the GIL's fields lie outside its structure");
    if (word(raw, W_STR_ASCII_SIZE) >= word(raw, W_STR_SIZE))
        FAIL(SW_EARG, "the str header sizes are inconsistent");

    /* The fields that are one debug offset each. */
#define DIRECT(field, w) {offsetof(sw_py_layout, field), w}
    static const struct { size_t field; unsigned w; } direct[] = {
        DIRECT(interp_threads_head, W_THREADS_HEAD), DIRECT(tstate_size, W_TSTATE_SIZE),
        DIRECT(tstate_next, W_TSTATE_NEXT), DIRECT(tstate_prev, W_TSTATE_PREV), DIRECT(tstate_interp, W_TSTATE_INTERP),
        DIRECT(tstate_frame, W_CURRENT_FRAME), DIRECT(tstate_thread_id, W_THREAD_ID),
        DIRECT(tstate_native_thread_id, W_NATIVE_THREAD_ID), DIRECT(tstate_datastack_chunk, W_DATASTACK_CHUNK),
        DIRECT(frame_previous, W_FRAME_PREVIOUS), DIRECT(frame_code, W_FRAME_EXECUTABLE),
        DIRECT(frame_instr, W_FRAME_INSTR), DIRECT(frame_owner, W_FRAME_OWNER), DIRECT(code_name, W_CODE_NAME),
        DIRECT(code_qualname, W_CODE_QUALNAME), DIRECT(code_filename, W_CODE_FILENAME),
        DIRECT(code_firstlineno, W_CODE_FIRSTLINENO), DIRECT(code_linetable, W_CODE_LINETABLE),
        DIRECT(code_code, W_CODE_ADAPTIVE), DIRECT(ob_type, W_OB_TYPE), DIRECT(str_state, W_STR_STATE),
        DIRECT(str_length, W_STR_LENGTH), DIRECT(str_ascii_data, W_STR_ASCII_SIZE),
        DIRECT(str_header_size, W_STR_SIZE), DIRECT(bytes_size, W_BYTES_OB_SIZE),
        DIRECT(bytes_data, W_BYTES_SVAL), DIRECT(interp_gil, W_CEVAL_GIL),
        DIRECT(interp_modules, W_IMPORTS_MODULES), DIRECT(frame_localsplus, W_FRAME_LOCALSPLUS),
        DIRECT(code_varnames, W_CODE_LOCALSPLUSNAMES),
    };
#undef DIRECT
    sw_py_layout l = *base;
    l.version_hex = (uint32_t)version;
    for (size_t i = 0; i < sizeof direct / sizeof direct[0]; i++) {
        uint32_t v = (uint32_t)word(raw, direct[i].w);   /* checked above: below 2^24 */
        memcpy((unsigned char *)&l + direct[i].field, &v, sizeof v);
    }
    /* Derived: datastack_top follows datastack_chunk in PyThreadState, and
     * the compact header and the legacy data pointer follow the ASCII
     * header, as in the base; the frame is read up to its localsplus. */
    l.tstate_datastack_top = l.tstate_datastack_chunk + (base->tstate_datastack_top - base->tstate_datastack_chunk);
    l.str_compact_data = l.str_ascii_data + (base->str_compact_data - base->str_ascii_data);
    l.str_legacy_data = l.str_ascii_data + (base->str_legacy_data - base->str_ascii_data);
    l.frame_size = (uint32_t)MAX2(word(raw, W_FRAME_LOCALSPLUS), word(raw, W_FRAME_INSTR) + 8);
    uint32_t end = MAX2(l.code_name + 8, l.code_filename + 8);
    end = MAX2(end, l.code_firstlineno + 4);
    end = MAX2(end, l.code_qualname + 8);
    end = MAX2(end, l.ob_type + 8);
    l.code_size = MAX2(end, l.code_linetable + 8);
    /* A code object's frame size (pystack.c "Frames that fit"), which the
     * debug offsets do not give, is kept from the base while the code
     * object and the frame lie out as there; else it is not told. */
    if (l.code_name != base->code_name || l.code_qualname != base->code_qualname ||
        l.code_filename != base->code_filename || l.code_firstlineno != base->code_firstlineno ||
        l.code_linetable != base->code_linetable || l.code_varnames != base->code_varnames ||
        l.code_code != base->code_code || l.frame_localsplus != base->frame_localsplus) {
        l.code_nlocalsplus = l.code_stacksize = SW_NO_OFFSET;
        l.frame_specials = 0;
    } else if (l.code_nlocalsplus != SW_NO_OFFSET) {
        l.code_size = MAX2(l.code_size, MAX2(l.code_nlocalsplus, l.code_stacksize) + 4);
    }
    l.gil_locked = (uint32_t)(locked - gil);
    l.gil_last_holder = (uint32_t)(holder - gil);
    /* interpreters.main follows interpreters.head in _PyRuntimeState. */
    l.runtime_interp_main = (uint32_t)word(raw, W_INTERPRETERS_HEAD) + 8;
    /* Whether the target's PyInterpreterState is the base's in size and in
     * each offset both give (what the base's offsets into it need). */
    const int interp_as_base = word(raw, W_INTERP_SIZE) == base->interp_size &&
                               l.interp_threads_head == base->interp_threads_head &&
                               l.interp_modules == base->interp_modules && l.interp_gil == base->interp_gil;
    /* The counter of code objects made and the count of interpreters
     * (layout.h) are not among the debug offsets: the base's are kept
     * only while interp_as_base, and next_id (after main, as in the
     * base) lies inside _PyRuntimeState; else they are left out, and
     * every walk reads its code objects' headers (pystack.c). */
    if (base->interp_code_counter == SW_NO_OFFSET || !interp_as_base ||
        base->runtime_interp_next_id < base->runtime_interp_main ||
        l.runtime_interp_main + (base->runtime_interp_next_id - base->runtime_interp_main) + 8 >
            word(raw, W_RUNTIME_SIZE)) {
        l.interp_code_counter = l.runtime_interp_next_id = SW_NO_OFFSET;
    } else {
        l.runtime_interp_next_id = l.runtime_interp_main + (base->runtime_interp_next_id - base->runtime_interp_main);
    }
    /* So are the audit hooks (attach's check): the base's kept while
     * interp_as_base, and _PyRuntimeState's interpreters where the base
     * has them, with the hooks' word inside it. */
    if (base->interp_audit_hooks == SW_NO_OFFSET || !interp_as_base ||
        l.runtime_interp_main != base->runtime_interp_main ||
        base->runtime_audit_hooks + 8 > word(raw, W_RUNTIME_SIZE))
        l.interp_audit_hooks = l.runtime_audit_hooks = SW_NO_OFFSET;
    l.interp_size = (uint32_t)word(raw, W_INTERP_SIZE);   /* checked above: below 2^24 */
#undef FAIL
    int rc = sw_layout_validate(&l, err, errlen);
    if (rc == SW_OK)
        *out = l;
    return rc;
}
