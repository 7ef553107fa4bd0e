/*
 * bytes.c - growable byte buffer (see bytes.h).
 */
#define _GNU_SOURCE
#include "bytes.h"
#include "varint.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int sw_bytes_reserve(sw_bytes *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return SW_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra) {
        if (cap > SIZE_MAX / 2) { b->failed = 1; return SW_ENOMEM; }
        cap *= 2;
    }
    uint8_t *p = realloc(b->data, cap);
    if (!p) { b->failed = 1; return SW_ENOMEM; }
    b->data = p;
    b->cap = cap;
    return SW_OK;
}

void *sw_array_grow(void *arr, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return arr;
    size_t n = *cap ? *cap : first;
    while (n < need) {
        if (n > SIZE_MAX / 2 / size)
            return NULL;
        n *= 2;
    }
    void *p = realloc(arr, n * size);
    if (p)
        *cap = n;
    return p;
}

char *sw_dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        if (n)
            memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

int sw_bytes_put(sw_bytes *b, const void *p, size_t n)
{
    if (sw_bytes_reserve(b, n))
        return SW_ENOMEM;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return SW_OK;
}

int sw_bytes_varint(sw_bytes *b, uint64_t v)
{
    if (sw_bytes_reserve(b, SW_VARINT_MAX))
        return SW_ENOMEM;
    b->len = (size_t)(sw_put_varint(b->data + b->len, v) - b->data);
    return SW_OK;
}

int sw_bytes_str(sw_bytes *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (sw_bytes_varint(b, n))
        return SW_ENOMEM;
    return sw_bytes_put(b, s, n);
}

int sw_bytes_u8(sw_bytes *b, uint8_t v) { return sw_bytes_put(b, &v, 1); }

int sw_bytes_f64(sw_bytes *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(u >> (8 * i));
    return sw_bytes_put(b, le, 8);
}

void sw_bytes_free(sw_bytes *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}
