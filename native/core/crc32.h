/*
 * crc32.h - CRC-32 (IEEE 802.3 polynomial, the one zlib and gzip use), which
 * protects every chunk of a trace file.
 */
#ifndef SW_CRC32_H
#define SW_CRC32_H

#include "sw_common.h"

/* Continues a CRC over len bytes: start with crc = 0, feed pieces in order.
 * sw_crc32(0, "123456789", 9) == 0xCBF43926. */
uint32_t sw_crc32(uint32_t crc, const void *data, size_t len);

#endif
