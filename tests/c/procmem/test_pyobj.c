/*
 * test_pyobj.c - objects read by name (procmem/pyobj.h) in the form of
 * 3.9/3.10 (SW_MANAGED_DICTOFFSET), over objects made here with the real
 * 3.9.18 layout and its probed asyncio table bound in (asyncio_layout.h):
 * an instance's attributes from the dict at its type's tp_dictoffset,
 * combined and split, with 1- and 2-byte index tables; keys objects whose
 * slot count is not a power of two or huge, or whose entry count exceeds
 * it, are refused; a negative tp_dictoffset is not read (ASan/UBSan watch
 * every read).
 */
#define _GNU_SOURCE
#include "check.h"
#include "objarena.h"
#include "procmem/procmem.h"

#include <string.h>
#include <unistd.h>

static uint64_t object(const sw_py_layout *l, uint64_t type, size_t size)
{
    uint64_t o = alloc(size);
    put64(o + l->ob_refcnt, 1);
    put64(o + l->ob_type, type);
    return o;
}

/* A compact ASCII str as the layout places one. */
static uint64_t str_of(const sw_py_layout *l, const char *s)
{
    size_t n = strlen(s);
    uint64_t o = object(l, l->str_type, l->str_ascii_data + n + 1);
    put64(o + l->str_length, n);
    uint32_t state = (1u << l->str_kind_shift) | l->str_compact_mask | l->str_ascii_mask;
    memcpy((void *)(uintptr_t)(o + l->str_state), &state, 4);
    memcpy((void *)(uintptr_t)(o + l->str_ascii_data), s, n + 1);
    return o;
}

/* A keys object of `size` slots holding keys[i] (values[i] too unless
 * split), as dict-common.h lays it out. */
static uint64_t keys_of(const sw_py_layout *l, uint64_t size, const uint64_t *keys, const uint64_t *values, size_t n)
{
    size_t width = size <= 0xff ? 1 : size <= 0xffff ? 2 : 4;
    uint64_t k = alloc(l->keys_indices + size * width + n * l->entry_size);
    put64(k + l->keys_size, size);
    put64(k + l->keys_nentries, n);
    uint64_t entries = k + l->keys_indices + size * width;
    for (size_t i = 0; i < n; i++) {
        put64(entries + i * l->entry_size + l->entry_key, keys[i]);
        put64(entries + i * l->entry_size + l->entry_value, values ? values[i] : 0);
    }
    return k;
}

static sw_py_layout layout_39(void)
{
    sw_py_layout l;
    sw_asyncio_layout a;
    CHECK_EQ_I64(sw_layout_known(0x030912f0u, &l), SW_OK);
    CHECK_EQ_I64(sw_asyncio_layout_known(0x030912f0u, &a), SW_OK);
    sw_asyncio_bind_objects(&a, &l);
    l.str_type = object(&l, 0, 256);
    return l;
}

static sw_mem self_mem(void)
{
    sw_mem m;
    char err[200];
    CHECK_EQ_I64(sw_mem_open(&m, getpid(), (uint64_t)(uintptr_t)arena, 8, err, sizeof err), SW_OK);
    return m;
}

TEST(attributes_of_a_39_instance)
{
    used = 0;
    sw_py_layout l = layout_39();
    char err[200];
    REQUIRE_EQ_U64(l.managed_kind, SW_MANAGED_DICTOFFSET);
    REQUIRE(sw_pyobj_usable(&l, err, sizeof err) == SW_OK);
    sw_mem m = self_mem();
    uint64_t type = object(&l, 0, 512), dict_type = object(&l, 0, 512);
    int64_t dictoffset = 16;
    memcpy((void *)(uintptr_t)(type + l.type_dictoffset), &dictoffset, 8);
    uint64_t keys[3] = {str_of(&l, "a"), str_of(&l, "data"), str_of(&l, "b")};
    uint64_t values[3] = {object(&l, type, 32), object(&l, type, 32), object(&l, type, 32)};
    uint64_t dict = object(&l, dict_type, 64);
    put64(dict + l.dict_keys, keys_of(&l, 8, keys, values, 3));
    uint64_t obj = object(&l, type, 32);
    put64(obj + 16, dict);
    uint64_t v = 0;
    CHECK_EQ_I64(sw_pyobj_attr(&m, &l, obj, "data", &v), SW_OK);
    CHECK_EQ_U64(v, values[1]);
    CHECK_EQ_I64(sw_pyobj_attr(&m, &l, obj, "missing", &v), SW_EARG);
    /* split: the keys shared, the values in ma_values' array; and 512
     * slots, whose index table has 2 bytes a slot */
    uint64_t array = alloc(24);
    for (int i = 0; i < 3; i++)
        put64(array + 8 * i, values[2 - i]);
    put64(dict + l.dict_keys, keys_of(&l, 512, keys, NULL, 3));
    put64(dict + l.dict_values, array);
    CHECK_EQ_I64(sw_pyobj_attr(&m, &l, obj, "b", &v), SW_OK);
    CHECK_EQ_U64(v, values[0]);
    /* a module's dict by name */
    uint64_t module = object(&l, type, 64);
    put64(module + l.module_dict, dict);
    uint64_t md;
    CHECK_EQ_I64(sw_mem_read_u64(&m, module + l.module_dict, &md), SW_OK);
    CHECK_EQ_I64(sw_pydict_get(&m, &l, md, "a", &v), SW_OK);
    CHECK_EQ_U64(v, values[2]);
    sw_mem_close(&m);
}

TEST(damaged_39_dicts_are_refused)
{
    used = 0;
    sw_py_layout l = layout_39();
    sw_mem m = self_mem();
    uint64_t type = object(&l, 0, 512);
    int64_t dictoffset = 16;
    memcpy((void *)(uintptr_t)(type + l.type_dictoffset), &dictoffset, 8);
    uint64_t keys[1] = {str_of(&l, "a")}, values[1] = {object(&l, type, 32)};
    uint64_t dict = object(&l, type, 64), k = keys_of(&l, 8, keys, values, 1);
    put64(dict + l.dict_keys, k);
    uint64_t obj = object(&l, type, 32), v;
    put64(obj + 16, dict);
    CHECK_EQ_I64(sw_pyobj_attr(&m, &l, obj, "a", &v), SW_OK);
    put64(k + l.keys_size, 12);   /* not a power of two */
    CHECK_EQ_I64(sw_pyobj_attr(&m, &l, obj, "a", &v), SW_EARG);
    put64(k + l.keys_size, (uint64_t)1 << 40);   /* far beyond any dict */
    CHECK_EQ_I64(sw_pyobj_attr(&m, &l, obj, "a", &v), SW_EARG);
    put64(k + l.keys_size, 8);
    put64(k + l.keys_nentries, 9);   /* more entries than slots */
    CHECK_EQ_I64(sw_pyobj_attr(&m, &l, obj, "a", &v), SW_EARG);
    put64(k + l.keys_nentries, 1);
    dictoffset = -8;   /* after a variable-size object's items: not read */
    memcpy((void *)(uintptr_t)(type + l.type_dictoffset), &dictoffset, 8);
    CHECK_EQ_I64(sw_pyobj_attr(&m, &l, obj, "a", &v), SW_EARG);
    sw_mem_close(&m);
}

TEST(only_a_39_or_310_layout_is_bound)
{
    sw_py_layout l, before;
    sw_asyncio_layout a;
    REQUIRE(sw_layout_known(0x030c01f0u, &l) == SW_OK);
    REQUIRE(sw_asyncio_layout_known(0x030c01f0u, &a) == SW_OK);
    before = l;
    sw_asyncio_bind_objects(&a, &l);   /* 3.12 describes its own objects */
    CHECK(memcmp(&l, &before, sizeof l) == 0);
    REQUIRE(sw_layout_known(0x030a0df0u, &l) == SW_OK);
    char err[200];
    CHECK(sw_pyobj_usable(&l, err, sizeof err) == SW_EARG);   /* unbound 3.10: not described */
    REQUIRE(sw_asyncio_layout_known(0x030a0df0u, &a) == SW_OK);
    sw_asyncio_bind_objects(&a, &l);
    CHECK(sw_pyobj_usable(&l, err, sizeof err) == SW_OK);
    CHECK_EQ_I64(sw_asyncio_layout_known(0x030e00f0u, &a), SW_EARG);   /* 3.14: no table */
}
