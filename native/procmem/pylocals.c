/*
 * pylocals.c - a frame's local variables from memory (see pylocals.h).
 *
 * The names: 3.11+ one tuple, co_localsplusnames, as long as the frame's
 * localsplus array of values; 3.9/3.10 three, co_varnames, co_cellvars and
 * co_freevars, in the order of the frame's f_localsplus. The values are
 * read in one go after the names, then each on its own (a cell first to
 * what it holds).
 */
#include "pylocals.h"
#include "pyobj.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t u64_at(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

int sw_pylocals_usable(const sw_py_layout *l, char *err, size_t errlen)
{
    const uint32_t within[] = {l->frame_localsplus, l->code_varnames, l->tuple_size, l->tuple_items,
                               l->float_value, l->type_name, l->cell_ref, l->long_size, l->long_digits,
                               l->bytes_size, l->bytes_data, l->ob_type, l->str_length};
    for (size_t i = 0; i < sizeof within / sizeof within[0]; i++)
        if (within[i] == SW_NO_OFFSET || within[i] + 8u > SW_LAYOUT_MAX_READ) {
            snprintf(err, errlen, "local variables are not described for this Python version (field %zu)", i);
            return SW_EARG;
        }
    if ((l->frames_kind == SW_FRAMES_OBJECTS) !=
            (l->code_cellvars != SW_NO_OFFSET && l->code_freevars != SW_NO_OFFSET) ||
        l->ob_type + 8u > l->tuple_items || l->tuple_size + 8u > l->tuple_items || l->long_size + 8u > l->long_digits ||
        l->long_digit_size != 4 || l->long_shift == 0 || l->long_shift > 30 || l->long_non_size_bits > 8 ||
        !l->long_type || !l->bool_type || !l->float_type || !l->bytes_type || !l->tuple_type || !l->cell_type ||
        !l->str_type || !l->none_addr) {
        snprintf(err, errlen, "the layout's local-variable fields are inconsistent or its types unknown");
        return SW_EARG;
    }
    return SW_OK;
}

/* The item addresses of the tuple at addr, appended to items (at most
 * cap in all): the count appended, or a negative SW_E* code. */
static long tuple_items(sw_mem *m, const sw_py_layout *l, uint64_t addr, uint64_t *items, uint32_t cap)
{
    unsigned char h[SW_LAYOUT_MAX_READ];
    if (!addr || sw_mem_read(m, addr, h, l->tuple_items) != SW_OK)   /* (usable: the header lies before the items) */
        return SW_EIO;
    int64_t n = (int64_t)u64_at(h + l->tuple_size);
    if (u64_at(h + l->ob_type) != l->tuple_type || n < 0)
        return SW_EARG;
    uint32_t k = (uint64_t)n > cap ? cap : (uint32_t)n;
    if (k && sw_mem_read(m, addr + l->tuple_items, items, (size_t)k * 8u) != SW_OK)
        return SW_EIO;
    return k;
}

static void read_int(sw_mem *m, const sw_py_layout *l, sw_pyval *v)
{
    unsigned char h[SW_LAYOUT_MAX_READ];
    if (sw_mem_read(m, v->addr, h, l->long_digits) != SW_OK) {
        v->kind = SW_PYVAL_UNREADABLE;
        return;
    }
    uint64_t size = u64_at(h + l->long_size), n;
    if (l->long_non_size_bits) {
        n = size >> l->long_non_size_bits;
        v->negative = (size & 3u) == 2;
    } else {
        v->negative = (int64_t)size < 0;
        n = v->negative ? (uint64_t)(-(int64_t)size) : size;
    }
    if (n > SW_PYVAL_INT_MAX_DIGITS)
        return;   /* left "other" */
    if (n && sw_mem_read(m, v->addr + l->long_digits, v->digits, (size_t)n * 4u) != SW_OK) {
        v->kind = SW_PYVAL_UNREADABLE;
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        if (v->digits[i] >> l->long_shift)
            return;   /* not digits: left "other" */
    v->ndigits = (uint32_t)n;
    v->shift = l->long_shift;
    v->kind = SW_PYVAL_INT;
}

static void read_str(sw_mem *m, const sw_py_layout *l, sw_pyval *v)
{
    uint64_t len;
    long n = sw_pystr_read(m, l, v->addr, v->data);
    if (n < 0 || sw_mem_read_u64(m, v->addr + l->str_length, &len) != SW_OK) {
        v->kind = SW_PYVAL_UNREADABLE;
        return;
    }
    v->truncated = len > SW_STR_MAX_CHARS;
    if (v->truncated && n >= 3)
        n -= 3;   /* the "..." pystr.c appends to a cut string */
    v->len = (size_t)n;
    v->kind = SW_PYVAL_STR;
}

static void read_bytes(sw_mem *m, const sw_py_layout *l, sw_pyval *v)
{
    uint64_t size;
    if (sw_mem_read_u64(m, v->addr + l->bytes_size, &size) != SW_OK || (int64_t)size < 0) {
        v->kind = SW_PYVAL_UNREADABLE;
        return;
    }
    v->truncated = size > SW_STR_MAX_CHARS;
    v->len = v->truncated ? SW_STR_MAX_CHARS : (size_t)size;
    if (v->len && sw_mem_read(m, v->addr + l->bytes_data, v->data, v->len) != SW_OK) {
        v->kind = SW_PYVAL_UNREADABLE;
        return;
    }
    v->kind = SW_PYVAL_BYTES;
}

/* The value of the object at addr into v. */
static void read_value(sw_mem *m, const sw_py_layout *l, uint64_t addr, sw_pyval *v)
{
    v->kind = SW_PYVAL_UNREADABLE;
    v->addr = addr;
    v->type_name[0] = 0;
    v->negative = v->truncated = 0;
    v->len = 0;
    uint64_t type;
    if (sw_mem_read_u64(m, addr + l->ob_type, &type) != SW_OK ||
        sw_pytype_name(m, l, type, v->type_name, sizeof v->type_name) != SW_OK)
        return;
    v->kind = SW_PYVAL_OTHER;
    if (addr == l->none_addr) {
        v->kind = SW_PYVAL_NONE;
    } else if (type == l->bool_type) {
        int neg;
        if (sw_pylong_read(m, l, addr, &v->small, &neg) == SW_OK && v->small <= 1 && !neg)
            v->kind = SW_PYVAL_BOOL;
    } else if (type == l->long_type) {
        read_int(m, l, v);
    } else if (type == l->float_type) {
        if (sw_mem_read(m, addr + l->float_value, &v->f, sizeof v->f) == SW_OK)
            v->kind = SW_PYVAL_FLOAT;
        else
            v->kind = SW_PYVAL_UNREADABLE;
    } else if (type == l->str_type) {
        read_str(m, l, v);
    } else if (type == l->bytes_type) {
        read_bytes(m, l, v);
    }
}

typedef struct locals_buf {
    uint64_t names[SW_PYLOCALS_MAX];
    uint64_t values[SW_PYLOCALS_MAX];
    char name[SW_STR_BUF];
    sw_pyval v;
} locals_buf;

int sw_pylocals_read(sw_mem *m, const sw_py_layout *l, uint64_t frame, uint64_t code, sw_pylocal_fn fn, void *ud)
{
    locals_buf *b = malloc(sizeof *b);
    if (!b)
        return SW_ENOMEM;
    int rc = SW_OK;
    uint32_t n = 0;
    const uint32_t tuples[] = {l->code_varnames, l->code_cellvars, l->code_freevars};
    for (size_t i = 0; i < 3 && tuples[i] != SW_NO_OFFSET && n < SW_PYLOCALS_MAX; i++) {
        uint64_t tuple;
        long k;
        if (sw_mem_read_u64(m, code + tuples[i], &tuple) != SW_OK)
            k = SW_EIO;
        else
            k = tuple_items(m, l, tuple, b->names + n, SW_PYLOCALS_MAX - n);
        if (k < 0) {
            rc = (int)k;
            break;
        }
        n += (uint32_t)k;
    }
    if (rc == SW_OK && n && sw_mem_read(m, frame + l->frame_localsplus, b->values, (size_t)n * 8u) != SW_OK)
        rc = SW_EIO;
    int given = 0;
    for (uint32_t i = 0; rc == SW_OK && i < n; i++) {
        uint64_t value = b->values[i];
        if (!value)
            continue;   /* unbound */
        uint64_t type;
        if (l->cell_type && sw_mem_read_u64(m, value + l->ob_type, &type) == SW_OK && type == l->cell_type) {
            if (sw_mem_read_u64(m, value + l->cell_ref, &value) != SW_OK)
                value = 0;
            if (!value)
                continue;   /* an empty cell: unbound */
        }
        if (sw_pystr_read(m, l, b->names[i], b->name) < 0)
            snprintf(b->name, sizeof b->name, "<local %u>", i);
        read_value(m, l, value, &b->v);
        given++;
        if (fn(ud, b->name, &b->v))
            break;
    }
    free(b);
    return rc == SW_OK ? given : rc;
}
