/*
 * hashtab.c - the hash table's insertion, growth and the byte-string hash
 * (see hashtab.h).
 */
#include "hashtab.h"

#include <stdlib.h>
#include <string.h>

/* The fewest slots a table has once it has any. */
#define MIN_SLOTS 16u

uint64_t sw_hash_bytes(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    uint64_t h = seed ^ (0x9e3779b97f4a7c15ull * ((uint64_t)n + 1));
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    if (n)
        memcpy(&w, s, n);
    return sw_hash_u64(h ^ w);
}

/* The first empty slot of tag's probe sequence. */
static sw_hslot *free_slot(const sw_hashtab *t, uint32_t tag)
{
    uint32_t i = tag & t->mask;
    while (t->slots[i].val != SW_HT_NONE)
        i = (i + 1) & t->mask;
    return &t->slots[i];
}

/* Moves the entries into nslots slots (a power of two, > 4/3 n). The
 * slots hold each entry's tag, which places it: no key is needed. */
static int rehash(sw_hashtab *t, uint64_t nslots)
{
    if (nslots > (1ull << 31))
        return SW_ENOMEM;
    sw_hslot *s = malloc((size_t)nslots * sizeof *s);
    if (!s)
        return SW_ENOMEM;
    memset(s, 0xff, (size_t)nslots * sizeof *s);   /* every val SW_HT_NONE */
    sw_hashtab old = *t;
    t->slots = s;
    t->mask = (uint32_t)(nslots - 1);
    if (old.slots) {
        for (uint64_t i = 0; i <= old.mask; i++)
            if (old.slots[i].val != SW_HT_NONE)
                *free_slot(t, old.slots[i].tag) = old.slots[i];
        free(old.slots);
    }
    return SW_OK;
}

int sw_hashtab_reserve(sw_hashtab *t, uint32_t n)
{
    uint64_t have = t->slots ? (uint64_t)t->mask + 1 : 0, want = MIN_SLOTS;
    while (3 * want < 4 * ((uint64_t)n + 1))
        want *= 2;
    return want > have ? rehash(t, want) : SW_OK;
}

int sw_hashtab_add(sw_hashtab *t, uint64_t hash, uint32_t val)
{
    if (val == SW_HT_NONE || t->n >= 0x7fffffffu)
        return SW_EARG;
    /* At most 3/4 full after this entry. A probe past the first slot
     * mostly stays in its cache line (8 slots of 8 bytes), and checks
     * only the tag: no entry of the caller's is read for it. */
    if (!t->slots || 4 * ((uint64_t)t->n + 1) > 3 * ((uint64_t)t->mask + 1)) {
        int rc = rehash(t, t->slots ? 2 * ((uint64_t)t->mask + 1) : MIN_SLOTS);
        if (rc)
            return rc;
    }
    sw_hslot *s = free_slot(t, sw_ht_tag_(hash));
    s->tag = sw_ht_tag_(hash);
    s->val = val;
    t->n++;
    return SW_OK;
}

void sw_hashtab_clear(sw_hashtab *t)
{
    if (t->slots)
        memset(t->slots, 0xff, ((size_t)t->mask + 1) * sizeof *t->slots);
    t->n = 0;
}

void sw_hashtab_free(sw_hashtab *t)
{
    free(t->slots);
    memset(t, 0, sizeof *t);
}
