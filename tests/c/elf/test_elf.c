/*
 * test_elf.c - the ELF reader (native/elf/elf.h) on real files, checked
 * against binutils: the defined symbols of .dynsym equal `nm -D`'s and
 * those of .symtab `nm`'s (name and value), the build id equals `readelf
 * -n`'s, the PT_LOAD segments `readelf -lW`'s; on /bin/ls and on a
 * libpython (the pyenv ones, else the system's). A file made by elfgen.h
 * reads back exactly as made. Then damaged copies: every
 * truncation at a header boundary and byte flips in the headers and
 * tables must be refused or read within bounds (ASan/UBSan watch).
 */
#define _GNU_SOURCE
#include "check.h"
#include "elf/elf.h"
#include "elfgen.h"

#include <elf.h>
#include <glob.h>

#define MAX_SYMS 200000

typedef struct named {
    char name[512];
    uint64_t value;
} named;

static int cmp_named(const void *a, const void *b)
{
    const named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->value < y->value ? -1 : x->value > y->value);
}

/* A libpython to read: the newest pyenv one, else the system's. */
static int find_libpython(char *out, size_t len)
{
    glob_t g;
    const char *home = getenv("HOME");
    char pat[512];
    for (int minor = 13; minor >= 9; minor--) {
        snprintf(pat, sizeof pat, "%s/.pyenv/versions/3.%d.*/lib/libpython3.%d.so.1.0", home ? home : "/root", minor,
                 minor);
        if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc) {
            snprintf(out, len, "%s", g.gl_pathv[g.gl_pathc - 1]);
            globfree(&g);
            return 1;
        }
        globfree(&g);
    }
    if (glob("/usr/lib/*/libpython3*.so.1.0", 0, NULL, &g) == 0 && g.gl_pathc) {
        snprintf(out, len, "%s", g.gl_pathv[0]);
        globfree(&g);
        return 1;
    }
    return 0;
}

/* `nm [-D] --defined-only FILE`: (name without version, value), sorted. */
static size_t nm_symbols(const char *file, int dynamic, named *out)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "nm %s --defined-only '%s' 2>/dev/null", dynamic ? "-D" : "", file);
    FILE *p = popen(cmd, "r");
    if (!p)
        return 0;
    char line[1024];
    size_t n = 0;
    while (n < MAX_SYMS && fgets(line, sizeof line, p)) {
        unsigned long long v;
        char type, name[400];
        if (sscanf(line, "%llx %c %399s", &v, &type, name) != 3)
            continue;
        char *at = strchr(name, '@');
        if (at)
            *at = 0;
        snprintf(out[n].name, sizeof out[n].name, "%s", name);
        out[n].value = v;
        n++;
    }
    pclose(p);
    qsort(out, n, sizeof *out, cmp_named);
    return n;
}

/* The reader's defined symbols of one table, as nm lists them (no file or
 * section symbols), sorted. */
static size_t elf_symbols(const sw_elf *e, int dynamic, named *out)
{
    size_t n = 0, total = sw_elf_symbol_count(e);
    for (size_t i = 0; i < total && n < MAX_SYMS; i++) {
        sw_elf_symbol s;
        if (sw_elf_symbol_at(e, i, &s) != SW_OK || s.dynamic != dynamic || s.shndx == SHN_UNDEF ||
            s.type == STT_FILE || s.type == STT_SECTION)
            continue;
        snprintf(out[n].name, sizeof out[n].name, "%s", s.name);
        out[n].value = s.value;
        n++;
    }
    qsort(out, n, sizeof *out, cmp_named);
    return n;
}

static void check_symbols_like_nm(const char *file, int dynamic, size_t at_least)
{
    sw_elf *e;
    char err[600];
    int rc = sw_elf_open(file, &e, err, sizeof err);
    CHECK_MSG(rc == SW_OK, "%s", err);
    if (rc != SW_OK)
        return;
    named *a = calloc(MAX_SYMS, sizeof *a), *b = calloc(MAX_SYMS, sizeof *b);
    size_t na = elf_symbols(e, dynamic, a), nb = nm_symbols(file, dynamic, b);
    CHECK_MSG(nb >= at_least, "%s: nm %s listed %zu symbols", file, dynamic ? "-D" : "", nb);
    CHECK_EQ_U64(na, nb);
    size_t diffs = 0;
    for (size_t i = 0; i < na && i < nb; i++) {
        if (strcmp(a[i].name, b[i].name) != 0 || a[i].value != b[i].value) {
            if (diffs++ < 3)
                (void)CHECK_MSG(0, "%s: symbol %zu: reader %s=%llx, nm %s=%llx", file, i, a[i].name,
                          (unsigned long long)a[i].value, b[i].name, (unsigned long long)b[i].value);
        }
    }
    CHECK_EQ_U64(diffs, 0);
    free(a);
    free(b);
    sw_elf_free(e);
}

TEST(bin_ls_dynsym_equals_nm)
{
    check_symbols_like_nm("/bin/ls", 1, 5);
}

TEST(libpython_symbols_equal_nm)
{
    char lib[512];
    REQUIRE(find_libpython(lib, sizeof lib));
    check_symbols_like_nm(lib, 1, 1000);
    check_symbols_like_nm(lib, 0, 1000);   /* .symtab: static functions too */
}

TEST(libpython_runtime_and_static_symbols)
{
    char lib[512], err[600];
    REQUIRE(find_libpython(lib, sizeof lib));
    sw_elf *e;
    REQUIRE(sw_elf_open(lib, &e, err, sizeof err) == SW_OK);
    sw_elf_symbol s;
    CHECK(sw_elf_find_symbol(e, "_PyRuntime", &s) == SW_OK);
    CHECK(s.dynamic && s.type == STT_OBJECT && s.size > 100);
    CHECK(sw_elf_find_symbol(e, "no such symbol, surely", &s) == SW_EARG);
    /* A local function, only in .symtab. */
    size_t locals = 0, n = sw_elf_symbol_count(e);
    for (size_t i = 0; i < n; i++)
        locals += sw_elf_symbol_at(e, i, &s) == SW_OK && !s.dynamic && s.bind == STB_LOCAL && s.type == STT_FUNC;
    CHECK_MSG(locals > 100, "%zu static functions", locals);
    /* Py_Version (3.11+) reads as a version word from the file's data. */
    uint64_t v = 0;
    if (sw_elf_find_symbol(e, "Py_Version", &s) == SW_OK) {
        CHECK(sw_elf_read_vaddr(e, s.value, &v, sizeof v) == SW_OK);
        CHECK_EQ_U64(v >> 24, 3);
    }
    size_t len = 0;
    CHECK(sw_elf_section(e, ".rodata", &len, NULL) != NULL && len > 0);
    CHECK(sw_elf_section(e, ".bss", &len, NULL) == NULL);   /* no file bytes */
    CHECK(sw_elf_read_vaddr(e, ~0ull - 4, &v, sizeof v) == SW_EARG);
    sw_elf_free(e);
}

static void check_build_id_and_loads(const char *file)
{
    char err[600], cmd[600], line[1024];
    sw_elf *e;
    REQUIRE(sw_elf_open(file, &e, err, sizeof err) == SW_OK);
    const unsigned char *id;
    size_t idlen = sw_elf_build_id(e, &id);
    char hex[2 * SW_ELF_MAX_BUILD_ID + 1] = "";
    for (size_t i = 0; i < idlen; i++)
        snprintf(hex + 2 * i, 3, "%02x", id[i]);
    snprintf(cmd, sizeof cmd, "readelf -nW '%s'", file);
    FILE *p = popen(cmd, "r");
    REQUIRE(p != NULL);
    char want[200] = "";
    while (fgets(line, sizeof line, p)) {
        const char *b = strstr(line, "Build ID: ");
        if (b && sscanf(b, "Build ID: %199s", want) == 1)
            break;
    }
    pclose(p);
    CHECK_MSG(want[0] && strcmp(hex, want) == 0, "%s: build id %s, readelf %s", file, hex, want);

    size_t n;
    const sw_elf_segment *seg = sw_elf_segments(e, &n);
    snprintf(cmd, sizeof cmd, "readelf -lW '%s'", file);
    p = popen(cmd, "r");
    REQUIRE(p != NULL);
    size_t k = 0;
    while (fgets(line, sizeof line, p)) {
        unsigned long long off, va, pa, fsz, msz;
        if (sscanf(line, " LOAD %llx %llx %llx %llx %llx", &off, &va, &pa, &fsz, &msz) != 5)
            continue;
        CHECK(k < n);
        if (k < n)
            CHECK(seg[k].offset == off && seg[k].vaddr == va && seg[k].filesz == fsz && seg[k].memsz == msz);
        k++;
    }
    pclose(p);
    CHECK_EQ_U64(k, n);
    CHECK(n >= 2);
    sw_elf_free(e);
}

TEST(build_id_and_loads_equal_readelf)
{
    char lib[512];
    check_build_id_and_loads("/bin/ls");
    REQUIRE(find_libpython(lib, sizeof lib));
    check_build_id_and_loads(lib);
}

/* The .gnu_debuglink of libc (stripped, its symbols in libc6-dbg's debug
 * file): the name `readelf -p .gnu_debuglink` prints, and the CRC-32 it
 * gives is the one of the debug file found by build id (when installed). */
TEST(debuglink_equals_readelf_and_its_crc_the_debug_files)
{
    const char *file = "/lib/x86_64-linux-gnu/libc.so.6";
    sw_elf *e, *d;
    char err[600], cmd[600], line[1024], want[300] = "", path[300];
    if (access(file, R_OK) != 0)
        return;   /* (another distribution's layout) */
    REQUIRE(sw_elf_open(file, &e, err, sizeof err) == SW_OK);
    snprintf(cmd, sizeof cmd, "readelf -p .gnu_debuglink '%s' 2>/dev/null", file);
    FILE *p = popen(cmd, "r");
    REQUIRE(p != NULL);
    while (fgets(line, sizeof line, p))
        if (sscanf(line, " [ %*x] %299s", want) == 1)
            break;
    pclose(p);
    const char *name;
    uint32_t crc;
    int rc = sw_elf_debuglink(e, &name, &crc);
    CHECK_MSG(want[0] ? rc == SW_OK && strcmp(name, want) == 0 : rc == SW_EARG, "%s: link %s, readelf %s", file,
              rc == SW_OK ? name : "(none)", want);
    const unsigned char *id;
    size_t n = sw_elf_build_id(e, &id);
    char hex[2 * SW_ELF_MAX_BUILD_ID + 1] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", id[i]);
    snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
    if (rc == SW_OK && n > 1 && sw_elf_open(path, &d, err, sizeof err) == SW_OK) {
        CHECK_MSG(sw_elf_file_crc(d) == crc, "%s: crc %08x, the link's %08x", path, sw_elf_file_crc(d), crc);
        sw_elf_free(d);
    }
    /* a file without the section (the generated one) has none */
    unsigned char buf[ELFGEN_MAX];
    size_t len = elfgen_build(buf);
    sw_elf_free(e);
    REQUIRE(sw_elf_from_bytes(buf, len, &e, err, sizeof err) == SW_OK);
    CHECK(sw_elf_debuglink(e, &name, &crc) == SW_EARG);
    sw_elf_free(e);
}

TEST(generated_file_reads_back_exactly)
{
    static unsigned char buf[ELFGEN_MAX];
    size_t n = elfgen_build(buf);
    sw_elf *e;
    char err[200];
    REQUIRE(sw_elf_from_bytes(buf, n, &e, err, sizeof err) == SW_OK);
    CHECK_EQ_U64(sw_elf_type(e), ET_DYN);
    CHECK_EQ_U64(sw_elf_symbol_count(e), 5);   /* with the two null entries, which have no name */
    sw_elf_symbol s;
    REQUIRE(sw_elf_find_symbol(e, "dyn_func", &s) == SW_OK);
    CHECK(s.value == 0x401000 && s.size == 16 && s.type == STT_FUNC && s.bind == STB_GLOBAL && s.dynamic);
    REQUIRE(sw_elf_find_symbol(e, "dyn_obj", &s) == SW_OK);
    CHECK(s.value == 0x402000 && s.size == 8 && s.type == STT_OBJECT && s.dynamic);
    REQUIRE(sw_elf_find_symbol(e, "static_func", &s) == SW_OK);
    CHECK(s.value == 0x401100 && s.size == 4 && s.bind == STB_LOCAL && !s.dynamic);
    CHECK(sw_elf_symbol_at(e, 0, &s) == SW_EARG);   /* the null symbol */
    const unsigned char *id;
    REQUIRE(sw_elf_build_id(e, &id) == 20);
    for (unsigned i = 0; i < 20; i++)
        CHECK_EQ_U64(id[i], i + 1);
    size_t nseg;
    const sw_elf_segment *seg = sw_elf_segments(e, &nseg);
    REQUIRE(nseg == 1);
    CHECK(seg[0].vaddr == ELFGEN_BASE && seg[0].offset == 0 && seg[0].filesz == n && seg[0].memsz == n + 0x100);
    size_t len;
    uint64_t addr;
    const unsigned char *ro = sw_elf_section(e, ".rodata", &len, &addr);
    REQUIRE(ro != NULL);
    CHECK(len == 9 && memcmp(ro, "\0" "3.10.99", 9) == 0);
    char v[8];
    CHECK(sw_elf_read_vaddr(e, addr + 1, v, 8) == SW_OK && memcmp(v, "3.10.99", 8) == 0);
    CHECK(sw_elf_read_vaddr(e, ELFGEN_BASE + n - 4, v, 8) == SW_EARG);   /* past the file bytes */
    sw_elf_free(e);
}

/* Reads everything a damaged file offers: must stay in bounds. */
static void read_all(const unsigned char *data, size_t len)
{
    sw_elf *e;
    char err[300];
    int rc = sw_elf_from_bytes(data, len, &e, err, sizeof err);
    if (rc != SW_OK) {
        CHECK(err[0] != 0);
        return;
    }
    size_t n = sw_elf_symbol_count(e);
    volatile size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        sw_elf_symbol s;
        if (sw_elf_symbol_at(e, i, &s) == SW_OK)
            total += strlen(s.name);
    }
    const unsigned char *id;
    total += sw_elf_build_id(e, &id);
    size_t sl;
    sw_elf_section(e, ".rodata", &sl, NULL);
    sw_elf_symbol s;
    sw_elf_find_symbol(e, "main", &s);
    (void)total;
    sw_elf_free(e);
}

TEST(damaged_files_are_refused_or_read_in_bounds)
{
    FILE *f = fopen("/bin/ls", "rb");
    REQUIRE(f != NULL);
    static unsigned char orig[1 << 20], buf[1 << 20];
    size_t len = fread(orig, 1, sizeof orig, f);
    fclose(f);
    REQUIRE(len > 4096 && len < sizeof orig);
    Elf64_Ehdr eh;
    memcpy(&eh, orig, sizeof eh);
    /* Truncations: inside the header, the program headers, the section
     * headers, and one byte short of the whole file. */
    size_t cuts[] = {0, 1, 16, sizeof eh - 1, sizeof eh, eh.e_phoff + 1, eh.e_phoff + 56 * 2 + 3,
                     (size_t)eh.e_shoff, (size_t)eh.e_shoff + 64 * 3 + 1, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
        if (cuts[i] <= len)
            read_all(orig, cuts[i]);
    char err[200];
    sw_elf *e;
    CHECK(sw_elf_from_bytes(orig, 10, &e, err, sizeof err) == SW_EFORMAT && strstr(err, "not an ELF"));
    /* Byte flips in the ELF header, the program headers and the section
     * headers (reproducible: a fixed LCG). */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    size_t regions[3][2] = {{0, sizeof eh}, {eh.e_phoff, (size_t)eh.e_phnum * 56}, {eh.e_shoff, len - eh.e_shoff}};
    for (int round = 0; round < 600; round++) {
        memcpy(buf, orig, len);
        size_t *r = regions[round % 3];
        for (int k = 0; k < 4; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = r[0] + (size_t)((x >> 33) % (r[1] ? r[1] : 1));
            buf[at] = (unsigned char)(x >> 24);
        }
        read_all(buf, len);
    }
    CHECK(sw_elf_open("/nonexistent/elf", &e, err, sizeof err) == SW_EIO && strstr(err, "No such file"));
    CHECK(sw_elf_open("/proc/self", &e, err, sizeof err) != SW_OK);
}
