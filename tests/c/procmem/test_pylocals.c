/*
 * test_pylocals.c - a frame's variables read from memory (procmem/
 * pylocals.h) over objects made here, in this process, with a layout of
 * the test's own: a frame whose slots hold an int of three digits, a
 * negative one, an unbound slot, a cell holding a float, an empty cell, a
 * str, bytes longer than what is kept, an object of another type, an
 * unreadable pointer and None; each read as what it is, in the names'
 * order. A names tuple of another type, or with a count far beyond its
 * memory, is refused or read within bounds (ASan/UBSan watch); a layout
 * missing a field is refused once, before any read.
 */
#define _GNU_SOURCE
#include "check.h"
#include "objarena.h"
#include "procmem/procmem.h"

#include <string.h>
#include <unistd.h>

/* Objects: refcount at 0, type at 8; the rest at the offsets below. */
static sw_py_layout layout(void)
{
    sw_py_layout l;
    memset(&l, 0, sizeof l);
    l.pointer_size = 8;
    l.frames_kind = SW_FRAMES_INTERP;
    l.ob_type = 8;
    l.type_name = 24;
    l.tuple_size = 16;
    l.tuple_items = 24;
    l.str_length = 16;
    l.str_state = 32;
    l.str_kind_shift = 2;
    l.str_kind_mask = 7;
    l.str_compact_mask = 1u << 5;
    l.str_ascii_mask = 1u << 6;
    l.str_ascii_data = 40;
    l.str_compact_data = 56;
    l.str_legacy_data = SW_NO_OFFSET;
    l.str_header_size = 56;
    l.long_size = 16;
    l.long_digits = 24;
    l.long_digit_size = 4;
    l.long_shift = 30;
    l.float_value = 16;
    l.bytes_size = 16;
    l.bytes_data = 32;
    l.cell_ref = 16;
    l.frame_localsplus = 64;
    l.code_varnames = 32;
    l.code_cellvars = l.code_freevars = SW_NO_OFFSET;
    return l;
}

static uint64_t object(uint64_t type, size_t size)
{
    uint64_t o = alloc(size);
    put64(o, 1);
    put64(o + 8, type);
    return o;
}

static uint64_t type_named(const char *name)
{
    uint64_t t = object(0, 64);
    put64(t + 24, (uint64_t)(uintptr_t)name);
    return t;
}

static uint64_t str_of(const sw_py_layout *l, const char *s)
{
    size_t n = strlen(s);
    uint64_t o = object(l->str_type, 40 + n + 1);
    put64(o + 16, n);
    uint32_t state = (1u << 2) | (1u << 5) | (1u << 6);   /* kind 1, compact, ascii */
    memcpy((void *)(uintptr_t)(o + 32), &state, 4);
    memcpy((void *)(uintptr_t)(o + 40), s, n + 1);
    return o;
}

typedef struct seen {
    char names[16][32];
    sw_pyval vals[16];
    int n;
} seen;

static int collect(void *ud, const char *name, const sw_pyval *v)
{
    seen *s = ud;
    if (s->n < 16) {
        snprintf(s->names[s->n], sizeof s->names[0], "%s", name);
        s->vals[s->n] = *v;
    }
    s->n++;
    return 0;
}

static sw_mem self_mem(void)
{
    sw_mem m;
    char err[200];
    CHECK_EQ_I64(sw_mem_open(&m, getpid(), (uint64_t)(uintptr_t)arena, 8, err, sizeof err), SW_OK);
    return m;
}

static seen the_seen;

TEST(each_value_read_as_what_it_is)
{
    used = 0;
    sw_py_layout l = layout();
    l.long_type = type_named("int");
    l.bool_type = type_named("bool");
    l.float_type = type_named("float");
    l.str_type = type_named("str");
    l.bytes_type = type_named("bytes");
    l.tuple_type = type_named("tuple");
    l.cell_type = type_named("cell");
    l.none_addr = object(type_named("NoneType"), 16);
    char err[200];
    REQUIRE(sw_pylocals_usable(&l, err, sizeof err) == SW_OK);
    const char *names[] = {"big", "neg", "unbound", "celled", "empty", "text", "blob", "thing", "bad", "nothing"};
    const size_t n = sizeof names / sizeof names[0];
    uint64_t tuple = object(l.tuple_type, 24 + 8 * n);
    put64(tuple + 16, n);
    for (size_t i = 0; i < n; i++)
        put64(tuple + 24 + 8 * i, str_of(&l, names[i]));
    uint64_t code = object(0, 64);
    put64(code + 32, tuple);
    uint64_t frame = alloc(64 + 8 * n);
    uint64_t big = object(l.long_type, 24 + 12);   /* 3 digits: 1 + 2 * 2^30 + 3 * 2^60 */
    put64(big + 16, 3);
    uint32_t digits[3] = {1, 2, 3};
    memcpy((void *)(uintptr_t)(big + 24), digits, sizeof digits);
    uint64_t neg = object(l.long_type, 28);
    put64(neg + 16, (uint64_t)-1);
    digits[0] = 7;
    memcpy((void *)(uintptr_t)(neg + 24), digits, 4);
    uint64_t fl = object(l.float_type, 24);
    double d = 2.5;
    memcpy((void *)(uintptr_t)(fl + 16), &d, 8);
    uint64_t cell = object(l.cell_type, 24), empty = object(l.cell_type, 24);
    put64(cell + 16, fl);
    put64(empty + 16, 0);
    uint64_t blob = object(l.bytes_type, 32 + SW_STR_MAX_CHARS + 100);
    put64(blob + 16, SW_STR_MAX_CHARS + 99);
    memset((void *)(uintptr_t)(blob + 32), 'z', SW_STR_MAX_CHARS + 100);
    uint64_t thing = object(type_named("mod.Thing"), 16);
    uint64_t values[] = {big, neg, 0, cell, empty, str_of(&l, "hello"), blob, thing, 0x10, l.none_addr};
    for (size_t i = 0; i < n; i++)
        put64(frame + 64 + 8 * i, values[i]);
    sw_mem m = self_mem();
    seen *s = &the_seen;
    memset(s, 0, sizeof *s);
    CHECK_EQ_I64(sw_pylocals_read(&m, &l, frame, code, collect, s), 8);
    REQUIRE_EQ_U64(s->n, 8);
    const char *want[] = {"big", "neg", "celled", "text", "blob", "thing", "bad", "nothing"};
    for (int i = 0; i < 8; i++)
        CHECK_EQ_STR(s->names[i], want[i]);
    CHECK_EQ_U64(s->vals[0].kind, SW_PYVAL_INT);
    CHECK_EQ_U64(s->vals[0].ndigits, 3);
    CHECK_EQ_U64(s->vals[0].digits[2], 3);
    CHECK_EQ_U64(s->vals[0].negative, 0);
    CHECK(s->vals[1].kind == SW_PYVAL_INT && s->vals[1].negative && s->vals[1].digits[0] == 7);
    CHECK(s->vals[2].kind == SW_PYVAL_FLOAT && s->vals[2].f == 2.5 && s->vals[2].addr == fl);
    CHECK(s->vals[3].kind == SW_PYVAL_STR && s->vals[3].len == 5 && memcmp(s->vals[3].data, "hello", 5) == 0);
    CHECK(s->vals[4].kind == SW_PYVAL_BYTES && s->vals[4].truncated && s->vals[4].len == SW_STR_MAX_CHARS);
    CHECK(s->vals[5].kind == SW_PYVAL_OTHER && s->vals[5].addr == thing);
    CHECK_EQ_STR(s->vals[5].type_name, "mod.Thing");
    CHECK_EQ_U64(s->vals[6].kind, SW_PYVAL_UNREADABLE);
    CHECK_EQ_U64(s->vals[7].kind, SW_PYVAL_NONE);
    /* A names "tuple" of another type; then one claiming far more items
     * than its memory (and the frame's) holds. */
    put64(tuple + 8, l.str_type);
    CHECK_EQ_I64(sw_pylocals_read(&m, &l, frame, code, collect, s), SW_EARG);
    put64(tuple + 8, l.tuple_type);
    put64(tuple + 16, (uint64_t)1 << 40);
    s->n = 0;
    int rc = sw_pylocals_read(&m, &l, frame, code, collect, s);
    CHECK(rc < 0 || (rc <= (int)SW_PYLOCALS_MAX && s->n == rc));
    sw_mem_close(&m);
}

TEST(a_layout_missing_a_field_is_refused)
{
    sw_py_layout l = layout();
    char err[200];
    CHECK(sw_pylocals_usable(&l, err, sizeof err) == SW_EARG);   /* no type objects */
    l.long_type = l.bool_type = l.float_type = l.bytes_type = l.tuple_type = l.cell_type = l.str_type = 1;
    l.none_addr = 1;
    CHECK(sw_pylocals_usable(&l, err, sizeof err) == SW_OK);
    l.frame_localsplus = SW_NO_OFFSET;
    CHECK(sw_pylocals_usable(&l, err, sizeof err) == SW_EARG && strstr(err, "not described"));
    l = layout();
    l.long_type = l.bool_type = l.float_type = l.bytes_type = l.tuple_type = l.cell_type = l.str_type = 1;
    l.none_addr = 1;
    l.frames_kind = SW_FRAMES_OBJECTS;   /* 3.9/3.10 read three tuples: their offsets are missing */
    CHECK(sw_pylocals_usable(&l, err, sizeof err) == SW_EARG);
}
