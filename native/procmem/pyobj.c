/*
 * pyobj.c - Python objects of a target read by name (see pyobj.h).
 *
 * A dict (3.11+) is a PyDictObject pointing to its keys object: a header,
 * an index table of 1 << dk_log2_index_bytes bytes, then dk_nentries
 * entries (PyDictKeyEntry for DICT_KEYS_GENERAL, else PyDictUnicodeEntry);
 * a split dict keeps its values in a separate array (ma_values). The
 * entries are read in one go and walked in order; keys are compared as
 * decoded strings (the hash is per process, so it is not used).
 */
#include "pyobj.h"
#include "pystr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG2_SIZE_MAX 30u

static uint64_t u64_at(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

int sw_pyobj_usable(const sw_py_layout *l, char *err, size_t errlen)
{
    if (l->managed_kind < SW_MANAGED_3_11 || l->managed_kind > SW_MANAGED_DICTOFFSET) {
        snprintf(err, errlen, "objects of this Python version are not described (3.11+ only)");
        return SW_EARG;
    }
    int old = l->managed_kind == SW_MANAGED_DICTOFFSET;
    const uint32_t within[] = {l->module_dict, l->dict_keys, l->dict_values, old ? l->keys_size : l->keys_log2_size,
                               old ? l->keys_size : l->keys_log2_index_bytes, old ? l->keys_size : l->keys_kind,
                               l->keys_nentries, l->keys_indices, l->entry_size, l->entry_key, l->entry_value,
                               old ? l->entry_size : l->uentry_size, old ? l->entry_key : l->uentry_key,
                               old ? l->entry_value : l->uentry_value, old ? 0 : l->values_values, l->long_size,
                               l->long_digits, l->type_flags, l->type_basicsize,
                               old ? l->type_dictoffset : l->heaptype_cached_keys,
                               old ? l->type_dictoffset : l->managed_dict_back};
    for (size_t i = 0; i < sizeof within / sizeof within[0]; i++)
        if (within[i] == SW_NO_OFFSET || within[i] + 8u > SW_LAYOUT_MAX_READ) {
            snprintf(err, errlen, "object field %zu of the layout is missing or out of range", i);
            return SW_EARG;
        }
    if (l->entry_key + 8 > l->entry_size || l->entry_value + 8 > l->entry_size ||
        (!old && (l->uentry_key + 8 > l->uentry_size || l->uentry_value + 8 > l->uentry_size)) ||
        l->long_digit_size != 4 || l->long_shift == 0 ||
        l->long_shift > 30 || l->long_non_size_bits > 8 || l->interp_modules == SW_NO_OFFSET ||
        (l->managed_kind == SW_MANAGED_3_11 && l->managed_values_back > SW_LAYOUT_MAX_READ) ||
        (l->managed_kind == SW_MANAGED_INLINE && l->values_valid > SW_LAYOUT_MAX_READ) ||
        (l->managed_kind == SW_MANAGED_TAGGED && l->managed_untag > 8)) {
        snprintf(err, errlen, "the layout's dict entry, int or instance fields are inconsistent");
        return SW_EARG;
    }
    return SW_OK;
}

/* The keys object at keys: its entries (malloc'd, *n of them, each
 * *esize bytes), or an error. */
static int read_entries(sw_mem *m, const sw_py_layout *l, uint64_t keys, unsigned char **out, uint64_t *n,
                        uint32_t *esize, int *general)
{
    unsigned char h[SW_LAYOUT_MAX_READ];
    if (!keys || sw_mem_read(m, keys, h, l->keys_indices) != 0)
        return SW_EIO;
    uint32_t log2_size, log2_index;
    if (l->managed_kind == SW_MANAGED_DICTOFFSET) {
        /* 3.9/3.10: a slot count; the index width grows with it (1, 2, 4, 8 bytes) */
        uint64_t size = u64_at(h + l->keys_size);
        if (!size || (size & (size - 1)) || size > (1ull << LOG2_SIZE_MAX))
            return SW_EARG;
        for (log2_size = 0; (1ull << log2_size) < size; log2_size++)
            ;
        log2_index = log2_size + (size <= 0xff ? 0 : size <= 0xffff ? 1 : 2);
        *general = 1;
    } else {
        log2_size = h[l->keys_log2_size];
        log2_index = h[l->keys_log2_index_bytes];
        *general = h[l->keys_kind] == l->keys_kind_general;
    }
    int64_t nentries = (int64_t)u64_at(h + l->keys_nentries);
    if (log2_size > LOG2_SIZE_MAX || log2_index > log2_size + 3 || nentries < 0 ||
        (uint64_t)nentries > (1ull << log2_size) || (uint64_t)nentries > SW_PYDICT_MAX_ENTRIES)
        return SW_EARG;
    *esize = *general ? l->entry_size : l->uentry_size;
    *n = (uint64_t)nentries;
    *out = malloc(*n ? *n * *esize : 1);
    if (!*out)
        return SW_ENOMEM;
    if (*n && sw_mem_read(m, keys + l->keys_indices + (1ull << log2_index), *out, *n * *esize) != 0) {
        free(*out);
        return SW_EIO;
    }
    return SW_OK;
}

/* Entries of a keys object with their values: from the entries, or from
 * the values array when values is not 0 (split keys). */
static int each_entry(sw_mem *m, const sw_py_layout *l, uint64_t keys, uint64_t values,
                      int (*fn)(void *ud, uint64_t key, uint64_t value), void *ud, int want_index)
{
    unsigned char *e, *v = NULL;
    uint64_t n;
    uint32_t esize;
    int general;
    int rc = read_entries(m, l, keys, &e, &n, &esize, &general);
    if (rc != SW_OK)
        return rc;
    if (values && n) {
        v = malloc(n * 8);
        if (!v || sw_mem_read(m, values + l->values_values, v, n * 8) != 0) {
            free(v);
            free(e);
            return v ? SW_EIO : SW_ENOMEM;
        }
    }
    for (uint64_t i = 0; i < n; i++) {
        const unsigned char *p = e + i * esize;
        uint64_t key = u64_at(p + (general ? l->entry_key : l->uentry_key));
        uint64_t value = want_index ? i : v ? u64_at(v + i * 8) : u64_at(p + (general ? l->entry_value
                                                                                      : l->uentry_value));
        if (key && (want_index || value) && fn(ud, key, value))
            break;
    }
    free(v);
    free(e);
    return SW_OK;
}

int sw_pydict_each(sw_mem *m, const sw_py_layout *l, uint64_t dict,
                   int (*fn)(void *ud, uint64_t key, uint64_t value), void *ud)
{
    unsigned char h[SW_LAYOUT_MAX_READ];
    uint32_t need = (l->dict_keys > l->dict_values ? l->dict_keys : l->dict_values) + 8u;
    if (!dict || sw_mem_read(m, dict, h, need) != 0)
        return SW_EIO;
    return each_entry(m, l, u64_at(h + l->dict_keys), u64_at(h + l->dict_values), fn, ud, 0);
}

typedef struct {
    sw_mem *m;
    const sw_py_layout *l;
    const char *name;
    uint64_t value;
    int found;
} lookup;

static int match(void *ud, uint64_t key, uint64_t value)
{
    lookup *q = ud;
    char s[SW_STR_BUF];
    if (sw_pystr_read(q->m, q->l, key, s) < 0 || strcmp(s, q->name) != 0)
        return 0;
    q->value = value;
    q->found = 1;
    return 1;
}

int sw_pydict_get(sw_mem *m, const sw_py_layout *l, uint64_t dict, const char *name, uint64_t *value)
{
    lookup q = {m, l, name, 0, 0};
    int rc = sw_pydict_each(m, l, dict, match, &q);
    if (rc != SW_OK)
        return rc;
    if (!q.found)
        return SW_EARG;
    *value = q.value;
    return SW_OK;
}

int sw_pyobj_type(sw_mem *m, const sw_py_layout *l, uint64_t obj, uint64_t *type)
{
    return sw_mem_read_u64(m, obj + l->ob_type, type);
}

int sw_pytype_name(sw_mem *m, const sw_py_layout *l, uint64_t type, char *out, size_t cap)
{
    uint64_t name;
    size_t got = 0;
    if (cap && type && sw_mem_read_u64(m, type + l->type_name, &name) == SW_OK && name)
        got = sw_mem_read_upto(m, name, out, cap - 1);
    if (!got)
        return SW_EIO;
    out[got] = 0;
    return SW_OK;
}

/* name among the shared keys of the instance's type, its value in the
 * values array at values. */
static int shared_attr(sw_mem *m, const sw_py_layout *l, uint64_t keys, uint64_t values, const char *name,
                       uint64_t *value)
{
    lookup q = {m, l, name, 0, 0};
    int rc = each_entry(m, l, keys, 0, match, &q, 1);
    if (rc != SW_OK)
        return rc;
    if (!q.found)
        return SW_EARG;
    rc = sw_mem_read_u64(m, values + l->values_values + 8 * q.value, value);
    return rc == SW_OK && !*value ? SW_EARG : rc;
}

int sw_pyobj_attr(sw_mem *m, const sw_py_layout *l, uint64_t obj, const char *name, uint64_t *value)
{
    unsigned char t[SW_LAYOUT_MAX_READ];
    uint64_t type, dict = 0, values = 0;
    if (l->managed_kind == SW_MANAGED_DICTOFFSET) {
        int64_t offset;
        if (sw_pyobj_type(m, l, obj, &type) != SW_OK || sw_mem_read(m, type + l->type_dictoffset, &offset, 8) != 0)
            return SW_EIO;
        if (offset <= 0 || offset > (1 << 20))
            return SW_EARG;   /* none, or after the items of a variable-size object: not read */
        if (sw_mem_read_u64(m, obj + (uint64_t)offset, &dict) != SW_OK)
            return SW_EIO;
        return dict ? sw_pydict_get(m, l, dict, name, value) : SW_EARG;
    }
    uint32_t need = l->heaptype_cached_keys + 8u;
    if (l->type_flags + 8u > need)
        need = l->type_flags + 8u;
    if (l->type_basicsize + 8u > need)
        need = l->type_basicsize + 8u;
    if (sw_pyobj_type(m, l, obj, &type) != SW_OK || sw_mem_read(m, type, t, need) != 0)
        return SW_EIO;
    uint64_t flags = u64_at(t + l->type_flags), basicsize = u64_at(t + l->type_basicsize);
    if (!(flags & l->tpflags_managed_dict) || basicsize > (1u << 20))
        return SW_EARG;
    if (sw_mem_read_u64(m, obj - l->managed_dict_back, &dict) != SW_OK)
        return SW_EIO;
    if (l->managed_kind == SW_MANAGED_3_11) {
        if (sw_mem_read_u64(m, obj - l->managed_values_back, &values) != SW_OK)
            return SW_EIO;
    } else if (l->managed_kind == SW_MANAGED_TAGGED) {
        if (dict & 1) {
            values = dict + l->managed_untag;
            dict = 0;
        }
    } else if (l->managed_kind == SW_MANAGED_INLINE && (flags & l->tpflags_inline_values)) {
        unsigned char valid;
        if (sw_mem_read(m, obj + basicsize + l->values_valid, &valid, 1) != 0)
            return SW_EIO;
        values = valid ? obj + basicsize : 0;
    }
    if (values) {
        int rc = shared_attr(m, l, u64_at(t + l->heaptype_cached_keys), values, name, value);
        if (rc != SW_EARG || !dict)
            return rc;
    }
    return dict ? sw_pydict_get(m, l, dict, name, value) : SW_EARG;
}

int sw_pylong_read(sw_mem *m, const sw_py_layout *l, uint64_t addr, uint64_t *value, int *negative)
{
    unsigned char h[SW_LAYOUT_MAX_READ];
    uint32_t need = l->long_digits + 3u * l->long_digit_size;
    size_t got = sw_mem_read_upto(m, addr, h, need);
    if (got < l->long_digits)
        return SW_EIO;
    uint64_t size = u64_at(h + l->long_size), ndigits;
    if (l->long_non_size_bits) {
        ndigits = size >> l->long_non_size_bits;
        *negative = (size & 3u) == 2;
    } else {
        *negative = (int64_t)size < 0;
        ndigits = *negative ? (uint64_t)(-(int64_t)size) : size;
    }
    if (ndigits > 3 || got < l->long_digits + ndigits * l->long_digit_size)
        return SW_EARG;
    uint64_t v = 0;
    for (uint64_t i = ndigits; i-- > 0;) {
        uint32_t d;
        memcpy(&d, h + l->long_digits + 4 * i, 4);
        if ((d >> l->long_shift) || (v >> (64 - l->long_shift)))
            return SW_EARG;   /* not a digit, or more than 64 bits */
        v = (v << l->long_shift) | d;
    }
    *value = v;
    return SW_OK;
}
