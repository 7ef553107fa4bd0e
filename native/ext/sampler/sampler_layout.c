/*
 * sampler_layout.c - offsets of the running CPython's structures for the
 * stack reader (see sampler_layout.h and native/procmem/layout.h).
 *
 * Only offsetof/sizeof and the addresses of a few type objects are taken
 * here; no function of the interpreter is called (but making empty code
 * objects, to find 3.12's counter of code objects made:
 * sw_sampler_code_counter), so
 * defining Py_BUILD_CORE (needed for PyInterpreterState and
 * _PyInterpreterFrame) changes nothing at run time.
 */
#ifndef Py_BUILD_CORE
#  define Py_BUILD_CORE 1
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "sampler_layout.h"

#include <string.h>

#if PY_VERSION_HEX >= 0x030E0000
/* Not supported yet (3.14 tags frame pointers to code objects): sampler.c
 * refuses to start, and the layout stays empty. */
void sw_sampler_layout_fill(sw_py_layout *l)
{
    memset(l, 0, sizeof *l);
}

uint32_t sw_sampler_thread_tid_offset(void)
{
    return SW_NO_OFFSET;
}

int sw_sampler_code_counter(void *interp, uint64_t *counter, uint64_t *interps)
{
    (void)interp;
    *counter = *interps = 0;
    return SW_EARG;
}
#else

#if PY_VERSION_HEX >= 0x030B0000
#  include <internal/pycore_frame.h>
#else
#  include <frameobject.h>
#  include <longintrepr.h>
#endif
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#if PY_VERSION_HEX >= 0x030B0000
/* 3.13's inline functions there have unused parameters */
#  pragma GCC diagnostic push
#  pragma GCC diagnostic ignored "-Wunused-parameter"
#  include <internal/pycore_dict.h>
#  include <internal/pycore_moduleobject.h>
#  include <internal/pycore_object.h>
#  pragma GCC diagnostic pop
#endif

#include "procmem/procmem.h"

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
#  include <opcode.h>   /* (the return opcodes) */
#endif

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#define OFF(type, field) ((uint32_t)offsetof(type, field))
#define END(type, field) ((uint32_t)(offsetof(type, field) + sizeof(((type *)0)->field)))
#define MAX2(a, b) ((a) > (b) ? (a) : (b))

/* The str state bit field cannot be named by offsetof: set one member in a
 * zeroed object and see which bits of the word change. */
static uint32_t state_word(const PyASCIIObject *o)
{
    uint32_t w;
    memcpy(&w, (const char *)o + offsetof(PyASCIIObject, state), sizeof w);
    return w;
}

static void fill_str(sw_py_layout *l)
{
    PyASCIIObject o;
    memset(&o, 0, sizeof o);
    o.state.kind = 7;
    uint32_t kind = state_word(&o);
    memset(&o, 0, sizeof o);
    o.state.compact = 1;
    l->str_compact_mask = state_word(&o);
    memset(&o, 0, sizeof o);
    o.state.ascii = 1;
    l->str_ascii_mask = state_word(&o);
    l->str_kind_shift = kind ? (uint32_t)__builtin_ctz(kind) : 0;
    l->str_kind_mask = kind >> l->str_kind_shift;
    l->str_length = OFF(PyASCIIObject, length);
    l->str_state = OFF(PyASCIIObject, state);
    l->str_ascii_data = (uint32_t)sizeof(PyASCIIObject);
    l->str_compact_data = (uint32_t)sizeof(PyCompactUnicodeObject);
    l->str_legacy_data = OFF(PyUnicodeObject, data);
    l->str_header_size = (uint32_t)sizeof(PyUnicodeObject);
    l->str_type = (uint64_t)(uintptr_t)&PyUnicode_Type;
}

static void fill_code(sw_py_layout *l)
{
    l->code_name = OFF(PyCodeObject, co_name);
#if PY_VERSION_HEX >= 0x030B0000
    l->code_qualname = OFF(PyCodeObject, co_qualname);
#else
    l->code_qualname = l->code_name;
#endif
    l->code_filename = OFF(PyCodeObject, co_filename);
    l->code_firstlineno = OFF(PyCodeObject, co_firstlineno);
    uint32_t end = MAX2(END(PyCodeObject, co_name), END(PyCodeObject, co_filename));
    end = MAX2(end, END(PyCodeObject, co_firstlineno));
    end = MAX2(end, l->code_qualname + (uint32_t)sizeof(PyObject *));
    end = MAX2(end, END(PyObject, ob_type));
#if PY_VERSION_HEX >= 0x030B0000
    l->code_nlocalsplus = OFF(PyCodeObject, co_nlocalsplus);
    l->code_stacksize = OFF(PyCodeObject, co_stacksize);
    l->frame_specials = (uint32_t)FRAME_SPECIALS_SIZE;
    end = MAX2(end, END(PyCodeObject, co_nlocalsplus));
    end = MAX2(end, END(PyCodeObject, co_stacksize));
#else
    l->code_nlocalsplus = l->code_stacksize = SW_NO_OFFSET;
    l->frame_specials = 0;
#endif
    l->code_size = end;
    l->code_type = (uint64_t)(uintptr_t)&PyCode_Type;
}

static void fill_threads(sw_py_layout *l)
{
    l->tstate_size = (uint32_t)sizeof(PyThreadState);
    l->tstate_next = OFF(PyThreadState, next);
    l->tstate_prev = OFF(PyThreadState, prev);
    l->tstate_interp = OFF(PyThreadState, interp);
    l->tstate_thread_id = OFF(PyThreadState, thread_id);
    l->tstate_native_thread_id = SW_NO_OFFSET;
    l->cframe_current_frame = SW_NO_OFFSET;
    l->cframe_previous = SW_NO_OFFSET;
    l->tstate_root_cframe = SW_NO_OFFSET;
    l->tstate_datastack_chunk = SW_NO_OFFSET;
    l->tstate_datastack_top = SW_NO_OFFSET;
    l->chunk_data = 0;
#if PY_VERSION_HEX >= 0x030B0000
    l->interp_threads_head = OFF(PyInterpreterState, threads.head);
    l->tstate_native_thread_id = OFF(PyThreadState, native_thread_id);
    l->tstate_datastack_chunk = OFF(PyThreadState, datastack_chunk);
    l->tstate_datastack_top = OFF(PyThreadState, datastack_top);
    l->chunk_data = OFF(_PyStackChunk, data);
#  if PY_VERSION_HEX >= 0x030D0000
    l->tstate_frame = OFF(PyThreadState, current_frame);
#  else
    l->tstate_frame = OFF(PyThreadState, cframe);
    l->cframe_current_frame = OFF(_PyCFrame, current_frame);
    l->cframe_previous = OFF(_PyCFrame, previous);
    l->tstate_root_cframe = OFF(PyThreadState, root_cframe);
#  endif
#else
    l->interp_threads_head = OFF(PyInterpreterState, tstate_head);
    l->tstate_frame = OFF(PyThreadState, frame);
#endif
}

static void fill_frames(sw_py_layout *l)
{
#if PY_VERSION_HEX >= 0x030B0000
    l->frames_kind = SW_FRAMES_INTERP;
    l->frame_previous = OFF(_PyInterpreterFrame, previous);
#  if PY_VERSION_HEX >= 0x030D0000
    l->frame_code = OFF(_PyInterpreterFrame, f_executable);
#  else
    l->frame_code = OFF(_PyInterpreterFrame, f_code);
#  endif
    l->frame_owner = OFF(_PyInterpreterFrame, owner);
#  if PY_VERSION_HEX < 0x030C0000
    l->frame_is_entry = OFF(_PyInterpreterFrame, is_entry);
#  else
    l->frame_is_entry = SW_NO_OFFSET;
#  endif
#  if PY_VERSION_HEX >= 0x030C0000
    l->owner_cstack = FRAME_OWNED_BY_CSTACK;
#  else
    l->owner_cstack = SW_NO_OFFSET;
#  endif
    l->owner_thread = FRAME_OWNED_BY_THREAD;
    l->owner_generator = FRAME_OWNED_BY_GENERATOR;
    l->gen_state_back = OFF(PyGenObject, gi_iframe) - OFF(PyGenObject, gi_frame_state);
    l->gen_executing = (uint8_t)FRAME_EXECUTING;
    l->frame_gen = SW_NO_OFFSET;
    l->frame_state = SW_NO_OFFSET;
#  if PY_VERSION_HEX >= 0x030C0000
    l->frame_func = OFF(_PyInterpreterFrame, f_funcobj);
#  else
    l->frame_func = OFF(_PyInterpreterFrame, f_func);
#  endif
    l->none_addr = (uint64_t)(uintptr_t)Py_None;
    l->frame_globals = OFF(_PyInterpreterFrame, f_globals);
#  if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000
    l->interp_trampoline = OFF(PyInterpreterState, interpreter_trampoline);
#  else
    l->interp_trampoline = SW_NO_OFFSET;   /* 3.13: a shim's f_executable is None */
#  endif
    l->frame_size = OFF(_PyInterpreterFrame, localsplus);
#else
    l->frames_kind = SW_FRAMES_OBJECTS;
    l->frame_previous = OFF(PyFrameObject, f_back);
    l->frame_code = OFF(PyFrameObject, f_code);
    l->frame_owner = SW_NO_OFFSET;
    l->owner_cstack = SW_NO_OFFSET;
    l->frame_is_entry = SW_NO_OFFSET;
    l->owner_thread = SW_NO_OFFSET;
    l->owner_generator = SW_NO_OFFSET;
    l->gen_state_back = SW_NO_OFFSET;
    l->gen_executing = SW_NO_OFFSET;
    l->frame_gen = OFF(PyFrameObject, f_gen);
    l->interp_trampoline = SW_NO_OFFSET;
    l->frame_func = SW_NO_OFFSET;
    l->frame_globals = OFF(PyFrameObject, f_globals);
    l->frame_size = MAX2(END(PyFrameObject, f_back), END(PyFrameObject, f_code));
    l->frame_size = MAX2(l->frame_size, END(PyFrameObject, f_gen));
    l->frame_size = MAX2(l->frame_size, END(PyFrameObject, f_globals));
#  if PY_VERSION_HEX >= 0x030A0000
    l->frame_state = OFF(PyFrameObject, f_state);
    l->frame_running = (1u << FRAME_EXECUTING) | (1u << FRAME_UNWINDING);
#  else
    l->frame_state = OFF(PyFrameObject, f_executing);
    l->frame_running = 1u << 1;
#  endif
    l->frame_size = MAX2(l->frame_size, l->frame_state + 1);
    l->frame_size = MAX2(l->frame_size, END(PyObject, ob_type));
    l->frame_type = (uint64_t)(uintptr_t)&PyFrame_Type;
#endif
}

/* Where the line being run is found (linetable.h). After fill_code and
 * fill_frames: widens what is read of frames and code objects. */
static void fill_lines(sw_py_layout *l)
{
    l->frame_lasti = SW_NO_OFFSET;
    l->frame_instr = SW_NO_OFFSET;
    l->bytes_size = OFF(PyVarObject, ob_size);
    l->bytes_data = OFF(PyBytesObject, ob_sval);
#if PY_VERSION_HEX >= 0x030B0000
    l->linetable_kind = SW_LINETABLE_LOCATIONS;
    l->code_linetable = OFF(PyCodeObject, co_linetable);
    l->code_code = OFF(PyCodeObject, co_code_adaptive);
#  if PY_VERSION_HEX >= 0x030D0000
    l->frame_instr = OFF(_PyInterpreterFrame, instr_ptr);
#  else
    l->frame_instr = OFF(_PyInterpreterFrame, prev_instr);
#  endif
    l->frame_size = MAX2(l->frame_size, l->frame_instr + (uint32_t)sizeof(void *));
#else
#  if PY_VERSION_HEX >= 0x030A0000
    l->linetable_kind = SW_LINETABLE_PAIRS;
    l->code_linetable = OFF(PyCodeObject, co_linetable);
    l->lasti_unit = 2;
#  else
    l->linetable_kind = SW_LINETABLE_LNOTAB;
    l->code_linetable = OFF(PyCodeObject, co_lnotab);
    l->lasti_unit = 1;
#  endif
    l->code_code = 0;
    l->frame_lasti = OFF(PyFrameObject, f_lasti);
    l->frame_size = MAX2(l->frame_size, END(PyFrameObject, f_lasti));
#endif
    l->code_size = MAX2(l->code_size, l->code_linetable + (uint32_t)sizeof(PyObject *));
}

/* The GIL: in _PyRuntime before 3.12, behind interp->ceval.gil since. */
static void fill_gil(sw_py_layout *l)
{
    l->runtime_gil = SW_NO_OFFSET;
    l->interp_gil = SW_NO_OFFSET;
    l->gil_size = SW_NO_OFFSET;
    l->gil_locked = SW_NO_OFFSET;
    l->gil_last_holder = SW_NO_OFFSET;
#if PY_VERSION_HEX >= 0x030C0000
    l->interp_gil = OFF(PyInterpreterState, ceval.gil);
#elif defined(EXPERIMENTAL_ISOLATED_SUBINTERPRETERS)
    return;   /* a per-interpreter GIL inside PyInterpreterState: not described */
#else
    l->runtime_addr = (uint64_t)(uintptr_t)&_PyRuntime;
    l->runtime_gil = OFF(_PyRuntimeState, ceval.gil);
#endif
    l->gil_size = (uint32_t)sizeof(struct _gil_runtime_state);
    l->gil_locked = OFF(struct _gil_runtime_state, locked);
    l->gil_last_holder = OFF(struct _gil_runtime_state, last_holder);
}

/* Before 3.11 a thread state has only pthread_self() (glibc: the address
 * of the thread's struct pthread, which holds its kernel tid somewhere).
 * The offset is the first place where this thread's struct holds this
 * thread's tid and a second thread's struct holds that one's. The second
 * thread does the comparison while both are alive (the kernel zeroes a
 * thread's tid field when it exits). Reads go through the fault-safe
 * reader: nothing here assumes glibc; no match leaves the tid unknown. */
#define TID_SCAN 2048

typedef struct {
    uint64_t self;           /* the first thread's pthread_self() */
    uint32_t tid;
    uint32_t offset;         /* result */
} tid_search;

static void *compare_tids(void *arg)
{
    tid_search *q = arg;
    uint64_t self = (uint64_t)(uintptr_t)pthread_self();
    uint32_t tid = (uint32_t)syscall(SYS_gettid);
    unsigned char a[TID_SCAN], b[TID_SCAN];
    sw_mem m;
    char err[160];
    if (tid == q->tid || sw_mem_open(&m, (int)getpid(), self, 8, err, sizeof err) != SW_OK)
        return NULL;
    size_t na = sw_mem_read_upto(&m, q->self, a, sizeof a), nb = sw_mem_read_upto(&m, self, b, sizeof b);
    sw_mem_close(&m);
    size_t n = na < nb ? na : nb;
    for (size_t off = 0; off + 4 <= n; off += 4) {
        uint32_t va, vb;
        memcpy(&va, a + off, 4);
        memcpy(&vb, b + off, 4);
        if (va == q->tid && vb == tid) {
            q->offset = (uint32_t)off;
            break;
        }
    }
    return NULL;
}

/* Called with the GIL held (from Sampler.start), so the cache needs no lock. */
static uint32_t find_thread_tid_offset(void)
{
    static int found;
    static uint32_t offset;
    if (found)
        return offset;
    tid_search q = {(uint64_t)(uintptr_t)pthread_self(), (uint32_t)syscall(SYS_gettid), SW_NO_OFFSET};
    pthread_t th;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);   /* signals stay with the program's threads */
    int rc = pthread_create(&th, NULL, compare_tids, &q);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return SW_NO_OFFSET;
    pthread_join(th, NULL);
    found = 1;
    offset = q.offset;
    return offset;
}

uint32_t sw_sampler_thread_tid_offset(void)
{
    return find_thread_tid_offset();
}

/* What threadnames.c reads by name: modules, dicts, ints and the
 * attributes of instances (layout.h). 3.9/3.10: not described (managed_kind
 * none) but for what the headers say of them. */
static void fill_objects(sw_py_layout *l)
{
    l->managed_kind = SW_MANAGED_NONE;
    uint32_t *none[] = {&l->interp_modules, &l->module_dict, &l->dict_keys, &l->dict_values, &l->keys_log2_size,
                        &l->keys_log2_index_bytes, &l->keys_kind, &l->keys_nentries, &l->keys_indices,
                        &l->keys_kind_general, &l->entry_size, &l->entry_key, &l->entry_value, &l->uentry_size,
                        &l->uentry_key, &l->uentry_value, &l->values_values, &l->values_valid, &l->long_size,
                        &l->long_non_size_bits, &l->long_digits, &l->long_digit_size, &l->long_shift,
                        &l->type_flags, &l->type_basicsize, &l->heaptype_cached_keys, &l->managed_dict_back,
                        &l->managed_values_back, &l->tpflags_managed_dict, &l->tpflags_inline_values,
                        &l->managed_untag};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        *none[i] = SW_NO_OFFSET;
    l->keys_size = SW_NO_OFFSET;
    l->type_dictoffset = OFF(PyTypeObject, tp_dictoffset);
#if PY_VERSION_HEX < 0x030B0000
    /* What the headers have of 3.9/3.10's (SW_MANAGED_DICTOFFSET: the
     * keys object's fields come from asyncio_layout.h, which probes them) */
    l->interp_modules = OFF(PyInterpreterState, modules);
    l->dict_keys = OFF(PyDictObject, ma_keys);
    l->dict_values = OFF(PyDictObject, ma_values);
    l->type_flags = OFF(PyTypeObject, tp_flags);
    l->type_basicsize = OFF(PyTypeObject, tp_basicsize);
#else
#  if PY_VERSION_HEX >= 0x030C0000
    l->interp_modules = OFF(PyInterpreterState, imports.modules);
    l->long_size = OFF(PyLongObject, long_value.lv_tag);
    l->long_digits = OFF(PyLongObject, long_value.ob_digit);
    l->long_non_size_bits = _PyLong_NON_SIZE_BITS;
#  else
    l->interp_modules = OFF(PyInterpreterState, modules);
    l->long_size = OFF(PyVarObject, ob_size);
    l->long_digits = OFF(PyLongObject, ob_digit);
    l->long_non_size_bits = 0;
#  endif
    l->long_digit_size = (uint32_t)sizeof(digit);
    l->long_shift = PyLong_SHIFT;
    l->module_dict = OFF(PyModuleObject, md_dict);
    l->dict_keys = OFF(PyDictObject, ma_keys);
    l->dict_values = OFF(PyDictObject, ma_values);
    l->keys_log2_size = OFF(PyDictKeysObject, dk_log2_size);
    l->keys_log2_index_bytes = OFF(PyDictKeysObject, dk_log2_index_bytes);
    l->keys_kind = OFF(PyDictKeysObject, dk_kind);
    l->keys_nentries = OFF(PyDictKeysObject, dk_nentries);
    l->keys_indices = OFF(PyDictKeysObject, dk_indices);
    l->keys_kind_general = DICT_KEYS_GENERAL;
    l->entry_size = (uint32_t)sizeof(PyDictKeyEntry);
    l->entry_key = OFF(PyDictKeyEntry, me_key);
    l->entry_value = OFF(PyDictKeyEntry, me_value);
    l->uentry_size = (uint32_t)sizeof(PyDictUnicodeEntry);
    l->uentry_key = OFF(PyDictUnicodeEntry, me_key);
    l->uentry_value = OFF(PyDictUnicodeEntry, me_value);
    l->values_values = OFF(PyDictValues, values);
    l->type_flags = OFF(PyTypeObject, tp_flags);
    l->type_basicsize = OFF(PyTypeObject, tp_basicsize);
    l->heaptype_cached_keys = OFF(PyHeapTypeObject, ht_cached_keys);
    l->tpflags_managed_dict = Py_TPFLAGS_MANAGED_DICT;
    l->tpflags_inline_values = 0;
    /* The header says where an instance's pointers are only as code: run
     * it on an object of a type with a managed dict (nothing is read but
     * the type's flags). */
    static PyTypeObject managed_type;
    managed_type.tp_flags = Py_TPFLAGS_MANAGED_DICT;
    PyObject objs[8];
    memset(objs, 0, sizeof objs);
    PyObject *obj = &objs[4];
    Py_SET_TYPE(obj, &managed_type);
#  if PY_VERSION_HEX >= 0x030D0000
    l->managed_dict_back = (uint32_t)((char *)obj - (char *)_PyObject_ManagedDictPointer(obj));
    l->managed_kind = SW_MANAGED_INLINE;
    l->values_valid = OFF(PyDictValues, valid);
    l->tpflags_inline_values = Py_TPFLAGS_INLINE_VALUES;
#  elif PY_VERSION_HEX >= 0x030C0000
    l->managed_dict_back = (uint32_t)((char *)obj - (char *)_PyObject_DictOrValuesPointer(obj));
    PyDictOrValues tagged;
    tagged.values = (char *)objs + 1;   /* the tag bit set: "values" */
    l->managed_untag = (uint32_t)((char *)_PyDictOrValues_GetValues(tagged) - tagged.values);
    l->managed_kind = SW_MANAGED_TAGGED;
#  else
    l->managed_dict_back = (uint32_t)((char *)obj - (char *)_PyObject_ManagedDictPointer(obj));
    l->managed_values_back = (uint32_t)((char *)obj - (char *)_PyObject_ValuesPointer(obj));
    l->managed_kind = SW_MANAGED_3_11;
#  endif
#endif
}

/* A frame's local variables (pylocals.h), every version: where its values
 * and their names are, and the simple objects read as values. After
 * fill_objects: the int fields of 3.9/3.10, which it leaves out, are
 * ob_size and ob_digit as on 3.11. */
static void fill_locals(sw_py_layout *l)
{
#if PY_VERSION_HEX >= 0x030B0000
    l->frame_localsplus = OFF(_PyInterpreterFrame, localsplus);
    l->code_varnames = OFF(PyCodeObject, co_localsplusnames);
    l->code_cellvars = SW_NO_OFFSET;
    l->code_freevars = SW_NO_OFFSET;
#else
    l->frame_localsplus = OFF(PyFrameObject, f_localsplus);
    l->code_varnames = OFF(PyCodeObject, co_varnames);
    l->code_cellvars = OFF(PyCodeObject, co_cellvars);
    l->code_freevars = OFF(PyCodeObject, co_freevars);
    l->long_size = OFF(PyVarObject, ob_size);
    l->long_digits = OFF(PyLongObject, ob_digit);
    l->long_non_size_bits = 0;
    l->long_digit_size = (uint32_t)sizeof(digit);
    l->long_shift = PyLong_SHIFT;
#endif
    l->tuple_size = OFF(PyVarObject, ob_size);
    l->tuple_items = OFF(PyTupleObject, ob_item);
    l->float_value = OFF(PyFloatObject, ob_fval);
    l->type_name = OFF(PyTypeObject, tp_name);
    l->cell_ref = OFF(PyCellObject, ob_ref);
    l->none_addr = (uint64_t)(uintptr_t)Py_None;
    l->long_type = (uint64_t)(uintptr_t)&PyLong_Type;
    l->bool_type = (uint64_t)(uintptr_t)&PyBool_Type;
    l->float_type = (uint64_t)(uintptr_t)&PyFloat_Type;
    l->bytes_type = (uint64_t)(uintptr_t)&PyBytes_Type;
    l->tuple_type = (uint64_t)(uintptr_t)&PyTuple_Type;
    l->cell_type = (uint64_t)(uintptr_t)&PyCell_Type;
}

void sw_sampler_layout_fill(sw_py_layout *l)
{
    memset(l, 0, sizeof *l);
    l->version_hex = PY_VERSION_HEX;
    l->pointer_size = (uint32_t)sizeof(void *);
    l->ob_refcnt = OFF(PyObject, ob_refcnt);
    l->ob_type = OFF(PyObject, ob_type);
    fill_str(l);
    fill_code(l);
    fill_threads(l);
    fill_frames(l);
    fill_lines(l);
    fill_gil(l);
    l->runtime_interp_main = OFF(_PyRuntimeState, interpreters.main);
    l->interp_size = (uint32_t)sizeof(PyInterpreterState);
#if PY_VERSION_HEX >= 0x030D0000
    l->interp_code_counter = OFF(PyInterpreterState, func_state.next_version);
    l->runtime_interp_next_id = OFF(_PyRuntimeState, interpreters.next_id);
#else
    l->interp_code_counter = SW_NO_OFFSET;
    l->runtime_interp_next_id = SW_NO_OFFSET;
#endif
    l->op_return_value = l->op_return_const = SW_NO_OFFSET;
    l->op_return_value_instrumented = l->op_return_const_instrumented = SW_NO_OFFSET;
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
    /* (the frame's prev_instr: 3.13's instr_ptr is the next instruction) */
    l->op_return_value = RETURN_VALUE;
#  if PY_VERSION_HEX >= 0x030C0000
    l->op_return_const = RETURN_CONST;
    l->op_return_value_instrumented = INSTRUMENTED_RETURN_VALUE;
    l->op_return_const_instrumented = INSTRUMENTED_RETURN_CONST;
#  endif
#endif
    l->interp_audit_hooks = OFF(PyInterpreterState, audit_hooks);
#if PY_VERSION_HEX >= 0x030C0000
    l->runtime_audit_hooks = OFF(_PyRuntimeState, audit_hooks.head);
#else
    l->runtime_audit_hooks = OFF(_PyRuntimeState, audit_hook_head);
#endif
    fill_objects(l);
    fill_locals(l);
    l->thread_tid = l->tstate_native_thread_id == SW_NO_OFFSET ? find_thread_tid_offset() : SW_NO_OFFSET;
}

#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000
/* 3.12's counter: the words of libpython's writable segments (every one
 * mapped and readable) that hold the next code object's version, narrowed
 * by making code objects until one word is left that each of them took its
 * version from, then moved by one. Only the pages present in this
 * process's page table are read (/proc/self/pagemap: the counter's page
 * has been written): reading the others would fault each one in (~10 ms
 * for libpython's 2 MB). The word found is kept for the process's next
 * profiler, checked again by one code object made. */
#  define COUNTER_CANDIDATES 64
#  define COUNTER_PROBES 4
typedef struct counter_scan {
    uintptr_t base;                  /* libpython's load address (dladdr) */
    int pagemap;                     /* /proc/self/pagemap, open */
    uint32_t want;                   /* the counter's value now */
    uint32_t *found[COUNTER_CANDIDATES];
    int n;                           /* candidates found; more than COUNTER_CANDIDATES: -1 */
} counter_scan;

static int scan_segments(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    counter_scan *cs = arg;
    if (info->dlpi_addr != cs->base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum && cs->n >= 0; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W) || !(ph->p_flags & PF_R))
            continue;
        const uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz, page = 4096;
        uint64_t present[512];   /* (pagemap's entries, read 512 pages at a time) */
        uint32_t k = 512;
        for (uintptr_t pg = lo & ~(page - 1); pg < hi && cs->n >= 0; pg += page) {
            if (k == 512) {
                ssize_t got = pread(cs->pagemap, present, sizeof present, (off_t)(pg / page * sizeof *present));
                if (got < (ssize_t)sizeof *present) {
                    cs->n = -1;
                    break;
                }
                for (size_t j = (size_t)got / sizeof *present; j < 512; j++)
                    present[j] = 0;
                k = 0;
            }
            if (!(present[k++] >> 63))
                continue;   /* (not present) */
            const uint32_t *w = (const uint32_t *)((pg < lo ? lo + 3 : pg) & ~(uintptr_t)3);
            const uint32_t *end = (const uint32_t *)((pg + page < hi ? pg + page : hi) & ~(uintptr_t)3);
            for (; w < end; w++) {
                if (*w != cs->want)
                    continue;
                if (cs->n == COUNTER_CANDIDATES) {
                    cs->n = -1;
                    break;
                }
                cs->found[cs->n++] = (uint32_t *)(uintptr_t)w;
            }
        }
    }
    return 1;
}

/* The version of a code object made now, or 0. (PyCode_NewEmpty, not
 * compile(): no audit event the program would see.) */
static uint32_t new_code_version(void)
{
    PyCodeObject *co = PyCode_NewEmpty("<stackwatch>", "<stackwatch>", 0);
    if (!co) {
        PyErr_Clear();
        return 0;
    }
    uint32_t v = co->co_version;
    Py_DECREF(co);
    return v;
}

static int counter_312(uint64_t *counter)
{
    static uint32_t *kept;   /* (the GIL held: one caller at a time) */
    Dl_info di;
    if (!dladdr((void *)&PyCode_NewEmpty, &di) || !di.dli_fbase)
        return SW_EARG;
    uint32_t v = new_code_version();
    if (!v || v == UINT32_MAX)
        return SW_EARG;   /* (the counter ran out: 0 from now on) */
    if (kept && *kept == v + 1) {
        *counter = (uint64_t)(uintptr_t)kept;
        return SW_OK;
    }
    kept = NULL;
    counter_scan cs = {(uintptr_t)di.dli_fbase, open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC), v + 1, {0}, 0};
    if (cs.pagemap < 0)
        return SW_EARG;
    dl_iterate_phdr(scan_segments, &cs);
    close(cs.pagemap);
    for (int probe = 0; probe < COUNTER_PROBES && cs.n > 1; probe++) {
        uint32_t u = new_code_version();
        if (u != cs.want || u == UINT32_MAX)
            return SW_EARG;
        int k = 0;
        for (int i = 0; i < cs.n; i++)
            if (*cs.found[i] == u + 1)
                cs.found[k++] = cs.found[i];
        cs.n = k;
        cs.want = u + 1;
    }
    if (cs.n != 1 || new_code_version() != cs.want || *cs.found[0] != cs.want + 1)
        return SW_EARG;
    kept = cs.found[0];
    *counter = (uint64_t)(uintptr_t)kept;
    return SW_OK;
}
#endif

int sw_sampler_code_counter(void *interp, uint64_t *counter, uint64_t *interps)
{
#if PY_VERSION_HEX >= 0x030D0000
    *counter = (uint64_t)(uintptr_t)&((PyInterpreterState *)interp)->func_state.next_version;
    *interps = (uint64_t)(uintptr_t)&_PyRuntime.interpreters.next_id;
    return SW_OK;
#elif PY_VERSION_HEX >= 0x030C0000
    (void)interp;
    *counter = *interps = 0;
    return counter_312(counter);
#else
    (void)interp;
    *counter = *interps = 0;
    return SW_EARG;
#endif
}

#endif
