/*
 * utf8.h - validating UTF-8, for the writers that must emit well-formed
 * text (speedscope JSON, pprof strings): a byte that starts no well-formed
 * sequence is replaced with U+FFFD by the caller.
 */
#ifndef SW_UTF8_H
#define SW_UTF8_H

#include <stddef.h>

/* Length (1-4) of the well-formed UTF-8 sequence at s, 0 if ill-formed
 * (overlong forms, surrogates and code points above U+10FFFF included).
 * Stops at a NUL: it is no continuation byte, so a NUL-terminated s is
 * never read past its end. */
static inline size_t sw_utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4, min = 0x10000;
    } else {
        return 0;
    }
    unsigned cp = c & (0x7fu >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

#endif
