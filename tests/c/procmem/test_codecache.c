/*
 * test_codecache.c - the code cache's trust (procmem/codecache.h) over
 * code objects and strs made here in the form of 3.9.18 and 3.12.1 (their
 * generated layouts), read back through the reader:
 * - an entry made from a header is unsettled until its code object is
 *   seen alive and unchanged after its strings were read; a code object
 *   freed in between (its reference count 0, or the allocator's words over
 *   its first fields) leaves it distrusted, and it is read afresh;
 * - a code object freed and another made at its address, its file name
 *   where the old one's was (a header equal pointer for pointer): the file
 *   name read again tells, and the entry takes the new one's strings;
 * - file names compared as they lie (ASCII) and decoded (Latin-1), and a
 *   legacy str (characters apart from its header) never so compared.
 */
#define _GNU_SOURCE
#include "check.h"
#include "objarena.h"
#include "procmem/procmem.h"

#include <string.h>
#include <unistd.h>

static sw_py_layout L;
static uint64_t str_type, code_type;

static uint64_t object(uint64_t type, size_t size)
{
    return arena_object(L.ob_refcnt, L.ob_type, type, size);
}

/* A compact str of s (Latin-1 if latin1, else ASCII), its bytes as they lie. */
static uint64_t str_of(const char *s, int latin1)
{
    size_t n = strlen(s);
    uint32_t data = latin1 ? L.str_compact_data : L.str_ascii_data;
    uint64_t o = object(str_type, data + n + 1);
    put64(o + L.str_length, n);
    put32(o + L.str_state, (1u << L.str_kind_shift) | L.str_compact_mask | (latin1 ? 0 : L.str_ascii_mask));
    memcpy((void *)(uintptr_t)(o + data), s, n + 1);
    return o;
}

static uint64_t code_of(uint64_t name, uint64_t filename, uint32_t line)
{
    uint64_t c = object(code_type, L.code_size);
    put64(c + L.code_name, name);
    put64(c + L.code_qualname, name);
    put64(c + L.code_filename, filename);
    put32(c + L.code_firstlineno, line);
    return c;
}

static sw_mem self_mem(void)
{
    sw_mem m;
    char err[200];
    CHECK_EQ_I64(sw_mem_open(&m, getpid(), (uint64_t)(uintptr_t)arena, 8, err, sizeof err), SW_OK);
    return m;
}

/* Binds the layout of version v, and types made here. */
static int setup(uint32_t v)
{
    if (sw_layout_known(v, &L) != SW_OK)
        return 0;
    used = 0;
    str_type = object(0, 512);
    code_type = object(0, 512);
    L.str_type = str_type;
    L.code_type = code_type;
    return 1;
}

/* The entry for code as read now (its header, then sw_codecache_get). */
static sw_sample_code *get(sw_codecache *c, sw_mem *m, uint64_t code, unsigned char *hdr)
{
    if (sw_mem_read(m, code, hdr, L.code_size) != SW_OK)
        return NULL;
    return sw_codecache_get(c, m, &L, code, hdr, 1);
}

static void settled_only_when_seen_alive_after(uint32_t version)
{
    REQUIRE(setup(version));
    sw_mem m = self_mem();
    sw_codecache *c = sw_codecache_new(64);
    unsigned char hdr[SW_LAYOUT_MAX_READ];
    uint64_t code = code_of(str_of("<module>", 0), str_of("pkg/mod_54.py", 0), 1);
    sw_sample_code *e = get(c, &m, code, hdr);
    REQUIRE(e != NULL);
    CHECK_EQ_STR(e->filename, "pkg/mod_54.py");
    CHECK(!sw_codecache_settled(e));
    /* Unsettled: never trusted without a read. */
    CHECK(sw_codecache_fresh(c, code, 1, 5) == NULL);
    sw_codecache_stamp(e, 7);
    CHECK(sw_codecache_stamped(c, code, 7) == NULL);
    CHECK(!sw_codecache_known(c, &L, code, hdr));
    /* Freed since its strings were read: each way an allocator leaves a
     * freed block's first words. */
    const uint64_t refs[] = {0, (uint64_t)(uintptr_t)arena + 4096};   /* (0; a free list's pointer) */
    for (int i = 0; i < 3; i++) {
        e = get(c, &m, code, hdr);   /* (read afresh: unsettled again) */
        REQUIRE(e != NULL);
        CHECK(!sw_codecache_settled(e));
        unsigned char after[SW_LAYOUT_MAX_READ];
        memcpy(after, hdr, L.code_size);
        if (i < 2)
            memcpy(after + L.ob_refcnt, &refs[i], 8);
        else
            memset(after + L.ob_type, 0x5a, 8);   /* (glibc's key over the type) */
        CHECK(!sw_codecache_settle(c, &L, e, after));
        CHECK(!sw_codecache_settled(e));
        CHECK(sw_codecache_fresh(c, code, 1, 5) == NULL);
    }
    /* Alive and unchanged: settled, and trusted. */
    e = get(c, &m, code, hdr);
    REQUIRE(e != NULL);
    CHECK(sw_codecache_settle(c, &L, e, hdr));
    CHECK(sw_codecache_settled(e));
    CHECK(sw_codecache_fresh(c, code, 1, 5) == e);
    CHECK(sw_codecache_known(c, &L, code, hdr));
    /* Another header at the address (another file name): not settled by it. */
    put64(code + L.code_filename, str_of("pkg/other.py", 0));
    unsigned char other[SW_LAYOUT_MAX_READ];
    REQUIRE(sw_mem_read(&m, code, other, L.code_size) == SW_OK);
    CHECK(!sw_codecache_settle(c, &L, e, other));
    sw_codecache_free(c);
    sw_mem_close(&m);
}

TEST(an_entry_is_settled_only_by_its_code_alive_after_its_strings_39)
{
    settled_only_when_seen_alive_after(0x030912f0u);
}

TEST(an_entry_is_settled_only_by_its_code_alive_after_its_strings_312)
{
    settled_only_when_seen_alive_after(0x030c01f0u);
}

/* The file name's bytes as they lie now, as the sampler reads them. */
static int check_name(sw_codecache *c, sw_mem *m, sw_sample_code *e)
{
    uint32_t span;
    uint64_t at = sw_codecache_filename_at(e, &span);
    unsigned char buf[4096];
    if (!at || span > sizeof buf || sw_mem_read(m, at, buf, span) != SW_OK)
        return -2;
    return sw_codecache_check_filename(c, m, &L, e, buf, span);
}

TEST(a_code_made_where_one_was_freed_is_told_by_its_file_name)
{
    REQUIRE(setup(0x030b07f0u));
    sw_mem m = self_mem();
    sw_codecache *c = sw_codecache_new(64);
    unsigned char hdr[SW_LAYOUT_MAX_READ];
    uint64_t module = str_of("<module>", 0), file = str_of("pkg/mod_54.py", 0);
    uint64_t code = code_of(module, file, 1);
    sw_sample_code *e = get(c, &m, code, hdr);
    REQUIRE(e != NULL && sw_codecache_settle(c, &L, e, hdr));
    CHECK_EQ_I64(check_name(c, &m, e), 1);   /* the same: confirmed */
    CHECK(sw_codecache_settled(e));
    /* The module imported, its code and file name freed; the next module's
     * made in their places: the header is the same, pointer for pointer. */
    memcpy((void *)(uintptr_t)(file + L.str_ascii_data), "pkg/mod_00.py", 13);
    CHECK(get(c, &m, code, hdr) == e);
    CHECK_EQ_STR(e->filename, "pkg/mod_54.py");   /* (what pointers alone gave) */
    CHECK_EQ_I64(check_name(c, &m, e), 0);
    CHECK_EQ_STR(e->filename, "pkg/mod_00.py");   /* read again ... */
    CHECK_EQ_STR(e->name, "<module>");
    CHECK(!sw_codecache_settled(e));              /* ... to be settled */
    CHECK(sw_codecache_settle(c, &L, e, hdr));
    CHECK_EQ_I64(check_name(c, &m, e), 1);
    /* A file name of another length at the pointer, and bytes that are no
     * str (a freed block's): not the entry's either. */
    put64(file + L.str_length, 12);
    CHECK_EQ_I64(check_name(c, &m, e), 0);
    CHECK_EQ_STR(e->filename, "pkg/mod_00.p");
    CHECK(sw_codecache_settle(c, &L, e, hdr));
    put64(file + L.ob_type, 0);
    CHECK_EQ_I64(check_name(c, &m, e), -1);   /* (its strings cannot be read: distrusted) */
    CHECK(!sw_codecache_settled(e));
    sw_codecache_free(c);
    sw_mem_close(&m);
}

TEST(file_names_compared_as_they_lie_or_decoded)
{
    REQUIRE(setup(0x030912f0u));
    sw_mem m = self_mem();
    sw_codecache *c = sw_codecache_new(64);
    unsigned char hdr[SW_LAYOUT_MAX_READ];
    uint64_t file = str_of("caf\xe9.py", 1);   /* Latin-1: decoded to UTF-8 */
    uint64_t code = code_of(str_of("f", 0), file, 3);
    sw_sample_code *e = get(c, &m, code, hdr);
    REQUIRE(e != NULL && sw_codecache_settle(c, &L, e, hdr));
    CHECK_EQ_STR(e->filename, "caf\xc3\xa9.py");
    CHECK_EQ_I64(check_name(c, &m, e), 1);
    memcpy((void *)(uintptr_t)(file + L.str_compact_data), "caf\xe8", 4);
    CHECK_EQ_I64(check_name(c, &m, e), 0);
    CHECK_EQ_STR(e->filename, "caf\xc3\xa8.py");
    /* A legacy str (3.9: its characters elsewhere) is never so compared. */
    uint64_t legacy = object(str_type, 128), chars = alloc(16);
    memcpy((void *)(uintptr_t)chars, "old.py", 7);
    put64(legacy + L.str_length, 6);
    put32(legacy + L.str_state, 1u << L.str_kind_shift);
    put64(legacy + L.str_legacy_data, chars);
    uint64_t code2 = code_of(str_of("g", 0), legacy, 9);
    sw_sample_code *e2 = get(c, &m, code2, hdr);
    REQUIRE(e2 != NULL);
    CHECK_EQ_STR(e2->filename, "old.py");
    uint32_t span = 1;
    CHECK_EQ_U64(sw_codecache_filename_at(e2, &span), 0);
    CHECK_EQ_U64(span, 0);
    sw_codecache_free(c);
    sw_mem_close(&m);
}
