/*
 * test_dwarf_line.c - the DWARF line-table reader (native/elf/dwarf_line.h):
 * two units assembled here byte by byte (version 4 with string tables,
 * version 5 with .debug_line_str offsets) give back the file and line of
 * every address as their programs say; this test program's own
 * .debug_line (the C test builds have -g) names each of its functions as
 * gdb does, and so do libc's lines from its separate debug file, whose
 * sections are compressed (zlib). Then crafted bad input: every truncation, byte flips,
 * a version it does not read, a row naming a file the unit lacks, an
 * address of 4 bytes, an endless LEB128 - refused with a reason or read
 * within bounds (ASan/UBSan watch), never out of the buffer.
 */
#define _GNU_SOURCE
#include "check.h"
#include "elf/elf.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

/* A growing byte buffer for the units. */
typedef struct buf {
    unsigned char b[1024];
    size_t n;
} buf;

static void put(buf *b, const void *p, size_t n)
{
    memcpy(b->b + b->n, p, n);
    b->n += n;
}
static void u8(buf *b, unsigned v) { b->b[b->n++] = (unsigned char)v; }
static void le(buf *b, uint64_t v, int n)
{
    for (int k = 0; k < n; k++)
        u8(b, (unsigned)(v >> (8 * k)) & 0xff);
}
static void str(buf *b, const char *s) { put(b, s, strlen(s) + 1); }
static void set_address(buf *b, uint64_t a)
{
    u8(b, 0), u8(b, 9), u8(b, 2), le(b, a, 8);
}
static void end_sequence(buf *b) { u8(b, 0), u8(b, 1), u8(b, 1); }

static const unsigned char std_lengths[12] = {0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1};

/* The common header fields after header_length: min_inst 1, max_ops 1,
 * default_is_stmt 1, line_base -5, line_range 14, opcode_base 13. */
static void params(buf *b)
{
    u8(b, 1), u8(b, 1), u8(b, 1), u8(b, 0xfb), u8(b, 14), u8(b, 13);
    put(b, std_lengths, sizeof std_lengths);
}

/* Version 4: /src/a.c (file 1) and /abs/b.h (file 2). Rows: 0x1000 a.c:10,
 * 0x1004 a.c:12 (a special opcode), 0x1014 b.h:5, end at 0x101c. */
static void unit_v4(buf *out, int bad_file)
{
    buf h = {0}, p = {0};
    params(&h);
    str(&h, "/src"), u8(&h, 0);
    str(&h, "a.c"), u8(&h, 1), u8(&h, 0), u8(&h, 0);
    str(&h, "/abs/b.h"), u8(&h, 0), u8(&h, 0), u8(&h, 0);
    u8(&h, 0);
    set_address(&p, 0x1000);
    u8(&p, 3), u8(&p, 9);            /* advance_line 9: line 10 */
    u8(&p, 1);                        /* copy */
    u8(&p, 13 + (2 + 5) + 14 * 4);    /* special: +4 bytes, +2 lines */
    u8(&p, 4), u8(&p, bad_file ? 7 : 2);   /* set_file */
    u8(&p, 2), u8(&p, 0x10);          /* advance_pc 16: 0x1014 */
    u8(&p, 3), u8(&p, 0x79);          /* advance_line -7: line 5 */
    u8(&p, 1);
    u8(&p, 2), u8(&p, 8);
    end_sequence(&p);
    le(out, 2 + 4 + h.n + p.n, 4);
    le(out, 4, 2);
    le(out, h.n, 4);
    put(out, h.b, h.n);
    put(out, p.b, p.n);
}

/* The .debug_line_str of unit_v5. */
static const char line_str[] = "/comp\0inc\0x.c\0y.h";

/* Version 5: directories /comp (0, the compilation directory) and inc (1,
 * relative to it), files x.c in /comp (0) and y.h in inc (1), by
 * .debug_line_str offsets. Rows: 0x2000 x.c:20, 0x2002 y.h:21, end at
 * 0x2004. */
static void unit_v5(buf *out, int addr_size)
{
    buf h = {0}, p = {0};
    params(&h);
    u8(&h, 1), u8(&h, 1), u8(&h, 0x1f);                   /* dirs: path as line_strp */
    u8(&h, 2), le(&h, 0, 4), le(&h, 6, 4);
    u8(&h, 2), u8(&h, 1), u8(&h, 0x1f), u8(&h, 2), u8(&h, 0x0f);   /* files: path, dir index */
    u8(&h, 2), le(&h, 10, 4), u8(&h, 0), le(&h, 14, 4), u8(&h, 1);
    set_address(&p, 0x2000);
    u8(&p, 4), u8(&p, 0);            /* set_file 0 */
    u8(&p, 3), u8(&p, 19);           /* line 20 */
    u8(&p, 1);
    u8(&p, 4), u8(&p, 1);
    u8(&p, 13 + (1 + 5) + 14 * 2);   /* +2 bytes, +1 line */
    u8(&p, 2), u8(&p, 2);
    end_sequence(&p);
    le(out, 2 + 2 + 4 + h.n + p.n, 4);
    le(out, 5, 2);
    u8(out, (unsigned)addr_size), u8(out, 0);
    le(out, h.n, 4);
    put(out, h.b, h.n);
    put(out, p.b, p.n);
}

static int parse(const unsigned char *d, size_t n, sw_dwarf_lines **out, char *err, size_t errlen)
{
    /* An exact-size copy: ASan catches a read one byte past the end. */
    unsigned char *copy = malloc(n ? n : 1);
    memcpy(copy, d, n);
    char *ls = malloc(sizeof line_str);
    memcpy(ls, line_str, sizeof line_str);
    int rc = sw_dwarf_lines_parse(copy, n, (unsigned char *)ls, sizeof line_str, NULL, 0, out, err, errlen);
    free(copy);
    free(ls);
    return rc;
}

static void expect(const sw_dwarf_lines *d, uint64_t addr, const char *file, uint32_t line)
{
    const char *f = NULL;
    uint32_t l = 0;
    int rc = sw_dwarf_lines_find(d, addr, &f, &l);
    if (!file) {
        CHECK_MSG(rc == SW_EARG, "0x%" PRIx64 ": %s:%u, expected nothing", addr, f ? f : "?", l);
        return;
    }
    CHECK_MSG(rc == SW_OK && strcmp(f, file) == 0 && l == line, "0x%" PRIx64 ": %s:%u, expected %s:%u", addr,
              rc == SW_OK ? f : "(none)", l, file, line);
}

TEST(crafted_units_v4_and_v5)
{
    buf b = {0};
    unit_v4(&b, 0);
    unit_v5(&b, 8);
    sw_dwarf_lines *d;
    char err[256] = "";
    REQUIRE(parse(b.b, b.n, &d, err, sizeof err) == SW_OK);
    CHECK_EQ_U64(sw_dwarf_lines_rows(d), 7);
    expect(d, 0xfff, NULL, 0);
    expect(d, 0x1000, "/src/a.c", 10);
    expect(d, 0x1003, "/src/a.c", 10);
    expect(d, 0x1004, "/src/a.c", 12);
    expect(d, 0x1013, "/src/a.c", 12);
    expect(d, 0x1014, "/abs/b.h", 5);
    expect(d, 0x101b, "/abs/b.h", 5);
    expect(d, 0x101c, NULL, 0);
    expect(d, 0x1fff, NULL, 0);
    expect(d, 0x2000, "/comp/x.c", 20);
    expect(d, 0x2002, "/comp/inc/y.h", 21);
    expect(d, 0x2003, "/comp/inc/y.h", 21);
    expect(d, 0x2004, NULL, 0);
    sw_dwarf_lines_free(d);
}

TEST(refusals_say_why)
{
    struct {
        const char *what, *reason;
        buf b;
    } cases[5];
    memset(cases, 0, sizeof cases);
    cases[0].what = "version 6", cases[0].reason = "version";
    unit_v4(&cases[0].b, 0);
    cases[0].b.b[4] = 6;
    cases[1].what = "a file the unit lacks", cases[1].reason = "file";
    unit_v4(&cases[1].b, 1);
    cases[2].what = "4-byte addresses", cases[2].reason = "address";
    unit_v5(&cases[2].b, 4);
    cases[3].what = "a unit longer than the section", cases[3].reason = "longer";
    unit_v4(&cases[3].b, 0);
    cases[3].b.b[0] += 1;
    cases[4].what = "an endless LEB128", cases[4].reason = "advance_line";
    unit_v4(&cases[4].b, 0);
    for (size_t k = 0; k + 1 < cases[4].b.n; k++)   /* the advance_line 9 of the program */
        if (cases[4].b.b[k] == 3 && cases[4].b.b[k + 1] == 9) {
            memset(cases[4].b.b + k + 1, 0xff, cases[4].b.n - (k + 1));
            break;
        }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sw_dwarf_lines *d = NULL;
        char err[256] = "";
        int rc = parse(cases[i].b.b, cases[i].b.n, &d, err, sizeof err);
        CHECK_MSG(rc == SW_EFORMAT && d == NULL && strstr(err, cases[i].reason), "%s: rc %d, \"%s\"",
                  cases[i].what, rc, err);
    }
}

TEST(every_truncation_and_byte_flip_stays_in_bounds)
{
    buf b = {0};
    unit_v4(&b, 0);
    size_t first = b.n;
    unit_v5(&b, 8);
    for (size_t n = 0; n < b.n; n++) {
        sw_dwarf_lines *d = NULL;
        char err[256] = "";
        int rc = parse(b.b, n, &d, err, sizeof err);
        CHECK_MSG((rc == SW_OK) == (n == 0 || n == first), "prefix %zu: rc %d (%s)", n, rc, err);
        CHECK_MSG(rc == SW_OK || err[0], "prefix %zu refused without a reason", n);
        sw_dwarf_lines_free(d);
    }
    for (size_t i = 0; i < b.n; i++) {
        for (unsigned v = 0; v < 256; v += 51) {
            buf c = b;
            c.b[i] = (unsigned char)(c.b[i] ^ (v | 1));
            sw_dwarf_lines *d = NULL;
            char err[256] = "";
            if (parse(c.b, c.n, &d, err, sizeof err) == SW_OK) {
                const char *f;
                uint32_t l;
                for (uint64_t a = 0xff0; a < 0x2010; a += 3)
                    if (sw_dwarf_lines_find(d, a, &f, &l) == SW_OK)
                        CHECK(f != NULL);
                sw_dwarf_lines_free(d);
            } else {
                CHECK_MSG(err[0], "flip at %zu refused without a reason", i);
            }
        }
    }
}

static int __attribute__((noinline, used)) probe_function(int x)
{
    return x * 3 + 1;
}

#define MAX_FUNCS 20000

/* Up to max function symbols of e's .symtab with a size (every
 * step-th), their addresses into addrs; the index of the one named probe
 * (SIZE_MAX if none) in *probe_at. */
static size_t functions_of(const sw_elf *e, uint64_t *addrs, size_t max, size_t step, const char *probe,
                           size_t *probe_at)
{
    size_t n = 0, seen = 0;
    *probe_at = SIZE_MAX;
    for (size_t i = 0; i < sw_elf_symbol_count(e) && n < max; i++) {
        sw_elf_symbol sy;
        if (sw_elf_symbol_at(e, i, &sy) != SW_OK || sy.dynamic || sy.type != STT_FUNC || !sy.shndx || !sy.size ||
            seen++ % step)
            continue;
        if (probe && strcmp(sy.name, probe) == 0)
            *probe_at = n;
        addrs[n++] = sy.value;
    }
    return n;
}

/* gdb's `info line *ADDR` of each of the n addresses in the file gdb_file
 * (which gdb reads with its debug information, wherever it finds it)
 * against d's rows: the same line and the same file's last component,
 * and no line where gdb knows none. Returns how many had a line. */
static size_t agree_with_gdb(const char *gdb_file, const sw_dwarf_lines *d, const uint64_t *addrs, size_t n)
{
    char cmds[] = "/tmp/sw-dwarf-XXXXXX";
    int fd = mkstemp(cmds);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!CHECK_MSG(f != NULL, "a file for gdb's commands"))
        return 0;
    for (size_t i = 0; i < n; i++)
        fprintf(f, "info line *0x%" PRIx64 "\n", addrs[i]);
    fclose(f);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "gdb -batch -nx -iex \"set width 0\" -x %s '%s' 2>/dev/null", cmds, gdb_file);
    FILE *p = popen(cmd, "r");
    if (!CHECK_MSG(p != NULL, "%s", cmd))
        return 0;
    char line[8192];
    size_t k = 0, with_lines = 0;
    while (k < n && fgets(line, sizeof line, p)) {
        unsigned theirs = 0;
        char file[4096] = "";
        if (sscanf(line, "Line %u of \"%4095[^\"]\"", &theirs, file) != 2 &&
            strncmp(line, "No line number information", 26) != 0)
            continue;   /* (another line of gdb's) */
        const char *mine_file = NULL;
        uint32_t mine = 0;
        int found = sw_dwarf_lines_find(d, addrs[k], &mine_file, &mine) == SW_OK;
        if (!theirs) {
            CHECK_MSG(!found, "0x%" PRIx64 ": gdb knows no line, we say %s:%u", addrs[k], mine_file, mine);
        } else {
            const char *base = strrchr(file, '/');
            base = base ? base + 1 : file;
            const char *mybase = found ? strrchr(mine_file, '/') : NULL;
            mybase = mybase ? mybase + 1 : (found ? mine_file : "(none)");
            CHECK_MSG(found && mine == theirs && strcmp(base, mybase) == 0, "0x%" PRIx64 ": %s:%u, gdb %s:%u",
                      addrs[k], found ? mine_file : "(none)", mine, file, theirs);
            with_lines++;
        }
        k++;
    }
    pclose(p);
    unlink(cmds);
    CHECK_EQ_U64(k, n);
    return with_lines;
}

/* This program's own line tables, read from its file, give every function
 * symbol of its .symtab the file (compared by its last component) and line
 * that gdb's `info line *ADDR` gives (the C test builds have -g; without
 * debug information, or gdb, there is nothing to compare): the functions
 * of stackwatch's own sources, compiled as the extension is. (gdb, not
 * addr2line: binutils 2.40's addr2line names the including .c file for
 * a static inline function of a header, where gdb and `readelf
 * --debug-dump=decodedline` name the header, as this reader does.) */
TEST(own_line_table_agrees_with_gdb)
{
    sw_elf *e;
    char err[256] = "";
    REQUIRE(sw_elf_open("/proc/self/exe", &e, err, sizeof err) == SW_OK);
    sw_dwarf_lines *d = NULL;
    int rc = sw_elf_lines(e, &d, err, sizeof err);
    if (rc == SW_EARG) {
        printf("      (no .debug_line in this build: nothing to compare)\n");
        sw_elf_free(e);
        return;
    }
    CHECK_MSG(rc == SW_OK, "%s", err);
    if (rc != SW_OK || system("command -v gdb >/dev/null 2>&1") != 0) {
        if (rc == SW_OK)
            printf("      (gdb is not installed: not compared)\n");
        sw_elf_free(e);
        sw_dwarf_lines_free(d);
        return;
    }
    uint64_t *addrs = malloc(MAX_FUNCS * sizeof *addrs);
    REQUIRE(addrs);
    size_t probe, n = functions_of(e, addrs, MAX_FUNCS, 1, "probe_function", &probe);
    sw_elf_free(e);
    char exe[64];
    snprintf(exe, sizeof exe, "/proc/%d/exe", (int)getpid());
    size_t with_lines = agree_with_gdb(exe, d, addrs, n);
    const char *file;
    uint32_t line;
    if (probe != SIZE_MAX && sw_dwarf_lines_find(d, addrs[probe], &file, &line) == SW_OK)
        CHECK_MSG(strstr(file, "test_dwarf_line.c") != NULL, "%s", file);
    CHECK_MSG(probe != SIZE_MAX && with_lines > 40, "%zu functions with lines", with_lines);
    free(addrs);
    sw_dwarf_lines_free(d);
    CHECK(probe_function(2) == 7);
}

/* The header of the section named name in the ELF file of len bytes at
 * data (a file the reader took whole): its offset, or 0. */
static size_t section_header_at(const unsigned char *data, size_t len, const char *name)
{
    Elf64_Ehdr eh;
    Elf64_Shdr sh, str;
    memcpy(&eh, data, sizeof eh);
    if (eh.e_shoff + (uint64_t)eh.e_shnum * sizeof sh > len || eh.e_shstrndx >= eh.e_shnum)
        return 0;
    memcpy(&str, data + eh.e_shoff + eh.e_shstrndx * sizeof sh, sizeof str);
    for (size_t i = 0; i < eh.e_shnum; i++) {
        memcpy(&sh, data + eh.e_shoff + i * sizeof sh, sizeof sh);
        if (str.sh_offset + sh.sh_name < len && strcmp((const char *)data + str.sh_offset + sh.sh_name, name) == 0)
            return (size_t)(eh.e_shoff + i * sizeof sh);
    }
    return 0;
}

/* A copy of the debug file at path with its compressed .debug_line
 * damaged: another method, a size its stream does not have, a stream cut
 * short, bytes flipped in it: refused with a reason (or, for a flip the
 * stream survives, read), never read out of bounds (ASan watches). */
static void damaged_compressed_sections_refused(const char *path)
{
    FILE *f = fopen(path, "rb");
    REQUIRE(f != NULL);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc((size_t)size), *copy = malloc((size_t)size);
    REQUIRE(data && copy && fread(data, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    size_t at = section_header_at(data, (size_t)size, ".debug_line");
    REQUIRE(at != 0);
    Elf64_Shdr sh;
    Elf64_Chdr ch;
    memcpy(&sh, data + at, sizeof sh);
    REQUIRE((sh.sh_flags & SHF_COMPRESSED) && sh.sh_size > sizeof ch + 64);
    memcpy(&ch, data + sh.sh_offset, sizeof ch);
    for (int damage = 0; damage < 7; damage++) {
        memcpy(copy, data, (size_t)size);
        Elf64_Chdr bad = ch;
        Elf64_Shdr cut = sh;
        if (damage == 0)
            bad.ch_type = 2;   /* zstd */
        else if (damage == 1)
            bad.ch_size += 1;
        else if (damage == 2)
            bad.ch_size = 1ull << 40;
        else if (damage == 3)
            cut.sh_size = sizeof ch + (sh.sh_size - sizeof ch) / 2;
        else
            copy[sh.sh_offset + sizeof ch + 2 + (uint64_t)damage * 997 % (sh.sh_size - sizeof ch - 2)] ^= 0x5a;
        memcpy(copy + sh.sh_offset, &bad, sizeof bad);
        memcpy(copy + at, &cut, sizeof cut);
        sw_elf *e;
        char err[256] = "";
        REQUIRE(sw_elf_from_bytes(copy, (size_t)size, &e, err, sizeof err) == SW_OK);
        sw_dwarf_lines *d = NULL;
        err[0] = 0;
        int rc = sw_elf_lines(e, &d, err, sizeof err);
        if (damage < 4)
            CHECK_MSG(rc == SW_EFORMAT && strstr(err, ".debug_line: "), "damage %d: %d %s", damage, rc, err);
        else
            CHECK_MSG(rc == SW_OK || err[0], "damage %d: refused without a reason", damage);
        sw_dwarf_lines_free(d);
        sw_elf_free(e);
    }
    free(data);
    free(copy);
}

/* libc, stripped: its line tables are in its separate debug file (Debian's
 * libc6-dbg, found by build id), whose .debug_line, .debug_line_str and
 * .debug_str are compressed with zlib (SHF_COMPRESSED): inflated, they
 * give every 16th function of that file's .symtab the line gdb gives it,
 * reading libc with the same debug file; damaged copies of that section
 * are refused with a reason. */
TEST(a_compressed_debug_files_lines_agree_with_gdb)
{
    const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
    sw_elf *e, *dbg;
    char err[256] = "", path[256], hex[2 * SW_ELF_MAX_BUILD_ID + 1] = "";
    if (sw_elf_open(libc, &e, err, sizeof err) != SW_OK) {
        printf("      (no %s here: nothing to compare)\n", libc);
        return;
    }
    const unsigned char *id;
    size_t idn = sw_elf_build_id(e, &id);
    for (size_t i = 0; i < idn; i++)
        snprintf(hex + 2 * i, 3, "%02x", id[i]);
    sw_elf_free(e);
    snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
    if (idn < 2 || sw_elf_open(path, &dbg, err, sizeof err) != SW_OK) {
        CHECK_MSG(!getenv("CI"), "libc's debug file %s is not installed (Debian: libc6-dbg; make deps)", path);
        return;
    }
    size_t len;
    CHECK(sw_elf_section(dbg, ".debug_line", &len, NULL) == NULL);   /* compressed: not its raw bytes */
    damaged_compressed_sections_refused(path);
    sw_dwarf_lines *d = NULL;
    int rc = sw_elf_lines(dbg, &d, err, sizeof err);
    CHECK_MSG(rc == SW_OK && sw_dwarf_lines_rows(d) > 100000, "%s: %s", path, err);
    if (rc != SW_OK || system("command -v gdb >/dev/null 2>&1") != 0) {
        sw_elf_free(dbg);
        sw_dwarf_lines_free(d);
        return;
    }
    uint64_t *addrs = malloc(MAX_FUNCS * sizeof *addrs);
    REQUIRE(addrs);
    size_t probe, n = functions_of(dbg, addrs, 400, 16, NULL, &probe);
    sw_elf_free(dbg);
    CHECK_MSG(agree_with_gdb(libc, d, addrs, n) > 100, "%zu functions", n);
    free(addrs);
    sw_dwarf_lines_free(d);
}
