/*
 * pyobj.h - Python objects of a target read by name, without running code
 * in it: dict entries, a str key's value, an instance's attribute, a small
 * int. 3.11+ (the layout's managed_kind and dict fields; layout.h), and
 * 3.9/3.10 once a layout has their dict fields bound in
 * (sw_asyncio_bind_objects: SW_MANAGED_DICTOFFSET). Every
 * read is bounded (SW_PYDICT_MAX_ENTRIES entries, one read of each array)
 * and every count checked before use; a target that changes under the
 * reader gives an error, never a hang or a crash.
 */
#ifndef SW_PYOBJ_H
#define SW_PYOBJ_H

#include "layout.h"
#include "mem.h"

#define SW_PYDICT_MAX_ENTRIES 65536u

/* 0 if the layout describes what this file reads (the object fields are
 * present and inside SW_LAYOUT_MAX_READ), else SW_EARG with err. */
int sw_pyobj_usable(const sw_py_layout *l, char *err, size_t errlen);

/* Calls fn for each live entry (key and value addresses) of the dict at
 * addr, in insertion order; fn returns nonzero to stop. Returns 0 or a
 * negative SW_E* code (SW_EIO: unreadable; SW_EARG: not a sane dict). */
int sw_pydict_each(sw_mem *m, const sw_py_layout *l, uint64_t dict,
                   int (*fn)(void *ud, uint64_t key, uint64_t value), void *ud);

/* The value of the str key name in the dict at addr: 0 and *value, or
 * SW_EARG when absent, or another SW_E* code. */
int sw_pydict_get(sw_mem *m, const sw_py_layout *l, uint64_t dict, const char *name, uint64_t *value);

/* The attribute name of the instance at obj, from its own attributes (a
 * managed dict or its values, as the layout's managed_kind says): 0 and
 * *value, or SW_EARG when absent or not kept there. */
int sw_pyobj_attr(sw_mem *m, const sw_py_layout *l, uint64_t obj, const char *name, uint64_t *value);

/* The int at addr if it fits in 64 bits: 0 with *value and *negative, or
 * SW_EARG (too large, or not an int's shape). */
int sw_pylong_read(sw_mem *m, const sw_py_layout *l, uint64_t addr, uint64_t *value, int *negative);

/* The type object of the object at addr (0 or SW_EIO). */
int sw_pyobj_type(sw_mem *m, const sw_py_layout *l, uint64_t obj, uint64_t *type);

/* The tp_name of the type object at type into out (cap bytes, cut, NUL
 * terminated): 0 or SW_EIO. Any version (the layout's type_name). */
int sw_pytype_name(sw_mem *m, const sw_py_layout *l, uint64_t type, char *out, size_t cap);

#endif
