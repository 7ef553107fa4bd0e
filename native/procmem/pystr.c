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

/* What a str object's header (the first `got` bytes read at addr) says:
 * its length in code points, its kind (bytes per code point) and where its
 * characters are. 0, or -1 if hdr is not a str's. */
typedef struct str_shape {
    int64_t len;
    uint32_t kind;
    int compact;      /* the characters follow the header (else: data) */
    uint64_t data;    /* their address */
} str_shape;

static int shape_of(const sw_py_layout *l, uint64_t addr, const unsigned char *hdr, size_t got, str_shape *sh)
{
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
    sh->len = (int64_t)get_u64(hdr + l->str_length);
    uint32_t state;
    memcpy(&state, hdr + l->str_state, sizeof state);
    sh->kind = (state >> l->str_kind_shift) & l->str_kind_mask;
    if (sh->len < 0 || (sh->kind != 1 && sh->kind != 2 && sh->kind != 4))
        return -1;
    sh->compact = (state & l->str_compact_mask) != 0;
    if (sh->compact) {
        sh->data = addr + ((state & l->str_ascii_mask) ? l->str_ascii_data : l->str_compact_data);
    } else {
        if (l->str_legacy_data == SW_NO_OFFSET || got < l->str_legacy_data + 8u)
            return -1;
        sh->data = get_u64(hdr + l->str_legacy_data);
    }
    return 0;
}

/* The characters read (raw: sh's first n code points) as UTF-8 into out,
 * "..." after them if cut; returns the length. */
static long decode(const str_shape *sh, const unsigned char *raw, size_t n, int cut, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp;
        if (sh->kind == 1) {
            cp = raw[i];
        } else if (sh->kind == 2) {
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

long sw_pystr_read_span(sw_mem *m, const sw_py_layout *l, uint64_t addr, char *out, uint32_t *span)
{
    unsigned char hdr[SW_LAYOUT_MAX_READ];
    str_shape sh;
    size_t got = sw_mem_read_upto(m, addr, hdr, l->str_header_size);
    if (span)
        *span = 0;
    if (shape_of(l, addr, hdr, got, &sh) != 0)
        return -1;
    int cut = sh.len > (int64_t)SW_STR_MAX_CHARS;
    size_t n = cut ? SW_STR_MAX_CHARS : (size_t)sh.len;
    unsigned char raw[SW_STR_MAX_CHARS * 4u];
    if (sw_mem_read(m, sh.data, raw, n * sh.kind) != 0)
        return -1;
    if (span && sh.compact && !cut)
        *span = (uint32_t)(sh.data - addr + n * sh.kind);
    return decode(&sh, raw, n, cut, out);
}

long sw_pystr_read(sw_mem *m, const sw_py_layout *l, uint64_t addr, char *out)
{
    return sw_pystr_read_span(m, l, addr, out, NULL);
}

int sw_pystr_same(const sw_py_layout *l, uint64_t addr, const unsigned char *obj, size_t got, const char *utf8,
                 size_t n)
{
    str_shape sh;
    if (shape_of(l, addr, obj, got, &sh) != 0 || !sh.compact || sh.len > (int64_t)SW_STR_MAX_CHARS ||
        sh.data - addr + (uint64_t)sh.len * sh.kind > got)
        return 0;
    const unsigned char *raw = obj + (sh.data - addr);
    if (sh.kind == 1 && sh.data - addr == l->str_ascii_data)   /* ASCII: its characters are its UTF-8 */
        return (size_t)sh.len == n && memcmp(raw, utf8, n) == 0;
    char out[SW_STR_BUF];
    return decode(&sh, raw, (size_t)sh.len, 0, out) == (long)n && memcmp(out, utf8, n) == 0;
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
