/*
 * test_varint.c - LEB128 varints and zigzag (native/base/varint.h).
 */
#define _GNU_SOURCE
#include "check.h"
#include "base/varint.h"

static const uint64_t boundaries[] = {
    0, 1, 2, 63, 64, 127, 128, 129, 255, 256, 300,
    (1ull << 14) - 1, 1ull << 14, (1ull << 21) - 1, 1ull << 21, (1ull << 28) - 1, 1ull << 28,
    (1ull << 32) - 1, 1ull << 32, (1ull << 35) - 1, 1ull << 35, (1ull << 42) - 1, 1ull << 42,
    (1ull << 49) - 1, 1ull << 49, (1ull << 56) - 1, 1ull << 56, (1ull << 63) - 1, 1ull << 63,
    (1ull << 63) + 1, UINT64_MAX - 1, UINT64_MAX,
};
#define NB (sizeof boundaries / sizeof boundaries[0])

/* Bytes an unsigned LEB128 encoding of v takes, computed independently. */
static size_t expected_len(uint64_t v)
{
    size_t bits = 1;
    while (bits < 64 && (v >> bits))
        bits++;
    return (bits + 6) / 7;
}

/* Decodes from a heap buffer holding exactly n bytes, so that AddressSanitizer
 * reports any read past `end`. */
static int decode_exact(const uint8_t *bytes, size_t n, uint64_t *out, size_t *used)
{
    uint8_t *buf = malloc(n ? n : 1);
    memcpy(buf, bytes, n);
    const uint8_t *p = buf;
    int rc = sw_get_varint(&p, buf + n, out);
    *used = (size_t)(p - buf);
    free(buf);
    return rc;
}

TEST(round_trip_boundaries)
{
    for (size_t i = 0; i < NB; i++) {
        uint64_t v = boundaries[i];
        uint8_t buf[SW_VARINT_MAX + 4];
        memset(buf, 0xAA, sizeof buf);
        uint8_t *e = sw_put_varint(buf, v);
        size_t len = (size_t)(e - buf);
        CHECK_EQ_U64(len, expected_len(v));
        CHECK_EQ_U64(len, sw_varint_len(v));
        CHECK(len >= 1 && len <= SW_VARINT_MAX);
        CHECK_EQ_U64(buf[len], 0xAA);  /* nothing written past the encoding */
        for (size_t k = 0; k + 1 < len; k++)
            CHECK(buf[k] & 0x80);
        CHECK(!(buf[len - 1] & 0x80));
        uint64_t out = 12345;
        size_t used = 0;
        CHECK_EQ_U64(decode_exact(buf, len, &out, &used), SW_OK);
        CHECK_EQ_U64(out, v);
        CHECK_EQ_U64(used, len);
    }
}

TEST(known_encodings)
{
    static const struct { uint64_t v; uint8_t enc[SW_VARINT_MAX]; size_t n; } cases[] = {
        {0, {0x00}, 1},
        {1, {0x01}, 1},
        {127, {0x7f}, 1},
        {128, {0x80, 0x01}, 2},
        {300, {0xac, 0x02}, 2},
        {16383, {0xff, 0x7f}, 2},
        {16384, {0x80, 0x80, 0x01}, 3},
        {1ull << 63, {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 10},
        {UINT64_MAX, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t buf[SW_VARINT_MAX];
        size_t n = (size_t)(sw_put_varint(buf, cases[i].v) - buf);
        CHECK_EQ_U64(n, cases[i].n);
        CHECK_EQ_MEM(buf, cases[i].enc, cases[i].n);
    }
}

TEST(round_trip_random)
{
    uint64_t s = 88172645463325252ull;
    uint8_t buf[64 * SW_VARINT_MAX];
    for (int round = 0; round < 2000; round++) {
        uint64_t vals[64];
        uint8_t *p = buf;
        for (int k = 0; k < 64; k++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            vals[k] = s >> (s % 64);  /* every magnitude */
            p = sw_put_varint(p, vals[k]);
        }
        const uint8_t *q = buf;
        for (int k = 0; k < 64; k++) {
            uint64_t v;
            if (!CHECK_EQ_U64(sw_get_varint(&q, p, &v), SW_OK))
                return;
            CHECK_EQ_U64(v, vals[k]);
        }
        CHECK(q == p);
    }
}

TEST(truncated_is_etrunc)
{
    for (size_t i = 0; i < NB; i++) {
        uint8_t enc[SW_VARINT_MAX];
        size_t len = (size_t)(sw_put_varint(enc, boundaries[i]) - enc);
        /* Every proper prefix, including the empty one, is truncated. */
        for (size_t cut = 0; cut < len; cut++) {
            uint8_t *buf = malloc(cut ? cut : 1);
            memcpy(buf, enc, cut);
            const uint8_t *p = buf;
            uint64_t out = 777;
            CHECK_EQ_I64(sw_get_varint(&p, buf + cut, &out), SW_ETRUNC);
            CHECK(p == buf);      /* the cursor does not move on failure */
            CHECK_EQ_U64(out, 777);
            free(buf);
        }
    }
    /* A continuation byte at the very end of the buffer. */
    const uint8_t cont[] = {0x80, 0x80, 0x80};
    uint64_t v;
    size_t used;
    CHECK_EQ_I64(decode_exact(cont, sizeof cont, &v, &used), SW_ETRUNC);
}

TEST(overlong_is_eformat)
{
    /* 11 bytes: ten continuation bytes then a terminator. */
    uint8_t eleven[11];
    memset(eleven, 0x80, 10);
    eleven[10] = 0x00;
    uint64_t v = 5;
    size_t used;
    CHECK_EQ_I64(decode_exact(eleven, sizeof eleven, &v, &used), SW_EFORMAT);
    CHECK_EQ_U64(used, 0);
    CHECK_EQ_U64(v, 5);
    /* Also when the input ends right after the 10th byte, or goes on. */
    CHECK_EQ_I64(decode_exact(eleven, 10, &v, &used), SW_EFORMAT);
    uint8_t many[32];
    memset(many, 0xff, sizeof many);
    CHECK_EQ_I64(decode_exact(many, sizeof many, &v, &used), SW_EFORMAT);
    /* A 10th byte that would put bits above bit 63. */
    uint8_t big[10];
    memset(big, 0xff, 9);
    for (int last = 2; last < 0x80; last++) {
        big[9] = (uint8_t)last;
        CHECK_EQ_I64(decode_exact(big, sizeof big, &v, &used), SW_EFORMAT);
    }
    /* The largest legal 10th byte is 1. */
    big[9] = 1;
    CHECK_EQ_I64(decode_exact(big, sizeof big, &v, &used), SW_OK);
    CHECK_EQ_U64(v, UINT64_MAX);
    CHECK_EQ_U64(used, 10);
}

TEST(non_minimal_up_to_ten_bytes_decodes)
{
    /* Padding with 0x80 groups is not minimal but within 10 bytes: accepted
     * (docs: "rejects encodings longer than 10 bytes"). */
    const uint8_t two_zero[] = {0x80, 0x00};
    const uint8_t ten_one[] = {0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
    uint64_t v;
    size_t used;
    CHECK_EQ_I64(decode_exact(two_zero, sizeof two_zero, &v, &used), SW_OK);
    CHECK_EQ_U64(v, 0);
    CHECK_EQ_U64(used, 2);
    CHECK_EQ_I64(decode_exact(ten_one, sizeof ten_one, &v, &used), SW_OK);
    CHECK_EQ_U64(v, 1);
    CHECK_EQ_U64(used, 10);
}

TEST(never_reads_past_end)
{
    /* end cuts a longer valid encoding: the decoder must stop at end even
     * though more (valid) bytes follow in memory. */
    uint8_t enc[SW_VARINT_MAX];
    size_t len = (size_t)(sw_put_varint(enc, UINT64_MAX) - enc);
    for (size_t cut = 0; cut < len; cut++) {
        const uint8_t *p = enc;
        uint64_t v;
        CHECK_EQ_I64(sw_get_varint(&p, enc + cut, &v), SW_ETRUNC);
        CHECK(p == enc);
    }
    /* A sequence decoded one varint after another ends exactly at end. */
    uint8_t *buf = malloc(3);
    buf[0] = 0x05;
    buf[1] = 0x80;
    buf[2] = 0x01;
    const uint8_t *p = buf;
    uint64_t a = 0, b = 0, c = 0;
    CHECK_EQ_I64(sw_get_varint(&p, buf + 3, &a), SW_OK);
    CHECK_EQ_I64(sw_get_varint(&p, buf + 3, &b), SW_OK);
    CHECK_EQ_U64(a, 5);
    CHECK_EQ_U64(b, 128);
    CHECK(p == buf + 3);
    CHECK_EQ_I64(sw_get_varint(&p, buf + 3, &c), SW_ETRUNC);
    free(buf);
}

TEST(zigzag)
{
    static const struct { int64_t s; uint64_t u; } cases[] = {
        {0, 0}, {-1, 1}, {1, 2}, {-2, 3}, {2, 4}, {-64, 127}, {64, 128},
        {INT64_MAX, UINT64_MAX - 1}, {INT64_MIN, UINT64_MAX},
        {INT32_MIN, 0xFFFFFFFFull}, {INT32_MAX, 0xFFFFFFFEull},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_U64(sw_zigzag(cases[i].s), cases[i].u);
        CHECK_EQ_I64(sw_unzigzag(cases[i].u), cases[i].s);
    }
    for (int64_t v = -70000; v <= 70000; v += 7) {
        CHECK_EQ_I64(sw_unzigzag(sw_zigzag(v)), v);
        /* Small magnitudes stay small: |v| < 64 fits one byte. */
        if (v > -64 && v < 64)
            CHECK_EQ_U64(sw_varint_len(sw_zigzag(v)), 1);
    }
    for (size_t i = 0; i < NB; i++) {
        uint64_t u = boundaries[i];
        CHECK_EQ_U64(sw_zigzag(sw_unzigzag(u)), u);
        CHECK_EQ_I64(sw_unzigzag(sw_zigzag((int64_t)u)), (int64_t)u);
    }
}
