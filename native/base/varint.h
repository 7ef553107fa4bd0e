/*
 * varint.h - LEB128 variable-length integers, the basic unit of the trace
 * format (see docs/format.md, "Integers").
 *
 * An unsigned value is written 7 bits at a time, least significant group
 * first; the high bit of each byte says that another byte follows. A u64
 * takes 1 to 10 bytes. Decoding is bounded: it never reads past `end` and
 * rejects encodings longer than 10 bytes.
 */
#ifndef SW_VARINT_H
#define SW_VARINT_H

#include "common.h"

#define SW_VARINT_MAX 10  /* bytes in the longest encoding of a u64 */

/* Writes v at p (which must have SW_VARINT_MAX bytes of room); returns the
 * byte after the encoding. */
SW_INLINE uint8_t *sw_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Same encoding, with the one- to three-byte cases (almost every event
 * field) written without a loop. */
SW_INLINE uint8_t *sw_put_varint_fast(uint8_t *p, uint64_t v)
{
    if (SW_LIKELY(v < 0x80)) {
        p[0] = (uint8_t)v;
        return p + 1;
    }
    if (SW_LIKELY(v < 0x4000)) {
        p[0] = (uint8_t)(v | 0x80);
        p[1] = (uint8_t)(v >> 7);
        return p + 2;
    }
    if (v < 0x200000) {
        p[0] = (uint8_t)(v | 0x80);
        p[1] = (uint8_t)((v >> 7) | 0x80);
        p[2] = (uint8_t)(v >> 14);
        return p + 3;
    }
    return sw_put_varint(p, v);
}

/* Reads a varint from [*pp, end). On success stores it in *out, advances *pp
 * and returns 0; returns SW_ETRUNC if the input ends first and SW_EFORMAT if
 * the encoding is longer than 10 bytes. */
SW_INLINE int sw_get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        if (p >= end)
            return SW_ETRUNC;
        uint8_t b = *p++;
        if (shift == 63 && b > 1)
            return SW_EFORMAT;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
        if (shift > 63)
            return SW_EFORMAT;
    }
    *pp = p;
    *out = v;
    return SW_OK;
}

/* Zigzag mapping of signed to unsigned so that small magnitudes stay small. */
SW_INLINE uint64_t sw_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
SW_INLINE int64_t sw_unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* Returns the number of bytes sw_put_varint would write for v. */
SW_INLINE size_t sw_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}

#endif /* SW_VARINT_H */
