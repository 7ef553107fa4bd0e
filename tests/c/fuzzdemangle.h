/*
 * fuzzdemangle.h - the demangler's part of the fuzz target (fuzz_reader.c
 * calls exercise_demangle on every input): the input's first bytes, up to
 * its first NUL and at most SW_DEMANGLE_MAX bytes, after "_Z" (so that
 * every input reaches libstdc++'s demangler) and after "_R" (the Rust v0
 * parser, demangle_rust.h), as a symbol name. Besides
 * ASan/UBSan reports it aborts when a promise of procmem/demangle.h is
 * broken: an empty result, or one longer than SW_DEMANGLE_OUT_MAX.
 */
#ifndef SW_FUZZDEMANGLE_H
#define SW_FUZZDEMANGLE_H

#include "procmem/procmem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void exercise_demangle(const uint8_t *data, size_t len)
{
    char name[SW_DEMANGLE_MAX + 1] = "_Z";
    size_t n = len < SW_DEMANGLE_MAX - 2 ? len : SW_DEMANGLE_MAX - 2;
    memcpy(name + 2, data, n);
    name[2 + n] = 0;
    for (int rust = 0; rust < 2; rust++) {
        name[1] = rust ? 'R' : 'Z';
        char *d = sw_demangle(name);
        if (d && (!d[0] || strlen(d) > SW_DEMANGLE_OUT_MAX)) {
            fprintf(stderr, "fuzz_reader (demangle): an empty or too long result for %s\n", name);
            abort();
        }
        free(d);
    }
}

#endif
