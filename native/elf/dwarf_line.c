/*
 * dwarf_line.c - the DWARF line-table reader (dwarf_line.h): each unit's
 * header (its directories and files, versions 2-4 as strings, version 5
 * by the entry formats it declares), then its line-number program run on
 * the state machine of the DWARF standard (section 6.2), each row kept as
 * (address, file, line); the rows of every unit sorted by address once.
 */
#define _GNU_SOURCE 1   /* strnlen, and what base/clock.h needs */
#include "dwarf_line.h"

#include "elf/elf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Forms (DW_FORM_*) a version 5 entry format may use, and the content
 * types (DW_LNCT_*) read. */
enum {
    FORM_BLOCK2 = 0x03, FORM_BLOCK4 = 0x04, FORM_DATA2 = 0x05, FORM_DATA4 = 0x06, FORM_DATA8 = 0x07,
    FORM_STRING = 0x08, FORM_BLOCK = 0x09, FORM_BLOCK1 = 0x0a, FORM_DATA1 = 0x0b, FORM_SDATA = 0x0d,
    FORM_STRP = 0x0e, FORM_UDATA = 0x0f, FORM_DATA16 = 0x1e, FORM_LINE_STRP = 0x1f
};
enum { LNCT_PATH = 1, LNCT_DIRECTORY_INDEX = 2 };
/* Standard and extended opcodes (DW_LNS_*, DW_LNE_*). */
enum {
    LNS_COPY = 1, LNS_ADVANCE_PC, LNS_ADVANCE_LINE, LNS_SET_FILE, LNS_SET_COLUMN, LNS_NEGATE_STMT,
    LNS_SET_BASIC_BLOCK, LNS_CONST_ADD_PC, LNS_FIXED_ADVANCE_PC, LNS_SET_PROLOGUE_END, LNS_SET_EPILOGUE_BEGIN,
    LNS_SET_ISA
};
enum { LNE_END_SEQUENCE = 1, LNE_SET_ADDRESS = 2, LNE_DEFINE_FILE = 3 };

#define MAX_FORMATS 16     /* entry formats of one version 5 list */
#define MAX_PATH_LEN 4096

typedef struct row {
    uint64_t addr;
    uint32_t file;           /* into files; */
    uint32_t line;
    uint32_t order;          /* position in the unit's program: ties keep it */
    uint16_t end;            /* 1: the end of a sequence (no line) */
    uint16_t stmt;           /* is_stmt: a recommended breakpoint location */
} row;

struct sw_dwarf_lines {
    row *rows;
    size_t n, cap;
    char **files;            /* every unit's file paths, one after the other */
    size_t nfiles, capfiles;
};

/* The parse: the sections, the result and the first problem met. */
typedef struct parse {
    const unsigned char *line_str, *str;
    size_t line_str_len, str_len;
    sw_dwarf_lines *d;
    int rc;
    char *err;
    size_t errlen;
} parse;

static int bad(parse *p, const char *why)
{
    if (p->rc == SW_OK) {
        p->rc = SW_EFORMAT;
        snprintf(p->err, p->errlen, "malformed .debug_line: %s", why);
    }
    return p->rc;
}

static int oom(parse *p)
{
    if (p->rc == SW_OK) {
        p->rc = SW_ENOMEM;
        snprintf(p->err, p->errlen, "out of memory");
    }
    return p->rc;
}

/* ---- bounded reads (0, or -1 when the range ends first) ---- */

static int get_le(sw_cursor *c, unsigned bytes, uint64_t *v)
{
    if ((size_t)(c->end - c->p) < bytes)
        return -1;
    uint64_t x = 0;
    for (unsigned k = 0; k < bytes; k++)
        x |= (uint64_t)c->p[k] << (8 * k);
    c->p += bytes;
    *v = x;
    return 0;
}

static int get_uleb(sw_cursor *c, uint64_t *v)
{
    return sw_cur_varint(c, v) == SW_OK ? 0 : -1;
}

static int get_sleb(sw_cursor *c, int64_t *v)
{
    uint64_t x = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
        if (c->p >= c->end || shift > 63)
            return -1;
        b = *c->p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        x |= ~(uint64_t)0 << shift;
    *v = (int64_t)x;
    return 0;
}

/* A NUL-terminated string in place. */
static int get_cstr(sw_cursor *c, const char **s)
{
    const uint8_t *nul = memchr(c->p, 0, (size_t)(c->end - c->p));
    if (!nul)
        return -1;
    *s = (const char *)c->p;
    c->p = nul + 1;
    return 0;
}

/* The NUL-terminated string at offset off of a string section. */
static const char *str_at(const unsigned char *sec, size_t len, uint64_t off)
{
    if (!sec || off >= len || !memchr(sec + off, 0, len - (size_t)off))
        return NULL;
    return (const char *)sec + off;
}

/* ---- files ---- */

/* Adds a file's path to the file table: name when it is absolute, else
 * dir/name when dir is absolute, else comp/dir/name (comp: the unit's
 * compilation directory, version 5's directory 0, as addr2line joins
 * them; NULL parts are left out). Its index, or UINT32_MAX when out of
 * memory or too many. */
static uint32_t add_file(parse *p, const char *comp, const char *dir, const char *name)
{
    sw_dwarf_lines *d = p->d;
    if (d->nfiles >= SW_DWARF_MAX_FILES) {
        bad(p, "too many files");
        return UINT32_MAX;
    }
    char **f = sw_array_grow(d->files, &d->capfiles, d->nfiles + 1, sizeof *f, 64);
    if (!f) {
        oom(p);
        return UINT32_MAX;
    }
    d->files = f;
    const char *parts[3] = {comp, dir, name};
    size_t first = name[0] == '/' ? 2 : (dir && dir[0] == '/') ? 1 : 0, len = 0;
    for (size_t k = first; k < 3; k++)
        len += parts[k] ? strnlen(parts[k], MAX_PATH_LEN) + 1 : 0;
    char *s = malloc(len + 1);
    if (!s) {
        oom(p);
        return UINT32_MAX;
    }
    size_t at = 0;
    for (size_t k = first; k < 3; k++) {
        if (!parts[k] || !parts[k][0])
            continue;
        size_t n = strnlen(parts[k], MAX_PATH_LEN);
        if (at && s[at - 1] != '/')
            s[at++] = '/';
        memcpy(s + at, parts[k], n);
        at += n;
    }
    s[at] = 0;
    f[d->nfiles] = s;
    return (uint32_t)d->nfiles++;
}

/* One attribute value of a version 5 entry: a string (*s) for the path
 * forms, a number (*v) for the data forms; others are skipped. 0, or -1
 * (truncated, or a form this reader does not know: its size is unknown). */
static int read_form(parse *p, sw_cursor *c, uint64_t form, int offset64, const char **s, uint64_t *v)
{
    uint64_t n = 0;
    const uint8_t *skip;
    *s = NULL;
    *v = 0;
    switch (form) {
    case FORM_STRING:
        return get_cstr(c, s);
    case FORM_LINE_STRP:
    case FORM_STRP:
        if (get_le(c, offset64 ? 8 : 4, &n))
            return -1;
        *s = form == FORM_LINE_STRP ? str_at(p->line_str, p->line_str_len, n) : str_at(p->str, p->str_len, n);
        return *s ? 0 : -1;
    case FORM_DATA1: return get_le(c, 1, v);
    case FORM_DATA2: return get_le(c, 2, v);
    case FORM_DATA4: return get_le(c, 4, v);
    case FORM_DATA8: return get_le(c, 8, v);
    case FORM_UDATA: return get_uleb(c, v);
    case FORM_SDATA: {
        int64_t x;
        return get_sleb(c, &x);
    }
    case FORM_DATA16: return sw_cur_bytes(c, 16, &skip) == SW_OK ? 0 : -1;
    case FORM_BLOCK1:
    case FORM_BLOCK2:
    case FORM_BLOCK4:
        if (get_le(c, form == FORM_BLOCK1 ? 1 : form == FORM_BLOCK2 ? 2 : 4, &n))
            return -1;
        return sw_cur_bytes(c, n, &skip) == SW_OK ? 0 : -1;
    case FORM_BLOCK:
        if (get_uleb(c, &n))
            return -1;
        return sw_cur_bytes(c, n, &skip) == SW_OK ? 0 : -1;
    default:
        return -1;
    }
}

/* A version 5 list of entries (directories or files): its formats, its
 * count, then each entry's path and directory index, handed to add()
 * (dirs: the unit's directories, for files). */
typedef struct v5_entry {
    const char *path;
    uint64_t dir;
} v5_entry;

static int read_v5_list(parse *p, sw_cursor *c, int offset64, v5_entry **out, uint64_t *count)
{
    uint8_t nformats;
    uint64_t type[MAX_FORMATS], form[MAX_FORMATS];
    if (sw_cur_u8(c, &nformats) != SW_OK || nformats > MAX_FORMATS)
        return bad(p, "entry formats");
    for (unsigned i = 0; i < nformats; i++)
        if (get_uleb(c, &type[i]) || get_uleb(c, &form[i]))
            return bad(p, "entry formats");
    if (get_uleb(c, count) || *count > SW_DWARF_MAX_FILES || (*count && !nformats))
        return bad(p, "entry count");
    v5_entry *e = calloc(*count ? (size_t)*count : 1, sizeof *e);
    if (!e)
        return oom(p);
    for (uint64_t k = 0; k < *count; k++) {
        for (unsigned i = 0; i < nformats; i++) {
            const char *s;
            uint64_t v;
            if (read_form(p, c, form[i], offset64, &s, &v)) {
                free(e);
                return bad(p, "an entry's value");
            }
            if (type[i] == LNCT_PATH)
                e[k].path = s;
            else if (type[i] == LNCT_DIRECTORY_INDEX)
                e[k].dir = v;
        }
        if (!e[k].path) {
            free(e);
            return bad(p, "an entry without a path");
        }
    }
    *out = e;
    return SW_OK;
}

/* ---- units ---- */

typedef struct unit {
    int version, offset64;
    uint8_t min_inst, default_stmt, line_range, opcode_base;
    int8_t line_base;
    uint8_t std_len[256];    /* operands of each standard opcode */
    uint32_t file0;          /* the unit's first file in d->files */
    uint32_t nfiles;         /* its files */
    int one_based;           /* versions 2-4: file 1 is the first */
} unit;

static int add_row(parse *p, const unit *u, uint64_t addr, uint64_t file, uint64_t line, int end, int stmt,
                   uint32_t order)
{
    sw_dwarf_lines *d = p->d;
    uint64_t idx = u->one_based ? file - 1 : file;
    if (!end && (file == 0 && u->one_based))
        return SW_OK;   /* (file 0 of an old unit: no file; the row is left out) */
    if (!end && idx >= u->nfiles)
        return bad(p, "a row names a file the unit does not have");
    if (d->n >= SW_DWARF_MAX_ROWS)
        return bad(p, "too many rows");
    row *r = sw_array_grow(d->rows, &d->cap, d->n + 1, sizeof *r, 1024);
    if (!r)
        return oom(p);
    d->rows = r;
    r[d->n++] = (row){addr, end ? 0 : u->file0 + (uint32_t)idx, line > UINT32_MAX ? UINT32_MAX : (uint32_t)line,
                      order, (uint16_t)end, (uint16_t)(stmt != 0)};
    return SW_OK;
}

/* Versions 2-4: include_directories then file_names, as strings. */
static int read_v4_files(parse *p, sw_cursor *c, unit *u)
{
    const char *dirs[512];
    unsigned ndirs = 0;
    for (;;) {
        const char *s;
        if (get_cstr(c, &s))
            return bad(p, "include_directories");
        if (!*s)
            break;
        if (ndirs < sizeof dirs / sizeof dirs[0])
            dirs[ndirs++] = s;
    }
    for (;;) {
        const char *name;
        uint64_t dir, mtime, len;
        if (get_cstr(c, &name))
            return bad(p, "file_names");
        if (!*name)
            return SW_OK;
        if (get_uleb(c, &dir) || get_uleb(c, &mtime) || get_uleb(c, &len))
            return bad(p, "file_names");
        if (add_file(p, NULL, dir && dir <= ndirs ? dirs[dir - 1] : NULL, name) == UINT32_MAX)
            return p->rc;
        u->nfiles++;
    }
}

static int read_v5_files(parse *p, sw_cursor *c, unit *u)
{
    v5_entry *dirs = NULL, *files = NULL;
    uint64_t ndirs, nfiles;
    if (read_v5_list(p, c, u->offset64, &dirs, &ndirs) || read_v5_list(p, c, u->offset64, &files, &nfiles)) {
        free(dirs);
        return p->rc;
    }
    for (uint64_t k = 0; k < nfiles && p->rc == SW_OK; k++) {
        uint64_t dir = files[k].dir;
        if (add_file(p, dir && ndirs ? dirs[0].path : NULL, dir < ndirs ? dirs[dir].path : NULL, files[k].path) !=
            UINT32_MAX)
            u->nfiles++;
    }
    free(dirs);
    free(files);
    return p->rc;
}

/* The unit's line-number program, [c->p, c->end). */
static int run_program(parse *p, sw_cursor *c, const unit *u)
{
    uint64_t addr = 0, file = 1, line = 1;
    int stmt = u->default_stmt != 0;
    uint32_t order = 0;
    while (c->p < c->end && p->rc == SW_OK) {
        uint8_t op = *c->p++;
        if (op >= u->opcode_base) {   /* special */
            unsigned adj = op - u->opcode_base;
            addr += (uint64_t)(adj / u->line_range) * u->min_inst;
            line += (uint64_t)(int64_t)(u->line_base + (int)(adj % u->line_range));
            add_row(p, u, addr, file, line, 0, stmt, order++);
            continue;
        }
        uint64_t v;
        int64_t s;
        switch (op) {
        case 0: {   /* extended */
            uint64_t len;
            const uint8_t *body;
            if (get_uleb(c, &len) || len == 0 || sw_cur_bytes(c, len, &body) != SW_OK)
                return bad(p, "an extended opcode");
            sw_cursor b = sw_cursor_of(body + 1, (size_t)len - 1);
            switch (body[0]) {
            case LNE_END_SEQUENCE:
                add_row(p, u, addr, file, line, 1, 0, order++);
                addr = 0, file = 1, line = 1, stmt = u->default_stmt != 0;
                break;
            case LNE_SET_ADDRESS:
                if (len - 1 != 8 || get_le(&b, 8, &addr))
                    return bad(p, "DW_LNE_set_address (8-byte addresses only)");
                break;
            default:   /* (DW_LNE_define_file, set_discriminator, vendors': skipped by their length) */
                break;
            }
            break;
        }
        case LNS_COPY:
            add_row(p, u, addr, file, line, 0, stmt, order++);
            break;
        case LNS_NEGATE_STMT:
            stmt = !stmt;
            break;
        case LNS_ADVANCE_PC:
            if (get_uleb(c, &v))
                return bad(p, "DW_LNS_advance_pc");
            addr += v * u->min_inst;
            break;
        case LNS_ADVANCE_LINE:
            if (get_sleb(c, &s))
                return bad(p, "DW_LNS_advance_line");
            line += (uint64_t)s;
            break;
        case LNS_SET_FILE:
            if (get_uleb(c, &file))
                return bad(p, "DW_LNS_set_file");
            break;
        case LNS_CONST_ADD_PC:
            addr += (uint64_t)((255 - u->opcode_base) / u->line_range) * u->min_inst;
            break;
        case LNS_FIXED_ADVANCE_PC:
            if (get_le(c, 2, &v))
                return bad(p, "DW_LNS_fixed_advance_pc");
            addr += v;
            break;
        default:   /* (column, basic block, prologue, epilogue, isa, unknown: operands skipped) */
            for (unsigned k = 0; k < u->std_len[op]; k++)
                if (get_uleb(c, &v))
                    return bad(p, "a standard opcode's operand");
            break;
        }
    }
    return p->rc;
}

/* One unit at the start of *c; *c advances past it. */
static int parse_unit(parse *p, sw_cursor *c)
{
    uint64_t len, hlen, v;
    unit u;
    memset(&u, 0, sizeof u);
    if (get_le(c, 4, &len))
        return bad(p, "unit_length");
    if (len == 0xffffffffu) {
        u.offset64 = 1;
        if (get_le(c, 8, &len))
            return bad(p, "unit_length");
    } else if (len >= 0xfffffff0u) {
        return bad(p, "unit_length (reserved value)");
    }
    const uint8_t *body;
    if (sw_cur_bytes(c, len, &body) != SW_OK)
        return bad(p, "a unit longer than the section");
    sw_cursor b = sw_cursor_of(body, (size_t)len);
    if (get_le(&b, 2, &v) || v < 2 || v > 5)
        return bad(p, "version (2 to 5 are read)");
    u.version = (int)v;
    if (u.version >= 5) {
        uint64_t asz, ssz;
        if (get_le(&b, 1, &asz) || get_le(&b, 1, &ssz) || asz != 8 || ssz != 0)
            return bad(p, "address size (8-byte addresses only)");
    }
    if (get_le(&b, u.offset64 ? 8 : 4, &hlen))
        return bad(p, "header_length");
    const uint8_t *hdr;
    if (sw_cur_bytes(&b, hlen, &hdr) != SW_OK)
        return bad(p, "a header longer than its unit");
    sw_cursor prog = b;   /* the program: what follows the header */
    sw_cursor h = sw_cursor_of(hdr, (size_t)hlen);
    uint64_t max_ops = 1, lb;
    if (get_le(&h, 1, &v))
        return bad(p, "header");
    u.min_inst = (uint8_t)v;
    if (u.version >= 4 && get_le(&h, 1, &max_ops))
        return bad(p, "header");
    if (get_le(&h, 1, &v))
        return bad(p, "header");
    u.default_stmt = (uint8_t)v;
    if (get_le(&h, 1, &lb) || get_le(&h, 1, &v))
        return bad(p, "header");
    u.line_base = (int8_t)(uint8_t)lb;
    u.line_range = (uint8_t)v;
    if (get_le(&h, 1, &v) || v == 0)
        return bad(p, "opcode_base");
    u.opcode_base = (uint8_t)v;
    if (u.line_range == 0 || max_ops != 1)
        return bad(p, "line_range 0, or VLIW operations (not read)");
    for (unsigned k = 1; k < u.opcode_base; k++) {
        if (get_le(&h, 1, &v))
            return bad(p, "standard_opcode_lengths");
        u.std_len[k] = (uint8_t)v;
    }
    u.file0 = (uint32_t)p->d->nfiles;
    u.one_based = u.version < 5;
    if ((u.version >= 5 ? read_v5_files(p, &h, &u) : read_v4_files(p, &h, &u)) != SW_OK)
        return p->rc;
    return run_program(p, &prog, &u);
}

static int cmp_row(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->end != y->end)   /* a sequence's end before the next one's start there */
        return x->end ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

int sw_dwarf_lines_parse(const unsigned char *line, size_t line_len, const unsigned char *line_str,
                         size_t line_str_len, const unsigned char *str, size_t str_len, sw_dwarf_lines **out,
                         char *err, size_t errlen)
{
    *out = NULL;
    parse p = {line_str, str, line_str_len, str_len, calloc(1, sizeof(sw_dwarf_lines)), SW_OK, err, errlen};
    if (!p.d) {
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    sw_cursor c = sw_cursor_of(line, line ? line_len : 0);
    while (c.p < c.end && p.rc == SW_OK) {
        size_t first = p.d->n;
        parse_unit(&p, &c);
        /* Each unit's rows are ordered within it; across units, by address. */
        for (size_t k = first; k < p.d->n; k++)
            p.d->rows[k].order += (uint32_t)first;
    }
    if (p.rc != SW_OK) {
        sw_dwarf_lines_free(p.d);
        return p.rc;
    }
    if (p.d->n)
        qsort(p.d->rows, p.d->n, sizeof *p.d->rows, cmp_row);
    *out = p.d;
    return SW_OK;
}

void sw_dwarf_lines_free(sw_dwarf_lines *d)
{
    if (!d)
        return;
    for (size_t k = 0; k < d->nfiles; k++)
        free(d->files[k]);
    free(d->files);
    free(d->rows);
    free(d);
}

int sw_dwarf_lines_find(const sw_dwarf_lines *d, uint64_t addr, const char **file, uint32_t *line)
{
    size_t lo = 0, hi = d ? d->n : 0;   /* the first row after addr */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->rows[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || d->rows[lo - 1].end)
        return SW_EARG;
    /* Of the rows at that address, the last is_stmt one (as gdb's `info
     * line` chooses), else the last. */
    const row *r = &d->rows[lo - 1];
    for (size_t k = lo; k > 0 && d->rows[k - 1].addr == r->addr && !d->rows[k - 1].end; k--)
        if (d->rows[k - 1].stmt) {
            r = &d->rows[k - 1];
            break;
        }
    *file = d->files[r->file];
    *line = r->line;
    return SW_OK;
}

int sw_elf_lines(const sw_elf *e, sw_dwarf_lines **out, char *err, size_t errlen)
{
    /* .debug_line, .debug_line_str, .debug_str (compressed ones inflated) */
    static const char *const names[3] = {".debug_line", ".debug_line_str", ".debug_str"};
    const unsigned char *bytes[3] = {NULL, NULL, NULL};
    unsigned char *owned[3] = {NULL, NULL, NULL};
    size_t len[3] = {0, 0, 0};
    char why[256];
    *out = NULL;
    int rc = sw_elf_section_bytes(e, names[0], &bytes[0], &len[0], &owned[0], err, errlen);
    for (int i = 1; i < 3 && rc == SW_OK; i++)
        if (sw_elf_section_bytes(e, names[i], &bytes[i], &len[i], &owned[i], why, sizeof why) != SW_OK)
            bytes[i] = NULL, len[i] = 0;   /* (either may be missing) */
    if (rc == SW_OK)
        rc = sw_dwarf_lines_parse(bytes[0], len[0], bytes[1], len[1], bytes[2], len[2], out, err, errlen);
    for (int i = 0; i < 3; i++)
        free(owned[i]);
    return rc;
}

size_t sw_dwarf_lines_rows(const sw_dwarf_lines *d)
{
    return d ? d->n : 0;
}
