/*
 * test_elfcore.c - the core-file reader (native/elf/elfcore.h): a core
 * written here (two PT_LOAD segments, one only partly dumped; an NT_FILE,
 * an NT_PRPSINFO and an NT_AUXV note) reads back as written; reads stop where the
 * core's bytes stop; a core of this very process made by gdb's gcore
 * holds a marker at its address; other ELF files and damaged cores are
 * refused or read in bounds (ASan/UBSan watch). And the build id found in
 * a file's first page equals the one of the whole file.
 */
#define _GNU_SOURCE
#include "check.h"
#include "elf/elf.h"
#include "gcorechild.h"

#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/procfs.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOTE_NAME "CORE"

/* Appends one note (name "CORE") to buf at *n. */
static void put_note(unsigned char *buf, size_t *n, uint32_t type, const void *desc, uint32_t len)
{
    Elf64_Nhdr nh = {5, len, type};
    memcpy(buf + *n, &nh, sizeof nh);
    *n += sizeof nh;
    memcpy(buf + *n, NOTE_NAME "\0\0\0", 8);
    *n += 8;
    memcpy(buf + *n, desc, len);
    *n += (len + 3u) & ~3u;
}

static unsigned char core[16384];

/* A core: segment A at 0x10000 (256 bytes, all dumped: bytes i & 0xff),
 * segment B at 0x20000 (512 bytes, the first 128 dumped: 0xab), the files
 * /usr/lib/libone.so at 0x30000-0x32000 offset 0 and /bin/two at
 * 0x40000-0x41000 page offset 3, pid 4242, command "pycore", the vDSO at
 * 0x50000. */
static size_t make_core(void)
{
    memset(core, 0, sizeof core);
    size_t phoff = sizeof(Elf64_Ehdr), notes = phoff + 3 * sizeof(Elf64_Phdr), n = notes;
    unsigned char nt[1024];
    uint64_t words[2 + 6] = {2, 4096, 0x30000, 0x32000, 0, 0x40000, 0x41000, 3};
    memcpy(nt, words, sizeof words);
    memcpy(nt + sizeof words, "/usr/lib/libone.so\0/bin/two", 28);
    put_note(core, &n, NT_FILE, nt, (uint32_t)sizeof words + 28);
    prpsinfo_t ps;
    memset(&ps, 0, sizeof ps);
    ps.pr_pid = 4242;
    snprintf(ps.pr_fname, sizeof ps.pr_fname, "pycore");
    put_note(core, &n, NT_PRPSINFO, &ps, (uint32_t)sizeof ps);
    const uint64_t auxv[] = {AT_PAGESZ, 4096, AT_SYSINFO_EHDR, 0x50000, AT_NULL, 0, AT_SYSINFO_EHDR, 0x60000};
    put_note(core, &n, NT_AUXV, auxv, (uint32_t)sizeof auxv);   /* (what follows AT_NULL is not read) */
    size_t notes_len = n - notes, a = 8192, b = a + 256;
    for (size_t i = 0; i < 256; i++)
        core[a + i] = (unsigned char)i;
    memset(core + b, 0xab, 128);
    Elf64_Ehdr eh = {.e_type = ET_CORE, .e_machine = EM_X86_64, .e_version = EV_CURRENT, .e_phoff = phoff,
                     .e_ehsize = sizeof eh, .e_phentsize = sizeof(Elf64_Phdr), .e_phnum = 3};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    memcpy(core, &eh, sizeof eh);
    /* (B before A: the reader sorts them) */
    Elf64_Phdr ph[3] = {{.p_type = PT_NOTE, .p_offset = notes, .p_filesz = notes_len},
                        {.p_type = PT_LOAD, .p_offset = b, .p_vaddr = 0x20000, .p_filesz = 128, .p_memsz = 512},
                        {.p_type = PT_LOAD, .p_offset = a, .p_vaddr = 0x10000, .p_filesz = 256, .p_memsz = 256}};
    memcpy(core + phoff, ph, sizeof ph);
    return b + 128;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, len, f);
        fclose(f);
    }
}

/* A new empty file's name into path (made from "/tmp/sw-test-core-XXXXXX"). */
static int temp_file(char *path)
{
    int fd = mkstemp(path);
    if (fd >= 0)
        close(fd);
    return fd >= 0;
}

TEST(written_core_reads_back)
{
    size_t len = make_core();
    char path[] = "/tmp/sw-test-core-XXXXXX";
    REQUIRE(temp_file(path));
    write_file(path, core, len);
    sw_core *c;
    char err[256];
    REQUIRE(sw_core_open(path, &c, err, sizeof err) == SW_OK);
    CHECK_EQ_I64(sw_core_pid(c), 4242);
    CHECK_EQ_STR(sw_core_command(c), "pycore");
    CHECK_EQ_U64(sw_core_vdso(c), 0x50000);
    size_t n;
    const sw_core_segment *s = sw_core_segments(c, &n);
    REQUIRE_EQ_U64(n, 2);
    CHECK_EQ_U64(s[0].vaddr, 0x10000);
    CHECK_EQ_U64(s[1].vaddr, 0x20000);
    CHECK_EQ_U64(s[1].filesz, 128);
    const sw_core_file *f = sw_core_files(c, &n);
    REQUIRE_EQ_U64(n, 2);
    CHECK_EQ_STR(f[0].path, "/usr/lib/libone.so");
    CHECK_EQ_STR(f[1].path, "/bin/two");
    CHECK_EQ_U64(f[1].start, 0x40000);
    CHECK_EQ_U64(f[1].offset, 3 * 4096);
    unsigned char buf[600];
    CHECK_EQ_U64(sw_core_read(c, 0x10010, buf, 16), 16);
    CHECK_EQ_U64(buf[0], 0x10);
    CHECK_EQ_U64(buf[15], 0x1f);
    CHECK_EQ_U64(sw_core_read(c, 0x100f0, buf, 64), 16);   /* the segment ends */
    CHECK_EQ_U64(sw_core_read(c, 0x20000, buf, 512), 128); /* the rest was not dumped */
    CHECK_EQ_U64(buf[127], 0xab);
    CHECK_EQ_U64(sw_core_read(c, 0x20080, buf, 8), 0);
    CHECK_EQ_U64(sw_core_read(c, 0x5000, buf, 8), 0);
    CHECK_EQ_U64(sw_core_read(c, UINT64_MAX - 4, buf, 8), 0);
    sw_core_free(c);
    unlink(path);
}

TEST(other_files_are_refused)
{
    sw_core *c;
    char err[256];
    CHECK(sw_core_open("/bin/ls", &c, err, sizeof err) == SW_EFORMAT && strstr(err, "not a core file"));
    CHECK(sw_core_open("/etc/passwd", &c, err, sizeof err) == SW_EFORMAT && strstr(err, "not an ELF file"));
    CHECK(sw_core_open("/nonexistent/core", &c, err, sizeof err) == SW_EIO && strstr(err, "No such file"));
    CHECK(sw_core_open("/tmp", &c, err, sizeof err) != SW_OK);
}

/* Opens len bytes of buf as a core; if it opens, reads every segment and
 * walks every file (in bounds, or ASan says so). */
static void open_damaged(const char *path, const unsigned char *buf, size_t len)
{
    write_file(path, buf, len);
    sw_core *c;
    char err[256];
    if (sw_core_open(path, &c, err, sizeof err) != SW_OK)
        return;
    size_t n;
    const sw_core_segment *s = sw_core_segments(c, &n);
    unsigned char out[1024];
    for (size_t i = 0; i < n; i++)
        sw_core_read(c, s[i].vaddr, out, sizeof out);
    const sw_core_file *f = sw_core_files(c, &n);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += strlen(f[i].path);
    (void)total;
    sw_core_free(c);
}

TEST(damaged_cores_are_refused_or_read_in_bounds)
{
    size_t len = make_core();
    char path[] = "/tmp/sw-test-core-XXXXXX";
    REQUIRE(temp_file(path));
    static unsigned char buf[sizeof core];
    for (size_t cut = 0; cut < len; cut += cut < 600 ? 7 : 97)
        open_damaged(path, core, cut);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 200; round++) {
        memcpy(buf, core, len);
        for (int k = 0; k < 3; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            buf[(x >> 33) % 700] = (unsigned char)(x >> 24);   /* the headers and the notes */
        }
        open_damaged(path, buf, len);
    }
    unlink(path);
}

static volatile uint64_t marker = 0x5357434f52454d4bull;   /* "KMEROCWS" */

TEST(gcore_of_a_child_holds_its_memory)
{
    marker ^= (uint64_t)getpid();   /* a value only this run has */
    gcore_child g;
    if (!gcore_child_take(&g))
        return;
    pid_t child = g.pid;
    sw_core *c;
    char err[256];
    if (CHECK(sw_core_open(g.path, &c, err, sizeof err) == SW_OK)) {
        CHECK_EQ_I64(sw_core_pid(c), child);
        CHECK_EQ_U64(sw_core_vdso(c), getauxval(AT_SYSINFO_EHDR));   /* (the child's: this process's) */
        uint64_t v = 0;
        CHECK_EQ_U64(sw_core_read(c, (uint64_t)(uintptr_t)&marker, &v, sizeof v), sizeof v);
        CHECK_EQ_U64(v, marker);
        size_t n;
        const sw_core_file *f = sw_core_files(c, &n);
        int self_mapped = 0;
        char exe[512];
        ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[k > 0 ? k : 0] = 0;
        for (size_t i = 0; i < n; i++)
            self_mapped |= strcmp(f[i].path, exe) == 0;
        CHECK_MSG(self_mapped, "the core's NT_FILE does not name %s", exe);
        sw_core_free(c);
    }
    gcore_child_remove(&g);
}

TEST(build_id_in_the_first_page_equals_the_file_s)
{
    sw_elf *e;
    char err[256];
    REQUIRE(sw_elf_open("/bin/ls", &e, err, sizeof err) == SW_OK);
    const unsigned char *want;
    size_t nw = sw_elf_build_id(e, &want);
    unsigned char head[4096], id[SW_ELF_MAX_BUILD_ID];
    int fd = open("/bin/ls", O_RDONLY);
    REQUIRE(fd >= 0);
    ssize_t got = read(fd, head, sizeof head);
    close(fd);
    REQUIRE(got > 64);
    CHECK(nw > 0);
    CHECK_EQ_U64(sw_elf_build_id_in_head(head, (size_t)got, id, sizeof id), nw);
    CHECK_EQ_MEM(id, want, nw);
    CHECK_EQ_U64(sw_elf_build_id_in_head(head, 40, id, sizeof id), 0);   /* not even a header */
    sw_elf_free(e);
}
