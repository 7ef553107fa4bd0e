/*
 * cfi.c - .eh_frame call frame information: the lookup of a code address's
 * FDE, the CIE/FDE parser and the DW_CFA rule interpreter, and the DW_OP
 * expression evaluator (see cfi.h). Every read goes through a bounded
 * reader over one record's bytes.
 */
#define _GNU_SOURCE
#include "cfi.h"
#include "elf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INDEX (1u << 22)   /* FDEs indexed by a scan */
#define STATE_STACK 8          /* DW_CFA_remember_state depth */
#define EXPR_OPS 64
#define EXPR_STACK 16

/* DW_EH_PE_* */
#define PE_OMIT 0xff
#define PE_FORMAT 0x0f
#define PE_APPL 0x70
#define PE_INDIRECT 0x80
#define PE_PCREL 0x10
#define PE_DATAREL 0x30

typedef struct entry {
    uint64_t start;            /* the FDE's first code address */
    uint64_t off;              /* its offset in .eh_frame */
} entry;

struct sw_cfi {
    const unsigned char *eh;
    size_t len;
    uint64_t eh_addr;
    const unsigned char *table;   /* .eh_frame_hdr's (initial location, FDE) sdata4 pairs, or NULL */
    size_t count;
    uint64_t hdr_addr;
    entry *index;              /* without a table: the scan's, sorted */
};

/* ---- a bounded reader ---- */

typedef struct rd {
    const unsigned char *b;
    size_t end, pos;           /* [pos, end) of b may be read */
    uint64_t addr;             /* the file address of b[0] */
    int bad;
} rd;

static uint64_t rd_n(rd *r, unsigned n)
{
    if (r->bad || n > r->end - r->pos) {
        r->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)r->b[r->pos + i] << (8 * i);
    r->pos += n;
    return v;
}

static uint64_t rd_uleb(rd *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; !r->bad; shift += 7) {
        if (r->pos >= r->end || shift > 63) {
            r->bad = 1;
            return 0;
        }
        uint8_t b = r->b[r->pos++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    return 0;
}

static int64_t rd_sleb(rd *r)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    do {
        if (r->bad || r->pos >= r->end || shift > 63) {
            r->bad = 1;
            return 0;
        }
        b = r->b[r->pos++];
        v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= ~0ull << shift;
    return (int64_t)v;
}

static int64_t sext(uint64_t v, unsigned bits)
{
    uint64_t m = 1ull << (bits - 1);
    return (int64_t)((v ^ m) - m);
}

/* A pointer in encoding enc (datarel relative to data_base; 0: refused).
 * Indirect pointers are refused unless skip (their value is not needed). */
static uint64_t rd_ptr(rd *r, uint8_t enc, uint64_t data_base, int skip)
{
    uint64_t field = r->addr + r->pos, v;
    switch (enc & PE_FORMAT) {
    case 0x00: v = rd_n(r, 8); break;
    case 0x01: v = rd_uleb(r); break;
    case 0x02: v = rd_n(r, 2); break;
    case 0x03: v = rd_n(r, 4); break;
    case 0x04: v = rd_n(r, 8); break;
    case 0x09: v = (uint64_t)rd_sleb(r); break;
    case 0x0a: v = (uint64_t)sext(rd_n(r, 2), 16); break;
    case 0x0b: v = (uint64_t)sext(rd_n(r, 4), 32); break;
    case 0x0c: v = rd_n(r, 8); break;
    default: r->bad = 1; return 0;
    }
    if (skip)
        return 0;
    switch (enc & PE_APPL) {
    case 0: break;
    case PE_PCREL: v += field; break;
    case PE_DATAREL:
        if (!data_base)
            r->bad = 1;
        v += data_base;
        break;
    default: r->bad = 1;
    }
    if (enc & PE_INDIRECT)
        r->bad = 1;
    return v;
}

/* ---- CIE and FDE ---- */

typedef struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint8_t fde_enc, has_z, signal_frame;
    size_t ins, ins_end;       /* its initial instructions in .eh_frame */
} cie;

typedef struct fde {
    uint64_t start, range;
    size_t ins, ins_end;
    cie c;
} fde;

/* The record at off: its body [*body, *end) after the length. SW_EARG at
 * the terminator (length 0), SW_EFORMAT if it does not fit. */
static int record_at(const sw_cfi *c, size_t off, size_t *body, size_t *end)
{
    rd r = {c->eh, c->len, off, c->eh_addr, 0};
    uint64_t n = rd_n(&r, 4);
    if (n == 0xffffffffu)
        n = rd_n(&r, 8);   /* 64-bit DWARF */
    if (r.bad)
        return SW_EFORMAT;
    if (n == 0)
        return SW_EARG;
    if (n > c->len - r.pos || n < 4)
        return SW_EFORMAT;
    *body = r.pos;
    *end = r.pos + (size_t)n;
    return SW_OK;
}

static int parse_cie(const sw_cfi *c, size_t off, cie *out)
{
    size_t body, end;
    if (record_at(c, off, &body, &end) != SW_OK)
        return SW_EFORMAT;
    rd r = {c->eh, end, body, c->eh_addr, 0};
    memset(out, 0, sizeof *out);
    if (rd_n(&r, 4) != 0)
        return SW_EFORMAT;   /* not a CIE */
    uint8_t version = (uint8_t)rd_n(&r, 1);
    if (r.bad || (version != 1 && version != 3 && version != 4))
        return SW_EFORMAT;
    char aug[8];
    size_t na = 0;
    for (;;) {
        uint8_t ch = (uint8_t)rd_n(&r, 1);
        if (r.bad || na == sizeof aug)
            return SW_EFORMAT;
        aug[na++] = (char)ch;
        if (!ch)
            break;
    }
    if (version == 4 && (rd_n(&r, 1) != 8 || rd_n(&r, 1) != 0))
        return SW_EFORMAT;   /* address size 8, no segments */
    out->code_align = rd_uleb(&r);
    out->data_align = rd_sleb(&r);
    uint64_t ra = version == 1 ? rd_n(&r, 1) : rd_uleb(&r);
    if (r.bad || ra != SW_CFI_RA)
        return SW_EFORMAT;
    out->fde_enc = 0;   /* absptr */
    if (aug[0] == 'z') {
        out->has_z = 1;
        uint64_t alen = rd_uleb(&r);
        if (r.bad || alen > r.end - r.pos)
            return SW_EFORMAT;
        rd a = {c->eh, r.pos + (size_t)alen, r.pos, c->eh_addr, 0};
        for (size_t i = 1; aug[i] && !a.bad; i++) {
            if (aug[i] == 'R') {
                out->fde_enc = (uint8_t)rd_n(&a, 1);
            } else if (aug[i] == 'P') {
                uint8_t enc = (uint8_t)rd_n(&a, 1);
                if (enc != PE_OMIT)
                    rd_ptr(&a, enc, 0, 1);
            } else if (aug[i] == 'L') {
                rd_n(&a, 1);
            } else if (aug[i] == 'S') {
                out->signal_frame = 1;
            } else {
                break;   /* unknown: the rest of the data is skipped by its length */
            }
        }
        if (a.bad)
            return SW_EFORMAT;
        r.pos += (size_t)alen;
    } else if (aug[0]) {
        return SW_EFORMAT;   /* an augmentation without its length */
    }
    if (out->fde_enc == PE_OMIT || (out->fde_enc & PE_INDIRECT))
        return SW_EFORMAT;
    out->ins = r.pos;
    out->ins_end = end;
    return SW_OK;
}

/* The FDE at off (SW_EARG: a CIE or the terminator there). */
static int parse_fde(const sw_cfi *c, size_t off, fde *out)
{
    size_t body, end;
    int rc = record_at(c, off, &body, &end);
    if (rc != SW_OK)
        return rc;
    rd r = {c->eh, end, body, c->eh_addr, 0};
    uint64_t id = rd_n(&r, 4);
    if (r.bad)
        return SW_EFORMAT;
    if (id == 0)
        return SW_EARG;   /* a CIE */
    if (id > body)
        return SW_EFORMAT;
    if (parse_cie(c, body - (size_t)id, &out->c) != SW_OK)
        return SW_EFORMAT;
    out->start = rd_ptr(&r, out->c.fde_enc, 0, 0);
    out->range = rd_ptr(&r, out->c.fde_enc & PE_FORMAT, 0, 0);
    if (out->c.has_z) {
        uint64_t alen = rd_uleb(&r);
        if (!r.bad && alen > r.end - r.pos)
            r.bad = 1;
        else
            r.pos += (size_t)alen;
    }
    if (r.bad || out->start + out->range < out->start)
        return SW_EFORMAT;
    out->ins = r.pos;
    out->ins_end = end;
    return SW_OK;
}

/* ---- the rule interpreter ---- */

/* x * align, wrapping (the factors are untrusted). */
static int64_t scaled(uint64_t x, int64_t align)
{
    return (int64_t)(x * (uint64_t)align);
}

static void set_rule(sw_cfi_row *row, uint64_t reg, uint8_t kind, int64_t off)
{
    if (reg < SW_CFI_NREGS)   /* (others: vector registers, not tracked) */
        row->regs[reg] = (sw_cfi_rule){kind, 0, off, NULL, 0};
}

/* Runs the instructions [ins, end) of .eh_frame until the location passes
 * pc (FDE instructions: loc starts at the FDE's start; the CIE's run in
 * full, pc UINT64_MAX). init: the row after the CIE's (DW_CFA_restore). */
static int run(const sw_cfi *c, const cie *ci, size_t ins, size_t end, uint64_t loc, uint64_t pc,
               sw_cfi_row *row, const sw_cfi_row *init)
{
    sw_cfi_row saved[STATE_STACK];
    unsigned depth = 0;
    rd r = {c->eh, end, ins, c->eh_addr, 0};
    while (r.pos < r.end && !r.bad) {
        uint8_t op = (uint8_t)rd_n(&r, 1), low = op & 0x3f;
        uint64_t reg = 0, delta = 0;
        switch (op >> 6) {
        case 1:   /* DW_CFA_advance_loc */
            delta = low;
            goto advance;
        case 2:   /* DW_CFA_offset */
            set_rule(row, low, SW_CFI_OFFSET, scaled(rd_uleb(&r), ci->data_align));
            continue;
        case 3:   /* DW_CFA_restore */
            if (!init)
                return SW_EFORMAT;
            if (low < SW_CFI_NREGS)
                row->regs[low] = init->regs[low];
            continue;
        }
        switch (op) {
        case 0x00: break;   /* nop */
        case 0x01: {        /* set_loc */
            uint64_t to = rd_ptr(&r, ci->fde_enc, 0, 0);
            if (to > pc)
                return r.bad ? SW_EFORMAT : SW_OK;
            loc = to;
            break;
        }
        case 0x02: delta = rd_n(&r, 1); goto advance;
        case 0x03: delta = rd_n(&r, 2); goto advance;
        case 0x04: delta = rd_n(&r, 4); goto advance;
        case 0x05:   /* offset_extended */
            reg = rd_uleb(&r);
            set_rule(row, reg, SW_CFI_OFFSET, scaled(rd_uleb(&r), ci->data_align));
            break;
        case 0x06:   /* restore_extended */
            reg = rd_uleb(&r);
            if (!init)
                return SW_EFORMAT;
            if (reg < SW_CFI_NREGS)
                row->regs[reg] = init->regs[reg];
            break;
        case 0x07: set_rule(row, rd_uleb(&r), SW_CFI_UNDEF, 0); break;
        case 0x08: set_rule(row, rd_uleb(&r), SW_CFI_SAME, 0); break;
        case 0x09: {   /* register */
            reg = rd_uleb(&r);
            uint64_t from = rd_uleb(&r);
            if (reg < SW_CFI_NREGS) {
                if (from >= SW_CFI_NREGS)
                    return SW_EFORMAT;
                row->regs[reg] = (sw_cfi_rule){SW_CFI_REGISTER, (uint8_t)from, 0, NULL, 0};
            }
            break;
        }
        case 0x0a:   /* remember_state */
            if (depth == STATE_STACK)
                return SW_EFORMAT;
            saved[depth++] = *row;
            break;
        case 0x0b:   /* restore_state: the rules and the CFA (as libgcc's unwinder does) */
            if (depth == 0)
                return SW_EFORMAT;
            *row = saved[--depth];
            break;
        case 0x0c:   /* def_cfa */
            reg = rd_uleb(&r);
            row->cfa_off = (int64_t)rd_uleb(&r);
            goto cfa_reg;
        case 0x12:   /* def_cfa_sf */
            reg = rd_uleb(&r);
            row->cfa_off = scaled((uint64_t)rd_sleb(&r), ci->data_align);
            goto cfa_reg;
        case 0x0d:   /* def_cfa_register */
            reg = rd_uleb(&r);
        cfa_reg:
            if (reg >= SW_CFI_NREGS)
                return SW_EFORMAT;
            row->cfa_reg = (uint8_t)reg;
            row->cfa_is_expr = 0;
            break;
        case 0x0e: row->cfa_off = (int64_t)rd_uleb(&r); break;                 /* def_cfa_offset */
        case 0x13: row->cfa_off = scaled((uint64_t)rd_sleb(&r), ci->data_align); break;         /* def_cfa_offset_sf */
        case 0x0f: {   /* def_cfa_expression */
            uint64_t n = rd_uleb(&r);
            if (r.bad || n > r.end - r.pos)
                return SW_EFORMAT;
            row->cfa_is_expr = 1;
            row->cfa_expr = r.b + r.pos;
            row->cfa_expr_len = (uint32_t)n;
            r.pos += (size_t)n;
            break;
        }
        case 0x10:     /* expression */
        case 0x16: {   /* val_expression */
            reg = rd_uleb(&r);
            uint64_t n = rd_uleb(&r);
            if (r.bad || n > r.end - r.pos)
                return SW_EFORMAT;
            if (reg < SW_CFI_NREGS)
                row->regs[reg] = (sw_cfi_rule){op == 0x10 ? SW_CFI_EXPR : SW_CFI_VAL_EXPR, 0, 0, r.b + r.pos,
                                               (uint32_t)n};
            r.pos += (size_t)n;
            break;
        }
        case 0x11:   /* offset_extended_sf */
            reg = rd_uleb(&r);
            set_rule(row, reg, SW_CFI_OFFSET, scaled((uint64_t)rd_sleb(&r), ci->data_align));
            break;
        case 0x14:   /* val_offset */
            reg = rd_uleb(&r);
            set_rule(row, reg, SW_CFI_VAL_OFFSET, scaled(rd_uleb(&r), ci->data_align));
            break;
        case 0x15:   /* val_offset_sf */
            reg = rd_uleb(&r);
            set_rule(row, reg, SW_CFI_VAL_OFFSET, scaled((uint64_t)rd_sleb(&r), ci->data_align));
            break;
        case 0x2e: rd_uleb(&r); break;   /* GNU_args_size */
        case 0x2f:   /* GNU_negative_offset_extended */
            reg = rd_uleb(&r);
            set_rule(row, reg, SW_CFI_OFFSET, (int64_t)(0 - (uint64_t)scaled(rd_uleb(&r), ci->data_align)));
            break;
        default:
            return SW_EFORMAT;
        }
        continue;
    advance:
        if (r.bad)
            break;
        if (pc < loc || (ci->code_align && delta > (pc - loc) / ci->code_align))
            return SW_OK;   /* the next row starts past pc */
        loc += delta * ci->code_align;
    }
    return r.bad ? SW_EFORMAT : SW_OK;
}

/* ---- lookup ---- */

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The index of one scan of .eh_frame: every FDE's start, sorted. */
static int scan(sw_cfi *c, char *err, size_t errlen)
{
    size_t cap = 0, n = 0, off = 0;
    while (off < c->len) {
        size_t body, end;
        int rc = record_at(c, off, &body, &end);
        if (rc == SW_EARG)
            break;
        if (rc != SW_OK) {
            snprintf(err, errlen, ".eh_frame: record at offset %zu does not fit", off);
            return SW_EFORMAT;
        }
        fde f;
        if (parse_fde(c, off, &f) == SW_OK && f.range) {
            if (n == MAX_INDEX) {
                snprintf(err, errlen, ".eh_frame: more than %u FDEs", MAX_INDEX);
                return SW_EFORMAT;
            }
            entry *ni = sw_array_grow(c->index, &cap, n + 1, sizeof *ni, 256);
            if (!ni) {
                snprintf(err, errlen, "out of memory");
                return SW_ENOMEM;
            }
            c->index = ni;
            c->index[n++] = (entry){f.start, off};
        }
        off = end;
    }
    if (n)
        qsort(c->index, n, sizeof *c->index, cmp_entry);
    c->count = n;
    return SW_OK;
}

/* .eh_frame_hdr's table, if it has the one encoding gcc and lld write
 * (datarel sdata4 pairs) and points into this .eh_frame. */
static void use_hdr(sw_cfi *c, const unsigned char *hdr, size_t hdr_len, uint64_t hdr_addr)
{
    rd r = {hdr, hdr_len, 0, hdr_addr, 0};
    uint8_t version = (uint8_t)rd_n(&r, 1), ptr_enc = (uint8_t)rd_n(&r, 1), count_enc = (uint8_t)rd_n(&r, 1),
            table_enc = (uint8_t)rd_n(&r, 1);
    if (r.bad || version != 1 || table_enc != 0x3b || ptr_enc == PE_OMIT || count_enc == PE_OMIT)
        return;
    uint64_t eh = rd_ptr(&r, ptr_enc, hdr_addr, 0), count = rd_ptr(&r, count_enc, hdr_addr, 0);
    if (r.bad || eh != c->eh_addr || count > (hdr_len - r.pos) / 8)
        return;
    c->table = hdr + r.pos;
    c->count = (size_t)count;
    c->hdr_addr = hdr_addr;
}

int sw_cfi_new(const unsigned char *eh, size_t len, uint64_t eh_addr, const unsigned char *hdr, size_t hdr_len,
               uint64_t hdr_addr, sw_cfi **out, char *err, size_t errlen)
{
    *out = NULL;
    sw_cfi *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    c->eh = eh;
    c->len = len;
    c->eh_addr = eh_addr;
    if (hdr)
        use_hdr(c, hdr, hdr_len, hdr_addr);
    if (!c->table) {
        int rc = scan(c, err, errlen);
        if (rc != SW_OK) {
            sw_cfi_free(c);
            return rc;
        }
    }
    *out = c;
    return SW_OK;
}

int sw_cfi_of_elf(const sw_elf *e, sw_cfi **out, char *err, size_t errlen)
{
    size_t len = 0, hlen = 0;
    uint64_t addr = 0, haddr = 0;
    const unsigned char *eh = sw_elf_section(e, ".eh_frame", &len, &addr);
    const unsigned char *hdr = sw_elf_section(e, ".eh_frame_hdr", &hlen, &haddr);
    if (!eh) {
        *out = NULL;
        snprintf(err, errlen, "no .eh_frame section");
        return SW_EARG;
    }
    return sw_cfi_new(eh, len, addr, hdr, hlen, haddr, out, err, errlen);
}

void sw_cfi_free(sw_cfi *c)
{
    if (!c)
        return;
    free(c->index);
    free(c);
}

int sw_cfi_uses_hdr(const sw_cfi *c)
{
    return c->table != NULL;
}

/* Entry i of the lookup: its start and FDE offset (1), or 0 if the table
 * points outside .eh_frame. */
static int entry_at(const sw_cfi *c, size_t i, uint64_t *start, uint64_t *off)
{
    if (!c->table) {
        *start = c->index[i].start;
        *off = c->index[i].off;
        return 1;
    }
    rd r = {c->table, c->count * 8, i * 8, 0, 0};
    *start = c->hdr_addr + (uint64_t)sext(rd_n(&r, 4), 32);
    uint64_t fde = c->hdr_addr + (uint64_t)sext(rd_n(&r, 4), 32);
    *off = fde - c->eh_addr;
    return fde >= c->eh_addr && *off < c->len;
}

int sw_cfi_find(const sw_cfi *c, uint64_t pc, sw_cfi_row *row)
{
    size_t lo = 0, hi = c->count;
    uint64_t start, off;
    while (hi - lo > 0) {   /* the last entry starting at or before pc */
        size_t mid = lo + (hi - lo) / 2;
        entry_at(c, mid, &start, &off);
        if (start <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return SW_EARG;
    if (!entry_at(c, lo - 1, &start, &off))
        return SW_EFORMAT;
    fde f;
    if (parse_fde(c, (size_t)off, &f) != SW_OK)
        return SW_EFORMAT;
    if (pc < f.start || pc - f.start >= f.range)
        return SW_EARG;
    memset(row, 0, sizeof *row);
    row->signal_frame = f.c.signal_frame;
    row->start = f.start;
    row->end = f.start + f.range;
    if (run(c, &f.c, f.c.ins, f.c.ins_end, 0, UINT64_MAX, row, NULL) != SW_OK)
        return SW_EFORMAT;
    sw_cfi_row init = *row;
    if (run(c, &f.c, f.ins, f.ins_end, f.start, pc, row, &init) != SW_OK)
        return SW_EFORMAT;
    return SW_OK;
}

/* ---- DW_OP ---- */

int sw_cfi_eval(const unsigned char *expr, size_t len, const uint64_t *regs, uint32_t valid, int has_push,
                uint64_t push, sw_cfi_read_fn read, void *ud, uint64_t *out)
{
    uint64_t st[EXPR_STACK];
    unsigned sp = 0, ops = 0;
    rd r = {expr, len, 0, 0, 0};
#define NEED(k) do { if (sp < (k)) return SW_EFORMAT; } while (0)
#define PUSH(v) do { if (sp == EXPR_STACK) return SW_EFORMAT; st[sp++] = (v); } while (0)
    if (has_push)
        PUSH(push);
    while (r.pos < r.end) {
        if (++ops > EXPR_OPS)
            return SW_EFORMAT;
        uint8_t op = (uint8_t)rd_n(&r, 1);
        uint64_t a, b, v;
        if (op >= 0x30 && op <= 0x4f) {   /* lit0..31 */
            PUSH((uint64_t)(op - 0x30));
            continue;
        }
        if ((op >= 0x70 && op <= 0x8f) || op == 0x92) {   /* breg0..31, bregx */
            uint64_t reg = op == 0x92 ? rd_uleb(&r) : (uint64_t)(op - 0x70);
            int64_t off = rd_sleb(&r);
            if (r.bad || reg >= SW_CFI_NREGS || !(valid & (1u << reg)))
                return SW_EFORMAT;
            PUSH(regs[reg] + (uint64_t)off);
            continue;
        }
        switch (op) {
        case 0x03: v = rd_n(&r, 8); PUSH(v); break;
        case 0x08: v = rd_n(&r, 1); PUSH(v); break;
        case 0x09: v = (uint64_t)sext(rd_n(&r, 1), 8); PUSH(v); break;
        case 0x0a: v = rd_n(&r, 2); PUSH(v); break;
        case 0x0b: v = (uint64_t)sext(rd_n(&r, 2), 16); PUSH(v); break;
        case 0x0c: v = rd_n(&r, 4); PUSH(v); break;
        case 0x0d: v = (uint64_t)sext(rd_n(&r, 4), 32); PUSH(v); break;
        case 0x0e: case 0x0f: v = rd_n(&r, 8); PUSH(v); break;
        case 0x10: v = rd_uleb(&r); PUSH(v); break;
        case 0x11: v = (uint64_t)rd_sleb(&r); PUSH(v); break;
        case 0x06:   /* deref */
            NEED(1);
            if (!read || read(ud, st[sp - 1], &st[sp - 1]) != 0)
                return SW_EFORMAT;
            break;
        case 0x12: NEED(1); v = st[sp - 1]; PUSH(v); break;                  /* dup */
        case 0x13: NEED(1); sp--; break;                                     /* drop */
        case 0x14: NEED(2); v = st[sp - 2]; PUSH(v); break;                  /* over */
        case 0x16: NEED(2); a = st[sp - 1]; st[sp - 1] = st[sp - 2]; st[sp - 2] = a; break;   /* swap */
        case 0x1f: NEED(1); st[sp - 1] = 0 - st[sp - 1]; break;              /* neg */
        case 0x20: NEED(1); st[sp - 1] = ~st[sp - 1]; break;                 /* not */
        case 0x23: NEED(1); st[sp - 1] += rd_uleb(&r); break;                /* plus_uconst */
        case 0x96: break;                                                    /* nop */
        case 0x1a: case 0x1c: case 0x1e: case 0x21: case 0x22: case 0x24: case 0x25: case 0x27:
        case 0x29: case 0x2a: case 0x2b: case 0x2c: case 0x2d: case 0x2e:
            NEED(2);
            b = st[--sp];
            a = st[sp - 1];
            switch (op) {
            case 0x1a: v = a & b; break;
            case 0x1c: v = a - b; break;
            case 0x1e: v = a * b; break;
            case 0x21: v = a | b; break;
            case 0x22: v = a + b; break;
            case 0x24: v = b < 64 ? a << b : 0; break;
            case 0x25: v = b < 64 ? a >> b : 0; break;
            case 0x27: v = a ^ b; break;
            case 0x29: v = a == b; break;
            case 0x2a: v = (int64_t)a >= (int64_t)b; break;
            case 0x2b: v = (int64_t)a > (int64_t)b; break;
            case 0x2c: v = (int64_t)a <= (int64_t)b; break;
            case 0x2d: v = (int64_t)a < (int64_t)b; break;
            default: v = a != b; break;
            }
            st[sp - 1] = v;
            break;
        default:
            return SW_EFORMAT;
        }
        if (r.bad)
            return SW_EFORMAT;
    }
#undef NEED
#undef PUSH
    if (r.bad || sp == 0)
        return SW_EFORMAT;
    *out = st[sp - 1];
    return SW_OK;
}
