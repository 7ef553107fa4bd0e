/*
 * test_hashtab.c - the hash table (base/hashtab.h): an empty table, integer
 * keys against a reference over a million random operations, hashes held
 * several times (byte strings whose hashes collide) with every candidate
 * visited, clear / reserve / free, refused indexes; and the hash
 * functions: equal
 * inputs hash alike, and sequential integers, aligned pointers and similar
 * strings spread evenly over a table's slots.
 */
#define _GNU_SOURCE
#include "check.h"
#include "base/hashtab.h"
#include "tracegen.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { return tg_rand(&rng); }

TEST(an_empty_table)
{
    sw_hashtab t = {0};
    uint64_t none[1] = {0};
    CHECK_EQ_U64(sw_hashtab_get_u64(&t, none, 0), SW_HT_NONE);
    uint32_t pos;
    CHECK_EQ_U64(sw_hashtab_first(&t, 7, &pos), SW_HT_NONE);
    CHECK_EQ_U64(sw_hashtab_next(&t, 7, &pos), SW_HT_NONE);
    sw_hashtab_clear(&t);
    sw_hashtab_free(&t);
    CHECK(t.slots == NULL && t.n == 0);
    /* Keys 0 and all ones are keys like any other. */
    uint64_t keys[2] = {0, UINT64_MAX};
    CHECK_EQ_I64(sw_hashtab_add(&t, sw_hash_u64(keys[0]), 0), SW_OK);
    CHECK_EQ_I64(sw_hashtab_add(&t, sw_hash_u64(keys[1]), 1), SW_OK);
    CHECK_EQ_U64(sw_hashtab_get_u64(&t, keys, 0), 0);
    CHECK_EQ_U64(sw_hashtab_get_u64(&t, keys, UINT64_MAX), 1);
    CHECK_EQ_U64(sw_hashtab_get_u64(&t, keys, 1), SW_HT_NONE);
    /* SW_HT_NONE is not an index. */
    CHECK_EQ_I64(sw_hashtab_add(&t, 9, SW_HT_NONE), SW_EARG);
    CHECK_EQ_U64(t.n, 2);
    sw_hashtab_free(&t);
}

/* A million random lookups and insertions over keys of several shapes
 * (small, packed pairs, aligned addresses), against a reference. */
#define NKEYS 200000
static uint64_t keys[NKEYS];      /* the key space */
static uint32_t where[NKEYS];     /* key k's index in `stored`, or SW_HT_NONE */
static uint64_t stored[NKEYS];    /* the caller's array of entries */

TEST(integer_keys_against_a_reference)
{
    for (int shape = 0; shape < 3; shape++) {
        sw_hashtab t = {0};
        uint32_t n = 0;
        for (uint32_t i = 0; i < NKEYS; i++) {
            keys[i] = shape == 0   ? i
                      : shape == 1 ? (uint64_t)(i % 977) << 32 | (i / 977)
                                   : 0x7f0000000000ull + (uint64_t)i * 64;
            where[i] = SW_HT_NONE;
        }
        for (int op = 0; op < 1000000; op++) {
            uint32_t k = (uint32_t)(next() % NKEYS);
            uint64_t h = sw_hash_u64(keys[k]);
            uint32_t pos, got;
            for (got = sw_hashtab_first(&t, h, &pos); got != SW_HT_NONE && stored[got] != keys[k];
                 got = sw_hashtab_next(&t, h, &pos)) {
            }
            if (!CHECK_EQ_U64(got, where[k]) || !CHECK_EQ_U64(sw_hashtab_get_u64(&t, stored, keys[k]), where[k]))
                break;
            if (got == SW_HT_NONE && (next() & 1)) {
                /* Where the lookup ended, or anew. */
                stored[n] = keys[k];
                int rc = op & 1 ? sw_hashtab_add_after(&t, h, n, pos) : sw_hashtab_add(&t, h, n);
                if (!CHECK_EQ_I64(rc, SW_OK))
                    break;
                where[k] = n++;
            }
        }
        CHECK_EQ_U64(t.n, n);
        for (uint32_t i = 0; i < NKEYS; i++)
            if (!CHECK_EQ_U64(sw_hashtab_get_u64(&t, stored, keys[i]), where[i]))
                break;
        CHECK((uint64_t)t.n * 4 <= 3 * ((uint64_t)t.mask + 1));   /* at most 3/4 full */
        sw_hashtab_free(&t);
    }
}

TEST(every_candidate_of_a_hash_is_visited)
{
    /* As for byte strings whose hashes collide: entries 0..9 under one
     * hash, 10..19 under another with the same tag (high 32 bits), plus
     * unrelated ones. */
    sw_hashtab t = {0};
    uint64_t h1 = 0x1234567800000001ull, h2 = 0x1234567800000002ull;
    for (uint32_t i = 0; i < 10; i++) {
        REQUIRE(sw_hashtab_add(&t, h1, i) == SW_OK);
        REQUIRE(sw_hashtab_add(&t, h2, 10 + i) == SW_OK);
        REQUIRE(sw_hashtab_add(&t, sw_hash_u64(i), 100 + i) == SW_OK);
    }
    uint32_t seen = 0, pos, v;
    for (v = sw_hashtab_first(&t, h1, &pos); v != SW_HT_NONE; v = sw_hashtab_next(&t, h1, &pos)) {
        CHECK(v < 20);   /* the same tag: both runs are candidates */
        seen |= 1u << v;
    }
    CHECK_EQ_U64(seen, 0xfffff);
    CHECK_EQ_U64(sw_hashtab_first(&t, 0x7777777700000001ull, &pos), SW_HT_NONE);
    sw_hashtab_free(&t);
}

TEST(clear_reserve_free)
{
    sw_hashtab t = {0};
    static uint64_t k[1000];
    REQUIRE(sw_hashtab_reserve(&t, 1000) == SW_OK);
    sw_hslot *slots = t.slots;
    for (uint32_t i = 0; i < 1000; i++) {
        k[i] = i * 7919;
        REQUIRE(sw_hashtab_add(&t, sw_hash_u64(k[i]), i) == SW_OK);
    }
    CHECK(t.slots == slots);   /* reserved: no growth */
    CHECK_EQ_U64(sw_hashtab_get_u64(&t, k, 7919 * 500), 500);
    sw_hashtab_clear(&t);
    CHECK_EQ_U64(t.n, 0);
    CHECK(t.slots == slots);
    for (uint32_t i = 0; i < 1000; i++)
        if (!CHECK_EQ_U64(sw_hashtab_get_u64(&t, k, k[i]), SW_HT_NONE))
            break;
    sw_hashtab_free(&t);
}

/* The largest number of keys in one of 1024 buckets, for the hashes of
 * 16384 keys. */
static uint32_t worst_bucket(uint64_t (*hash)(uint32_t))
{
    static uint32_t count[1024];
    memset(count, 0, sizeof count);
    uint32_t worst = 0;
    for (uint32_t i = 0; i < 16384; i++) {
        uint32_t b = (uint32_t)(hash(i) >> 32) & 1023;   /* the bits that place a slot */
        if (++count[b] > worst)
            worst = count[b];
    }
    return worst;
}

static uint64_t seq(uint32_t i) { return sw_hash_u64(i); }
static uint64_t aligned(uint32_t i) { return sw_hash_u64(0x55d4a0000000ull + (uint64_t)i * 4096); }
static uint64_t pair(uint32_t i) { return sw_hash_u64((uint64_t)(i & 127) << 32 | (i >> 7)); }
static char sbuf[64];
static uint64_t strkey(uint32_t i)
{
    int n = snprintf(sbuf, sizeof sbuf, "/usr/lib/python3.12/module%u.py", i);
    return sw_hash_bytes(sbuf, (size_t)n, 0);
}

TEST(hashes_spread_keys_evenly)
{
    /* 16 keys a bucket on average; a good hash stays well under 40. */
    CHECK_MSG(worst_bucket(seq) < 40, "sequential: %u", worst_bucket(seq));
    CHECK_MSG(worst_bucket(aligned) < 40, "aligned: %u", worst_bucket(aligned));
    CHECK_MSG(worst_bucket(pair) < 40, "pairs: %u", worst_bucket(pair));
    CHECK_MSG(worst_bucket(strkey) < 40, "strings: %u", worst_bucket(strkey));
}

TEST(byte_string_hashes)
{
    const char *a = "Class.method", *b = "Class.methoe";
    CHECK_EQ_U64(sw_hash_bytes(a, 12, 0), sw_hash_bytes("Class.method", 12, 0));
    CHECK(sw_hash_bytes(a, 12, 0) != sw_hash_bytes(b, 12, 0));
    CHECK(sw_hash_bytes(a, 12, 0) != sw_hash_bytes(a, 12, 1));    /* the seed counts */
    CHECK(sw_hash_bytes(a, 11, 0) != sw_hash_bytes(a, 12, 0));    /* and the length */
    CHECK(sw_hash_bytes("", 0, 0) != sw_hash_bytes("\0", 1, 0));
    /* Every length from 0 to 40 reads only its bytes (ASan: exact sizes). */
    for (size_t n = 0; n <= 40; n++) {
        char *p = malloc(n ? n : 1);
        memset(p, 'x', n);
        uint64_t h = sw_hash_bytes(p, n, 0);
        CHECK(n == 0 || h != sw_hash_bytes(p, n - 1, 0));
        free(p);
    }
    /* Two strings, one after the other, as the function table hashes
     * (name, file): not the hash of their concatenation's split. */
    uint64_t x = sw_hash_bytes("ab", 2, sw_hash_bytes("c", 1, 0));
    uint64_t y = sw_hash_bytes("b", 1, sw_hash_bytes("ac", 2, 0));
    CHECK(x != y);
}
