/*
 * linetable.c - decoding the line tables of CPython 3.9-3.13 (linetable.h).
 *
 * Lines are summed in 64 bits and offsets checked against 2^32, so a
 * damaged table gives wrong lines but no overflow; every byte read is
 * inside the table.
 */
#include "linetable.h"

#include <stdlib.h>

typedef struct builder {
    sw_linetable *t;
    uint32_t cap;
} builder;

static int32_t clamp_line(int64_t line)
{
    return line < 0 || line > INT32_MAX ? -1 : (int32_t)line;
}

/* Records that from `start` on, the line is `line`: a range starting where
 * the last one starts replaces it; one with the last one's line is merged
 * into it. */
static void put(builder *b, uint64_t start, int64_t line)
{
    sw_linetable *t = b->t;
    int32_t l = clamp_line(line);
    if (start >= UINT32_MAX)
        return;
    if (t->n && t->r[t->n - 1].start == start) {
        t->r[t->n - 1].line = l;
        if (t->n > 1 && t->r[t->n - 2].line == l)
            t->n--;
        return;
    }
    if (t->n && t->r[t->n - 1].line == l)
        return;
    if (t->n < b->cap)
        t->r[t->n++] = (sw_linerange){(uint32_t)start, l};
}

/* 3.9 co_lnotab: the line changes at each offset reached; a pair with a
 * zero offset increment changes the line at the same offset. Open-ended. */
static void decode_lnotab(builder *b, const unsigned char *tab, size_t len, int64_t line)
{
    uint64_t addr = 0;
    put(b, 0, line);
    for (size_t i = 0; i + 1 < len; i += 2) {
        addr += tab[i];
        line += (signed char)tab[i + 1];
        put(b, addr, line);
    }
    b->t->end = UINT32_MAX;
}

/* 3.10 co_linetable: each pair is a range of tab[i] bytes; its line is the
 * running line plus the delta, or none for -128 (the running line is then
 * unchanged). Empty ranges only move the running line. */
static void decode_pairs(builder *b, const unsigned char *tab, size_t len, int64_t line)
{
    uint64_t addr = 0;
    for (size_t i = 0; i + 1 < len; i += 2) {
        int delta = (signed char)tab[i + 1];
        int64_t l = -1;
        if (delta != -128) {
            line += delta;
            l = line;
        }
        if (tab[i]) {
            put(b, addr, l);
            addr += tab[i];
        }
    }
    b->t->end = addr >= UINT32_MAX ? UINT32_MAX : (uint32_t)addr;
}

/* The 6-bit-chunk varint of locations.md at tab[*i]; chunks but the last
 * have bit 6 set. Returns -1 if it runs past the table or the entry. */
static int64_t read_varint(const unsigned char *tab, size_t len, size_t *i)
{
    uint64_t v = 0;
    for (unsigned shift = 0; *i < len && shift < 42; shift += 6) {
        unsigned char c = tab[(*i)++];
        if (c & 0x80)
            return -1;     /* the next entry's first byte: truncated */
        v |= (uint64_t)(c & 63) << shift;
        if (!(c & 64))
            return (int64_t)v;
    }
    return -1;
}

static int read_svarint(const unsigned char *tab, size_t len, size_t *i, int64_t *out)
{
    int64_t u = read_varint(tab, len, i);
    if (u < 0)
        return -1;
    *out = (u & 1) ? -(u >> 1) : (u >> 1);
    return 0;
}

/* 3.11+ location entries. Column bytes are skipped. */
static int decode_locations(builder *b, const unsigned char *tab, size_t len, int64_t line)
{
    uint64_t addr = 0;
    size_t i = 0;
    while (i < len) {
        unsigned char first = tab[i++];
        if (!(first & 0x80))
            return SW_EFORMAT;
        unsigned code = (first >> 3) & 15, units = (first & 7) + 1u;
        int64_t l = -1, delta = 0;
        if (code == 15) {
            /* no location */
        } else if (code == 14) {
            if (read_svarint(tab, len, &i, &delta) < 0 || read_varint(tab, len, &i) < 0 ||
                read_varint(tab, len, &i) < 0 || read_varint(tab, len, &i) < 0)
                return SW_EFORMAT;
        } else if (code == 13) {
            if (read_svarint(tab, len, &i, &delta) < 0)
                return SW_EFORMAT;
        } else if (code >= 10) {
            delta = code - 10;
            i += 2;
        } else {
            i += 1;
        }
        if (i > len)
            return SW_EFORMAT;
        if (code != 15) {
            line += delta;
            l = line;
        }
        put(b, addr, l);
        addr += 2u * units;
    }
    b->t->end = addr >= UINT32_MAX ? UINT32_MAX : (uint32_t)addr;
    return SW_OK;
}

int sw_linetable_decode(int kind, const unsigned char *tab, size_t len, int32_t firstlineno, sw_linetable *out)
{
    out->r = NULL;
    out->n = 0;
    out->end = 0;
    if (kind < SW_LINETABLE_LNOTAB || kind > SW_LINETABLE_LOCATIONS || len > SW_LINETABLE_MAX_BYTES)
        return SW_EARG;
    builder b = {out, (uint32_t)len + 1};
    out->r = malloc(b.cap * sizeof *out->r);
    if (!out->r)
        return SW_ENOMEM;
    int rc = SW_OK;
    if (kind == SW_LINETABLE_LNOTAB)
        decode_lnotab(&b, tab, len, firstlineno);
    else if (kind == SW_LINETABLE_PAIRS)
        decode_pairs(&b, tab, len, firstlineno);
    else
        rc = decode_locations(&b, tab, len, firstlineno);
    if (rc != SW_OK)
        sw_linetable_free(out);
    return rc;
}

int32_t sw_linetable_line(const sw_linetable *t, uint32_t offset)
{
    if (!t->n || offset >= t->end || offset < t->r[0].start)
        return -1;
    uint32_t lo = 0, hi = t->n;      /* the answer is in [lo, hi) */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->r[mid].start <= offset)
            lo = mid;
        else
            hi = mid;
    }
    return t->r[lo].line;
}

void sw_linetable_free(sw_linetable *t)
{
    free(t->r);
    t->r = NULL;
    t->n = 0;
    t->end = 0;
}
