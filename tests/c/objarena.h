/*
 * objarena.h - memory for the Python objects a procmem test makes in its
 * own process (test_pylocals.c, test_pyobj.c), read back through the
 * reader as if they were another process's: one static arena, 16-byte
 * aligned allocations (reset with `used = 0`), and 64-bit stores.
 * Included once per test file.
 */
#ifndef SW_TEST_OBJARENA_H
#define SW_TEST_OBJARENA_H

#include <stdint.h>
#include <string.h>

static unsigned char arena[1 << 17];
static size_t used;

static uint64_t alloc(size_t n)
{
    used = (used + 15) & ~(size_t)15;
    uint64_t a = (uint64_t)(uintptr_t)(arena + used);
    used += n;
    return a;
}

static void put64(uint64_t addr, uint64_t v)
{
    memcpy((void *)(uintptr_t)addr, &v, 8);
}

static inline void put32(uint64_t addr, uint32_t v)
{
    memcpy((void *)(uintptr_t)addr, &v, 4);
}

/* An object of size bytes (at least 32), its reference count 1 and its
 * type `type`, at the offsets refcnt_at and type_at (the layout's). */
static inline uint64_t arena_object(uint32_t refcnt_at, uint32_t type_at, uint64_t type, size_t size)
{
    uint64_t o = alloc(size < 32 ? 32 : size);
    put64(o + refcnt_at, 1);
    put64(o + type_at, type);
    return o;
}

#endif
