/*
 * test_cfi.c - the call frame information reader (native/elf/cfi.h):
 * - on real files (this test program and libc), every row of every FDE
 *   equals what binutils' `readelf --debug-dump=frames-interp` prints (the
 *   CFA and each register's rule), looked up through .eh_frame_hdr and
 *   through the index of a scan alike;
 * - a crafted .eh_frame (CIE, FDE with advance, offset, restore,
 *   remember/restore state, a PLT-style CFA expression, register and
 *   undefined rules) and its .eh_frame_hdr read back as made;
 * - the DW_OP evaluator on PLT expressions, deref, and bad expressions;
 * - damaged copies (every truncation, byte flips) are refused or read
 *   within bounds (ASan/UBSan watch: each copy is a heap block of its own
 *   exact size).
 */
#define _GNU_SOURCE
#include "check.h"
#include "elf/elf.h"

#include <ctype.h>

/* ---- against readelf ---- */

static const char *const reg_names[SW_CFI_NREGS] = {"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8",
                                                    "r9",  "r10", "r11", "r12", "r13", "r14", "r15", "ra"};

static int reg_of(const char *name)
{
    for (int i = 0; i < SW_CFI_NREGS; i++)
        if (strcmp(name, reg_names[i]) == 0)
            return i;
    return -1;
}

/* 1 if rule r is what readelf printed as text. */
static int rule_matches(const sw_cfi_rule *r, const char *text)
{
    if (strcmp(text, "u") == 0)
        return r->kind == SW_CFI_UNDEF || r->kind == SW_CFI_SAME;
    if (strcmp(text, "s") == 0)
        return r->kind == SW_CFI_SAME;
    if (strcmp(text, "exp") == 0)
        return r->kind == SW_CFI_EXPR;
    if (strcmp(text, "vexp") == 0)
        return r->kind == SW_CFI_VAL_EXPR;
    if ((text[0] == 'c' || text[0] == 'v') && (text[1] == '+' || text[1] == '-'))
        return r->kind == (text[0] == 'c' ? SW_CFI_OFFSET : SW_CFI_VAL_OFFSET) && r->off == strtoll(text + 1, NULL, 10);
    int reg = reg_of(text);
    return reg >= 0 && r->kind == SW_CFI_REGISTER && r->reg == reg;
}

typedef struct diff_counts {
    unsigned long rows, fdes, mismatches;
} diff_counts;

/* Every row readelf prints for path, looked up in c. */
static void compare_with_readelf(const char *path, const sw_cfi *c, diff_counts *dc)
{
    char cmd[600], line[1024];
    snprintf(cmd, sizeof cmd, "readelf --debug-dump=frames-interp '%s' 2>/dev/null", path);
    FILE *p = popen(cmd, "r");
    REQUIRE(p != NULL);
    int cols[32], ncols = 0, in_fde = 0;
    while (fgets(line, sizeof line, p)) {
        if (strstr(line, " FDE cie=")) {
            in_fde = 1;
            ncols = 0;
            dc->fdes++;
            continue;
        }
        if (strstr(line, " CIE ")) {
            in_fde = 0;
            continue;
        }
        char *tok[40];
        int nt = 0;
        for (char *s = strtok(line, " \t\n"); s && nt < 40; s = strtok(NULL, " \t\n"))
            tok[nt++] = s;
        if (!in_fde || nt < 2)
            continue;
        if (strcmp(tok[0], "LOC") == 0) {
            ncols = 0;
            for (int i = 2; i < nt && ncols < 32; i++)
                cols[ncols++] = reg_of(tok[i]);
            continue;
        }
        if (!isxdigit((unsigned char)tok[0][0]) || nt != ncols + 2)
            continue;
        uint64_t loc = strtoull(tok[0], NULL, 16);
        sw_cfi_row row;
        dc->rows++;
        int rc = sw_cfi_find(c, loc, &row);
        int ok = rc == SW_OK;
        if (ok && strcmp(tok[1], "exp") == 0) {
            ok = row.cfa_is_expr;
        } else if (ok) {
            char *plus = strchr(tok[1], '+');
            if (plus)
                *plus = 0;
            ok = plus && !row.cfa_is_expr && row.cfa_reg == reg_of(tok[1]) && row.cfa_off == strtoll(plus + 1, NULL, 10);
        }
        for (int i = 0; ok && i < ncols; i++)
            ok = cols[i] < 0 || rule_matches(&row.regs[cols[i]], tok[i + 2]);
        if (!ok && dc->mismatches++ < 5)
            printf("  %s: the row at %#" PRIx64 " differs from readelf's (rc %d)\n", path, loc, rc);
    }
    pclose(p);
}

static void check_file(const char *path)
{
    sw_elf *e;
    char err[256];
    REQUIRE(sw_elf_open(path, &e, err, sizeof err) == SW_OK);
    sw_cfi *with_hdr, *scanned;
    REQUIRE(sw_cfi_of_elf(e, &with_hdr, err, sizeof err) == SW_OK);
    CHECK(sw_cfi_uses_hdr(with_hdr));
    size_t len;
    uint64_t addr;
    const unsigned char *eh = sw_elf_section(e, ".eh_frame", &len, &addr);
    REQUIRE(eh != NULL);
    REQUIRE(sw_cfi_new(eh, len, addr, NULL, 0, 0, &scanned, err, sizeof err) == SW_OK);
    CHECK(!sw_cfi_uses_hdr(scanned));
    diff_counts a = {0, 0, 0}, b = {0, 0, 0};
    compare_with_readelf(path, with_hdr, &a);
    compare_with_readelf(path, scanned, &b);
    printf("  %s: %lu FDEs, %lu rows, %lu + %lu differ\n", path, a.fdes, a.rows, a.mismatches, b.mismatches);
    CHECK(a.fdes > 10 && a.rows > a.fdes);
    CHECK_EQ_U64(a.mismatches, 0);
    CHECK_EQ_U64(b.mismatches, 0);
    sw_cfi_free(with_hdr);
    sw_cfi_free(scanned);
    sw_elf_free(e);
}

TEST(rows_equal_readelf_on_this_program)
{
    char self[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    REQUIRE(n > 0);
    self[n] = 0;
    check_file(self);
}

TEST(rows_equal_readelf_on_libc)
{
    const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
    if (access(libc, R_OK) != 0) {
        printf("  (no %s)\n", libc);
        return;
    }
    check_file(libc);
}

/* ---- crafted ---- */

#define EH_ADDR 0x10000ull
#define HDR_ADDR 0x20000ull
#define CODE 0x401000ull

typedef struct crafted {
    unsigned char eh[256], hdr[64];
    size_t eh_len, hdr_len, fde_off;
} crafted;

static void put(unsigned char *b, size_t *at, const void *p, size_t n)
{
    memcpy(b + *at, p, n);
    *at += n;
}

static void put32(unsigned char *b, size_t *at, uint32_t v)
{
    put(b, at, &v, 4);
}

static void craft(crafted *c)
{
    memset(c, 0, sizeof *c);
    size_t at = 0;
    /* The CIE: "zR", code align 1, data align -8, RA 16, FDE pointers
     * pcrel sdata4; CFA rsp+8, RA at CFA-8. */
    static const unsigned char cie[] = {0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b,
                                        0x0c, 7, 8, 0x90, 1, 0, 0};
    put32(c->eh, &at, sizeof cie);
    put(c->eh, &at, cie, sizeof cie);
    /* The FDE, for [CODE, CODE + 0x40). */
    c->fde_off = at;
    static const unsigned char ins[] = {
        0x41, 0x0e, 16, 0x86, 2,           /* +1: CFA rsp+16, rbp at CFA-16 */
        0x43, 0x0d, 6,                     /* +4: CFA rbp+16 */
        0x48, 0x0a, 0x0c, 7, 8, 0xc6,      /* +12: remember; CFA rsp+8; rbp restored */
        0x41, 0x0b,                        /* +13: restore state */
        0x03, 0x10, 0x00,                  /* +29 (advance_loc2 16) */
        0x0f, 11, 0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22,   /* the PLT's CFA */
        0x41, 0x09, 3, 12, 0x07, 16,       /* +30: rbx in r12, RA undefined */
        0x41, 0x14, 7, 2, 0x11, 14, 0x7e,  /* +31: rsp is CFA-16 (val_offset), r14 at CFA+16 (sf) */
        0, 0,
    };
    uint32_t body = 4 + 4 + 4 + 1 + (uint32_t)sizeof ins;
    put32(c->eh, &at, body);
    size_t id_at = at;
    put32(c->eh, &at, (uint32_t)id_at);                          /* back to the CIE at 0 */
    put32(c->eh, &at, (uint32_t)(CODE - (EH_ADDR + at)));         /* pcrel */
    put32(c->eh, &at, 0x40);
    c->eh[at++] = 0;                                              /* no augmentation data */
    put(c->eh, &at, ins, sizeof ins);
    put32(c->eh, &at, 0);                                         /* terminator */
    c->eh_len = at;
    /* .eh_frame_hdr: version 1, pcrel sdata4 eh_frame_ptr, udata4 count, datarel sdata4 table. */
    at = 0;
    static const unsigned char h[] = {1, 0x1b, 0x03, 0x3b};
    put(c->hdr, &at, h, 4);
    put32(c->hdr, &at, (uint32_t)(EH_ADDR - (HDR_ADDR + at)));
    put32(c->hdr, &at, 1);
    put32(c->hdr, &at, (uint32_t)(CODE - HDR_ADDR));
    put32(c->hdr, &at, (uint32_t)(EH_ADDR + c->fde_off - HDR_ADDR));
    c->hdr_len = at;
}

static void check_crafted_rows(const sw_cfi *c)
{
    sw_cfi_row r;
    REQUIRE(sw_cfi_find(c, CODE, &r) == SW_OK);
    CHECK(!r.cfa_is_expr && r.cfa_reg == 7 && r.cfa_off == 8);
    CHECK(r.regs[SW_CFI_RA].kind == SW_CFI_OFFSET && r.regs[SW_CFI_RA].off == -8);
    CHECK(r.regs[6].kind == SW_CFI_SAME);
    CHECK_EQ_U64(r.start, CODE);
    CHECK_EQ_U64(r.end, CODE + 0x40);
    for (uint64_t pc = CODE + 1; pc < CODE + 4; pc++) {
        REQUIRE(sw_cfi_find(c, pc, &r) == SW_OK);
        CHECK(r.cfa_reg == 7 && r.cfa_off == 16 && r.regs[6].kind == SW_CFI_OFFSET && r.regs[6].off == -16);
    }
    REQUIRE(sw_cfi_find(c, CODE + 11, &r) == SW_OK);
    CHECK(r.cfa_reg == 6 && r.cfa_off == 16);
    REQUIRE(sw_cfi_find(c, CODE + 12, &r) == SW_OK);
    CHECK(r.cfa_reg == 7 && r.cfa_off == 8 && r.regs[6].kind == SW_CFI_SAME);
    REQUIRE(sw_cfi_find(c, CODE + 28, &r) == SW_OK);
    CHECK(r.cfa_reg == 6 && r.cfa_off == 16 && r.regs[6].kind == SW_CFI_OFFSET && r.regs[6].off == -16);
    REQUIRE(sw_cfi_find(c, CODE + 29, &r) == SW_OK);
    REQUIRE(r.cfa_is_expr);
    /* The PLT's rule: rsp + 8, plus 8 more from the 11th byte of a 16-byte entry on. */
    uint64_t regs[SW_CFI_NREGS] = {0}, v = 0;
    uint32_t valid = 1u << 7 | 1u << 16;
    regs[7] = 0x7000;
    regs[16] = 0x401025;
    CHECK(sw_cfi_eval(r.cfa_expr, r.cfa_expr_len, regs, valid, 0, 0, NULL, NULL, &v) == SW_OK && v == 0x7008);
    regs[16] = 0x40102b;
    CHECK(sw_cfi_eval(r.cfa_expr, r.cfa_expr_len, regs, valid, 0, 0, NULL, NULL, &v) == SW_OK && v == 0x7010);
    CHECK(sw_cfi_eval(r.cfa_expr, r.cfa_expr_len, regs, 1u << 7, 0, 0, NULL, NULL, &v) == SW_EFORMAT);   /* no rip */
    REQUIRE(sw_cfi_find(c, CODE + 30, &r) == SW_OK);
    CHECK(r.regs[3].kind == SW_CFI_REGISTER && r.regs[3].reg == 12);
    CHECK(r.regs[SW_CFI_RA].kind == SW_CFI_UNDEF);
    REQUIRE(sw_cfi_find(c, CODE + 0x3f, &r) == SW_OK);
    CHECK(r.regs[7].kind == SW_CFI_VAL_OFFSET && r.regs[7].off == -16);
    CHECK(r.regs[14].kind == SW_CFI_OFFSET && r.regs[14].off == 16);
    CHECK(sw_cfi_find(c, CODE + 0x40, &r) == SW_EARG);
    CHECK(sw_cfi_find(c, CODE - 1, &r) == SW_EARG);
    CHECK(sw_cfi_find(c, 0, &r) == SW_EARG);
}

TEST(crafted_eh_frame_reads_back_through_the_table_and_the_scan)
{
    crafted cr;
    craft(&cr);
    char err[128];
    sw_cfi *a, *b;
    REQUIRE(sw_cfi_new(cr.eh, cr.eh_len, EH_ADDR, cr.hdr, cr.hdr_len, HDR_ADDR, &a, err, sizeof err) == SW_OK);
    CHECK(sw_cfi_uses_hdr(a));
    check_crafted_rows(a);
    REQUIRE(sw_cfi_new(cr.eh, cr.eh_len, EH_ADDR, NULL, 0, 0, &b, err, sizeof err) == SW_OK);
    CHECK(!sw_cfi_uses_hdr(b));
    check_crafted_rows(b);
    sw_cfi_free(a);
    sw_cfi_free(b);
    /* A table that points elsewhere than this .eh_frame is not used. */
    REQUIRE(sw_cfi_new(cr.eh, cr.eh_len, EH_ADDR + 16, cr.hdr, cr.hdr_len, HDR_ADDR, &a, err, sizeof err) == SW_OK);
    CHECK(!sw_cfi_uses_hdr(a));
    sw_cfi_free(a);
}

static int read_fake(void *ud, uint64_t addr, uint64_t *v)
{
    (void)ud;
    if (addr != 0x5000)
        return -1;
    *v = 0x123456;
    return 0;
}

TEST(expressions)
{
    uint64_t regs[SW_CFI_NREGS] = {0}, v = 0;
    regs[6] = 0x5008;
    /* A realigned frame's CFA: breg6 -8; deref. */
    static const unsigned char drap[] = {0x76, 0x78, 0x06};
    CHECK(sw_cfi_eval(drap, sizeof drap, regs, 1u << 6, 0, 0, read_fake, NULL, &v) == SW_OK && v == 0x123456);
    CHECK(sw_cfi_eval(drap, sizeof drap, regs, 1u << 6, 0, 0, NULL, NULL, &v) == SW_EFORMAT);
    regs[6] = 0x6000;
    CHECK(sw_cfi_eval(drap, sizeof drap, regs, 1u << 6, 0, 0, read_fake, NULL, &v) == SW_EFORMAT);
    /* The pushed CFA, plus_uconst, constants, arithmetic. */
    static const unsigned char e1[] = {0x23, 0x10, 0x08, 3, 0x1c, 0x11, 0x7f, 0x1e};
    CHECK(sw_cfi_eval(e1, sizeof e1, regs, 0, 1, 100, NULL, NULL, &v) == SW_OK && v == (uint64_t)-113);
    static const unsigned char under[] = {0x22};
    CHECK(sw_cfi_eval(under, sizeof under, regs, 0, 1, 1, NULL, NULL, &v) == SW_EFORMAT);
    CHECK(sw_cfi_eval(under, 0, regs, 0, 0, 0, NULL, NULL, &v) == SW_EFORMAT);   /* empty stack */
    static const unsigned char unknown[] = {0x30, 0xe0};
    CHECK(sw_cfi_eval(unknown, sizeof unknown, regs, 0, 0, 0, NULL, NULL, &v) == SW_EFORMAT);
    static const unsigned char cut[] = {0x0e, 1, 2};   /* const8u of 2 bytes */
    CHECK(sw_cfi_eval(cut, sizeof cut, regs, 0, 0, 0, NULL, NULL, &v) == SW_EFORMAT);
    unsigned char many[100];
    memset(many, 0x30, sizeof many);   /* 100 lit0: more than 16 on the stack */
    CHECK(sw_cfi_eval(many, sizeof many, regs, 0, 0, 0, NULL, NULL, &v) == SW_EFORMAT);
    memset(many, 0x96, sizeof many);   /* 100 nops: more than 64 operations */
    many[0] = 0x30;
    CHECK(sw_cfi_eval(many, sizeof many, regs, 0, 0, 0, NULL, NULL, &v) == SW_EFORMAT);
}

/* new + find at every code address and the expressions, over a damaged
 * copy (its own heap block of exactly len bytes). */
static void exercise(const unsigned char *eh, size_t len, const unsigned char *hdr, size_t hdr_len)
{
    unsigned char *e = malloc(len ? len : 1), *h = hdr ? malloc(hdr_len ? hdr_len : 1) : NULL;
    memcpy(e, eh, len);
    if (h)
        memcpy(h, hdr, hdr_len);
    sw_cfi *c;
    char err[128];
    if (sw_cfi_new(e, len, EH_ADDR, h, hdr_len, HDR_ADDR, &c, err, sizeof err) == SW_OK) {
        for (uint64_t pc = CODE - 2; pc < CODE + 0x44; pc++) {
            sw_cfi_row r;
            if (sw_cfi_find(c, pc, &r) != SW_OK)
                continue;
            uint64_t regs[SW_CFI_NREGS] = {0}, v;
            if (r.cfa_is_expr)
                sw_cfi_eval(r.cfa_expr, r.cfa_expr_len, regs, 0xffffffffu, 0, 0, read_fake, NULL, &v);
            for (int k = 0; k < SW_CFI_NREGS; k++)
                if (r.regs[k].kind == SW_CFI_EXPR || r.regs[k].kind == SW_CFI_VAL_EXPR)
                    sw_cfi_eval(r.regs[k].expr, r.regs[k].expr_len, regs, 0xffffffffu, 1, 8, read_fake, NULL, &v);
        }
        sw_cfi_free(c);
    }
    free(e);
    free(h);
}

TEST(damaged_copies_stay_in_bounds)
{
    crafted cr;
    craft(&cr);
    for (size_t n = 0; n <= cr.eh_len; n++) {
        exercise(cr.eh, n, NULL, 0);
        exercise(cr.eh, n, cr.hdr, cr.hdr_len);
    }
    for (size_t n = 0; n <= cr.hdr_len; n++)
        exercise(cr.eh, cr.eh_len, cr.hdr, n);
    static const unsigned char flips[] = {0x01, 0x80, 0xff, 0x7f, 0x40};
    unsigned char copy[256];
    for (size_t i = 0; i < cr.eh_len; i++) {
        for (size_t f = 0; f < sizeof flips; f++) {
            memcpy(copy, cr.eh, cr.eh_len);
            copy[i] ^= flips[f];
            exercise(copy, cr.eh_len, NULL, 0);
            exercise(copy, cr.eh_len, cr.hdr, cr.hdr_len);
        }
    }
    for (size_t i = 0; i < cr.hdr_len; i++) {
        for (size_t f = 0; f < sizeof flips; f++) {
            memcpy(copy, cr.hdr, cr.hdr_len);
            copy[i] ^= flips[f];
            exercise(cr.eh, cr.eh_len, copy, cr.hdr_len);
        }
    }
    /* (what is checked: no read out of bounds, under ASan and UBSan) */
}
