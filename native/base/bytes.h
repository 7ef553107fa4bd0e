/*
 * bytes.h - a growable byte buffer used to build chunk payloads and exports.
 * All functions return 0 or SW_ENOMEM; after a failure the buffer keeps its
 * old contents and `failed` is set, so a builder can check once at the end.
 */
#ifndef SW_BYTES_H
#define SW_BYTES_H

#include "common.h"

typedef struct sw_bytes {
    uint8_t *data;
    size_t len, cap;
    int failed;
} sw_bytes;

int sw_bytes_reserve(sw_bytes *b, size_t extra);
int sw_bytes_put(sw_bytes *b, const void *p, size_t n);
int sw_bytes_varint(sw_bytes *b, uint64_t v);
int sw_bytes_str(sw_bytes *b, const char *s);   /* varint length + bytes; NULL = "" */
int sw_bytes_u8(sw_bytes *b, uint8_t v);
int sw_bytes_f64(sw_bytes *b, double v);
void sw_bytes_free(sw_bytes *b);

/* v in decimal at the end of s[SW_DECIMAL_MAX] (NUL-terminated); returns
 * where its digits start. */
#define SW_DECIMAL_MAX 24
static inline char *sw_decimal(char s[SW_DECIMAL_MAX], uint64_t v)
{
    char *p = s + SW_DECIMAL_MAX - 1;
    *p = 0;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return p;
}

/* A NUL-terminated copy of the n bytes at s (which need not be
 * NUL-terminated). Returns NULL when out of memory. */
char *sw_dup_n(const char *s, size_t n);

/* Grows an array so that it holds at least `need` elements of `size`
 * bytes: capacity doubles from `first`. Returns the (possibly moved) array
 * and updates *cap, or returns NULL when out of memory (the array and *cap
 * are then unchanged). */
void *sw_array_grow(void *arr, size_t *cap, size_t need, size_t size, size_t first);

#endif
