/*
 * common.h - definitions shared by every file of the stackwatch C code.
 *
 * Outside native/ext nothing includes Python.h: it is plain C11 so that it
 * can be unit-tested alone, fuzzed, and reused by the out-of-process reader.
 * Every fallible core function returns 0 on success or a negative SW_E* code;
 * only native/ext turns these codes into Python exceptions.
 */
#ifndef SW_BASE_COMMON_H
#define SW_BASE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define SW_OK        0
#define SW_ENOMEM   -1   /* an allocation failed */
#define SW_EIO      -2   /* a read or write of a file failed (errno kept) */
#define SW_EFORMAT  -3   /* the input is not a valid stackwatch trace */
#define SW_ETRUNC   -4   /* the input ends in the middle of a record */
#define SW_ECRC     -5   /* a chunk's checksum does not match its payload */
#define SW_EVERSION -6   /* a trace written by an incompatible format version */
#define SW_EARG     -7   /* an argument is out of range */
#define SW_ESTATE   -8   /* the object is not in a state that allows the call */
#define SW_ECANCELED -9  /* stopped by the caller (a progress callback said so) */

#if defined(__GNUC__)
#  define SW_LIKELY(x)   __builtin_expect(!!(x), 1)
#  define SW_UNLIKELY(x) __builtin_expect(!!(x), 0)
#  define SW_NOINLINE    __attribute__((noinline))
#  define SW_INLINE      static inline __attribute__((always_inline))
#else
#  define SW_LIKELY(x)   (x)
#  define SW_UNLIKELY(x) (x)
#  define SW_NOINLINE
#  define SW_INLINE      static inline
#endif

/* Returns a static English description of an SW_E* code. */
const char *sw_strerror(int code);

#endif /* SW_BASE_COMMON_H */
