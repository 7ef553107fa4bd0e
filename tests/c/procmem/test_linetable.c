/*
 * test_linetable.c - the line-table decoders (native/procmem/linetable.h)
 * on tables compiled by CPython 3.9-3.13 (linetable_fixtures.h, made by
 * gen_linetable_fixtures.py), checked against each interpreter's own line
 * for every instruction; hand-made tables for the corner cases; damaged
 * and truncated tables (never a read outside the table: ASan run); and
 * the (function, line) -> id map of the profiler's lines mode
 * (native/profile/lineids.h).
 */
#define _GNU_SOURCE
#include "check.h"
#include "procmem/linetable.h"
#include "profile/lineids.h"
#include "linetable_fixtures.h"

#define NFIX (sizeof lt_fixtures / sizeof lt_fixtures[0])

TEST(real_tables_every_instruction)
{
    unsigned kinds_seen = 0, units = 0;
    for (size_t i = 0; i < NFIX; i++) {
        const lt_fixture *f = &lt_fixtures[i];
        sw_linetable t;
        REQUIRE(sw_linetable_decode(f->kind, f->table, f->table_len, f->first, &t) == SW_OK);
        kinds_seen |= 1u << f->kind;
        for (unsigned k = 0; k < f->nlines; k++) {
            int32_t got = sw_linetable_line(&t, 2 * k);
            if (!CHECK_MSG(got == f->lines[k], "%s: offset %u: got %d, the interpreter says %d", f->what, 2 * k,
                           got, f->lines[k]))
                break;
            units++;
        }
        sw_linetable_free(&t);
    }
    CHECK_EQ_U64(kinds_seen, (1u << 1) | (1u << 2) | (1u << 3));
    CHECK(units > 200);
}

TEST(lnotab_by_hand)
{
    /* 3.9: +6 bytes +1 line, +0 bytes +200 lines (two pairs at one
     * offset), +4 bytes -3 lines. */
    const unsigned char tab[] = {6, 1, 0, 100, 0, 100, 4, (unsigned char)-3};
    sw_linetable t;
    REQUIRE(sw_linetable_decode(SW_LINETABLE_LNOTAB, tab, sizeof tab, 10, &t) == SW_OK);
    CHECK_EQ_U64(sw_linetable_line(&t, 0), 10);
    CHECK_EQ_U64(sw_linetable_line(&t, 4), 10);
    CHECK_EQ_U64(sw_linetable_line(&t, 6), 211);
    CHECK_EQ_U64(sw_linetable_line(&t, 10), 208);
    CHECK_EQ_U64(sw_linetable_line(&t, 100000), 208);    /* open-ended */
    sw_linetable_free(&t);
}

TEST(pairs_by_hand)
{
    /* 3.10: 4 bytes line+0, 0 bytes +5 (moves the line only), 2 bytes no
     * line, 6 bytes +1. */
    const unsigned char tab[] = {4, 0, 0, 5, 2, 0x80, 6, 1};
    sw_linetable t;
    REQUIRE(sw_linetable_decode(SW_LINETABLE_PAIRS, tab, sizeof tab, 7, &t) == SW_OK);
    CHECK_EQ_U64(sw_linetable_line(&t, 0), 7);
    CHECK_EQ_U64(sw_linetable_line(&t, 2), 7);
    CHECK_EQ_I64(sw_linetable_line(&t, 4), -1);
    CHECK_EQ_U64(sw_linetable_line(&t, 6), 13);
    CHECK_EQ_U64(sw_linetable_line(&t, 10), 13);
    CHECK_EQ_I64(sw_linetable_line(&t, 12), -1);   /* past the end */
    sw_linetable_free(&t);
}

TEST(locations_by_hand)
{
    const unsigned char tab[] = {
        0x80 | (13 << 3) | 0, 4,                 /* no columns, 1 unit, line +2 (svarint 4) */
        0x80 | (11 << 3) | 1, 3, 9,              /* one-line form, 2 units, line +1 */
        0x80 | (15 << 3) | 0,                    /* no location, 1 unit */
        0x80 | (14 << 3) | 2, 0x40 | 1, 2, 1, 5, 9, /* long form, 3 units, svarint 1 | 2 << 6 = 129: line -64 */
        0x80 | (3 << 3) | 0, 0x12,               /* short form, 1 unit, same line */
    };
    sw_linetable t;
    REQUIRE(sw_linetable_decode(SW_LINETABLE_LOCATIONS, tab, sizeof tab, 100, &t) == SW_OK);
    CHECK_EQ_U64(sw_linetable_line(&t, 0), 102);
    CHECK_EQ_U64(sw_linetable_line(&t, 2), 103);
    CHECK_EQ_U64(sw_linetable_line(&t, 4), 103);
    CHECK_EQ_I64(sw_linetable_line(&t, 6), -1);
    CHECK_EQ_U64(sw_linetable_line(&t, 8), 39);
    CHECK_EQ_U64(sw_linetable_line(&t, 12), 39);
    CHECK_EQ_U64(sw_linetable_line(&t, 14), 39);
    CHECK_EQ_I64(sw_linetable_line(&t, 16), -1);
    sw_linetable_free(&t);
}

TEST(damaged_and_truncated_tables)
{
    /* Every prefix of every real table, and every table with each byte
     * flipped: decoded or refused, never read out of bounds (ASan). */
    for (size_t i = 0; i < NFIX; i++) {
        const lt_fixture *f = &lt_fixtures[i];
        unsigned char *copy = malloc(f->table_len + 1);
        REQUIRE(copy != NULL);
        for (unsigned cut = 0; cut <= f->table_len; cut++) {
            unsigned char *exact = malloc(cut ? cut : 1);   /* exactly cut bytes: ASan sees overreads */
            memcpy(exact, f->table, cut);
            sw_linetable t;
            if (sw_linetable_decode(f->kind, exact, cut, f->first, &t) == SW_OK) {
                for (unsigned k = 0; k < 2 * f->nlines + 8; k += 2)
                    (void)sw_linetable_line(&t, k);
                sw_linetable_free(&t);
            }
            free(exact);
        }
        for (unsigned b = 0; b < f->table_len; b++) {
            memcpy(copy, f->table, f->table_len);
            copy[b] ^= 0xa5;
            sw_linetable t;
            if (sw_linetable_decode(f->kind, copy, f->table_len, f->first, &t) == SW_OK) {
                for (unsigned k = 0; k < t.n; k++)
                    CHECK(k == 0 || t.r[k].start > t.r[k - 1].start);
                sw_linetable_free(&t);
            }
        }
        free(copy);
    }
    sw_linetable t;
    const unsigned char trunc[] = {0x80 | (14 << 3), 0x41};   /* long form cut in its first varint */
    CHECK_EQ_I64(sw_linetable_decode(SW_LINETABLE_LOCATIONS, trunc, sizeof trunc, 1, &t), SW_EFORMAT);
    CHECK_EQ_I64(sw_linetable_decode(7, trunc, sizeof trunc, 1, &t), SW_EARG);
    /* Lines summed past INT32_MAX are "no line", not an overflow. */
    unsigned char up[2 * 300];
    for (int i = 0; i < 300; i++) {
        up[2 * i] = 2;
        up[2 * i + 1] = 127;
    }
    REQUIRE(sw_linetable_decode(SW_LINETABLE_LNOTAB, up, sizeof up, INT32_MAX - 1000, &t) == SW_OK);
    CHECK_EQ_I64(sw_linetable_line(&t, 500), -1);
    sw_linetable_free(&t);
}

TEST(lineids_map)
{
    sw_functab *ft = sw_functab_new();
    sw_lineids *m = sw_lineids_new();
    REQUIRE(ft && m);
    uint32_t f, g, a, b, c, d;
    REQUIRE(sw_functab_intern(ft, "f", 1, "x.py", 4, 10, &f) == SW_OK);
    REQUIRE(sw_functab_intern(ft, "g", 1, "x.py", 4, 20, &g) == SW_OK);
    CHECK(sw_lineids_get(m, ft, f, 10, &a) == SW_OK && a == f);    /* its own line */
    CHECK(sw_lineids_get(m, ft, f, 0, &a) == SW_OK && a == f);     /* unknown */
    REQUIRE(sw_lineids_get(m, ft, f, 12, &a) == SW_OK);
    REQUIRE(sw_lineids_get(m, ft, f, 12, &b) == SW_OK);
    REQUIRE(sw_lineids_get(m, ft, g, 12, &c) == SW_OK);
    CHECK(a == b && a != f && c != a);
    const sw_func *fa = sw_functab_get(ft, a);
    CHECK(fa && strcmp(fa->name, "f") == 0 && strcmp(fa->filename, "x.py") == 0 && fa->line == 12);
    /* Many lines: the table grows and keeps every mapping. */
    for (int32_t l = 100; l < 5100; l++) {
        REQUIRE(sw_lineids_get(m, ft, g, l, &d) == SW_OK);
        CHECK(sw_functab_get(ft, d)->line == l);
    }
    for (int32_t l = 100; l < 5100; l += 97) {
        uint32_t again;
        REQUIRE(sw_lineids_get(m, ft, g, l, &again) == SW_OK);
        CHECK(sw_functab_get(ft, again)->line == l && strcmp(sw_functab_get(ft, again)->name, "g") == 0);
    }
    CHECK(sw_lineids_get(m, ft, 999999, 5, &d) == SW_EARG);
    sw_lineids_free(m);
    sw_functab_free(ft);
}
