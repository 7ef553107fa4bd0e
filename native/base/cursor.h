/*
 * cursor.h - bounded reading of a byte range: the one way every reader of
 * a stackwatch file (container.c, the trace reader, profile/profile_file.c)
 * takes fields out of a chunk's payload. A cursor is [p, end); every read
 * checks the bytes it needs against end first, so nothing in the input can
 * make a reader read outside its range.
 *
 * Every function returns 0 and advances the cursor, or returns SW_ETRUNC
 * (the range ends first) or SW_EFORMAT (a varint longer than 10 bytes) and
 * leaves the cursor where it was.
 */
#ifndef SW_BASE_CURSOR_H
#define SW_BASE_CURSOR_H

#include "common.h"
#include "varint.h"

#include <string.h>

typedef struct sw_cursor {
    const uint8_t *p, *end;
} sw_cursor;

SW_INLINE sw_cursor sw_cursor_of(const void *p, size_t len)
{
    sw_cursor c = {(const uint8_t *)p, (const uint8_t *)p + len};
    return c;
}

SW_INLINE int sw_cur_varint(sw_cursor *c, uint64_t *v) { return sw_get_varint(&c->p, c->end, v); }

/* A zigzag varint (a signed value). */
SW_INLINE int sw_cur_zigzag(sw_cursor *c, int64_t *v)
{
    uint64_t u;
    int rc = sw_get_varint(&c->p, c->end, &u);
    if (rc == SW_OK)
        *v = sw_unzigzag(u);
    return rc;
}

SW_INLINE int sw_cur_u8(sw_cursor *c, uint8_t *v)
{
    if (c->p >= c->end)
        return SW_ETRUNC;
    *v = *c->p++;
    return SW_OK;
}

/* A little-endian IEEE 754 binary64. */
SW_INLINE int sw_cur_f64(sw_cursor *c, double *v)
{
    if (c->end - c->p < 8)
        return SW_ETRUNC;
    uint64_t u = 0;
    for (int k = 0; k < 8; k++)
        u |= (uint64_t)c->p[k] << (8 * k);
    memcpy(v, &u, 8);
    c->p += 8;
    return SW_OK;
}

/* n raw bytes in place: *s points into the range. */
SW_INLINE int sw_cur_bytes(sw_cursor *c, uint64_t n, const uint8_t **s)
{
    if (n > (uint64_t)(c->end - c->p))
        return SW_ETRUNC;
    *s = c->p;
    c->p += n;
    return SW_OK;
}

/* A str (varint length, then that many bytes) in place: *s points into
 * the range (not NUL-terminated), *len is its length. */
SW_INLINE int sw_cur_str(sw_cursor *c, const char **s, size_t *len)
{
    const uint8_t *p0 = c->p, *b;
    uint64_t n;
    int rc = sw_get_varint(&c->p, c->end, &n);
    if (rc == SW_OK && (rc = sw_cur_bytes(c, n, &b)) == SW_OK) {
        *s = (const char *)b;
        *len = (size_t)n;
        return SW_OK;
    }
    c->p = p0;
    return rc;
}

#endif /* SW_BASE_CURSOR_H */
