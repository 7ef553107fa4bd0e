/*
 * crc32.h - CRC-32C (Castagnoli polynomial, reflected 0x82F63B78), which
 * protects every chunk of a trace file. Computed with the SSE4.2 crc32
 * instruction where the CPU has it (8 bytes per instruction), else by table.
 */
#ifndef SW_CRC32_H
#define SW_CRC32_H

#include "common.h"

/* Continues a CRC over len bytes: start with crc = 0, feed pieces in order.
 * sw_crc32(0, "123456789", 9) == 0xE3069283. */
uint32_t sw_crc32(uint32_t crc, const void *data, size_t len);

/* The table implementation alone (tests compare both). */
uint32_t sw_crc32_table(uint32_t crc, const void *data, size_t len);

#endif
