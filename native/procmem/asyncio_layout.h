/*
 * asyncio_layout.h - where asyncio's C Task and Future objects keep their
 * fields, and the few other objects the task tree is read through
 * (coroutine, the top of a suspended frame's value stack, set, list,
 * weakref, bound method; tuple, functools.partial, function and cell for
 * done callbacks), per CPython release: asyncio_generated.h,
 * written by scripts/gen-asyncio-layouts.py, which finds each offset by
 * probing that release's own objects (Task and Future are private to
 * Modules/_asynciomodule.c: no installed header has them). A table is
 * chosen by minor version and checked against the target once
 * (asynciotree.c: its Task and Future types by name and size).
 */
#ifndef SW_ASYNCIO_LAYOUT_H
#define SW_ASYNCIO_LAYOUT_H

#include "base/base.h"
#include "layout.h"

/* coro_frame_kind */
enum {
    SW_CORO_FRAME_POINTER = 1,   /* 3.9/3.10: a frame object at the pointer coro_frame */
    SW_CORO_FRAME_EMBEDDED = 2,  /* 3.11+: the frame inside the coroutine, its localsplus at coro_localsplus */
};

/* frame_stack_kind: where a suspended frame's value stack ends (its top
 * slot holds what it awaits). Offsets are from the frame object (3.9/3.10)
 * or the coroutine (3.11+). */
enum {
    SW_STACK_POINTER = 1,        /* a pointer one slot past the top, at frame_stack_top */
    SW_STACK_COUNT = 2,          /* an int: slots used from frame_stack_base (localsplus) */
    SW_STACK_DEPTH_OVER_BASE = 3,/* an int depth at frame_stack_top over a pointer at frame_stack_base */
};

typedef struct sw_asyncio_layout {
    uint32_t version_hex, pointer_size;
    uint32_t task_size, future_size, coro_size;    /* tp_basicsize of Task, Future, coroutine */
    uint32_t fut_loop, fut_callback0, fut_state;   /* FutureObj: fut_loop, fut_callback0, fut_state (int) */
    uint32_t fut_state_pending, fut_state_cancelled, fut_state_finished;
    uint32_t fut_dict;                             /* a subclass's attribute dict pointer, or SW_NO_OFFSET
                                                      (3.13: a managed dict, read as the layout says) */
    uint32_t task_coro, task_name, task_fut_waiter;
    uint32_t coro_frame_kind, coro_frame, coro_localsplus;
    uint32_t frame_stack_kind, frame_stack_top, frame_stack_base;
    uint32_t set_mask, set_table, set_entry_size, set_entry_key;   /* PySetObject, setentry */
    uint32_t list_size, list_items;                /* PyListObject */
    uint32_t weakref_object;                       /* PyWeakReference.wr_object */
    uint32_t method_self;                          /* PyMethodObject.im_self */
    uint32_t type_base;                            /* PyTypeObject.tp_base */
    /* done callbacks (what asyncio.wait_for, wait and shield leave on a
     * task: a functools.partial or a closure holding the future they
     * release) */
    uint32_t fut_callbacks;                        /* FutureObj: the list of (callback, context)
                                                      tuples after fut_callback0 */
    uint32_t tuple_size, tuple_items;              /* PyTupleObject: ob_size, ob_item */
    uint32_t partial_args;                         /* functools.partial: its args tuple */
    uint32_t function_closure;                     /* PyFunctionObject.func_closure */
    uint32_t cell_ref;                             /* PyCellObject.ob_ref */
    /* 3.9/3.10 only (else SW_NO_OFFSET): a module's dict and a dict's keys
     * object (Objects/dict-common.h), for layout.h's SW_MANAGED_DICTOFFSET */
    uint32_t module_dict, keys_size, keys_nentries, keys_indices, entry_size, entry_key, entry_value;
    /* tp_name of each type, as the release names it */
    const char *task_type, *future_type, *coroutine_type, *set_type, *list_type, *weakref_type, *method_type;
    const char *tuple_type, *partial_type, *function_type, *cell_type;
} sw_asyncio_layout;

/* The table of the release of version_hex's minor version into *out: 0, or
 * SW_EARG (none known). */
int sw_asyncio_layout_known(uint32_t version_hex, sw_asyncio_layout *out);

/* A 3.9/3.10 layout (l), which describes no objects read by name, made to
 * describe them with the table's dict fields (SW_MANAGED_DICTOFFSET); any
 * other is left as it is. */
void sw_asyncio_bind_objects(const sw_asyncio_layout *a, sw_py_layout *l);

#endif
