/*
 * test_layout_facts.c - a layout checked against the target's build
 * (procmem/layout_facts.h). The type objects of each pyenv CPython 3.9-3.13
 * (their bytes from its libpython file, their ob_type pointing to its
 * PyType_Type, as the loader relocates it) agree with that release's
 * generated layout on every fact; the same bytes refuted, each naming what
 * differs: a debug build (its mark symbol), a free-threaded one (its mark,
 * and an object header whose type pointer lies elsewhere), a layout that
 * moved a field (one type's size); a fact that cannot be read is skipped.
 */
#define _GNU_SOURCE
#include "check.h"
#include "objarena.h"
#include "procmem/procmem.h"

#include "elf/elf.h"

#include <glob.h>

#define MAX_SYMBOLS 16
#define TYPE_BYTES 64u   /* read of each type object: its ob_type and tp_basicsize lie inside */

/* The target's symbols, as a test double: names and their addresses here. */
typedef struct {
    const char *name[MAX_SYMBOLS];
    uint64_t addr[MAX_SYMBOLS];
    int n;
} symbols;

static int symbol_of(const void *ud, const char *name, uint64_t *addr)
{
    const symbols *s = ud;
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->name[i], name) == 0) {
            *addr = s->addr[i];
            return 0;
        }
    return -1;
}

static void add_symbol(symbols *s, const char *name, uint64_t addr)
{
    REQUIRE(s->n < MAX_SYMBOLS);
    s->name[s->n] = name;
    s->addr[s->n++] = addr;
}

static const char *const TYPES[] = {"PyLong_Type", "PyFloat_Type", "PyTuple_Type", "PyBytes_Type",
                                    "PyUnicode_Type", "PyCell_Type", "PyFrame_Type", "PyCode_Type"};

/* The type objects of the libpython at path copied here (ob_type set to
 * the copy of its PyType_Type), with the symbols of those copies and of
 * the build marks the file defines. 0, or -1 if it cannot be read. */
static int load_types(const char *path, const sw_py_layout *l, symbols *s)
{
    sw_elf *e;
    char err[300];
    if (sw_elf_open(path, &e, err, sizeof err) != SW_OK)
        return -1;
    sw_elf_symbol sym;
    uint64_t type_type = alloc(TYPE_BYTES);
    int rc = sw_elf_find_symbol(e, "PyType_Type", &sym) == SW_OK &&
                     sw_elf_read_vaddr(e, sym.value, (void *)(uintptr_t)type_type, TYPE_BYTES) == SW_OK
                 ? 0 : -1;
    add_symbol(s, "PyType_Type", type_type);
    for (size_t i = 0; rc == 0 && i < sizeof TYPES / sizeof TYPES[0]; i++) {
        uint64_t t = alloc(TYPE_BYTES);
        if (sw_elf_find_symbol(e, TYPES[i], &sym) != SW_OK ||
            sw_elf_read_vaddr(e, sym.value, (void *)(uintptr_t)t, TYPE_BYTES) != SW_OK)
            rc = -1;
        put64(t + l->ob_type, type_type);
        add_symbol(s, TYPES[i], t);
    }
    static const char *const marks[] = {"_Py_NegativeRefcount", "_Py_PrintReferences", "_Py_MergeZeroLocalRefcount"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (sw_elf_find_symbol(e, marks[i], &sym) == SW_OK)
            add_symbol(s, marks[i], 1);
    sw_elf_free(e);
    return rc;
}

static int open_self(sw_mem *m)
{
    char err[200];
    return sw_mem_open(m, getpid(), (uint64_t)(uintptr_t)arena, 1, err, sizeof err);
}

TEST(real_builds_agree_with_their_layouts_and_refuted_say_what_differs)
{
    sw_mem m;
    REQUIRE(open_self(&m) == SW_OK);
    unsigned found = 0;
    for (unsigned minor = 9; minor <= 13; minor++) {
        glob_t g;
        char pat[512];
        const char *home = getenv("HOME");
        snprintf(pat, sizeof pat, "%s/.pyenv/versions/3.%u.*/lib/libpython3.%u.so.1.0", home ? home : "/root", minor,
                 minor);
        if (glob(pat, 0, NULL, &g) != 0 || !g.gl_pathc)
            continue;
        const char *path = g.gl_pathv[g.gl_pathc - 1];
        const char *v = strstr(path, "versions/3.") + strlen("versions/");
        unsigned micro = (unsigned)atoi(strchr(v + 2, '.') + 1);
        sw_py_layout l;
        if (sw_layout_known((3u << 24) | (minor << 16) | (micro << 8) | 0xF0, &l) != SW_OK) {
            globfree(&g);
            continue;   /* a release of this minor without a generated layout */
        }
        found++;
        used = 0;
        symbols s = {.n = 0};
        CHECK_MSG(load_types(path, &l, &s) == 0, "%s: its type objects cannot be read", path);
        globfree(&g);
        char err[600];
        unsigned checked = 0;
        /* 7 types (frame before 3.11, code from then on), each its type and size */
        CHECK_MSG(sw_layout_check_facts(&m, &l, symbol_of, &s, &checked, err, sizeof err) == SW_OK, "3.%u: %s",
                  minor, err);
        CHECK_EQ_U64(checked, 14);

        /* A field moved: the layout's float value 8 bytes on. */
        sw_py_layout moved = l;
        moved.float_value += 8;
        CHECK(sw_layout_check_facts(&m, &moved, symbol_of, &s, &checked, err, sizeof err) == SW_EVERSION);
        CHECK_MSG(strcmp(err, "PyFloat_Type.tp_basicsize is 24 where the layout says 32 (float value at 24)") == 0,
                  "%s", err);

        /* A debug build of this release: its mark. */
        symbols debug = s;
        add_symbol(&debug, "_Py_NegativeRefcount", 1);
        CHECK(sw_layout_check_facts(&m, &l, symbol_of, &debug, &checked, err, sizeof err) == SW_EVERSION);
        CHECK_MSG(strcmp(err, "a debug build (it defines _Py_NegativeRefcount: Py_REF_DEBUG)") == 0, "%s", err);

        /* A free-threaded build: its mark, and objects whose header puts
         * something else (ob_tid, ob_ref_shared) where the type pointer
         * was. Both are said. */
        symbols ft = s;
        add_symbol(&ft, "_Py_MergeZeroLocalRefcount", 1);
        uint64_t int_type;
        REQUIRE(symbol_of(&s, "PyLong_Type", &int_type) == 0);
        put64(int_type + l.ob_type, 0);
        CHECK(sw_layout_check_facts(&m, &l, symbol_of, &ft, &checked, err, sizeof err) == SW_EVERSION);
        CHECK_MSG(strstr(err, "a free-threaded build (_Py_MergeZeroLocalRefcount: Py_GIL_DISABLED); PyLong_Type's "
                              "type is not PyType_Type at offset 8 (another object header)") == err,
                  "%s", err);

        /* A fact that cannot be read is skipped, not taken as agreeing or not. */
        symbols gone = s;
        for (int i = 0; i < gone.n; i++)
            if (strcmp(gone.name[i], "PyLong_Type") == 0)
                gone.addr[i] = 8;   /* unmapped */
        CHECK(sw_layout_check_facts(&m, &l, symbol_of, &gone, &checked, err, sizeof err) == SW_OK);
        CHECK_EQ_U64(checked, 12);
    }
    sw_mem_close(&m);
    if (!found) {
        REQUIRE(getenv("CI") == NULL || strcmp(getenv("CI"), "true") != 0);   /* no pyenv CPython 3.9-3.13 */
        printf("  (no pyenv CPython with a generated layout: skipped)\n");
    }
}

TEST(every_difference_is_said_within_the_buffer)
{
    /* Every fact wrong at once, into a short buffer: cut, terminated. */
    sw_mem m;
    REQUIRE(open_self(&m) == SW_OK);
    used = 0;
    sw_py_layout l;
    REQUIRE(sw_layout_known_minor(0x030c00f0u, &l) == SW_OK);
    symbols s = {.n = 0};
    uint64_t type_type = alloc(TYPE_BYTES);
    add_symbol(&s, "PyType_Type", type_type);
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++) {
        uint64_t t = alloc(TYPE_BYTES);
        put64(t + l.ob_type, type_type);
        put64(t + l.type_basicsize, 1000);
        add_symbol(&s, TYPES[i], t);
    }
    add_symbol(&s, "_Py_PrintReferences", 1);
    char err[600], small[40];
    unsigned checked;
    CHECK(sw_layout_check_facts(&m, &l, symbol_of, &s, &checked, err, sizeof err) == SW_EVERSION);
    CHECK_EQ_U64(checked, 7);   /* the types' types agree; no size does */
    CHECK_MSG(strstr(err, "Py_TRACE_REFS") && strstr(err, "; PyCode_Type.tp_basicsize is 1000"), "%s", err);
    memset(small, 'x', sizeof small);
    CHECK(sw_layout_check_facts(&m, &l, symbol_of, &s, &checked, small, sizeof small) == SW_EVERSION);
    CHECK_EQ_U64(strlen(small), sizeof small - 1);
    CHECK(strncmp(small, err, sizeof small - 1) == 0);
    sw_mem_close(&m);
}
