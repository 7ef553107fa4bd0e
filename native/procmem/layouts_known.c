/*
 * layouts_known.c - the generated layouts of known CPython releases,
 * looked up by version (see layouts_known.h).
 */
#include "layouts_known.h"

#include <stdio.h>

#include "layouts_generated.h"

#define N_KNOWN (sizeof sw_layouts_generated / sizeof sw_layouts_generated[0])

int sw_layout_known(uint32_t version_hex, sw_py_layout *out)
{
    for (size_t i = 0; i < N_KNOWN; i++) {
        if ((sw_layouts_generated[i].version_hex >> 8) == (version_hex >> 8)) {
            *out = sw_layouts_generated[i];
            return SW_OK;
        }
    }
    return SW_EARG;
}

int sw_layout_known_minor(uint32_t version_hex, sw_py_layout *out)
{
    for (size_t i = 0; i < N_KNOWN; i++) {
        if ((sw_layouts_generated[i].version_hex >> 16) == (version_hex >> 16)) {
            *out = sw_layouts_generated[i];
            return SW_OK;
        }
    }
    return SW_EARG;
}

void sw_layout_known_list(char *buf, size_t len)
{
    size_t at = 0;
    if (len)
        buf[0] = 0;
    for (size_t i = 0; i < N_KNOWN && at < len; i++) {
        uint32_t v = sw_layouts_generated[i].version_hex;
        int n = snprintf(buf + at, len - at, "%s%u.%u.%u", i ? ", " : "", v >> 24, (v >> 16) & 0xFF, (v >> 8) & 0xFF);
        if (n < 0)
            break;
        at += (size_t)n;
    }
}
