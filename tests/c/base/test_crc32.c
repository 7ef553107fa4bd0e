/*
 * test_crc32.c - the chunk checksum (native/base/crc32.c): CRC-32C
 * (Castagnoli, reflected polynomial 0x82F63B78; docs/format.md), computed
 * in hardware where the CPU allows and by table otherwise. Both are checked
 * against the standard check values and a bit-at-a-time reference.
 */
#define _GNU_SOURCE
#include "check.h"
#include "base/crc32.h"

#include <pthread.h>

/* Bitwise reference: reflected polynomial, init and xorout ~0. */
static uint32_t ref_crc(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);
static const crc_fn impls[2] = {sw_crc32, sw_crc32_table};

static void check_value(int k, const void *data, size_t len, uint32_t want, const char *what)
{
    static const char *names[2] = {"sw_crc32", "sw_crc32_table"};
    uint32_t got = impls[k](0, data, len);
    CHECK_MSG(got == want, "%s(%s): 0x%08x, expected 0x%08x", names[k], what, got, want);
}

TEST(check_values)
{
    uint8_t zeros[32] = {0}, ff[32], up[32], down[32];
    memset(ff, 0xff, sizeof ff);
    for (int i = 0; i < 32; i++) {
        up[i] = (uint8_t)i;
        down[i] = (uint8_t)(31 - i);
    }
    for (int k = 0; k < 2; k++) {
        check_value(k, "123456789", 9, 0xE3069283u, "\"123456789\"");  /* the standard check value */
        check_value(k, "", 0, 0, "\"\"");
        check_value(k, "a", 1, 0xC1D04330u, "\"a\"");
        check_value(k, "The quick brown fox jumps over the lazy dog", 43, 0x22620404u, "fox");
        /* RFC 3720 (iSCSI) B.4 test vectors. */
        check_value(k, zeros, 32, 0x8A9136AAu, "32 x 00");
        check_value(k, ff, 32, 0x62A8AB43u, "32 x ff");
        check_value(k, up, 32, 0x46DD794Eu, "00..1f");
        check_value(k, down, 32, 0x113FDB5Cu, "1f..00");
    }
}

TEST(matches_reference_all_lengths_and_alignments)
{
    uint8_t buf[600];
    fill(buf, sizeof buf, 7);
    for (size_t off = 0; off < 8; off++)
        for (size_t len = 0; len + off <= 300; len++) {
            uint32_t want = ref_crc(0, buf + off, len);
            CHECK_EQ_U64(sw_crc32(0, buf + off, len), want);
            CHECK_EQ_U64(sw_crc32_table(0, buf + off, len), want);
        }
    /* A long buffer: hardware and table agree. */
    uint8_t *big = malloc(300000);
    fill(big, 300000, 11);
    CHECK_EQ_U64(sw_crc32(0, big, 300000), sw_crc32_table(0, big, 300000));
    CHECK_EQ_U64(sw_crc32(0, big + 3, 299990), ref_crc(0, big + 3, 299990));
    free(big);
}

TEST(incremental_equals_one_shot)
{
    uint8_t buf[1000];
    fill(buf, sizeof buf, 99);
    uint32_t whole = sw_crc32(0, buf, sizeof buf);
    CHECK_EQ_U64(whole, ref_crc(0, buf, sizeof buf));
    for (int k = 0; k < 2; k++) {
        crc_fn f = impls[k];
        for (size_t cut = 0; cut <= sizeof buf; cut++) {
            uint32_t c = f(0, buf, cut);
            c = f(c, buf + cut, sizeof buf - cut);
            CHECK_EQ_U64(c, whole);
        }
        /* Many small pieces of varying size. */
        uint32_t c = 0;
        size_t pos = 0, step = 1;
        while (pos < sizeof buf) {
            size_t n = step < sizeof buf - pos ? step : sizeof buf - pos;
            c = f(c, buf + pos, n);
            pos += n;
            step = step % 13 + 1;
        }
        CHECK_EQ_U64(c, whole);
    }
    /* The two can even be mixed piece by piece. */
    uint32_t c = sw_crc32(0, buf, 333);
    c = sw_crc32_table(c, buf + 333, 333);
    c = sw_crc32(c, buf + 666, sizeof buf - 666);
    CHECK_EQ_U64(c, whole);
}

TEST(detects_every_single_bit_change)
{
    uint8_t buf[256];
    fill(buf, sizeof buf, 3);
    uint32_t base = sw_crc32(0, buf, sizeof buf);
    for (size_t i = 0; i < sizeof buf; i++)
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1u << bit);
            CHECK(sw_crc32(0, buf, sizeof buf) != base);
            buf[i] ^= (uint8_t)(1u << bit);
        }
}

static void *crc_thread(void *arg)
{
    (void)arg;
    uintptr_t bad = 0;
    for (int i = 0; i < 1000; i++)
        if (sw_crc32(0, "123456789", 9) != 0xE3069283u || sw_crc32_table(0, "123456789", 9) != 0xE3069283u)
            bad++;
    return (void *)bad;
}

TEST(first_use_from_many_threads)
{
    /* Lazy initialisation (table, CPU check) by whichever thread is first:
     * this test runs in a fresh process so nothing is initialised yet. */
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        REQUIRE(pthread_create(&th[i], NULL, crc_thread, NULL) == 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        CHECK_EQ_U64((uintptr_t)r, 0);
    }
}
