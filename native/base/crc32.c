/*
 * crc32.c - CRC-32C: hardware (x86-64 SSE4.2) when available, else a
 * slicing-by-8 table. Both give identical results.
 */
#include "crc32.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? POLY ^ (c >> 1) : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int s = 1; s < 8; s++)
            table[s][i] = (table[s - 1][i] >> 8) ^ table[0][table[s - 1][i] & 0xff];
}

uint32_t sw_crc32_table(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&table_once, build_table);
    const uint8_t *p = data;
    crc = ~crc;
    while (len >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= crc;
        crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^
              table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
              table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
              table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t c = ~crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}

static int have_hw;
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;

static void detect_hw(void)
{
    have_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
}

uint32_t sw_crc32(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&hw_once, detect_hw);
    return have_hw ? crc_hw(crc, data, len) : sw_crc32_table(crc, data, len);
}
#else
uint32_t sw_crc32(uint32_t crc, const void *data, size_t len)
{
    return sw_crc32_table(crc, data, len);
}
#endif
