/*
 * pystr.c - a Python str from memory to UTF-8 (see pystr.h).
 *
 * Layouts handled: compact ASCII (data right after PyASCIIObject), compact
 * (after PyCompactUnicodeObject) and, before 3.12, legacy strings whose
 * data is a separate buffer. Code-object names are always compact.
 */
#include "pystr.h"

#include <string.h>

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp >= 0xd800 && cp <= 0xdfff)
        cp = 0xfffd;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    if (cp > 0x10ffff)
        cp = 0xfffd;
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

long sw_pystr_read(sw_mem *m, const sw_py_layout *l, uint64_t addr, char *out)
{
    unsigned char hdr[SW_LAYOUT_MAX_READ];
    size_t got = sw_mem_read_upto(m, addr, hdr, l->str_header_size);
    /* A compact ASCII object may end before the full header size. */
    size_t need = l->str_state + 4u;
    if (l->str_length + 8u > need)
        need = l->str_length + 8u;
    if (l->ob_type + 8u > need)
        need = l->ob_type + 8u;
    if (got < need)
        return -1;
    if (l->str_type && get_u64(hdr + l->ob_type) != l->str_type)
        return -1;
    int64_t len = (int64_t)get_u64(hdr + l->str_length);
    uint32_t state;
    memcpy(&state, hdr + l->str_state, sizeof state);
    uint32_t kind = (state >> l->str_kind_shift) & l->str_kind_mask;
    if (len < 0 || (kind != 1 && kind != 2 && kind != 4))
        return -1;
    int cut = len > (int64_t)SW_STR_MAX_CHARS;
    size_t n = cut ? SW_STR_MAX_CHARS : (size_t)len;
    uint64_t data;
    if (state & l->str_compact_mask) {
        data = addr + ((state & l->str_ascii_mask) ? l->str_ascii_data : l->str_compact_data);
    } else {
        if (l->str_legacy_data == SW_NO_OFFSET || got < l->str_legacy_data + 8u)
            return -1;
        data = get_u64(hdr + l->str_legacy_data);
    }
    unsigned char raw[SW_STR_MAX_CHARS * 4u];
    if (sw_mem_read(m, data, raw, n * kind) != 0)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp;
        if (kind == 1) {
            cp = raw[i];
        } else if (kind == 2) {
            uint16_t v;
            memcpy(&v, raw + 2 * i, 2);
            cp = v;
        } else {
            memcpy(&cp, raw + 4 * i, 4);
        }
        o += put_utf8(out + o, cp);
    }
    if (cut) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = 0;
    return (long)o;
}

void sw_utf8_copy_cut(char *dst, size_t size, const char *s)
{
    size_t len = strlen(s);
    if (len >= size) {
        len = size - 1;
        while (len && ((unsigned char)s[len] & 0xc0) == 0x80)
            len--;
    }
    memcpy(dst, s, len);
    dst[len] = 0;
}
