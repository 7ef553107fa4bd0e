/*
 * hashtab.h - the one hash table of the C core, and its hash functions.
 *
 * A table indexes the caller's own array of entries (functions, call-tree
 * nodes, code objects, strings, addresses): it maps the hash of a key to
 * the indexes of the entries that may hold that key, and the caller, which
 * knows where its keys are, confirms each. Open addressing with linear
 * probing over a power-of-two array of 8-byte slots (32 bits of the hash
 * and an index), doubled before it is 3/4 full: a lookup reads a slot or
 * a few in one cache line, and confirms one entry.
 *
 * Keys of any kind go through the same calls:
 *  - integers (u32, u64, pointers, or two u32 packed in a u64): their hash
 *    is sw_hash_u64(key); a plain array of u64 keys has the shortcut
 *    sw_hashtab_get_u64();
 *  - byte strings: sw_hash_bytes(), chained over several strings with its
 *    seed; the caller compares the strings of the candidates.
 *
 *     uint32_t pos;
 *     for (uint32_t i = sw_hashtab_first(&t, h, &pos); i != SW_HT_NONE;
 *          i = sw_hashtab_next(&t, h, &pos))
 *         if (the key of entry i is the key) return i;
 *     ... append the entry at index n; sw_hashtab_add(&t, h, n) ...
 *
 * Indexes are below SW_HT_NONE. A zero-initialised table is empty and
 * valid; the first insertion allocates. An allocation that fails leaves
 * the table as it was and returns SW_ENOMEM (never exit or abort). No
 * locks: callers serialise (the sampler thread uses tables it alone
 * touches). Memory comes from malloc, never from Python.
 */
#ifndef SW_BASE_HASHTAB_H
#define SW_BASE_HASHTAB_H

#include "common.h"

#define SW_HT_NONE 0xffffffffu   /* no index: an empty slot, a key absent */

typedef struct sw_hslot {
    uint32_t tag;            /* the hash's high 32 bits, which also place the slot */
    uint32_t val;            /* the caller's index; SW_HT_NONE: empty slot */
} sw_hslot;

typedef struct sw_hashtab {
    sw_hslot *slots;
    uint32_t mask;           /* slots - 1 (0 with no slots) */
    uint32_t n;              /* entries */
} sw_hashtab;

/* ---- hash functions (one family, for every table and key kind) ---- */

/* A 64-bit integer mixed so that every bit of the key reaches every bit of
 * the hash (the finaliser of MurmurHash3). */
SW_INLINE uint64_t sw_hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* n bytes, eight at a time, continuing from seed (0 to start; the hash of
 * one string seeds the next, to hash several as one key). */
uint64_t sw_hash_bytes(const void *p, size_t n, uint64_t seed);

/* ---- the table ---- */

SW_INLINE uint32_t sw_ht_tag_(uint64_t hash) { return (uint32_t)(hash >> 32); }

/* The next candidate index for hash from slot *pos on, or SW_HT_NONE at
 * the end of its probe sequence; *pos moves past it. */
SW_INLINE uint32_t sw_hashtab_next(const sw_hashtab *t, uint64_t hash, uint32_t *pos)
{
    if (!t->slots)
        return SW_HT_NONE;
    uint32_t tag = sw_ht_tag_(hash);
    for (uint32_t i = *pos;; i = (i + 1) & t->mask) {
        const sw_hslot *s = &t->slots[i];
        if (s->val == SW_HT_NONE || s->tag == tag) {
            *pos = (i + 1) & t->mask;
            return s->val;
        }
    }
}

/* The first candidate index for hash (every entry whose key has this hash
 * is a candidate, and rarely another), or SW_HT_NONE. */
SW_INLINE uint32_t sw_hashtab_first(const sw_hashtab *t, uint64_t hash, uint32_t *pos)
{
    *pos = sw_ht_tag_(hash) & t->mask;
    return sw_hashtab_next(t, hash, pos);
}

/* For entries whose keys are the u64 keys[index]: the index of key, or
 * SW_HT_NONE. (The table must hash them with sw_hash_u64.) */
SW_INLINE uint32_t sw_hashtab_get_u64(const sw_hashtab *t, const uint64_t *keys, uint64_t key)
{
    uint64_t h = sw_hash_u64(key);
    uint32_t pos, i;
    for (i = sw_hashtab_first(t, h, &pos); i != SW_HT_NONE && keys[i] != key; i = sw_hashtab_next(t, h, &pos)) {
    }
    return i;
}

/* Adds the entry `val` under hash (a key may be held several times: the
 * caller looks first when it must not). Returns 0, SW_ENOMEM (the table is
 * unchanged) or SW_EARG (val is SW_HT_NONE, or 2^31 entries). */
int sw_hashtab_add(sw_hashtab *t, uint64_t hash, uint32_t val);

/* The same, right after a lookup of hash that ended with SW_HT_NONE at
 * *pos (first/next), the table unchanged since: the entry goes into the
 * empty slot the lookup ended on, unless the table must grow first. */
SW_INLINE int sw_hashtab_add_after(sw_hashtab *t, uint64_t hash, uint32_t val, uint32_t pos)
{
    if (SW_UNLIKELY(!t->slots || 4 * ((uint64_t)t->n + 1) > 3 * ((uint64_t)t->mask + 1) || val == SW_HT_NONE ||
                    t->n >= 0x7fffffffu))
        return sw_hashtab_add(t, hash, val);
    sw_hslot *s = &t->slots[(pos - 1) & t->mask];
    s->tag = sw_ht_tag_(hash);
    s->val = val;
    t->n++;
    return SW_OK;
}

/* Makes room for n entries in all, so that adding up to them does not
 * allocate. Returns 0 or SW_ENOMEM. */
int sw_hashtab_reserve(sw_hashtab *t, uint32_t n);

/* Removes every entry, keeping the slots. */
void sw_hashtab_clear(sw_hashtab *t);

/* Frees the slots: the table is empty (and zero) again. */
void sw_hashtab_free(sw_hashtab *t);

#endif /* SW_BASE_HASHTAB_H */
