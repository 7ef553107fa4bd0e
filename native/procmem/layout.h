/*
 * layout.h - where CPython keeps what a stack reader needs, as plain
 * offsets: the one input that differs between Python versions (and builds).
 *
 * The reader (pystack.c) knows nothing about any CPython header; it reads
 * memory only through these numbers. In-process, native/ext/sampler/sampler_layout.c
 * fills them with offsetof() from the headers of the version being compiled.
 * To read another process the same struct can be filled from the target's
 * _Py_DebugOffsets (3.13+) or from per-version tables; sw_layout_validate
 * then checks it once, so that the hot path can trust it.
 *
 * All offsets are in bytes from the start of the object named by the
 * prefix. SW_NO_OFFSET marks a field this version does not have.
 */
#ifndef SW_LAYOUT_H
#define SW_LAYOUT_H

#include "base/base.h"

#define SW_NO_OFFSET 0xffffffffu
#define SW_LAYOUT_MAX_READ 4096u   /* most bytes of one object the reader reads at once */
#define SW_GEN_STATE_BACK_MAX 64u  /* bound of sw_py_layout.gen_state_back */

typedef enum {
    SW_FRAMES_OBJECTS = 1,   /* 3.9/3.10: a chain of PyFrameObject (f_back, f_code) */
    SW_FRAMES_INTERP = 2,    /* 3.11+: a chain of _PyInterpreterFrame (previous, f_code/f_executable) */
} sw_frames_kind;

typedef struct sw_py_layout {
    uint32_t version_hex;          /* PY_VERSION_HEX of the target */
    uint32_t frames_kind;          /* sw_frames_kind */
    uint32_t pointer_size;         /* must be sizeof(void *) of the reader */

    uint32_t ob_refcnt;            /* PyObject.ob_refcnt */
    uint32_t ob_type;              /* PyObject.ob_type */

    /* PyInterpreterState */
    uint32_t interp_threads_head;  /* first PyThreadState of the interpreter */

    /* PyThreadState: tstate_size bytes are read at once and must cover
     * every field below. */
    uint32_t tstate_size;
    uint32_t tstate_next;
    uint32_t tstate_prev;              /* the list's back link: checked as the list is walked */
    uint32_t reserved;                 /* 0: keeps tstate_prev's 32 bits paired (the struct unpadded) */
    uint32_t tstate_interp;
    uint32_t tstate_thread_id;         /* unsigned long, threading.get_ident() */
    uint32_t tstate_native_thread_id;  /* unsigned long, or SW_NO_OFFSET */
    uint32_t tstate_frame;             /* the current frame, or (cframe_current_frame
                                          set) the pointer to the _PyCFrame holding it */
    uint32_t cframe_current_frame;     /* 3.11/3.12: _PyCFrame.current_frame, else SW_NO_OFFSET */
    uint32_t cframe_previous;          /* 3.11/3.12: _PyCFrame.previous (the word after
                                          current_frame: read with it), else SW_NO_OFFSET */
    uint32_t tstate_root_cframe;       /* 3.11/3.12: PyThreadState.root_cframe, the _PyCFrame
                                          below a thread's outermost run, else SW_NO_OFFSET */
    uint32_t tstate_datastack_chunk;   /* 3.11+: the current _PyStackChunk, else SW_NO_OFFSET */
    uint32_t tstate_datastack_top;     /* 3.11+: first free slot in that chunk */
    uint32_t chunk_data;               /* _PyStackChunk.data */

    /* A frame: frame_size bytes are read and must cover these fields. */
    uint32_t frame_size;
    uint32_t frame_previous;
    uint32_t frame_code;           /* f_code (<= 3.12) or f_executable (3.13) */
    uint32_t frame_owner;          /* char owner, or SW_NO_OFFSET */
    uint32_t owner_cstack;         /* value of FRAME_OWNED_BY_CSTACK (3.12+: shim frames
                                      that are skipped), or SW_NO_OFFSET */
    uint32_t frame_is_entry;       /* 3.11: char is_entry (the root-most frame of one run
                                      of the interpreter function), else SW_NO_OFFSET */

    /* Telling a torn stack (pystack.c "Torn stacks"). A generator's or
     * coroutine's frame is linked to the frame that resumed it only while
     * it runs: the link is cleared when it yields or returns.
     * 3.11+: frames owned by owner_thread, owner_generator (a frame
     * embedded in its generator object, whose int8 frame state lies
     * gen_state_back bytes before the frame and equals gen_executing while
     * it runs) or owner_cstack; any other owner is not on a stack.
     * 3.9/3.10: frame_gen is PyFrameObject.f_gen (non-NULL: a generator's
     * frame). SW_NO_OFFSET where a version has no such thing. */
    uint32_t owner_thread;         /* FRAME_OWNED_BY_THREAD */
    uint32_t owner_generator;      /* FRAME_OWNED_BY_GENERATOR */
    uint32_t gen_state_back;       /* offsetof(PyGenObject, gi_iframe) - offsetof(..., gi_frame_state) */
    uint32_t gen_executing;        /* FRAME_EXECUTING, as the byte the state holds */
    uint32_t frame_gen;            /* 3.9/3.10: f_gen (a pointer) */
    uint32_t frame_state;          /* 3.9/3.10: the byte saying whether the frame runs
                                      (f_executing / f_state), else SW_NO_OFFSET ... */
    uint32_t frame_running;        /* ... and the values (bits of this mask, 0-7) it has
                                      while it does: a frame with no f_back that does not
                                      run (a generator just finished) is no thread's root */
    uint32_t frame_globals;        /* f_globals (the code cache's check that a frame's code
                                      object is the one it knows), or SW_NO_OFFSET */
    uint32_t frame_func;           /* 3.11+: f_func / f_funcobj, None (at none_addr) only in
                                      the interpreter's own frames that run no function
                                      (3.13: the __init__ cleanup frame of
                                      CALL_ALLOC_AND_ENTER_INIT), which are skipped like
                                      shims; SW_NO_OFFSET before 3.11 */
    uint32_t interp_trampoline;    /* 3.12: PyInterpreterState.interpreter_trampoline, the
                                      code object of the shim frames (a frame that has it
                                      but not their owner is one read half-made) */

    /* PyCodeObject: code_size bytes are read and must cover these fields. */
    uint32_t code_size;
    uint32_t code_name;
    uint32_t code_qualname;        /* co_qualname, or the same as code_name before 3.11 */
    uint32_t code_filename;
    uint32_t code_firstlineno;     /* int */
    /* 3.11+: the size of a code object's frames, in pointer-sized words:
     * frame_specials + co_nlocalsplus + co_stacksize (two ints; 3.12+
     * keep the sum as co_framesize). The interpreter takes each frame from
     * the top of the thread's stack chunk, so a frame called from another
     * in the same chunk begins exactly that many words after it (pystack.c
     * "Frames that fit"). SW_NO_OFFSET (frame_specials 0) before 3.11. */
    uint32_t code_nlocalsplus;
    uint32_t code_stacksize;       /* (frame_specials: below, where it keeps the struct unpadded) */

    /* str (PEP 393): the state bit field is described by shifts and masks
     * of the 32-bit word at str_state. */
    uint32_t str_length;           /* Py_ssize_t length in code points */
    uint32_t str_state;
    uint32_t str_kind_shift, str_kind_mask;   /* kind = (state >> shift) & mask: 1, 2 or 4 */
    uint32_t str_compact_mask, str_ascii_mask;
    uint32_t str_ascii_data;       /* data of a compact ASCII string: sizeof(PyASCIIObject) */
    uint32_t str_compact_data;     /* data of another compact string: sizeof(PyCompactUnicodeObject) */
    uint32_t str_legacy_data;      /* PyUnicodeObject.data.any (a pointer), or SW_NO_OFFSET */
    uint32_t str_header_size;      /* bytes read to decode the header */

    /* The kernel thread id, where a thread state has none (before 3.11):
     * the offset of a 32-bit tid inside the object that tstate_thread_id
     * points to (glibc's struct pthread, as pthread_self() gives it), or
     * SW_NO_OFFSET. */
    uint32_t thread_tid;

    /* The GIL (struct _gil_runtime_state): where it is, either inside
     * _PyRuntime (3.9-3.11: runtime_addr + runtime_gil) or through a
     * pointer in the interpreter (3.12+: interp_gil); gil_size bytes of it,
     * its `locked` flag (an int) and `last_holder` (a thread state
     * pointer). Everything SW_NO_OFFSET (or 0) when unknown: then no
     * sample says whether its thread held or waited for the GIL. */
    uint64_t runtime_addr;         /* address of _PyRuntime, 0 if unknown */
    uint32_t runtime_interp_main;  /* _PyRuntimeState.interpreters.main (a pointer), or
                                      SW_NO_OFFSET: how a reader from outside finds the
                                      interpreter (target.h) */
    uint32_t runtime_gil;
    uint32_t interp_gil;
    /* 3.13's counter of code objects made, one per interpreter (pystack.c
     * "Code objects by counter"): PyInterpreterState.func_state.next_version
     * (a uint32_t), and _PyRuntimeState.interpreters.next_id (an int64_t,
     * the interpreters made so far: while it is 1 only the main one ever
     * ran, so every code object came from its counter); SW_NO_OFFSET in
     * other versions (3.12's counter is a static: target.h); interp_size
     * (below) is sizeof(PyInterpreterState), which debug_offsets.c
     * compares with the target's before trusting the counter's offset. */
    uint32_t interp_code_counter;
    uint32_t runtime_interp_next_id;
    uint32_t gil_size;
    uint32_t gil_locked;
    uint32_t gil_last_holder;

    /* The line being run (the profiler's lines mode); linetable_kind 0
     * (SW_LINETABLE_NONE) when not described. A frame's current instruction
     * is either an int at frame_lasti (3.9/3.10; in units of lasti_unit
     * bytes, -1 before the first instruction) or a pointer at frame_instr
     * (3.11+: prev_instr / instr_ptr) into the code units that start
     * code_code bytes into the code object. The table is the bytes object
     * at code_linetable (co_lnotab / co_linetable): its size at bytes_size,
     * its data at bytes_data. */
    uint32_t linetable_kind;       /* SW_LINETABLE_* of linetable.h */
    uint32_t frame_lasti;
    uint32_t lasti_unit;
    uint32_t frame_instr;
    uint32_t code_code;
    uint32_t code_linetable;
    uint32_t bytes_size;
    uint32_t bytes_data;

    /* Addresses of the type objects, to check what a pointer points to;
     * 0 means "unknown, do not check". */
    uint64_t code_type;
    uint64_t str_type;
    uint64_t frame_type;           /* PyFrame_Type (frame objects, before 3.11) */
    uint64_t none_addr;            /* Py_None (_Py_NoneStruct), for frame_func; 0 if unknown */

    /* Objects read by name (threadnames.h: threading._active and each
     * Thread's _name), 3.11+. managed_kind 0 (SW_MANAGED_NONE) and the
     * rest SW_NO_OFFSET before: 3.9/3.10 keep their dict keys object in
     * Objects/dict-common.h, which no installed header has (a reader binds
     * them in from asyncio_layout.h: sw_asyncio_bind_objects). */
    uint32_t managed_kind;         /* SW_MANAGED_*: where an instance keeps its attributes */
    uint32_t interp_modules;       /* PyInterpreterState's sys.modules (a dict pointer) */
    uint32_t module_dict;          /* PyModuleObject.md_dict */
    uint32_t dict_keys;            /* PyDictObject.ma_keys */
    uint32_t dict_values;          /* PyDictObject.ma_values (split dicts) */
    uint32_t keys_log2_size;       /* uint8_t fields of PyDictKeysObject */
    uint32_t keys_log2_index_bytes;
    uint32_t keys_kind;
    uint32_t keys_nentries;        /* Py_ssize_t */
    uint32_t keys_indices;         /* the index table; entries follow it */
    uint32_t keys_kind_general;    /* DICT_KEYS_GENERAL: entries are PyDictKeyEntry, else PyDictUnicodeEntry */
    uint32_t entry_size, entry_key, entry_value;      /* PyDictKeyEntry */
    uint32_t uentry_size, uentry_key, uentry_value;   /* PyDictUnicodeEntry */
    uint32_t values_values;        /* PyDictValues.values */
    uint32_t values_valid;         /* 3.13: PyDictValues.valid (uint8_t), else SW_NO_OFFSET */
    uint32_t long_size;            /* int: ob_size (3.11, signed count of digits) or lv_tag (3.12+) */
    uint32_t long_non_size_bits;   /* 0 for ob_size; lv_tag's low bits that are not the count */
    uint32_t long_digits, long_digit_size, long_shift;
    uint32_t type_flags;           /* PyTypeObject.tp_flags (unsigned long) */
    uint32_t type_basicsize;       /* PyTypeObject.tp_basicsize */
    uint32_t heaptype_cached_keys; /* PyHeapTypeObject.ht_cached_keys: the shared keys */
    uint32_t managed_dict_back;    /* bytes before the object of its dict pointer (-MANAGED_DICT_OFFSET) */
    uint32_t managed_values_back;  /* 3.11: bytes before the object of its values pointer */
    uint32_t tpflags_managed_dict; /* Py_TPFLAGS_MANAGED_DICT */
    uint32_t tpflags_inline_values;/* 3.13: Py_TPFLAGS_INLINE_VALUES, else 0 */
    uint32_t managed_untag;        /* 3.12: added to the tagged word to get the values' address */
    /* 3.9/3.10 (managed_kind SW_MANAGED_DICTOFFSET): a dict's keys object
     * has a slot count, dk_size (a Py_ssize_t at keys_size), not its log2;
     * its index table (keys_indices) has 1, 2, 4 or 8 bytes per slot as the
     * count needs, then PyDictKeyEntry entries; an instance keeps its dict
     * at its type's tp_dictoffset. The keys object's private layout
     * (Objects/dict-common.h, not installed) and the module's dict come
     * from probing those releases (asyncio_layout.h), bound in by the
     * readers that need them (asynciotree.c, threadnames.c); the headers give the rest. */
    uint32_t keys_size;            /* 3.9/3.10: PyDictKeysObject.dk_size, else SW_NO_OFFSET */
    uint32_t type_dictoffset;      /* PyTypeObject.tp_dictoffset */

    /* A frame's local variables (pylocals.h: `dump --locals`). 3.11+: the
     * values are the frame's localsplus array, named by the code's
     * co_localsplusnames tuple (code_varnames); 3.9/3.10: f_localsplus,
     * named by co_varnames, then co_cellvars, then co_freevars. A cell
     * (a cell or free variable) is shown as what it holds. The simple
     * values are read as themselves: int (the long fields above), bool,
     * float, str, bytes, None; any other is named by its type's tp_name. */
    uint32_t frame_localsplus;     /* localsplus / f_localsplus */
    uint32_t code_varnames;        /* co_localsplusnames (3.11+) / co_varnames */
    uint32_t code_cellvars;        /* 3.9/3.10: co_cellvars, else SW_NO_OFFSET */
    uint32_t code_freevars;        /* 3.9/3.10: co_freevars, else SW_NO_OFFSET */
    uint32_t tuple_size;           /* PyTupleObject's ob_size */
    uint32_t tuple_items;          /* PyTupleObject.ob_item */
    uint32_t float_value;          /* PyFloatObject.ob_fval */
    uint32_t type_name;            /* PyTypeObject.tp_name (a char pointer) */
    uint32_t cell_ref;             /* PyCellObject.ob_ref */
    uint32_t frame_specials;       /* 3.11+: FRAME_SPECIALS_SIZE, the frame's own words (code_nlocalsplus);
                                      here, its one 32-bit field before the 64-bit ones, the struct
                                      has no padding (layout.c's tripwire counts every byte) */
    /* The audit hooks (attach refuses a process that has any: its start-up
     * is compiled and run there, which a hook may refuse): the interpreter's
     * Python hooks (a list pointer, NULL when none was added) and the
     * runtime's C hooks (the head of a linked list); SW_NO_OFFSET where
     * unknown (a layout from the debug offsets). */
    uint32_t interp_audit_hooks;
    uint32_t runtime_audit_hooks;
    /* 3.11/3.12: the opcodes that return from a frame (RETURN_VALUE, 3.12's
     * RETURN_CONST and their instrumented forms), SW_NO_OFFSET where none
     * or on other versions: a frame whose current instruction (prev_instr)
     * is one is returning, or returned and left as it was (pystack.c
     * "Returned frames"). */
    uint32_t op_return_value;
    uint32_t op_return_const;
    uint32_t op_return_value_instrumented;
    uint32_t op_return_const_instrumented;
    uint64_t long_type;            /* the type objects, in the target (0: unknown) */
    uint64_t bool_type;
    uint64_t float_type;
    uint64_t bytes_type;
    uint64_t tuple_type;
    uint64_t cell_type;
    uint64_t interp_size;          /* sizeof(PyInterpreterState) (above, interp_code_counter) */
} sw_py_layout;

/* managed_kind: how an instance of a class without __slots__ keeps its
 * attributes. */
enum {
    SW_MANAGED_NONE = 0,     /* not described: attributes are not read */
    SW_MANAGED_3_11 = 1,     /* values pointer and dict pointer before the object */
    SW_MANAGED_TAGGED = 2,   /* 3.12: one word before it, values when its low bit is set, else a dict */
    SW_MANAGED_INLINE = 3,   /* 3.13: values inline after tp_basicsize (if the type says so and they
                                are valid), else the dict pointer before it */
    SW_MANAGED_DICTOFFSET = 4,   /* 3.9/3.10: a dict at the type's tp_dictoffset (keys_size above) */
};

/* Every field of sw_py_layout, in order, with its width in bits: the
 * generated tables of known versions (layouts_known.c, written by
 * scripts/gen-layouts.py) are printed from this list, and layout.c checks
 * at compile time that it names every field (a field added to the struct
 * but not here fails the build; so does padding: keep 32-bit fields in
 * pairs). */
#define SW_PY_LAYOUT_FIELDS(X) \
    X(version_hex, 32) X(frames_kind, 32) X(pointer_size, 32) X(ob_refcnt, 32) X(ob_type, 32) \
    X(interp_threads_head, 32) X(tstate_size, 32) X(tstate_next, 32) X(tstate_prev, 32) X(reserved, 32) X(tstate_interp, 32) \
    X(tstate_thread_id, 32) X(tstate_native_thread_id, 32) X(tstate_frame, 32) \
    X(cframe_current_frame, 32) X(cframe_previous, 32) X(tstate_root_cframe, 32) X(tstate_datastack_chunk, 32) X(tstate_datastack_top, 32) \
    X(chunk_data, 32) X(frame_size, 32) X(frame_previous, 32) X(frame_code, 32) X(frame_owner, 32) \
    X(owner_cstack, 32) X(frame_is_entry, 32) X(owner_thread, 32) X(owner_generator, 32) \
    X(gen_state_back, 32) X(gen_executing, 32) X(frame_gen, 32) X(frame_state, 32) X(frame_running, 32) \
    X(frame_globals, 32) X(frame_func, 32) X(interp_trampoline, 32) X(code_size, 32) X(code_name, 32) X(code_qualname, 32) \
    X(code_filename, 32) X(code_firstlineno, 32) X(code_nlocalsplus, 32) X(code_stacksize, 32) \
    X(str_length, 32) X(str_state, 32) \
    X(str_kind_shift, 32) X(str_kind_mask, 32) X(str_compact_mask, 32) X(str_ascii_mask, 32) \
    X(str_ascii_data, 32) X(str_compact_data, 32) X(str_legacy_data, 32) X(str_header_size, 32) \
    X(thread_tid, 32) X(runtime_addr, 64) X(runtime_interp_main, 32) X(runtime_gil, 32) \
    X(interp_gil, 32) X(interp_code_counter, 32) X(runtime_interp_next_id, 32) \
    X(gil_size, 32) X(gil_locked, 32) X(gil_last_holder, 32) X(linetable_kind, 32) \
    X(frame_lasti, 32) X(lasti_unit, 32) X(frame_instr, 32) X(code_code, 32) X(code_linetable, 32) \
    X(bytes_size, 32) X(bytes_data, 32) X(code_type, 64) X(str_type, 64) X(frame_type, 64) X(none_addr, 64) \
    X(managed_kind, 32) X(interp_modules, 32) X(module_dict, 32) X(dict_keys, 32) X(dict_values, 32) \
    X(keys_log2_size, 32) X(keys_log2_index_bytes, 32) X(keys_kind, 32) X(keys_nentries, 32) \
    X(keys_indices, 32) X(keys_kind_general, 32) X(entry_size, 32) X(entry_key, 32) X(entry_value, 32) \
    X(uentry_size, 32) X(uentry_key, 32) X(uentry_value, 32) X(values_values, 32) X(values_valid, 32) \
    X(long_size, 32) X(long_non_size_bits, 32) X(long_digits, 32) X(long_digit_size, 32) X(long_shift, 32) \
    X(type_flags, 32) X(type_basicsize, 32) X(heaptype_cached_keys, 32) X(managed_dict_back, 32) \
    X(managed_values_back, 32) X(tpflags_managed_dict, 32) X(tpflags_inline_values, 32) \
    X(managed_untag, 32) X(keys_size, 32) X(type_dictoffset, 32) X(frame_localsplus, 32) X(code_varnames, 32) \
    X(code_cellvars, 32) X(code_freevars, 32) X(tuple_size, 32) X(tuple_items, 32) X(float_value, 32) X(type_name, 32) \
    X(cell_ref, 32) X(frame_specials, 32) X(interp_audit_hooks, 32) X(runtime_audit_hooks, 32) \
    X(op_return_value, 32) X(op_return_const, 32) X(op_return_value_instrumented, 32) \
    X(op_return_const_instrumented, 32) X(long_type, 64) X(bool_type, 64) X(float_type, 64) X(bytes_type, 64) X(tuple_type, 64) \
    X(cell_type, 64) X(interp_size, 64)

/* Checks that the layout is usable: known kinds, every field inside the
 * bytes read, read sizes within SW_LAYOUT_MAX_READ. Returns 0 or SW_EARG,
 * with a description of the first problem in err. */
int sw_layout_validate(const sw_py_layout *l, char *err, size_t errlen);

#endif
